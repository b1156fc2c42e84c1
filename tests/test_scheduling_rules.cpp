// The scheduling rules as tables (layer 1, no threads, no clock): the steal plan's orders,
// delays, wake-up order and nearest node on synthetic distance matrices (4x1, 2x2, asymmetric,
// 8 nodes, 10/100), the steal rule's decision for each combination of delay, idle time, clock
// and home-node state, the exec policy's choice, and the index partition.
#include <numaaff/detail/dynamic_loop.hpp>
#include <numaaff/detail/steal_plan.hpp>
#include <numaaff/partition.hpp>
#include <numaaff/topology.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using numaaff::detail::steal_decision;
using numaaff::detail::steal_plan;
using numaaff::detail::steal_source;
using matrix = std::vector<std::vector<int>>;
using std::chrono::microseconds;
constexpr std::uint64_t us = 1000;  // ns
constexpr std::uint64_t never = UINT64_MAX;

enum class mode { distance, local_only, free };

// A plan over nodes 0..n-1 (or `pool`, a subset) of matrix m, rows "from".
steal_plan plan_of(const matrix& m, mode s = mode::distance, microseconds unit = microseconds(50),
                   std::vector<int> pool = {}) {
  std::vector<int> all;
  for (std::size_t i = 0; i < m.size(); ++i) all.push_back(static_cast<int>(i));
  if (pool.empty()) pool = all;
  return steal_plan(pool, all, [&m](int a, int b) { return m[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)]; },
                    10, s == mode::local_only, s == mode::free, unit);
}

matrix uniform(std::size_t n, int remote) {
  matrix m(n, std::vector<int>(n, remote));
  for (std::size_t i = 0; i < n; ++i) m[i][i] = 10;
  return m;
}

// Remote node numbers and delays (us) of `from`, as the plan gives them.
std::vector<std::pair<int, std::uint64_t>> remotes(const steal_plan& p, std::size_t from) {
  std::vector<std::pair<int, std::uint64_t>> out;
  for (const steal_source& r : p.remotes(from)) out.emplace_back(p.node(r.node_index), r.delay_ns / us);
  return out;
}

std::vector<int> wake_order(const steal_plan& p, std::size_t home, bool bound) {
  std::vector<int> out;
  for (std::size_t i : p.wake_after(home, bound)) out.push_back(p.node(i));
  return out;
}

using order = std::vector<std::pair<int, std::uint64_t>>;

TEST(StealPlan, FourSingleNodePackagesAt20AndAt100) {
  const steal_plan p20 = plan_of(uniform(4, 20));
  const steal_plan p100 = plan_of(uniform(4, 100));
  for (std::size_t from = 0; from < 4; ++from) {
    order want20, want100;
    for (int r = 0; r < 4; ++r)
      if (static_cast<std::size_t>(r) != from) {
        want20.emplace_back(r, 50);  // 50 us * (20 - 10) / 10
        want100.emplace_back(r, 450);  // 50 us * (100 - 10) / 10
      }
    EXPECT_EQ(remotes(p20, from), want20) << "from " << from;
    EXPECT_EQ(remotes(p100, from), want100) << "from " << from;
    EXPECT_EQ(p20.delay_ns(from, from), 0u);
  }
  EXPECT_EQ(wake_order(p20, 2, false), (std::vector<int>{0, 1, 3}));  // ties by node number
}

