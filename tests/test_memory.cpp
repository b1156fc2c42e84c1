// Range policies, move_to and where() on this host (layer 2). Every policy is checked with a
// raw get_mempolicy(MPOL_F_ADDR) and every placement with a raw move_pages query.
#include <numaaff/memory.hpp>
#include <numaaff/system_report.hpp>

#include <numaaff/detail/syscall.hpp>

#include "common/exceptions.hpp"
#include "common/placement_check.hpp"
#include "common/seccomp_filter.hpp"
#include "common/scratch.hpp"
#include "common/smaps.hpp"

#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

namespace {

using numaaff::detail::scoped_failure;
using numaaff::detail::sys;

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

struct mapping : numaaff_test::scratch {
  explicit mapping(std::size_t pages) : scratch(pages * ps, 0) {}
  void touch() const {
    for (std::size_t i = 0; i < bytes; i += ps) p[i] = static_cast<char>(i / ps);
  }
};

int raw_policy(void* addr) {
  int mode = -1;
  unsigned long mask[16] = {};
  if (get_mempolicy(&mode, mask, sizeof(mask) * 8, addr, MPOL_F_ADDR) != 0) return -2;
  return mode;
}

/// The policy the kernel holds for addr; under tests/numa_sandbox nobody can read it, so the
/// expectation there is the denial itself (the call that set it was a counted no-op).
int expected_policy(int mode) { return numaaff_test::in_numa_sandbox() ? -2 : mode; }

int home() { return numaaff_test::sysfs_nodes().front(); }

TEST(Where, CountsUnpopulatedThenResidentPagesExactly) {
  mapping m(64);
  numaaff::placement before = numaaff::where(m.p, m.bytes);
  EXPECT_EQ(before.total(), 64u);
  EXPECT_EQ(before.unpopulated(), 64u);
  EXPECT_EQ(before.dominant_node(), -1);
  for (std::size_t i = 0; i < 32; ++i) m.p[i * ps] = 1;  // first half
  const numaaff::placement half = numaaff::where(m.p, m.bytes);
  const auto raw = numaaff_test::query_pages(m.p, m.bytes);
  EXPECT_EQ(half.unpopulated(), raw.unpopulated);
  EXPECT_EQ(half.unpopulated(), 32u);
  for (const auto& [node, count] : raw.per_node) EXPECT_EQ(half.pages_on(node), count);
  EXPECT_EQ(half.dominant_node(), home());
  EXPECT_DOUBLE_EQ(half.fraction_on(home()), 1.0);
  EXPECT_EQ(half.nodes(), std::vector<int>{home()});
  EXPECT_NE(half.to_string().find("unpopulated 32"), std::string::npos) << half.to_string();
}

TEST(Where, UnalignedRangesCoverEveryTouchedPage) {
  mapping m(4);
  m.touch();
  EXPECT_EQ(numaaff::where(m.p + 100, ps).total(), 2u);      // straddles pages 0 and 1
  EXPECT_EQ(numaaff::where(m.p + ps - 1, 2).total(), 2u);
  EXPECT_EQ(numaaff::where(m.p + ps, ps).total(), 1u);       // exactly one page
  EXPECT_EQ(numaaff::where(m.p, 0).total(), 0u);             // no-op
}

TEST(Where, LargeRangesAreBatched) {
  mapping m(5000);  // more than one migration batch
  m.touch();
  const numaaff::placement p = numaaff::where(m.p, m.bytes);
  EXPECT_EQ(p.total(), 5000u);
  EXPECT_EQ(p.pages_on(home()), 5000u);
  const std::string table = numaaff::placement_table({{"big", p}, {"none", numaaff::placement{}}});
  EXPECT_NE(table.find("node00"), std::string::npos) << table;
  EXPECT_NE(table.find("100.0%"), std::string::npos) << table;
  const bool tiers = std::any_of(numaaff::topology::system().nodes().begin(), numaaff::topology::system().nodes().end(), [](int n) {
    return !numaaff::topology::system().has_cpus(n) || !numaaff::topology::system().kind_of(n).empty();
  });
  if (!tiers) {
    EXPECT_EQ(table.find("\ntier "), std::string::npos) << "no tier line without tiers\n" << table;
  }
}

TEST(Memory, BadRangesAndNodesAreCallerErrors) {
  mapping m(1);
  const auto wraps = reinterpret_cast<void*>(UINTPTR_MAX - 10);
  EXPECT_THROW(numaaff::where(nullptr, 10), std::invalid_argument);
  EXPECT_THROW(numaaff::where(wraps, 100), std::invalid_argument);
  EXPECT_THROW(numaaff::move_to(nullptr, 10, 0), std::invalid_argument);
  EXPECT_THROW(numaaff::move_to(m.p, m.bytes, 4242), std::invalid_argument);
  EXPECT_THROW(numaaff::bind(m.p, m.bytes, 4242), std::invalid_argument);
  EXPECT_THROW(numaaff::bind(m.p, m.bytes, std::vector<int>{}), std::invalid_argument);
  EXPECT_THROW(numaaff::interleave(m.p, m.bytes, std::vector<int>{}), std::invalid_argument);
  EXPECT_THROW(numaaff::interleave(m.p, m.bytes, {0}, ps + 1), std::invalid_argument);
  EXPECT_THROW(numaaff::prefer(wraps, 100, 0), std::invalid_argument);
  EXPECT_THROW(numaaff::set_home_node(m.p, m.bytes, -3), std::invalid_argument);
  try {
    numaaff::bind(m.p, m.bytes, 4242);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("node 4242 does not exist"), std::string::npos) << e.what();
  }
  try {
    numaaff::move_to(nullptr, 10, 0);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("addr is null"), std::string::npos) << e.what();
  }
  std::error_code ec;
  numaaff::bind(nullptr, 1, 0, {}, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  (void)numaaff::where(wraps, 100, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  numaaff::bind(m.p, 0, 0);  // bytes == 0: no-op, even with a null-free range
  numaaff::bind(nullptr, 0, 0);
}

TEST(Memory, PoliciesReachTheKernel) {
  mapping m(16);
  numaaff::bind(m.p + 1, m.bytes - 2, home());
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_BIND));
  numaaff::interleave(m.p, m.bytes, {home()});
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_INTERLEAVE));
  numaaff::prefer(m.p, m.bytes, home());
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_PREFERRED));
  numaaff::interleave(m.p, m.bytes, {home()}, 4 * ps);
  EXPECT_EQ(raw_policy(m.p + 5 * ps), expected_policy(MPOL_BIND));
  numaaff::reset_policy(m.p, m.bytes);
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_DEFAULT));
  numaaff::bind(m.p, m.bytes, home(), numaaff::policy_options{true, true});  // move existing, strict
  m.touch();
  EXPECT_EQ(numaaff_test::query_pages(m.p, m.bytes).on(home()), 16u);
}

