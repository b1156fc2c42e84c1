// Next-touch on a real multi-node kernel (inside the emulated VM), placement checked with a raw
// move_pages query: each quarter of an armed range lands on the node of the thread that
// touched it, a fault storm from all nodes loses no update, the homenode target works, and a
// full target node degrades to "opened, not moved" with the data intact.
#include <numaaff/allocator.hpp>
#include <numaaff/memory.hpp>
#include <numaaff/next_touch.hpp>

#include "../common/numa_test.hpp"
#include "../common/scratch.hpp"
#include "../common/smaps.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using numaaff_test::query_pages;
using numaaff_test::sysfs_cpus_of;
using numaaff_test::sysfs_cpu_nodes;

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

using numaaff_test::pin_to_node;

struct region : numaaff_test::scratch {
  explicit region(std::size_t size) : scratch(size) {}
  std::uint64_t checksum(std::size_t from, std::size_t len) const {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = from; i < from + len; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
    return h;
  }
};

// Fills the region on `node` (bind, touch, reset the policy so that only next-touch moves it).
void fill_on(region& r, int node) {
  numaaff::bind(r.p, r.bytes, node);
  for (std::size_t i = 0; i < r.bytes; ++i) r.p[i] = static_cast<char>((i * 131) >> 7);
  numaaff::reset_policy(r.p, r.bytes);
  ASSERT_EQ(query_pages(r.p, r.bytes).on(node), r.bytes / ps);
}

void quarters_follow_their_toucher(const numaaff::next_touch_options& options) {
  const std::vector<int> nodes = sysfs_cpu_nodes();
  region r(32 << 20);
  fill_on(r, nodes.front());
  const std::size_t part = r.bytes / nodes.size();
  std::vector<std::uint64_t> before(nodes.size());
  for (std::size_t q = 0; q < nodes.size(); ++q) before[q] = r.checksum(q * part, part);
  numaaff::affinity_on_next_touch(r.p, r.bytes, options);
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> seen(nodes.size());
  for (std::size_t q = 0; q < nodes.size(); ++q) {
    threads.emplace_back([&, q] {
      pin_to_node(nodes[q]);
      seen[q] = r.checksum(q * part, part);  // the first touch of every chunk of this part
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t q = 0; q < nodes.size(); ++q) {
    EXPECT_EQ(seen[q], before[q]) << "part " << q;
    const auto raw = query_pages(r.p + q * part, part);
    EXPECT_GE(static_cast<double>(raw.on(nodes[q])), 0.99 * static_cast<double>(part / ps))
        << "part " << q << " on node " << nodes[q] << ": " << raw.on(nodes[q]) << " of " << part / ps;
  }
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
}

TEST(NextTouchNuma, EachPartLandsOnTheNodeThatTouchedIt) {
  NUMAAFF_REQUIRE_NODES(2);
  numaaff::reset_next_touch_stats();
  quarters_follow_their_toucher({});
  EXPECT_EQ(numaaff::next_touch_stats().pages_failed, 0u);
}

TEST(NextTouchNuma, AdaptiveGranularityAlsoFollowsTheToucher) {
  NUMAAFF_REQUIRE_NODES(2);
  numaaff::next_touch_options o;
  o.chunk_bytes = 16 * ps;
  o.adaptive = true;
  quarters_follow_their_toucher(o);
}

TEST(NextTouchNuma, FaultStormFromAllNodesLosesNoUpdate) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_cpu_nodes();
  const std::size_t pages = 1024;
  region r(pages * ps);
  fill_on(r, nodes.front());
  std::memset(r.p, 0, r.bytes);
  numaaff::next_touch_options o;
  o.chunk_bytes = 4 * ps;
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < nodes.size(); ++t) {
    threads.emplace_back([&, t] {
      pin_to_node(nodes[t]);
      std::vector<std::size_t> order(pages);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(t) + 7));
      for (std::size_t k : order) reinterpret_cast<std::atomic<std::uint32_t>*>(r.p + k * ps)->fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t k = 0; k < pages; ++k)
    ASSERT_EQ(reinterpret_cast<std::atomic<std::uint32_t>*>(r.p + k * ps)->load(), nodes.size()) << "page " << k;
  const auto raw = query_pages(r.p, r.bytes);
  std::size_t placed = 0;
  for (int n : nodes) placed += raw.on(n);
  EXPECT_EQ(placed, pages);
}

