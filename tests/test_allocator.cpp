// Allocators and resources on this host (layer 2): the standard allocator requirements,
// pmr behaviour, the small-object arena (alignment, reuse, threads), options, and failures.
#include <numaaff/allocator.hpp>
#include <numaaff/system_report.hpp>

#include <numaaff/detail/syscall.hpp>

#include "common/exceptions.hpp"
#include "common/placement_check.hpp"
#include "common/process.hpp"
#include "common/smaps.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <list>
#include <map>
#include <memory_resource>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using numaaff::detail::scoped_failure;
using numaaff::detail::sys;

int home() { return numaaff_test::sysfs_nodes().front(); }

static_assert(std::allocator_traits<numaaff::node_allocator<int>>::propagate_on_container_swap::value);
static_assert(!std::allocator_traits<numaaff::node_allocator<int>>::is_always_equal::value);
static_assert(std::allocator_traits<numaaff::local_allocator<int>>::is_always_equal::value);
static_assert(std::is_same_v<std::allocator_traits<numaaff::node_allocator<int>>::rebind_alloc<double>,
                             numaaff::node_allocator<double>>);

TEST(NodeAllocator, MeetsTheAllocatorRequirementsInContainers) {
  numaaff::node_allocator<int> a(home());
  numaaff::node_allocator<double> b(a);  // rebind copy
  EXPECT_EQ(a, numaaff::node_allocator<int>(b));
  EXPECT_EQ(b.node(), home());
  numaaff::node_allocator<int> preferred(home(), numaaff::alloc_options{false, false});
  EXPECT_NE(a, preferred);

  numaaff::node_vector<int> v(a);
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  numaaff::node_vector<int> copy = v;
  EXPECT_EQ(copy, v);
  EXPECT_EQ(copy.get_allocator(), a);
  numaaff::node_vector<int> moved = std::move(copy);
  EXPECT_EQ(moved.size(), 100000u);
  numaaff::node_vector<int> other(preferred);
  other.assign(10, 7);
  std::swap(moved, other);  // allocators propagate on swap
  EXPECT_EQ(moved.get_allocator(), preferred);
  EXPECT_EQ(other.get_allocator(), a);
  EXPECT_EQ(other[99999], 99999);

  std::map<int, std::string, std::less<>, numaaff::node_allocator<std::pair<const int, std::string>>> m(
      numaaff::node_allocator<std::pair<const int, std::string>>{home()});
  for (int i = 0; i < 1000; ++i) m.emplace(i, std::to_string(i));
  EXPECT_EQ(m.at(777), "777");
  std::list<int, numaaff::node_allocator<int>> l(a);
  for (int i = 0; i < 1000; ++i) l.push_front(i);
  EXPECT_EQ(l.front(), 999);

  const auto placed = numaaff_test::query_pages(other.data(), other.size() * sizeof(int));
  EXPECT_EQ(placed.on(home()), placed.total);
}

TEST(NodeAllocator, UnknownNodeIsACallerError) {
  EXPECT_THROW(numaaff::node_allocator<int>(4242), std::invalid_argument);
  EXPECT_THROW(numaaff::node_resource(-1), std::invalid_argument);
  EXPECT_THROW(numaaff::interleave_allocator<int>(std::vector<int>{}), std::invalid_argument);
  EXPECT_THROW(numaaff::interleave_resource(std::vector<int>{0, 4242}), std::invalid_argument);
  EXPECT_THROW(numaaff::allocate_on_node(64, 4242), std::invalid_argument);
  EXPECT_THROW(numaaff::set_homenode(4242), std::invalid_argument);
  numaaff::node_allocator<std::uint64_t> a(home());
  EXPECT_THROW((void)a.allocate(SIZE_MAX / 4), std::bad_array_new_length);
}