TEST(StealPlan, TwoPackagesOfTwoNodesStealInsideThePackageFirst) {
  const matrix m = {{10, 12, 20, 20}, {12, 10, 20, 20}, {20, 20, 10, 12}, {20, 20, 12, 10}};
  const steal_plan p = plan_of(m);
  EXPECT_EQ(remotes(p, 0), (order{{1, 10}, {2, 50}, {3, 50}}));
  EXPECT_EQ(remotes(p, 3), (order{{2, 10}, {0, 50}, {1, 50}}));
  EXPECT_EQ(wake_order(p, 1, false), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(wake_order(p, 2, false), (std::vector<int>{3, 0, 1}));
}

TEST(StealPlan, AsymmetricMatricesUseTheThiefsRowToStealAndTheOthersRowsToWake) {
  // Rows are "from", as some firmware reports.
  const matrix m = {{10, 40, 20, 30}, {25, 10, 20, 30}, {30, 20, 10, 20}, {40, 30, 15, 10}};
  const steal_plan p = plan_of(m);
  EXPECT_EQ(remotes(p, 0), (order{{2, 50}, {3, 100}, {1, 150}}));
  EXPECT_EQ(remotes(p, 3), (order{{2, 25}, {1, 100}, {0, 150}}));
  EXPECT_EQ(remotes(p, 2), (order{{1, 50}, {3, 50}, {0, 100}}));
  // Whom to wake for node 0's work: the nodes whose own distance to 0 is smallest.
  EXPECT_EQ(wake_order(p, 0, false), (std::vector<int>{1, 2, 3}));  // 25, 30, 40
  EXPECT_EQ(wake_order(p, 2, false), (std::vector<int>{3, 0, 1}));  // 15, 20, 20
}

TEST(StealPlan, EightNodesOnARing) {
  matrix m(8, std::vector<int>(8));
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      const int hops = std::min((a - b + 8) % 8, (b - a + 8) % 8);
      m[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] = 10 + 10 * hops;
    }
  const steal_plan p = plan_of(m, mode::distance, microseconds(10));
  EXPECT_EQ(remotes(p, 0), (order{{1, 10}, {7, 10}, {2, 20}, {6, 20}, {3, 30}, {5, 30}, {4, 40}}));
  EXPECT_EQ(remotes(p, 5), (order{{4, 10}, {6, 10}, {3, 20}, {7, 20}, {0, 30}, {2, 30}, {1, 40}}));
  EXPECT_EQ(wake_order(p, 4, false), (std::vector<int>{3, 5, 2, 6, 1, 7, 0}));
}

TEST(StealPlan, LocalOnlyHasNoRemotesAndWakesNobodyElse) {
  const steal_plan p = plan_of(uniform(4, 20), mode::local_only);
  for (std::size_t from = 0; from < 4; ++from) {
    EXPECT_TRUE(p.remotes(from).empty());
    EXPECT_TRUE(p.wake_after(from, false).empty());
  }
}

TEST(StealPlan, FreeStealingHasNoDelaysAndBoundWorkWakesNobodyElse) {
  const steal_plan p = plan_of(uniform(4, 100), mode::free);
  EXPECT_EQ(remotes(p, 1), (order{{0, 0}, {2, 0}, {3, 0}}));
  EXPECT_EQ(wake_order(p, 1, false), (std::vector<int>{0, 2, 3}));
  EXPECT_TRUE(p.wake_after(1, true).empty());
}

TEST(StealPlan, APoolOnSomeNodesMapsEveryNodeToItsNearestPoolNode) {
  const matrix m = {{10, 30, 20, 40}, {30, 10, 40, 20}, {20, 40, 10, 30}, {40, 20, 30, 10}};
  const steal_plan p = plan_of(m, mode::distance, microseconds(50), {1, 2});
  EXPECT_EQ(p.node_count(), 2u);
  EXPECT_EQ(p.index_of(2), 1u);
  EXPECT_EQ(p.index_of(0), steal_plan::no_node);
  EXPECT_EQ(p.nearest(1), 0u);
  EXPECT_EQ(p.nearest(2), 1u);
  EXPECT_EQ(p.nearest(0), 1u);  // 0 -> 2 is 20, 0 -> 1 is 30
  EXPECT_EQ(p.nearest(3), 0u);  // 3 -> 1 is 20
  EXPECT_EQ(p.nearest(42), steal_plan::no_node);  // not a node of the topology: the caller decides
  EXPECT_EQ(remotes(p, 0), (order{{2, 150}}));
}