TEST(NextTouchNuma, HomenodeTargetPullsToTheTouchersHomenode) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_cpu_nodes();
  region r(8 << 20);
  fill_on(r, nodes.front());
  numaaff::next_touch_options o;
  o.target = numaaff::next_touch_target::toucher_homenode;
  const std::uint64_t before = r.checksum(0, r.bytes);
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  std::uint64_t seen = 0;
  std::thread t([&] {
    pin_to_node(nodes.front());
    numaaff::set_homenode(nodes.back());
    seen = r.checksum(0, r.bytes);
  });
  t.join();
  EXPECT_EQ(seen, before);
  EXPECT_EQ(query_pages(r.p, r.bytes).on(nodes.back()), r.bytes / ps);
}

TEST(NextTouchNuma, AFullTargetNodeLeavesDataIntactAndCountsFailures) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_cpu_nodes();
  const int full = nodes.back();
  region r(32 << 20);
  fill_on(r, nodes.front());
  const std::uint64_t before = r.checksum(0, r.bytes);
  // Occupy the target node until less than the range fits there.
  numaaff_test::drop_page_cache();
  std::size_t free_bytes = 0;
  ASSERT_TRUE(numaaff::detail::node_available_bytes(full, free_bytes));
  ASSERT_GT(free_bytes, std::size_t{40} << 20);
  const std::size_t hog_bytes = free_bytes - (std::size_t{8} << 20);
  const numaaff::alloc_options strict_now{true, true};
  void* hog = numaaff::allocate_on_node(hog_bytes, full, strict_now);
  // Not zeros: 6.12 splits huge pages that are mostly zero under memory pressure and frees
  // their zero pages (thp underused shrinker), which gave the moves room they should not have.
  std::memset(hog, 0x5a, hog_bytes);
  // The hog is bound to the node: its pages are there. A page the kernel is compacting within
  // the nearly full node reads as not present for a moment (a migration entry), so pages not
  // reported yet are looked at again, for up to 5 s; a page on any other node fails at once.
  const std::size_t hog_pages = (hog_bytes + ps - 1) / ps;
  numaaff_test::raw_placement seen_hog = query_pages(hog, hog_bytes);
  for (int tries = 0; tries < 100 && seen_hog.on(full) != hog_pages && seen_hog.on(full) + seen_hog.unpopulated +
                                                                              seen_hog.other_errors == hog_pages;
       ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen_hog = query_pages(hog, hog_bytes);
  }
  ASSERT_EQ(seen_hog.on(full), hog_pages) << "the hog occupies node " << full << ": " << seen_hog.to_string();
  numaaff::affinity_on_next_touch(r.p, r.bytes);
  numaaff::reset_next_touch_stats();
  std::uint64_t seen = 0;
  std::thread t([&] {
    pin_to_node(full);
    seen = r.checksum(0, r.bytes);
  });
  t.join();
  EXPECT_EQ(seen, before);
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  // How many pages the kernel finds room for depends on what it can reclaim there (6.12 in the
  // tiered guest sometimes takes them all). What is guaranteed: every page is on one of the two
  // nodes, and the counts say which: pages counted as moved are exactly those on the full node
  // (when part of a batch fails, move_pages returns a count and leaves statuses unwritten; the
  // handler must query rather than trust them).
  const auto raw = query_pages(r.p, r.bytes);
  std::printf("full node %d: %llu pages moved, %llu failed\n", full, static_cast<unsigned long long>(s.pages_moved),
              static_cast<unsigned long long>(s.pages_failed));
  EXPECT_EQ(s.pages_failed + s.pages_moved, r.bytes / ps);
  EXPECT_EQ(raw.on(full), s.pages_moved);
  EXPECT_EQ(raw.on(full) + raw.on(nodes.front()), r.bytes / ps);
  numaaff::deallocate(hog, hog_bytes, strict_now);
}