TEST(Arena, SmallBlocksAreAlignedDistinctAndReused) {
  numaaff::node_resource r(home());
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t size : std::vector<std::size_t>{1, 8, 16, 24, 33, 64, 100, 500, 4096, 5000, 32768}) {
    for (int i = 0; i < 200; ++i) {
      void* p = r.allocate(size, alignof(std::max_align_t));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t), 0u);
      std::memset(p, static_cast<int>(size & 0xff), size);
      blocks.emplace_back(p, size);
    }
  }
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> spans;
  for (auto [p, n] : blocks) spans.emplace_back(reinterpret_cast<std::uintptr_t>(p), reinterpret_cast<std::uintptr_t>(p) + n);
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) ASSERT_LE(spans[i - 1].second, spans[i].first) << "overlap";
  for (const auto& block : blocks) {
    const auto* c = static_cast<const unsigned char*>(block.first);
    const auto expected = static_cast<unsigned char>(block.second & 0xff);
    ASSERT_TRUE(std::all_of(c, c + block.second, [expected](unsigned char x) { return x == expected; }))
        << "block of " << block.second;
  }
  for (auto [p, n] : blocks) r.deallocate(p, n, alignof(std::max_align_t));
  void* a = r.allocate(48, 16);
  r.deallocate(a, 48, 16);
  EXPECT_EQ(r.allocate(48, 16), a);  // the thread cache hands the same block back
  r.deallocate(a, 48, 16);
  void* big = r.allocate(4096, 4096);  // over-aligned small block
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big) % 4096, 0u);
  r.deallocate(big, 4096, 4096);
}

TEST(Arena, ManyThreadsAllocateAndFreeAcrossEachOther) {
  numaaff::node_resource r(home());
  constexpr int threads = 4, per_thread = 20000;
  std::vector<std::vector<std::uint64_t*>> made(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto* p = static_cast<std::uint64_t*>(r.allocate(sizeof(std::uint64_t) * 4, 8));
        p[0] = static_cast<std::uint64_t>(t) << 32 | static_cast<std::uint64_t>(i);
        made[static_cast<std::size_t>(t)].push_back(p);
      }
    });
  }
  for (auto& th : pool) th.join();
  pool.clear();
  std::set<std::uint64_t*> unique;
  for (int t = 0; t < threads; ++t) {
    for (int i = 0; i < per_thread; ++i) {
      std::uint64_t* p = made[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)];
      ASSERT_EQ(p[0], static_cast<std::uint64_t>(t) << 32 | static_cast<std::uint64_t>(i));
      unique.insert(p);
    }
  }
  EXPECT_EQ(unique.size(), static_cast<std::size_t>(threads * per_thread));
  // Each thread frees what another one allocated.
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::uint64_t* p : made[static_cast<std::size_t>((t + 1) % threads)]) r.deallocate(p, sizeof(std::uint64_t) * 4, 8);
    });
  }
  for (auto& th : pool) th.join();
}

TEST(Resources, PmrContainersAndEquality) {
  numaaff::node_resource on(home());
  std::pmr::vector<double> v(&on);
  v.resize(1 << 18, 1.5);  // 2 MiB: a large block
  EXPECT_EQ(numaaff_test::query_pages(v.data(), v.size() * sizeof(double)).on(home()),
            numaaff_test::query_pages(v.data(), v.size() * sizeof(double)).total);
  std::pmr::unordered_map<int, int> small(&on);
  for (int i = 0; i < 5000; ++i) small[i] = i;
  EXPECT_EQ(small[4999], 4999);
  EXPECT_TRUE(on.is_equal(numaaff::node_resource(home())));
  EXPECT_FALSE(on.is_equal(numaaff::node_resource(home(), numaaff::alloc_options{false, false})));
  EXPECT_FALSE(on.is_equal(*std::pmr::new_delete_resource()));
  numaaff::interleave_resource il({home()});
  EXPECT_TRUE(il.is_equal(il));
  std::pmr::vector<int> w(&il);
  w.assign(100000, 3);
  EXPECT_EQ(w[99999], 3);
  EXPECT_TRUE(numaaff::local_memory().is_equal(numaaff::local_resource()));
  std::pmr::string s("a string long enough to leave the small-string buffer", &numaaff::local_memory());
  EXPECT_EQ(s.size(), 53u);
}