TEST(Memory, PreferManyFallsBackWhereTheKernelLacksIt) {
  mapping m(4);
  {
    scoped_failure old_kernel(sys::mbind, EINVAL, 1);  // MPOL_PREFERRED_MANY unknown
    numaaff::prefer(m.p, m.bytes, std::vector<int>{home(), home()});
  }
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_PREFERRED));
}

TEST(Memory, SetHomeNodeUsesTheSyscallOrSaysItIsMissing) {
  mapping m(4);
  {
    scoped_failure missing(sys::set_mempolicy_home_node, ENOSYS);
    std::error_code ec;
    numaaff::set_home_node(m.p, m.bytes, home(), {}, ec);
    if (numaaff_test::in_numa_sandbox()) {  // mbind is refused first: one counted no-op
      EXPECT_FALSE(ec);
      return;
    }
    EXPECT_EQ(ec, numaaff::errc::feature_unavailable);
    EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_DEFAULT));  // left as it was
    EXPECT_THROW(numaaff::set_home_node(m.p, m.bytes, home()), std::system_error);
  }
  std::error_code ec;
  numaaff::set_home_node(m.p, m.bytes, home(), {}, ec);
  if (ec == numaaff::errc::feature_unavailable) GTEST_SKIP() << "kernel before 5.17";
  ASSERT_FALSE(ec) << ec.message();  // in a sandbox: a counted no-op, not an error
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_BIND));
}