TEST(StealPlan, DelaysSaturateAtNeverInsteadOfOverflowing) {
  using numaaff::detail::distance_delay_ns;
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(distance_delay_ns(2147483647LL * 1000, 2147483647, 10), max);
  EXPECT_EQ(distance_delay_ns(max, 20, 10), max);
  EXPECT_EQ(distance_delay_ns(max / 1000 * 1000, 20, 10), max / 1000 * 1000);  // exact up to the limit
  EXPECT_EQ(distance_delay_ns(7, 13, 10), 2);  // 7 * 3 / 10, rounded down
  EXPECT_EQ(distance_delay_ns(1000, 5, 10), 0);  // nearer than local: no delay
  EXPECT_EQ(distance_delay_ns(1000, 20, 0), 0);  // a broken matrix (XML with 0 on the diagonal) never divides by 0
  const steal_plan p = plan_of(uniform(2, 20), mode::distance, microseconds::max());
  EXPECT_EQ(p.delay_ns(0, 1), static_cast<std::uint64_t>(max));
}

// One row per situation a worker can be in when a remote node has stealable work. Distance 20
// unless said (beyond 10: a remote task costs one task time more); the thief went idle at 100.
TEST(StealRule, EveryCaseOfDelayIdleTimeHomeNodeAndBacklog) {
  struct row {
    const char* what;
    std::uint64_t delay, idle_since, now;
    bool home_free;
    std::size_t workers, queued;
    int beyond;
    bool take;
    std::uint64_t look_again_at;
    bool asks_home, asks_backlog;
  };
  const row rows[] = {
      {"no delay (free stealing): take at once, even before idling", 0, 0, 0, true, 1, 1, 10, true, never, false, false},
      {"no delay and idle", 0, 100, 500, true, 1, 1, 10, true, never, false, false},
      {"not idle yet: remote work must wait, no deadline", 50, 0, 0, false, 1, 9, 10, false, never, false, false},
      {"idle, delay not over: look again when it is", 50, 100, 120, false, 1, 9, 10, false, 150, false, false},
      {"idle, delay over, home node has a free worker: leave it, look again a delay later", 50, 100, 170, true, 1, 9,
       10, false, 220, true, false},
      {"delay just over, home busy, two queued for one worker: the second waits two task times, take", 50, 100, 150,
       false, 1, 2, 10, true, never, true, true},
      {"one queued per worker: it starts within a task time at home, leave it; look again a delay later", 50, 100,
       150, false, 1, 1, 10, false, 200, true, true},
      {"three queued for two workers: 30 > 20, take", 50, 100, 150, false, 2, 3, 10, true, never, true, true},
      {"two queued for two workers: 20 is not more than 20, leave them", 50, 100, 150, false, 2, 2, 10, false, 200,
       true, true},
      {"distance 30 (remote costs two task times): two queued for one worker stay", 50, 100, 150, false, 1, 2, 20,
       false, 200, true, true},
      {"distance 30: three queued for one worker, take", 50, 100, 150, false, 1, 3, 20, true, never, true, true},
      {"short queue, next look capped at starvation (20 delays after going idle)", 50, 100, 1090, false, 1, 1, 10,
       false, 1100, true, true},
      {"idle for 20 delays: the home node is held, take however short its queue", 50, 100, 1100, false, 1, 1, 10,
       true, never, true, true},
      {"nothing queued (taken meanwhile) and not starved: leave", 50, 100, 150, false, 1, 0, 10, false, 200, true,
       true},
      {"a delay of never: never, and no wrapped deadline", never, 100, never - 1, false, 1, 9, 10, false, never,
       false, false},
      {"deadline near the end of time saturates", 50, never - 10, never - 5, false, 1, 9, 10, false, never, false,
       false},
      {"a distance near INT_MAX and 2^40 workers: the comparison does not overflow", 50, 100, 150, false,
       std::size_t{1} << 40, std::size_t{1} << 40, 2147483647 - 10, false, 200, true, true},
      {"a delay so long that 20 of them overflow: starvation saturates, the next look is a delay later", never / 10,
       100, 100 + never / 10, false, 1, 1, 10, false, 100 + 2 * (never / 10), true, true},
  };
  for (const row& r : rows) {
    bool asked = false, asked_backlog = false;
    const steal_decision d = steal_plan::steal_rule(
        steal_source{1, r.delay, r.beyond, 10}, r.idle_since, r.now,
        [&] {
          asked = true;
          return r.home_free;
        },
        [&] {
          asked_backlog = true;
          return numaaff::detail::home_backlog{r.workers, r.queued};
        });
    EXPECT_EQ(d.take, r.take) << r.what;
    EXPECT_EQ(d.look_again_at, r.look_again_at) << r.what;
    EXPECT_EQ(asked, r.asks_home) << r.what;
    EXPECT_EQ(asked_backlog, r.asks_backlog) << r.what;
  }
}