TEST(Allocators, InterleaveAndLocal) {
  numaaff::interleave_allocator<int> il({home()});
  numaaff::interleave_allocator<int> copy(il);
  EXPECT_EQ(il, copy);
  EXPECT_NE(il, numaaff::interleave_allocator<int>({home()}));
  std::vector<int, numaaff::interleave_allocator<int>> v(il);
  v.assign(1 << 20, 5);
  EXPECT_EQ(numaaff_test::query_pages(v.data(), v.size() * sizeof(int)).on(home()),
            numaaff_test::query_pages(v.data(), v.size() * sizeof(int)).total);
  numaaff::set_homenode(home());
  EXPECT_EQ(numaaff::this_homenode(), home());
  std::vector<int, numaaff::local_allocator<int>> l(1000, 1);
  EXPECT_EQ(l[999], 1);
  numaaff::set_homenode(-1);
  EXPECT_EQ(numaaff::this_homenode(), numaaff::current_node());
}

TEST(AllocateOnNode, OptionsPopulateAndHugePages) {
  const std::size_t bytes = 4 << 20;
  void* lazy = numaaff::allocate_on_node(bytes, home());
  EXPECT_EQ(numaaff_test::query_pages(lazy, bytes).unpopulated, bytes / static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));  // first touch places
  numaaff::deallocate(lazy, bytes);

  const numaaff::alloc_options eager{true, true};
  void* now = numaaff::allocate_on_node(bytes, home(), eager);
  EXPECT_EQ(numaaff_test::query_pages(now, bytes).on(home()), bytes / static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  numaaff::deallocate(now, bytes, eager);

  const numaaff::alloc_options huge{true, false, numaaff::huge_page_mode::always};
  void* h = numaaff::allocate_on_node(bytes, home(), huge);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(h) % (2 << 20), 0u);
  numaaff::deallocate(h, bytes, huge);

  auto arr = numaaff::make_unique_on_node<std::uint32_t>(1000, home());
  EXPECT_EQ(arr[999], 0u);
}

TEST(AllocateOnNode, StrictPopulateBeyondTheNodeIsBadAllocNotACrash) {
  const std::size_t too_much = std::size_t{1} << 46;  // 64 TiB
  EXPECT_THROW(numaaff::allocate_on_node(too_much, home(), numaaff::alloc_options{true, true}), std::bad_alloc);
  std::error_code ec;
  EXPECT_EQ(numaaff::allocate_on_node(too_much, home(), numaaff::alloc_options{true, true}, ec), nullptr);
  EXPECT_EQ(ec, std::errc::not_enough_memory);
}

TEST(AllocateOnNode, KernelRefusalsSurface) {
  // A fresh mapping each time: a smaller block may reuse kept pages, with no system call to fail.
  const std::size_t bytes = numaaff::detail::reusable_bytes();
  {
    scoped_failure fail(sys::mbind, EIO);
    try {
      (void)numaaff::allocate_on_node(bytes, home());
      FAIL() << "no exception";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::io_error);
      EXPECT_EQ(std::string(e.what()).rfind("numaaff: mbind", 0), 0u) << e.what();
    }
  }
  {
    scoped_failure fail(sys::mmap, EINVAL);
    try {
      (void)numaaff::allocate_on_node(bytes, home());
      FAIL() << "no exception";
    } catch (const std::system_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("numaaff: mmap", 0), 0u) << e.what();
    }
  }
  {
    // A sandbox that denies mbind: the memory is still good, placed by its first touch.
    scoped_failure deny(sys::mbind, EPERM);
    const std::uint64_t before = numaaff::refusal_stats().mappings_unbound;
    void* p = numaaff::allocate_on_node(bytes, home());
    std::memset(p, 1, bytes);
    numaaff::deallocate(p, bytes);
    EXPECT_EQ(numaaff::refusal_stats().mappings_unbound, before + 1);
  }
  {
    scoped_failure out(sys::mmap, ENOMEM);
    EXPECT_THROW((void)numaaff::allocate_on_node(bytes, home()), std::bad_alloc);
    numaaff::node_allocator<char> a(home());
    EXPECT_THROW((void)a.allocate(bytes), std::bad_alloc);
  }
}