TEST(Memory, AFailedCallIsASystemErrorNamingIt) {
  mapping m(8);
  m.touch();
  std::memset(m.p, 0x5a, m.bytes);
  {
    scoped_failure fail(sys::mbind, EIO);
    try {
      numaaff::bind(m.p, m.bytes, home());
      FAIL() << "no exception";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::io_error);
      EXPECT_EQ(std::string(e.what()).rfind("numaaff: mbind", 0), 0u) << e.what();
    }
    std::error_code ec;
    numaaff::interleave(m.p, m.bytes, {home()}, {}, ec);
    EXPECT_EQ(ec, std::errc::io_error);
  }
  {
    scoped_failure fail(sys::move_pages, EIO);
    try {
      (void)numaaff::move_to(m.p, m.bytes, home());
      FAIL() << "no exception";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::io_error);
      EXPECT_EQ(std::string(e.what()).rfind("numaaff: move_pages", 0), 0u) << e.what();
    }
    std::error_code ec;
    const numaaff::move_result r = numaaff::move_to(m.p, m.bytes, home(), ec);
    EXPECT_EQ(ec, std::errc::io_error);
    EXPECT_EQ(r.failed, 8u);
    EXPECT_EQ(r.first_error, EIO);
    EXPECT_THROW((void)numaaff::where(m.p, m.bytes), std::system_error);
  }
  for (std::size_t i = 0; i < m.bytes; ++i) ASSERT_EQ(m.p[i], 0x5a);  // data intact and readable
}

// ---- weighted interleave -------------------------------------------------------------------

/// Pages per weight entry of a plan, checking that the runs tile [0, pages) in order.
std::vector<std::size_t> plan_totals(std::size_t pages, const std::vector<std::uint64_t>& w, std::size_t max_runs,
                                     std::size_t* runs = nullptr, std::vector<std::size_t>* first_tile = nullptr) {
  std::vector<std::size_t> totals(w.size(), 0);
  std::size_t at = 0, count = 0;
  numaaff::detail::for_each_weighted_run(pages, w, max_runs, [&](const numaaff::detail::page_run& r) {
    EXPECT_EQ(r.first, at) << "runs must tile the range in order";
    EXPECT_GT(r.pages, 0u);
    EXPECT_NE(w[r.owner], 0u) << "a zero weight got pages";
    if (first_tile != nullptr && count < w.size()) first_tile->push_back(r.pages);
    totals[r.owner] += r.pages;
    at += r.pages;
    ++count;
  });
  EXPECT_EQ(at, pages);
  if (runs != nullptr) *runs = count;
  return totals;
}

TEST(WeightedInterleave, RunsFollowTheWeightsRoundByRound) {
  std::size_t runs = 0;
  std::vector<std::size_t> tile;
  // A round of 3 + 1 pages when the map count allows one run per page group.
  EXPECT_EQ(plan_totals(4000, {3, 1}, 100000, &runs, &tile), (std::vector<std::size_t>{3000, 1000}));
  EXPECT_EQ(runs, 2000u);
  EXPECT_EQ(tile, (std::vector<std::size_t>{3, 1}));
  // Reduced by the gcd: 6:2 is 3:1.
  EXPECT_EQ(plan_totals(4000, {6, 2}, 100000, &runs), (std::vector<std::size_t>{3000, 1000}));
  EXPECT_EQ(runs, 2000u);
  // Zero weights get nothing; the others keep their proportion.
  EXPECT_EQ(plan_totals(900, {0, 5, 3, 1}, 100000), (std::vector<std::size_t>{0, 500, 300, 100}));
  // A partial last round is split at the cumulative boundaries, rounded to nearest: 10 pages
  // of 3:1 are two rounds and 2 pages, of which 3:1 gives 1.5 + 0.5.
  EXPECT_EQ(plan_totals(10, {3, 1}, 100000), (std::vector<std::size_t>{8, 2}));
  EXPECT_EQ(plan_totals(1, {3, 1}, 100000), (std::vector<std::size_t>{1, 0}));  // not to the last entry
  EXPECT_EQ(plan_totals(1, {1, 3}, 100000), (std::vector<std::size_t>{0, 1}));
  // Weights far above the page count (no whole round fits) still split by proportion.
  EXPECT_EQ(plan_totals(10, {4294967295u, 1}, 100000), (std::vector<std::size_t>{10, 0}));
  EXPECT_EQ(plan_totals(10, {1000, 1}, 100000), (std::vector<std::size_t>{10, 0}));
  EXPECT_EQ(plan_totals(0, {3, 1}, 100000), (std::vector<std::size_t>{0, 0}));
}