// Blocks smaller than a huge page, owners alternating over the nodes, huge pages on: each
// owner's touch must pull its block alone (arming splits the huge pages at chunk boundaries),
// not the whole huge page back and forth between owners.
TEST(NextTouchNuma, BlocksInsideHugePagesEachFollowTheirOwnToucher) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = numaaff_test::sysfs_cpu_nodes();
  const std::size_t huge = numaaff::detail::huge_page_size(), block = 72u << 10, bytes = 2 * huge;
  int start = -1;
  bool formed = false;
  char* p = numaaff_test::huge_backed_on(2, 0x44, nodes, start, formed);
  ASSERT_NE(p, nullptr);
  std::printf("huge pages %s, first on node %d\n", formed ? "formed" : "did not form", start);
  const std::size_t blocks = bytes / block;  // the partial tail block is left alone
  numaaff::affinity_on_next_touch(p, bytes, numaaff::next_touch_options::for_blocks(block));
  std::vector<std::thread> owners;
  for (std::size_t k = 0; k < nodes.size(); ++k)
    owners.emplace_back([&, k] {
      pin_to_node(nodes[k]);
      for (std::size_t b = k; b < blocks; b += nodes.size()) p[b * block + 100] = 0x45;
    });
  for (auto& t : owners) t.join();
  numaaff::disarm(p, bytes);
  std::size_t placed = 0;
  std::string where;
  for (std::size_t b = 0; b < blocks; ++b) {
    const auto q = query_pages(p + b * block, block);
    placed += q.on(nodes[b % nodes.size()]);
    if (q.on(nodes[b % nodes.size()]) != block / ps)
      where += "block " + std::to_string(b) + " (owner on node " + std::to_string(nodes[b % nodes.size()]) + "): " + q.to_string() + "\n";
  }
  EXPECT_EQ(placed, blocks * block / ps) << where;
  for (std::size_t b = 0; b < blocks; ++b) ASSERT_EQ(p[b * block + 100], 0x45);
}

// The phase change AMR codes meet: a halo exchange reads every neighbour's block before its
// owner does. Plain next touch gives each chunk to that first reader (here one thread on the
// last node reads everything); owner mode sends each page to its block's owner whoever touches
// it, with huge pages on and off, with the default chunk spanning several owners' blocks and
// with one chunk per huge page (no chunk edge inside it: only the owners' edges split it), and
// with blocks that are not page-aligned (a shared page goes with the block holding its first
// byte).
TEST(NextTouchNuma, PlaceBlocksOnNextTouchSendsEachBlockToItsOwnerWhoeverTouchesFirst) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_cpu_nodes();
  const std::size_t huge = numaaff::detail::huge_page_size(), bytes = 2 * huge;
  for (const std::size_t block : {std::size_t{72} << 10, (std::size_t{72} << 10) + 24})
  for (const std::size_t chunk : {std::size_t{0}, huge})
  for (bool thp : {true, false}) {
    SCOPED_TRACE(std::string(thp ? "huge pages" : "plain pages") + ", chunk " + std::to_string(chunk) + ", block " +
                 std::to_string(block));
    const std::size_t blocks = (bytes + block - 1) / block;
    std::vector<numaaff::node_id> owners(blocks);
    for (std::size_t b = 0; b < blocks; ++b) owners[b] = nodes[(b * 7 + 1) % nodes.size()];
    region plain(bytes + huge);
    char* p = nullptr;
    if (thp) {
      int start = -1;
      bool formed = false;
      p = numaaff_test::huge_backed_on(2, 0x3b, nodes, start, formed);
      // Whether the kernel forms them depends on its free memory (on the 6.1 2x2 guest it
      // sometimes does not): the placement must be right either way.
      std::printf("huge pages %s, first on node %d\n", formed ? "formed" : "did not form", start);
    } else {
      p = reinterpret_cast<char*>(numaaff::detail::align_up(reinterpret_cast<std::uintptr_t>(plain.p), huge));
      numaaff::bind(p, bytes, nodes.back());
      std::memset(p, 0x3b, bytes);
      numaaff::reset_policy(p, bytes);
    }
    ASSERT_NE(p, nullptr);
    std::size_t elsewhere_before = 0;  // pages not on their owner's node, by a raw query
    for (std::size_t k = 0; k < bytes / ps; ++k) elsewhere_before += query_pages(p + k * ps, ps).on(owners[k * ps / block]) == 0;
    numaaff::reset_next_touch_stats();
    numaaff::next_touch_options options;
    options.chunk_bytes = chunk;
    numaaff::place_blocks_on_next_touch(p, bytes, block, owners, options);
    std::size_t wrong = 0;
    std::thread halo([&] {
      pin_to_node(nodes.back());
      for (std::size_t i = 0; i < bytes; i += ps) wrong += p[i] != 0x3b;
    });
    halo.join();
    EXPECT_EQ(wrong, 0u);
    EXPECT_FALSE(numaaff::is_armed(p, bytes));
    // Page k belongs to the block holding its first byte; runs of pages with one owner are
    // queried together.
    std::size_t placed = 0;
    for (std::size_t k = 0; k < bytes / ps;) {
      const numaaff::node_id owner = owners[k * ps / block];
      std::size_t end = k + 1;
      while (end < bytes / ps && owners[end * ps / block] == owner) ++end;
      const std::size_t on = query_pages(p + k * ps, (end - k) * ps).on(owner);
      EXPECT_EQ(on, end - k) << "pages " << k << "-" << end << " owner " << owner;
      placed += on;
      k = end;
    }
    EXPECT_EQ(placed, bytes / ps);
    // Counted apart: moved and already there. Without huge pages exactly the pages that were
    // elsewhere before arming moved; a huge page moved for one chunk can take pages of a later
    // chunk (same owner) along, which that chunk then finds already there.
    const numaaff::next_touch_statistics st = numaaff::next_touch_stats();
    EXPECT_EQ(st.pages_moved + st.pages_already_there, bytes / ps);
    if (!thp) {
      EXPECT_EQ(st.pages_moved, elsewhere_before);
    }
    EXPECT_LE(st.pages_moved, elsewhere_before);
    EXPECT_GT(st.pages_moved, 0u);
    EXPECT_EQ(numaaff::next_touch_stats().pages_failed, 0u);
  }
}