// Tier allocators on one node: every tier is node 0, blocks of every size work, equality is
// by tier, and pmr containers take the resource.
TEST(TierAllocator, EveryTierWorksOnOneNode) {
  const int node = numaaff_test::sysfs_nodes().front();
  for (auto tier : {numaaff::memory_attribute::bandwidth, numaaff::memory_attribute::latency,
                    numaaff::memory_attribute::capacity}) {
    std::vector<double, numaaff::tier_allocator<double>> big(1 << 18, 1.0, numaaff::tier_allocator<double>(tier));
    std::vector<int, numaaff::tier_allocator<int>> small(10, 7, numaaff::tier_allocator<int>(tier));
    const auto placed = numaaff_test::query_pages(big.data(), big.size() * sizeof(double));
    EXPECT_EQ(placed.on(node), placed.total);
    EXPECT_EQ(small[9], 7);
    numaaff::tier_resource r(tier);
    std::pmr::vector<int> v(&r);
    v.assign(100000, 3);
    EXPECT_EQ(v[99999], 3);
    EXPECT_TRUE(r.is_equal(numaaff::tier_resource(tier)));
  }
  EXPECT_EQ(numaaff::tier_allocator<int>(), numaaff::tier_allocator<double>(numaaff::memory_attribute::bandwidth));
  EXPECT_NE(numaaff::tier_allocator<int>(numaaff::memory_attribute::latency), numaaff::tier_allocator<int>());
  EXPECT_FALSE(numaaff::tier_resource(numaaff::memory_attribute::capacity).is_equal(numaaff::tier_resource()));
}

// A full tier spills in attribute order, not in the kernel's (distance from the full node):
// from node 0 the bandwidth order here is 3, 0, 1, 2, while node 3's nearest is node 2. Node
// 3 has 6 MiB of room, so a 16 MiB block (2 MiB units) puts 6 MiB there and 10 on node 0; a
// unit that fits nowhere goes last to the first node (its preferred policy then spills).
TEST(TierAllocator, PlanSpillsInAttributeOrder) {
  const numaaff::topology t = numaaff::topology::from_synthetic("pack:2 numa:2 core:1 pu:1")
                                  .with_distances("10,20,30,40;20,10,20,30;30,20,10,20;40,30,20,10")
                                  .with_memory_attributes("0>3:bandwidth=50000;0>0:bandwidth=10000;0>1:bandwidth=10000");
  const std::vector<int> order = numaaff::detail::tier_order(t, numaaff::memory_attribute::bandwidth, 0);
  ASSERT_EQ(order, (std::vector<int>{3, 0, 1, 2}));
  EXPECT_EQ(t.nodes_by_distance(3)[1], 2) << "the kernel's fallback from node 3";
  constexpr std::size_t mib = 1 << 20;
  const auto plan_with = [&](std::map<int, std::uint64_t> room, std::size_t bytes) {
    std::vector<std::pair<int, std::size_t>> out;
    for (const auto& s : numaaff::detail::tier_plan(order, bytes, 2 * mib, [&](int n) { return room[n]; }))
      out.emplace_back(s.node, s.bytes);
    return out;
  };
  using plan = std::vector<std::pair<int, std::size_t>>;
  EXPECT_EQ(plan_with({{3, 100 * mib}}, 16 * mib), (plan{{3, 16 * mib}}));
  EXPECT_EQ(plan_with({{3, 6 * mib}, {0, 100 * mib}, {2, 100 * mib}}, 16 * mib), (plan{{3, 6 * mib}, {0, 10 * mib}}));
  EXPECT_EQ(plan_with({{3, 5 * mib}, {0, 100 * mib}}, 16 * mib), (plan{{3, 4 * mib}, {0, 12 * mib}}));
  EXPECT_EQ(plan_with({{3, 0}, {0, 3 * mib}, {1, 2 * mib}, {2, 0}}, 16 * mib), (plan{{0, 2 * mib}, {1, 2 * mib}, {3, 12 * mib}}));
  EXPECT_EQ(plan_with({}, 16 * mib), (plan{{3, 16 * mib}}));
  // Demotion goes the other way: the slowest memory first (ties farthest first), unknown last.
  EXPECT_EQ(numaaff::detail::demotion_order(t, 0), (std::vector<int>{1, 0, 3, 2}));
  EXPECT_EQ(numaaff::detail::demotion_order(t, 2), (std::vector<int>{0, 1, 3, 2}));
  const numaaff::topology none = t.with_memory_attributes("");
  EXPECT_EQ(numaaff::detail::demotion_order(none, 1), (std::vector<int>{3, 2, 0, 1}));
}