TEST(WeightedInterleave, FewerMappingsMeanLargerTilesNotOtherProportions) {
  std::size_t runs = 0;
  std::vector<std::size_t> tile;
  // 8 runs allowed for 4000 pages of 3:1: 4 tiles of 750 + 250 pages.
  EXPECT_EQ(plan_totals(4000, {3, 1}, 8, &runs, &tile), (std::vector<std::size_t>{3000, 1000}));
  EXPECT_EQ(runs, 8u);
  EXPECT_EQ(tile, (std::vector<std::size_t>{750, 250}));
  // 1 GiB of 4 KiB pages, 2:1, at the library's cap: about 1024 runs, proportions kept.
  const std::size_t gib = 262144;
  const auto t = plan_totals(gib, {2, 1}, numaaff::detail::weighted_runs_max, &runs);
  EXPECT_LE(runs, numaaff::detail::weighted_runs_max + 2);
  EXPECT_LE(std::max(t[0], 2 * t[1]) - std::min(t[0], 2 * t[1]), 2u) << t[0] << " " << t[1];
  // A budget below one run per node still covers the range: one tile.
  EXPECT_EQ(plan_totals(400, {1, 3}, 1, &runs), (std::vector<std::size_t>{100, 300}));
  EXPECT_EQ(runs, 2u);
}

TEST(WeightedInterleave, CallerMistakesNameTheWeights) {
  mapping m(8);
  const auto message = [&](const std::vector<numaaff::node_weight>& w) {
    return numaaff_test::what_of<std::invalid_argument>([&] { numaaff::weighted_interleave(m.p, m.bytes, w); });
  };
  EXPECT_NE(message({}).find("weighted_interleave: weights: the list is empty"), std::string::npos);
  EXPECT_NE(message({{999, 1}}).find("weights: node 999 does not exist"), std::string::npos) << message({{999, 1}});
  EXPECT_NE(message({{home(), 1}, {home(), 2}}).find("is listed twice"), std::string::npos);
  EXPECT_NE(message({{home(), 0}}).find("every weight is 0"), std::string::npos);
  // A node without memory (CPUs only) cannot take a share; with weight 0 it is left out.
  const std::string no_memory = numaaff::detail::weights_error({{home(), 2}}, std::vector<int>{});
  EXPECT_NE(no_memory.find("weights: node " + std::to_string(home()) + " has no memory"), std::string::npos) << no_memory;
  EXPECT_NE(numaaff::detail::weights_error({{home(), 0}}, std::vector<int>{}).find("every weight is 0"), std::string::npos);
  EXPECT_EQ(numaaff::detail::weights_error({{home(), 2}}), "") << "this kernel's node has memory";
  EXPECT_THROW(numaaff::weighted_interleave(nullptr, 1, {{home(), 1}}), std::invalid_argument);
  std::error_code ec;
  numaaff::weighted_interleave(m.p, m.bytes, {}, {}, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  numaaff::weighted_interleave(m.p, m.bytes, {{home(), 1}}, {}, ec);
  EXPECT_FALSE(ec);
  numaaff::weighted_interleave(m.p, 0, {{home(), 1}});  // no-op
}

TEST(WeightedInterleave, OneNodeIsPreferredAndKeepsTheData) {
  mapping m(16);
  m.touch();
  numaaff::weighted_interleave(m.p, m.bytes, {{home(), 7}}, numaaff::policy_options{true, true});
  EXPECT_EQ(raw_policy(m.p), expected_policy(MPOL_PREFERRED));
  EXPECT_EQ(numaaff_test::query_pages(m.p, m.bytes).on(home()), 16u);
  for (std::size_t i = 0; i < m.bytes; i += ps) ASSERT_EQ(m.p[i], static_cast<char>(i / ps));
}

// ---- data_node -----------------------------------------------------------------------------

TEST(DataNode, TheNodeOfMostSampledPagesOrMinusOne) {
  mapping m(64);
  EXPECT_EQ(numaaff::data_node(m.p, m.bytes), -1);  // never touched
  m.touch();
  const int known = numaaff_test::in_numa_sandbox() ? -1 : home();  // a sandbox denies the query
  EXPECT_EQ(numaaff::data_node(m.p, m.bytes), known);
  EXPECT_EQ(numaaff::data_node(m.p + 3, 10), known);
  EXPECT_EQ(numaaff::data_node(m.p, 0), -1);
  EXPECT_THROW((void)numaaff::data_node(nullptr, 1), std::invalid_argument);
  {
    scoped_failure fail(sys::move_pages, EIO, 1);
    try {
      (void)numaaff::data_node(m.p, m.bytes);
      ADD_FAILURE() << "no exception";
    } catch (const std::system_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("numaaff: move_pages", 0), 0u) << e.what();
    }
  }
  {
    scoped_failure deny(sys::move_pages, EPERM);  // a sandbox: nobody can say, no error
    std::error_code ec;
    EXPECT_EQ(numaaff::data_node(m.p, m.bytes, ec), -1);
    EXPECT_FALSE(ec);
  }
}