// The plan gives each remote its distance beyond local, from the thief's row.
TEST(StealPlan, EachRemoteCarriesItsDistanceBeyondLocal) {
  const matrix m = {{10, 20, 30}, {21, 10, 40}, {30, 40, 10}};
  const steal_plan p = plan_of(m);
  std::vector<std::pair<std::size_t, int>> seen;
  for (const steal_source& r : p.remotes(1)) seen.emplace_back(r.node_index, r.beyond);
  EXPECT_EQ(seen, (std::vector<std::pair<std::size_t, int>>{{0, 11}, {2, 30}}));
  for (const steal_source& r : p.remotes(1)) EXPECT_EQ(r.local, 10);
}

TEST(ExecPolicy, TheLeastUnfinishedWorkPerWorkerTiesRotating) {
  const steal_plan p = plan_of(uniform(4, 20));
  struct row {
    std::vector<long> unfinished;
    std::vector<std::size_t> workers;
    std::size_t start;
    std::size_t want;
  };
  const row rows[] = {
      {{4, 2, 1, 1}, {1, 1, 1, 1}, 0, 2},
      {{4, 2, 1, 1}, {1, 1, 1, 1}, 3, 3},  // a tie: the first from the start
      {{0, 0, 0, 0}, {1, 1, 1, 1}, 6, 2},  // start wraps
      {{2, 3, 9, 9}, {1, 2, 1, 1}, 0, 1},  // 3 / 2 workers < 2 / 1
      {{2, 4, 9, 9}, {1, 2, 1, 1}, 0, 0},  // 4 / 2 == 2 / 1: the first from the start
      {{2, 4, 9, 9}, {1, 2, 1, 1}, 1, 1},
  };
  for (const row& r : rows)
    EXPECT_EQ(p.least_loaded(
                  r.start, [&](std::size_t i) { return static_cast<std::int64_t>(r.unfinished[i]); },
                  [&](std::size_t i) { return r.workers[i]; }),
              r.want)
        << "start " << r.start;
}

// A dataflow task whose bytes several nodes share equally goes to the least busy of them:
// only the candidates count, per worker, ties to the earliest candidate.
TEST(StealPlan, LeastLoadedOfChoosesAmongTheCandidatesOnly) {
  using numaaff::detail::steal_plan;
  const std::size_t load[] = {0, 5, 2, 2, 6};
  const std::size_t workers[] = {1, 1, 1, 1, 2};
  struct row {
    std::vector<std::size_t> candidates;
    std::size_t want;
  };
  const row rows[] = {
      {{1, 2}, 2},     // node 0 is idler but not a candidate
      {{3, 2}, 3},     // equal loads: the earliest candidate
      {{1, 4}, 4},     // 6 / 2 workers < 5 / 1
      {{4, 1, 3}, 3},
      {{1}, 1},
      {{}, steal_plan::no_node},
  };
  for (const row& r : rows)
    EXPECT_EQ(steal_plan::least_loaded_of(
                  r.candidates.size(), [&](std::size_t k) { return r.candidates[k]; }, [&](std::size_t i) { return load[i]; },
                  [&](std::size_t i) { return workers[i]; }),
              r.want);
}