// Memory attributes become interleave weights: each node's best bandwidth, reduced; without
// any value, plain interleave.
TEST(TierAllocator, BandwidthWeights) {
  const numaaff::topology base = numaaff::topology::from_synthetic("pack:2 numa:2 core:1 pu:1");
  using weights = std::vector<std::pair<int, unsigned>>;
  const auto of = [](const std::vector<numaaff::node_weight>& w) {
    weights out;
    for (const auto& x : w) out.emplace_back(x.node, x.weight);
    return out;
  };
  EXPECT_EQ(of(numaaff::bandwidth_weights(base)), (weights{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(of(numaaff::bandwidth_weights(base.with_memory_attributes(
                "0>0:bandwidth=20000;1>1:bandwidth=20000;0>2:bandwidth=40000;1>2:bandwidth=30000;0>3:bandwidth=5000"))),
            (weights{{0, 4}, {1, 4}, {2, 8}, {3, 1}}));
  EXPECT_EQ(of(numaaff::bandwidth_weights(base.with_memory_attributes("0>0:bandwidth=20001;0>1:bandwidth=10000;0>2:bandwidth=7"))),
            (weights{{0, 100}, {1, 50}, {2, 1}, {3, 0}}));
}

// Small blocks of a weighted interleave take their nodes in proportion: node i takes
// weights[i] turns of each round (reduced by the gcd), in list order.
TEST(InterleaveAllocator, WeightedSmallBlocksTakeTurnsInProportion) {
  numaaff::detail::interleave_state s;
  s.set_weights({{0, 6}, {5, 0}, {2, 2}});
  std::vector<int> seen;
  for (int i = 0; i < 8; ++i) seen.push_back(s.pick());
  EXPECT_EQ(seen, (std::vector<int>{0, 0, 0, 2, 0, 0, 0, 2}));
  numaaff::detail::interleave_state even;
  even.set_weights({{1, 4}, {3, 4}});
  EXPECT_TRUE(even.weights.empty());
  EXPECT_EQ(even.pick(), 1);
  EXPECT_EQ(even.pick(), 3);
  // Weights whose sum passes 2^32 (each is an unsigned): no wrap to a zero-length round.
  numaaff::detail::interleave_state huge;
  huge.set_weights({{0, 3000000000u}, {1, 1294967296u}});
  EXPECT_EQ(huge.round, 8388608u);  // (2^32) / gcd 512
  EXPECT_EQ(huge.pick(), 0);
}

// The weighted allocator and resource on one node work (every block on it), keep `({0, 1})` a
// node list, and name `weights` for a list weighted_interleave would refuse.
TEST(InterleaveAllocator, WeightedFormsWorkAndRejectBadWeights) {
  const int node = numaaff_test::sysfs_nodes().front();
  numaaff::interleave_allocator<double> a(numaaff::by_weight, {{node, 3}});
  std::vector<double, numaaff::interleave_allocator<double>> big(1 << 18, 2.0, a);
  EXPECT_EQ(numaaff_test::query_pages(big.data(), big.size() * sizeof(double)).on(node), big.size() * sizeof(double) / 4096);
  EXPECT_EQ(a.weights().size(), 1u);
  numaaff::interleave_resource r(numaaff::by_weight, {{node, 2}});
  std::pmr::vector<int> v(&r);
  v.assign(1000, 5);
  EXPECT_EQ(v[999], 5);
  EXPECT_EQ(numaaff::interleave_allocator<int>({node}).weights().front().weight, 1u);
  const numaaff::interleave_allocator<int> braces{{node}};  // still a node list
  EXPECT_EQ(braces.nodes(), std::vector<int>{node});
  for (const std::vector<numaaff::node_weight>& bad :
       {std::vector<numaaff::node_weight>{}, {{node, 0}}, {{node, 1}, {node, 2}}, {{4096, 1}}}) {
    const std::string m =
        numaaff_test::what_of<std::invalid_argument>([&] { numaaff::interleave_allocator<int> x(numaaff::by_weight, bad); });
    EXPECT_NE(m.find("interleave_allocator: weights"), std::string::npos) << m;
    EXPECT_THROW((numaaff::interleave_resource{numaaff::by_weight, bad}), std::invalid_argument);
  }
}

// promote and demote keep the data and fail no page (on one node everything stays).
TEST(TierAllocator, PromoteAndDemoteKeepTheData) {
  std::vector<char> data(1 << 20, 1);
  const numaaff::move_result up = numaaff::promote(data.data(), data.size());
  EXPECT_EQ(up.failed, 0u);
  EXPECT_EQ(numaaff::demote(data.data(), data.size()).failed, 0u);
  EXPECT_EQ(data[12345], 1);
  EXPECT_THROW(numaaff::promote(nullptr, 10), std::invalid_argument);
  EXPECT_EQ(numaaff::demote(data.data() + 1, 0).total, 0u) << "an empty range moves nothing";
}


// ---- transparent huge pages --------------------------------------------------------------

TEST(HugePages, PerBlockByDefaultNoHugePageEverHoldsTwoBlocks) {
  using numaaff::huge_page_mode;
  EXPECT_EQ(numaaff::alloc_options{}.huge_pages, huge_page_mode::per_block);
  const std::size_t mib = std::size_t{1} << 20;
  // A block under 2 MiB (an AMR block): none.
  void* small = numaaff::allocate_on_node(72 << 10, home());
  EXPECT_TRUE(numaaff_test::has_vm_flag(small, "nh")) << numaaff_test::vm_flags(small);
  // 5 MiB: 2 MiB-aligned, huge pages allowed in its first 4 MiB, none in its partial tail.
  void* big = numaaff::allocate_on_node(5 * mib, home());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big) % (2 * mib), 0u);
  EXPECT_FALSE(numaaff_test::has_vm_flag(big, "nh")) << numaaff_test::vm_flags(big);
  EXPECT_TRUE(numaaff_test::has_vm_flag(static_cast<char*>(big) + 4 * mib, "nh")) << numaaff_test::vm_flags(static_cast<char*>(big) + 4 * mib);
  // Small blocks' slabs: none.
  auto tiny = numaaff::node_allocator<int>(home()).allocate(8);
  EXPECT_TRUE(numaaff_test::has_vm_flag(tiny, "nh")) << numaaff_test::vm_flags(tiny);
  numaaff::node_allocator<int>(home()).deallocate(tiny, 8);
  numaaff::deallocate(small, 72 << 10);
  numaaff::deallocate(big, 5 * mib);
}

TEST(HugePages, AlwaysAndNeverAreWhatTheySay) {
  using numaaff::huge_page_mode;
  const std::size_t bytes = std::size_t{3} << 20;
  const numaaff::alloc_options always{true, false, huge_page_mode::always};
  const numaaff::alloc_options never{true, false, huge_page_mode::never};
  void* a = numaaff::allocate_on_node(bytes, home(), always);
  void* n = numaaff::allocate_on_node(bytes, home(), never);
  EXPECT_TRUE(numaaff_test::has_vm_flag(a, "hg")) << numaaff_test::vm_flags(a);
  EXPECT_TRUE(numaaff_test::has_vm_flag(n, "nh")) << numaaff_test::vm_flags(n);
  numaaff::deallocate(a, bytes, always);
  numaaff::deallocate(n, bytes, never);
  // Interleaved memory spreads page by page: no huge pages unless asked.
  std::vector<char, numaaff::interleave_allocator<char>> v(bytes, 0, numaaff::interleave_allocator<char>({home()}));
  EXPECT_TRUE(numaaff_test::has_vm_flag(v.data(), "nh")) << numaaff_test::vm_flags(v.data());
}

// ---- default-constructible allocators and allocate_interleaved ----------------------------

struct mesh {  // what an application writes: allocators as plain container members
  std::vector<double, numaaff::node_allocator<double>> cells;
  std::vector<int, numaaff::interleave_allocator<int>> shared;
};

TEST(Allocators, DefaultConstructedForContainerMembers) {
  mesh m;  // the constructing thread's homenode; every node
  m.cells.assign(100000, 1.5);
  m.shared.assign(100000, 7);
  EXPECT_EQ(m.cells.get_allocator().node(), numaaff::this_homenode());
  EXPECT_EQ(m.shared.get_allocator().nodes(), numaaff::detail::kernel_nodes());
  EXPECT_EQ(numaaff::interleave_allocator<int>(), numaaff::interleave_allocator<long>()) << "one shared cursor";
  const auto raw = numaaff_test::query_pages(m.cells.data(), m.cells.size() * sizeof(double));
  EXPECT_EQ(raw.on(home()), raw.total);
  mesh copy = m;
  EXPECT_EQ(copy.cells, m.cells);

  const std::string child = numaaff_test::run_in_child(10, [] {  // a thread with a homenode
    numaaff::set_homenode(home());
    numaaff::node_allocator<int> a;
    return a.node() == home() ? 0 : 1;
  });
  EXPECT_EQ(child, "");
}

TEST(Allocators, AllocateInterleavedIsRealAndFreesWithDeallocate) {
  for (std::size_t bytes : {std::size_t{24}, std::size_t{40} << 10, std::size_t{3} << 20}) {
    void* p = numaaff::allocate_interleaved(bytes);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t), 0u);
    numaaff::deallocate(p, bytes);
  }
}