// A code whose arrays are each smaller than 128 pages per CPU, split by rows over a team of
// one thread per CPU (a Fortran hydro code's 25 arrays, armed one by one with the defaults):
// each thread's rows reach its node. With 128-page chunks each array was one chunk, moved whole
// to whichever thread touched it first (the code ended 40% placed).
TEST(NextTouchNuma, RowSplitArraysSmallerThanTheDefaultChunkReachEachRowsOwner) {
  NUMAAFF_REQUIRE_NODES(2);
  std::vector<int> node_of_thread;  // one thread per CPU the process may use, in node order
  for (int n : sysfs_cpu_nodes())
    for (std::size_t k = sysfs_cpus_of(n).size(); k > 0; --k) node_of_thread.push_back(n);
  const std::size_t threads = node_of_thread.size(), rows = 16, pages = rows * threads;
  ASSERT_EQ(threads, numaaff::detail::process_cpus().size()) << "the default chunk divides by the process's CPUs";
  std::vector<std::unique_ptr<region>> arrays;
  for (int a = 0; a < 25; ++a) {
    arrays.push_back(std::make_unique<region>(pages * ps));
    fill_on(*arrays.back(), node_of_thread.back());
    numaaff::affinity_on_next_touch(arrays.back()->p, pages * ps);  // the defaults
  }
  std::vector<std::thread> team;
  for (std::size_t t = 0; t < threads; ++t)
    team.emplace_back([&, t] {
      pin_to_node(node_of_thread[t]);
      for (auto& r : arrays)
        for (std::size_t i = t * rows * ps; i < (t + 1) * rows * ps; i += ps) r->p[i] = static_cast<char>(r->p[i] + 1);
    });
  for (auto& th : team) th.join();
  std::size_t placed = 0;
  for (auto& r : arrays) {
    EXPECT_FALSE(numaaff::is_armed(r->p, pages * ps));
    for (std::size_t t = 0; t < threads; ++t) placed += query_pages(r->p + t * rows * ps, rows * ps).on(node_of_thread[t]);
  }
  std::printf("%zu of %zu pages on their row owner's node\n", placed, 25 * pages);
  EXPECT_EQ(placed, 25 * pages);
}

}  // namespace
