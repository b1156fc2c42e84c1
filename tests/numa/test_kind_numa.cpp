// The heap by kind on several nodes (VM), every page checked with a raw move_pages query:
// node kinds put every page of every block on their node at every size; local follows the
// thread; interleave spreads a large block evenly; in the tiered guest fastest lands on its
// HBM-like node 2 and hbwmalloc's default policy does too (tests/vm/README.md gives the layout).
#include <numaaff/hbwmalloc.h>
#include <numaaff/kind.hpp>

#include "../common/numa_test.hpp"
#include "../common/placement_check.hpp"
#include "../common/scratch.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <thread>
#include <vector>

using numaaff::kind;
using numaaff_test::query_pages;
using numaaff_test::sysfs_nodes;

namespace {
const std::size_t sizes[] = {16, 48, 64, 1000, 4096, 32 * 1024, 32 * 1024 + 1, 1 << 20, (4 << 20) + 4096};
}

TEST(KindNuma, ANodeKindPutsEveryPageOfEveryBlockOnItsNode) {
  NUMAAFF_REQUIRE_NODES(2);
  for (int n : sysfs_nodes())
    for (std::size_t bytes : sizes) {
      std::vector<void*> blocks;
      const int count = bytes > 32 * 1024 ? 4 : 64;  // small: more than one slab page; large: within 256 MiB
      for (int i = 0; i < count; ++i) {
        void* p = numaaff::allocate(kind::on_node(n), bytes);
        std::memset(p, 1, bytes);
        blocks.push_back(p);
      }
      for (void* p : blocks) {
        const auto raw = query_pages(p, bytes);
        ASSERT_EQ(raw.on(n), raw.total) << bytes << " bytes on node " << n;
      }
      for (void* p : blocks) numaaff::deallocate(p);
    }
}

TEST(KindNuma, TheLocalKindFollowsTheAllocatingThread) {
  NUMAAFF_REQUIRE_NODES(2);
  for (int n : numaaff::topology::system().cpu_nodes())
    std::thread([&] {
      numaaff::pin_this_thread(n);
      for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20}) {
        void* p = numaaff::allocate(kind::local(), bytes);
        std::memset(p, 1, bytes);
        const auto raw = query_pages(p, bytes);
        EXPECT_EQ(raw.on(n), raw.total) << bytes << " bytes from node " << n;
        numaaff::deallocate(p);
      }
    }).join();
}

TEST(KindNuma, LocalBlocksFollowAThreadMovedBehindNumaaffsBack) {
  // The small-block path reads the thread's node once per 64 local allocations (a getcpu costs
  // more than the allocation): a thread moved without numaaff (raw sched_setaffinity) gets
  // its blocks on the new node from the 65th allocation on, one pinned by numaaff at once.
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = numaaff::topology::system().cpu_nodes();
  const int from = nodes.front(), to = nodes.back();
  std::thread([&] {
    ASSERT_TRUE(numaaff_test::pin_to_node(from));
    std::vector<void*> before, after;
    for (int i = 0; i < 100; ++i) before.push_back(numaaff::allocate(kind::local(), 64));
    ASSERT_TRUE(numaaff_test::pin_to_node(to));
    for (int i = 0; i < 200; ++i) after.push_back(numaaff::allocate(kind::local(), 64));
    for (void* p : before) std::memset(p, 1, 64);
    for (void* p : after) std::memset(p, 1, 64);
    for (std::size_t i = 0; i < before.size(); ++i)
      EXPECT_EQ(query_pages(before[i], 64).on(from), 1u) << "block " << i << " before the move";
    for (std::size_t i = 64; i < after.size(); ++i)
      EXPECT_EQ(query_pages(after[i], 64).on(to), 1u) << "block " << i << " after the move";
    std::vector<void*> pinned;
    numaaff::pin_this_thread(from);  // numaaff's own pinning: the next block already follows
    numaaff::set_homenode(-1);       // memory by the current node again, not the homenode
    for (int i = 0; i < 3; ++i) pinned.push_back(numaaff::allocate(kind::local(), 64));
    for (void* p : pinned) std::memset(p, 1, 64);
    for (void* p : pinned) EXPECT_EQ(query_pages(p, 64).on(from), 1u) << "after pin_this_thread";
    for (auto* v : {&before, &after, &pinned})
      for (void* p : *v) numaaff::deallocate(p);
  }).join();
}