// The variable is read during static initialisation (no first-use initialisation another
// thread could be inside when one forks): a value set later changes nothing, and a wrong value
// at start-up throws at the first use, not before main.
TEST(Allocators, InterleaveNodesAreReadAtStartUpAndAWrongValueThrowsAtFirstUse) {
  if (const char* role = std::getenv("NUMAAFF_TEST_INTERLEAVE_ROLE")) {  // the re-executed child
    setenv("NUMAAFF_INTERLEAVE_NODES", std::to_string(home()).c_str(), 1);
    try {
      numaaff::interleave_allocator<int> a;
      std::printf("[%s] constructed\n", role);
    } catch (const std::invalid_argument& e) {
      std::printf("[%s] threw: %s\n", role, e.what());
    }
    return;
  }
  const std::string self = "NUMAAFF_TEST_INTERLEAVE_ROLE=%s NUMAAFF_INTERLEAVE_NODES=%s /proc/" +
                           std::to_string(getpid()) + "/exe --gtest_filter=Allocators.InterleaveNodesAreRead*";
  auto run = [&](const char* role, const char* value) {
    char cmd[512];
    std::snprintf(cmd, sizeof cmd, self.c_str(), role, value);
    return numaaff_test::run_command(cmd);
  };
  const std::string bad = run("bad", "banana");
  EXPECT_NE(bad.find("[bad] threw: numaaff: NUMAAFF_INTERLEAVE_NODES='banana'"), std::string::npos) << bad;
  EXPECT_NE(bad.find("PASSED"), std::string::npos) << bad;  // started and ran: nothing thrown before main
  const std::string good = run("good", "");
  EXPECT_NE(good.find("[good] constructed"), std::string::npos) << good;
}