// The scheduling hints' data directory: it remembers pages, so a repeated hint, or a hint on
// another range over the same pages, makes no query while numaaff migrates nothing; pages it
// has not seen are asked; and any migration (here a moving bind of another range) makes the
// next hint ask again.
TEST(DataNode, HintsAreCachedUntilNumaaffMigratesSomething) {
  if (numaaff_test::in_numa_sandbox()) GTEST_SKIP() << "the sandbox denies every page query: nothing to cache";
  mapping m(16), other(4), unseen(4);
  m.touch();
  other.touch();
  unseen.touch();
  EXPECT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes), home());
  {
    scoped_failure fail(sys::move_pages, EIO);  // a query now would fail: -1
    EXPECT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes), home());  // known pages
    EXPECT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes - 1), home());  // the same pages
    EXPECT_EQ(numaaff::detail::directory.node_of(unseen.p, unseen.bytes), -1);  // pages not seen: asked
  }
  numaaff::bind(other.p, other.bytes, home(), numaaff::policy_options{true, true});  // a migration (MPOL_MF_MOVE)
  {
    scoped_failure fail(sys::move_pages, EIO);
    EXPECT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes), -1);  // asked again
  }
  EXPECT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes), home());
}

// A thread's remembered answer for a range is as old as the oldest page it was judged by: asked
// over pages the directory learnt 30 ms before, it expires with them (50 ms after they were
// asked), not 50 ms after itself. Ages are on the coarse clock (a tick of up to 10 ms).
TEST(DataNode, ARangesAnswerExpiresWithItsOldestPage) {
  if (numaaff_test::in_numa_sandbox()) GTEST_SKIP() << "the sandbox denies every page query: nothing to cache";
  using clock = std::chrono::steady_clock;
  using ms = std::chrono::milliseconds;
  static_assert(numaaff::detail::data_directory::ttl == ms(50), "the times below are for a ttl of 50 ms");
  for (int attempt = 0; attempt < 5; ++attempt) {
    // What an earlier test or attempt left for pages at the same address expires first.
    std::this_thread::sleep_for(ms(70));
    mapping m(8);
    m.touch();
    const auto t0 = clock::now();
    ASSERT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes), home());  // the pages, asked now
    std::this_thread::sleep_until(t0 + ms(30));
    int answer = 0;
    {
      scoped_failure fail(sys::move_pages, EIO);
      answer = numaaff::detail::directory.node_of(m.p, m.bytes - 1);  // a new range over known pages
    }
    if (clock::now() - t0 >= ms(38)) continue;  // a stalled host: the pages may have expired; again
    EXPECT_EQ(answer, home());
    std::this_thread::sleep_until(t0 + ms(70));  // the pages 70 ms old, the answer 32-40 ms
    scoped_failure fail(sys::move_pages, EIO);
    EXPECT_EQ(numaaff::detail::directory.node_of(m.p, m.bytes - 1), -1) << "the answer outlived the pages it was judged by";
    return;
  }
  GTEST_SKIP() << "the host stalled the test past the directory's ttl five times";
}