TEST(KindNuma, InterleaveSpreadsALargeBlockWithinOnePercentPerNode) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::size_t bytes = std::size_t{32} << 20;
  auto* p = static_cast<char*>(numaaff::allocate(kind::interleave(), bytes));
  std::memset(p, 1, bytes);
  const auto raw = query_pages(p, bytes);
  const std::vector<int> nodes = sysfs_nodes();
  const double share = static_cast<double>(raw.total) / static_cast<double>(nodes.size());
  for (int n : nodes)
    EXPECT_NEAR(static_cast<double>(raw.on(n)), share, share * 0.01) << "node " << n << " of " << raw.total << " pages";
  numaaff::deallocate(p);
}

// Small interleaved blocks take turns over the nodes whatever the kind's options (each option
// set once had a cursor of its own that started over at every allocation: all on node 0).
TEST(KindNuma, SmallInterleavedBlocksOfEveryOptionTakeTurnsOverTheNodes) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_nodes();
  for (const kind& k : {kind::interleave(), kind::interleave().preferred(),
                        kind::interleave().with_pages(numaaff::huge_page_mode::never)}) {
    std::vector<void*> blocks;
    std::map<int, int> per_node;
    for (std::size_t i = 0; i < 40 * nodes.size(); ++i) {
      void* p = numaaff::allocate(k, 256);
      std::memset(p, 1, 256);
      const auto raw = query_pages(p, 256);
      for (const auto& [node, pages] : raw.per_node) per_node[node] += static_cast<int>(pages);
      blocks.push_back(p);
    }
    for (int n : nodes) EXPECT_GE(per_node[n], 10) << "node " << n << " got " << per_node[n] << " of " << blocks.size() << " blocks";
    for (void* p : blocks) numaaff::deallocate(p);
  }
}

TEST(KindNuma, FastestAndHbwMallocLandOnTheHbmNodeOfTheTieredGuest) {
  NUMAAFF_REQUIRE_MEMORY_TIERS();
  std::thread([] {
    numaaff::pin_this_thread(0);
    const int hbm = 2;  // the tiered guest: node 2, 40 GB/s from node 0 against 20 GB/s locally
    for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20}) {
      void* p = numaaff::allocate(kind::fastest(), bytes);
      std::memset(p, 1, bytes);
      EXPECT_EQ(query_pages(p, bytes).on(hbm), query_pages(p, bytes).total) << "fastest, " << bytes << " bytes";
      numaaff::deallocate(p);
    }
    EXPECT_EQ(hbw_check_available(), 0);
    for (std::size_t bytes : {std::size_t{64}, std::size_t{3} << 20}) {
      void* h = hbw_malloc(bytes);
      ASSERT_NE(h, nullptr);
      std::memset(h, 1, bytes);
      EXPECT_EQ(query_pages(h, bytes).on(hbm), query_pages(h, bytes).total) << "hbw_malloc, " << bytes << " bytes";
      EXPECT_EQ(hbw_verify_memory_region(h, bytes, 0), 0);
      hbw_free(h);
    }
    void* c = numaaff::allocate(kind::capacity(), std::size_t{1} << 20);
    std::memset(c, 1, std::size_t{1} << 20);
    EXPECT_EQ(query_pages(c, std::size_t{1} << 20).per_node.size(), 1u) << "capacity: one node for the block";
    numaaff::deallocate(c);
  }).join();
}