TEST(Allocators, InterleaveNodesFromTheEnvironment) {
  using numaaff::detail::interleave_nodes_from;  // what the variable's value gives
  EXPECT_EQ(interleave_nodes_from(nullptr), numaaff::detail::kernel_nodes());
  EXPECT_EQ(interleave_nodes_from(" "), numaaff::detail::kernel_nodes());
  EXPECT_EQ(interleave_nodes_from(std::to_string(home()).c_str()), std::vector<int>{home()});
  for (const char* bad : {"0-999999999", "banana", "1023", "0,", "-1", "3-1"}) {
    try {
      (void)interleave_nodes_from(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("NUMAAFF_INTERLEAVE_NODES"), std::string::npos) << e.what();
    }
  }
}

// ---- misuse: the heap refuses it instead of handing a block to two owners -----------------

// Each case would, unchecked, put the block on a free list twice (or put memory that is not
// ours on one), so that the next two allocations return the same address.
TEST(HeapMisuseDeathTest, DoubleFreeOfASmallBlockAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = numaaff::allocate_on_node(64, home());
        numaaff::deallocate(p, 64);
        numaaff::deallocate(p, 64);
      },
      "numaaff: double free \\(pointer 0x[0-9a-f]+\\): aborting");
}

TEST(HeapMisuseDeathTest, DoubleFreeAfterOtherBlocksWereFreedStillAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        std::vector<void*> blocks;
        for (int i = 0; i < 200; ++i) blocks.push_back(numaaff::allocate_on_node(48, home()));
        void* twice = blocks[7];
        for (void* b : blocks) numaaff::deallocate(b, 48);  // past the thread cache's batch: some go central
        numaaff::deallocate(twice, 48);
      },
      "numaaff: double free");
}