// A node whose data-placed tasks run longer than its distance delay is waited for the remote
// cost of one of them: (distance - 10) / 10 of a task time; never less than the distance delay,
// free stealing stays free, and no measurement keeps the distance delay.
TEST(StealPlan, TaskScaledDelayIsTheRemoteCostOfOneTaskAtLeast) {
  using numaaff::detail::steal_plan;
  using numaaff::detail::steal_source;
  struct row {
    std::uint64_t delay_ns;
    int beyond;
    std::uint64_t task_ns, want, since_ns = 0;
  };
  constexpr std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
  const row rows[] = {
      {50'000, 10, 7'000'000, 7'000'000},  // 10/20: one task time
      {50'000, 20, 7'000'000, 14'000'000},  // 10/30: two
      {50'000, 10, 20'000, 50'000},         // short tasks: the distance delay
      {50'000, 10, 0, 50'000},              // nothing measured
      {0, 10, 7'000'000, 0},                // free stealing
      {50'000, 10, huge, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())},  // saturated
      {50'000, 10, 7'000'000, 7'000'000, 140'000'000},  // finished one 20 task times ago: still
      {50'000, 10, 7'000'000, 50'000, 140'000'001},     // longer: the node runs no such tasks now
      {50'000, 20, 7'000'000, 14'000'000, 280'000'000},
      {50'000, 20, 7'000'000, 50'000, 280'000'001},
  };
  for (const row& r : rows)
    EXPECT_EQ(steal_plan::task_scaled_delay(steal_source{1, r.delay_ns, r.beyond, 10}, r.task_ns, r.since_ns), r.want)
        << r.delay_ns << " " << r.beyond << " " << r.task_ns;
  EXPECT_EQ(steal_plan::averaged(0, 800), 800u);
  EXPECT_EQ(steal_plan::averaged(800, 1600), 900u);
  EXPECT_EQ(steal_plan::averaged(800, 800), 800u);
  EXPECT_EQ(steal_plan::averaged(800, 1'000'000), 900u);  // a task that blocked counts as twice the average
  EXPECT_EQ(steal_plan::averaged(800, 0), 700u);
  // Task times matter only where some remote steal waits for a delay.
  EXPECT_TRUE(plan_of(uniform(4, 20)).delayed_stealing());
  EXPECT_FALSE(plan_of(uniform(4, 20), mode::local_only).delayed_stealing());
  EXPECT_FALSE(plan_of(uniform(4, 20), mode::free).delayed_stealing());
  EXPECT_FALSE(plan_of(uniform(1, 20)).delayed_stealing());
  EXPECT_FALSE(plan_of(uniform(4, 20), mode::distance, microseconds(0)).delayed_stealing());
}

// static_part_of is static_block's inverse, for ranges shorter and longer than the team.
TEST(IndexPartition, StaticPartOfIsTheInverseOfStaticBlock) {
  for (std::size_t n : {1u, 2u, 5u, 12u, 13u, 1000u})
    for (std::size_t parts : {1u, 2u, 3u, 5u, 7u, 16u})
      for (std::size_t i = 0; i < parts; ++i) {
        const auto [lo, hi] = numaaff::static_block(n, parts, i);
        for (std::size_t at = lo; at < hi; ++at) ASSERT_EQ(numaaff::static_part_of(n, parts, at), i) << n << "/" << parts << " @" << at;
      }
}

TEST(IndexPartition, StaticBlocksPerWorkerAndContiguousPerNode) {
  const numaaff::index_partition part({0, 0, 1, 1, 1});
  const auto w = part.worker_blocks(0, 12);  // 12 over 5: 3, 3, 2, 2, 2
  ASSERT_EQ(w.size(), 5u);
  const std::size_t firsts[] = {0, 3, 6, 8, 10};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(w[i].first, firsts[i]);
    EXPECT_EQ(w[i].last, i + 1 < 5 ? firsts[i + 1] : 12u);
  }
  const auto n = part.node_blocks(100, 112);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].node, 0);
  EXPECT_EQ(n[0].first, 100u);
  EXPECT_EQ(n[0].last, 106u);
  EXPECT_EQ(n[1].node, 1);
  EXPECT_EQ(n[1].last, 112u);
  EXPECT_TRUE(part.node_blocks(5, 5).empty());
  // Three indices over five workers: two empty worker blocks, no empty task.
  EXPECT_EQ(part.worker_blocks(0, 3).size(), 5u);
  EXPECT_EQ(part.task_blocks(0, 3, 0).size(), 3u);
  // A grain cuts each worker block evenly into pieces of at most `grain`.
  const auto t = part.task_blocks(0, 12, 2);  // 3 -> 2+1, 3 -> 2+1, 2, 2, 2
  ASSERT_EQ(t.size(), 7u);
  EXPECT_EQ(t[0].last - t[0].first, 2u);
  EXPECT_EQ(t[1].last - t[1].first, 1u);
  EXPECT_EQ(t[6].node, 1);
  EXPECT_EQ(numaaff::static_block(10, 4, 1), (std::pair<std::size_t, std::size_t>{3, 6}));
}

}  // namespace

// ---- the dynamic NUMA loop (detail/dynamic_loop.hpp) ----------------------------------------

using numaaff::detail::loop_chunk;

// Owners take guided chunks from the front (half of what is left per taker, never below the
// grain), helpers the same sizes from the back; the two ends never overlap and together cover
// every index once.
TEST(DynamicLoop, OwnersTakeGuidedChunksFromTheFrontHelpersFromTheBack) {
  numaaff::detail::node_work w;
  w.assign({{0, 1000}});
  loop_chunk c;
  ASSERT_TRUE(w.take_front(10, 1, c));
  EXPECT_EQ(c.first, 0u);
  EXPECT_EQ(c.last, 500u);
  ASSERT_TRUE(w.take_back(10, 1, c));
  EXPECT_EQ(c.first, 750u);
  EXPECT_EQ(c.last, 1000u);
  ASSERT_TRUE(w.take_front(10, 2, c));  // two takers: a quarter of what is left
  EXPECT_EQ(c.first, 500u);
  EXPECT_EQ(c.last, 562u);
  std::vector<int> seen(1000, 0);
  for (std::size_t i = 0; i < 562; ++i) seen[i] = 1;
  for (std::size_t i = 750; i < 1000; ++i) seen[i] = 1;
  std::size_t smallest = 1000;
  for (bool front = true; front ? w.take_front(10, 1, c) : w.take_back(10, 1, c); front = !front) {
    for (std::size_t i = c.first; i < c.last; ++i) ++seen[i];
    if (w.left() > 0) smallest = std::min(smallest, c.last - c.first);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 1000) << "every index exactly once";
  EXPECT_GE(smallest, 10u) << "never below the grain while more is left";
  EXPECT_EQ(w.left(), 0u);
  EXPECT_FALSE(w.take_back(10, 1, c));
}

// A part of several segments (the blocks whose data is on a node): chunks never span two.
TEST(DynamicLoop, ChunksStayInsideTheirSegment) {
  numaaff::detail::node_work w;
  w.assign({{0, 8}, {100, 104}, {200, 300}});
  loop_chunk c;
  std::vector<std::pair<std::size_t, std::size_t>> front, back;
  ASSERT_TRUE(w.take_front(1, 1, c));
  front.emplace_back(c.first, c.last);
  ASSERT_TRUE(w.take_back(1, 1, c));
  back.emplace_back(c.first, c.last);
  EXPECT_EQ(front[0], (std::pair<std::size_t, std::size_t>{0, 8}));     // 112 / 2 = 56, cut at the segment's end
  EXPECT_EQ(back[0], (std::pair<std::size_t, std::size_t>{248, 300}));  // 104 / 2 = 52
  std::size_t total = 8 + 52;
  while (w.take_front(1, 1, c)) {
    EXPECT_TRUE((c.first >= 100 && c.last <= 104) || (c.first >= 200 && c.last <= 248)) << c.first << "-" << c.last;
    total += c.last - c.first;
  }
  EXPECT_EQ(total, 112u);
}

// However owner and helper claims interleave, the owner's indices are a prefix of the part and
// the helpers' a suffix (here the worst case: they alternate, claim for claim), and a worker
// whose own part is done helps to the end.
TEST(DynamicLoop, HelpedIndicesAreASuffixOfThePart) {
  numaaff::detail::node_work part;
  part.assign({{100, 500}});
  loop_chunk c;
  std::vector<int> who(500, -1);
  bool owner = true;
  while (owner ? part.take_front(4, 1, c) : part.take_back(4, 1, c)) {
    for (std::size_t i = c.first; i < c.last; ++i) who[i] = owner ? 1 : 0;
    owner = !owner;
  }
  std::size_t i = 100;
  while (i < 500 && who[i] == 1) ++i;
  const std::size_t boundary = i;
  while (i < 500 && who[i] == 0) ++i;
  EXPECT_EQ(i, 500u) << "owner's indices [100, " << boundary << "), helpers' the rest";
  EXPECT_GT(boundary, 100u);
  EXPECT_LT(boundary, 500u);

  numaaff::detail::dynamic_loop skew({{{0, 100}}, {{100, 500}}}, {1, 1}, {{1}, {0}}, 4);
  std::vector<std::size_t> owner_of(500, 9);
  skew.run(0, [&](std::size_t lo, std::size_t hi, std::size_t whose) {
    for (std::size_t k = lo; k < hi; ++k) owner_of[k] = whose;
  });
  for (std::size_t k = 0; k < 500; ++k) ASSERT_EQ(owner_of[k], k < 100 ? 0u : 1u) << k;  // all of it, each with its owner
  EXPECT_EQ(skew.left(1), 0u);
  numaaff::detail::dynamic_loop alone({{{0, 100}}, {{100, 500}}}, {1, 1}, {{}, {}}, 4);
  alone.run(0, [](std::size_t, std::size_t, std::size_t) {});
  EXPECT_EQ(alone.left(1), 400u) << "no help order (steal_mode::local): the other part is left to its owners";
}

// Four threads, one per node, on a loop whose parts differ by 16x: every index exactly once.
TEST(DynamicLoop, ThreadsCoverEveryIndexExactlyOnce) {
  const std::size_t n = 200000;
  std::vector<std::vector<loop_chunk>> parts = {{{0, 10000}}, {{10000, 20000}}, {{20000, 40000}}, {{40000, n}}};
  numaaff::detail::dynamic_loop loop(std::move(parts), {1, 1, 1, 1}, {{1, 2, 3}, {0, 2, 3}, {3, 0, 1}, {2, 1, 0}}, 16);
  std::vector<std::atomic<int>> hits(n);
  std::vector<std::thread> threads;
  for (std::size_t ni = 0; ni < 4; ++ni)
    threads.emplace_back([&, ni] {
      loop.run(ni, [&](std::size_t lo, std::size_t hi, std::size_t) {
        for (std::size_t i = lo; i < hi; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
      });
    });
  for (auto& t : threads) t.join();
  std::size_t once = 0;
  for (auto& h : hits) once += h.load() == 1 ? 1u : 0u;
  EXPECT_EQ(once, n);
  for (std::size_t ni = 0; ni < 4; ++ni) EXPECT_EQ(loop.left(ni), 0u);
}