TEST(Memory, ARefusedCallIsACountedNoOp) {
  // EPERM: a sandbox (seccomp) denies the call; tests/test_sandbox.cpp covers the real filter,
  // this the per-call handling. EACCES is not a sandbox (move_pages to a node outside the
  // cpuset's mems): it stays an error.
  mapping m(8);
  m.touch();
  std::memset(m.p, 0x5a, m.bytes);
  {
    scoped_failure outside_mems(sys::move_pages, EACCES);
    EXPECT_THROW((void)numaaff::move_to(m.p, m.bytes, home()), std::system_error);
  }
  for (int error : {EPERM}) {
    const numaaff::refusal_statistics before = numaaff::refusal_stats();
    {
      scoped_failure deny(sys::mbind, error);
      numaaff::bind(m.p, m.bytes, home());
      numaaff::interleave(m.p, m.bytes, {home()});
      EXPECT_EQ(numaaff::refusal_stats().policies_skipped, before.policies_skipped + 2);
    }
    {
      scoped_failure deny(sys::move_pages, error);
      const numaaff::move_result r = numaaff::move_to(m.p, m.bytes, home());
      EXPECT_EQ(r.already_there, 8u);  // one node: resident pages are on it
      EXPECT_EQ(numaaff::where(m.p, m.bytes).pages_on(home()), 8u);
    }
  }
  for (std::size_t i = 0; i < m.bytes; ++i) ASSERT_EQ(m.p[i], 0x5a);
}

TEST(MoveTo, OnOneNodeEverythingIsAlreadyThere) {
  mapping m(40);
  for (std::size_t i = 0; i < 30; ++i) m.p[i * ps] = static_cast<char>(i);
  const numaaff::move_result r = numaaff::move_to(m.p, m.bytes, home());
  EXPECT_EQ(r.total, 40u);
  EXPECT_EQ(r.already_there, 30u);
  EXPECT_EQ(r.unpopulated, 10u);
  EXPECT_EQ(r.moved, 0u);
  EXPECT_TRUE(r.complete());
  for (std::size_t i = 0; i < 30; ++i) EXPECT_EQ(m.p[i * ps], static_cast<char>(i));
}

TEST(MoveTo, ARangeInsideAHugePageSplitsItInsteadOfCarryingItsNeighbours) {
  char* p = numaaff_test::huge_backed(2);
  if (p == nullptr) GTEST_SKIP() << "no transparent huge pages here: " << numaaff::system_report().to_string();
  const std::size_t huge = numaaff::detail::huge_page_size();
  // A 72 KiB block in the middle of the first huge page: moving it alone needs that huge page
  // split (here the target is the only node, so nothing else changes).
  const numaaff::move_result r = numaaff::move_to(p + huge / 2, 72 << 10, home());
  EXPECT_EQ(r.total, (72u << 10) / ps);
  EXPECT_EQ(r.already_there, r.total);
  EXPECT_EQ(r.carried, 0u);
  // The split region is marked not-huge (its own mapping now, so that khugepaged never merges
  // it again): the first huge page is split, the second, in the next mapping, intact.
  EXPECT_EQ(numaaff_test::smaps_kb(p, "AnonHugePages"), 0);
  EXPECT_EQ(numaaff_test::smaps_kb(p + huge, "AnonHugePages") * 1024, static_cast<long>(huge));
  for (std::size_t i = 0; i < 2 * huge; i += ps) ASSERT_EQ(p[i], 0x33);
  // A range that covers whole huge pages is left whole.
  char* q = numaaff_test::huge_backed(2);
  ASSERT_NE(q, nullptr);
  (void)numaaff::move_to(q, 2 * huge, home());
  EXPECT_EQ(numaaff_test::smaps_kb(q, "AnonHugePages") * 1024, static_cast<long>(2 * huge));
}