TEST(HeapMisuseDeathTest, DoubleFreeThroughAnAllocatorAndAResourceAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        numaaff::node_allocator<double> a(home());
        double* p = a.allocate(4);
        a.deallocate(p, 4);
        a.deallocate(p, 4);
      },
      "numaaff: double free");
  EXPECT_DEATH(
      {
        numaaff::node_resource r(home());
        void* p = r.allocate(1 << 20, 64);
        r.deallocate(p, 1 << 20, 64);
        r.deallocate(p, 1 << 20, 64);
      },
      "numaaff: free of a pointer numaaff did not allocate, or a double free");
}

TEST(HeapMisuseDeathTest, ForeignPointersAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* m = std::malloc(64);
        numaaff::deallocate(m, 64);
      },
      "numaaff: free of a pointer numaaff did not allocate");
  EXPECT_DEATH(
      {
        static char on_stack_or_data[64];
        numaaff::deallocate(on_stack_or_data, sizeof on_stack_or_data);
      },
      "numaaff: free of a pointer numaaff did not allocate");
  EXPECT_DEATH(
      {
        char* p = static_cast<char*>(numaaff::allocate_on_node(256, home()));
        numaaff::deallocate(p + 16, 128);
      },
      "numaaff: free of a pointer inside a block");
  EXPECT_DEATH(
      {
        char* p = static_cast<char*>(numaaff::allocate_on_node(1 << 20, home()));
        numaaff::deallocate(p + 4096, (1 << 20) - 4096);
      },
      "numaaff: free of a pointer numaaff did not allocate");
}

TEST(HeapMisuseDeathTest, ASizeThatDoesNotFitTheBlockAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = numaaff::allocate_on_node(1 << 20, home());
        numaaff::deallocate(p, 1 << 16);  // would unmap 64 KiB and leave the rest for a new block
      },
      "numaaff: free with a size that does not match");
  EXPECT_DEATH(
      {
        void* p = numaaff::allocate_on_node(64, home());
        numaaff::deallocate(p, 4096);
      },
      "numaaff: free with a size larger than the block");
}

TEST(HeapMisuse, CorrectUseIsNeverMistakenForMisuse) {
  // Blocks whose data looks like a free block's (a copy of one), every size class, the large
  // path, blocks freed by another thread, and frees with the sizes containers give.
  std::vector<std::pair<void*, std::size_t>> live;
  for (std::size_t bytes = 1; bytes <= (std::size_t{1} << 22); bytes = bytes * 3 / 2 + 1) {
    void* p = numaaff::allocate_on_node(bytes, home());
    std::memset(p, 0xa5, bytes);
    live.emplace_back(p, bytes);
  }
  void* probe = numaaff::allocate_on_node(64, home());
  numaaff::deallocate(probe, 64);
  ASSERT_GE(live[5].second, 16u);
  std::memcpy(live[5].first, probe, 16);  // a free block's bytes in a live block: what a free reads is elsewhere
  void* again = numaaff::allocate_on_node(64, home());  // the same block, handed out again
  std::thread([&] {
    for (auto& [p, bytes] : live) numaaff::deallocate(p, bytes);
  }).join();
  numaaff::deallocate(again, 64);
  std::vector<double, numaaff::node_allocator<double>> v{numaaff::node_allocator<double>(home())};
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  v.shrink_to_fit();
  EXPECT_EQ(v[99999], 99999.0);
}

}  // namespace