TEST(PlaceBlocks, CallerMistakesNameWhatIsWrong) {
  mapping m(40);
  const auto message = [&](std::size_t block, const std::vector<int>& owners) {
    return numaaff_test::what_of<std::invalid_argument>([&] { numaaff::place_blocks(m.p, m.bytes, block, owners); });
  };
  EXPECT_NE(message(0, {home()}).find("block_bytes is 0"), std::string::npos);
  EXPECT_NE(message(m.bytes / 4, {home(), home()}).find("owners has 2 entries for 4 blocks"), std::string::npos);
  EXPECT_NE(message(m.bytes / 2, {home(), 4000}).find("owner of block 1"), std::string::npos);
  std::error_code ec;
  (void)numaaff::place_blocks(nullptr, 10, 4, std::vector<int>{home()}, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  EXPECT_THROW(numaaff::place_blocks(m.p, m.bytes, 0, [](std::size_t) { return 0; }), std::invalid_argument);
}

TEST(PlaceBlocks, UnalignedBlocksOnOneNodeAreAllThereAndKeepEveryByte) {
  mapping m(64);
  for (std::size_t i = 0; i < 48 * ps; ++i) m.p[i] = static_cast<char>(i * 7);
  std::size_t asked = 0;
  const numaaff::move_result r = numaaff::place_blocks(m.p + 100, m.bytes - 100, 5000, [&](std::size_t) {
    ++asked;
    return home();
  });
  EXPECT_EQ(asked, (m.bytes - 100 + 4999) / 5000) << "owner_of is called once per block";
  EXPECT_EQ(r.total, 64u);
  EXPECT_EQ(r.already_there, 48u);
  EXPECT_EQ(r.unpopulated, 16u);
  EXPECT_EQ(r.moved + r.failed + r.carried, 0u);
  for (std::size_t i = 0; i < 48 * ps; ++i) ASSERT_EQ(m.p[i], static_cast<char>(i * 7));
}

TEST(PlaceBlocks, KeepInPlaceLeavesABlockWhereItIs) {
  // Free slots of a block pool and blocks whose owner did not change: -2 (keep_in_place) is
  // an owner, not a mistake; any other negative owner still is.
  static_assert(numaaff::keep_in_place == -2, "the C API's NUMAAFF_KEEP");
  mapping m(64);
  std::memset(m.p, 5, 40 * ps);
  std::vector<int> owners(8, numaaff::keep_in_place);
  owners[1] = owners[6] = home();
  const numaaff::move_result r = numaaff::place_blocks(m.p, m.bytes, 8 * ps, owners);
  EXPECT_EQ(r.total, 64u);
  EXPECT_EQ(r.already_there, 40u);
  EXPECT_EQ(r.unpopulated, 24u);
  EXPECT_EQ(r.moved + r.failed + r.carried, 0u);
  owners.assign(8, numaaff::keep_in_place);
  EXPECT_EQ(numaaff::place_blocks(m.p, m.bytes, 8 * ps, owners).already_there, 40u);
  owners[3] = -1;  // the C API's error value is no owner
  EXPECT_NE(numaaff_test::what_of<std::invalid_argument>([&] { numaaff::place_blocks(m.p, m.bytes, 8 * ps, owners); })
                .find("owner of block 3"),
            std::string::npos);
  for (std::size_t i = 0; i < 40 * ps; ++i) ASSERT_EQ(m.p[i], 5);
}

}  // namespace
