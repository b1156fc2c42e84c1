// The thread pool on synthetic topologies (layer 1: policies, steal order and delays, partitions,
// with logical nodes and unbound workers) and on this host (layer 2: futures, exceptions,
// nesting, recursion, cancellation, destruction, idle CPU use, binding, cpuset, environment).
#include <numaaff/allocator.hpp>
#include <numaaff/detail/work_deque.hpp>
#include <numaaff/thread_pool.hpp>

#include "common/exceptions.hpp"
#include "common/placement_check.hpp"
#include "common/pool_helpers.hpp"
#include "common/process.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory_resource>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using numaaff::node_id;
using numaaff_test::arrivals;
using numaaff_test::block_node;
using numaaff_test::gate;
using numaaff_test::hang_guard;
using numaaff_test::run_stealable_and_wait;
using numaaff_test::worker_node;
using numaaff::node_policy;
using numaaff::steal_mode;
using numaaff::thread_pool;
using numaaff::thread_pool_options;
using clock_type = std::chrono::steady_clock;

thread_pool_options synthetic(const std::string& description, const std::string& distances = "") {
  thread_pool_options o;
  auto t = numaaff::topology::from_synthetic(description);
  if (!distances.empty()) t = t.with_distances(distances);
  o.topo = std::make_shared<const numaaff::topology>(std::move(t));
  return o;
}

// ---- layer 1: synthetic topologies ------------------------------------------------------

TEST(ThreadPoolSynthetic, WorkersPerNodeInNodeOrderAndUnbound) {
  thread_pool pool(synthetic("pack:4 numa:1 core:2 pu:1"));
  EXPECT_EQ(pool.nodes(), (std::vector<node_id>{0, 1, 2, 3}));
  ASSERT_EQ(pool.worker_count(), 8u);
  for (std::size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(pool.worker_node(i), static_cast<node_id>(i / 2));
    EXPECT_EQ(pool.worker_cpu(i), -1);
  }
  EXPECT_FALSE(pool.workers_bound());
  EXPECT_NE(pool.to_string().find("8 workers on 4 nodes"), std::string::npos) << pool.to_string();
}

TEST(ThreadPoolSynthetic, OptionsChooseNodesAndThreads) {
  auto o = synthetic("pack:4 numa:1 core:2 pu:1");
  o.nodes = {3, 1};
  o.threads_per_node = 3;
  thread_pool pool(o);
  EXPECT_EQ(pool.nodes(), (std::vector<node_id>{1, 3}));
  EXPECT_EQ(pool.worker_count(), 6u);
  EXPECT_EQ(pool.workers_on(3), 3u);
  EXPECT_THROW(pool.workers_on(0), std::invalid_argument);
  EXPECT_THROW(pool.submit(0, [] {}), std::invalid_argument);

  o.nodes = {7};
  EXPECT_THROW(thread_pool{o}, std::invalid_argument);
  o.nodes = {};
  o.threads_per_node = -1;
  EXPECT_THROW(thread_pool{o}, std::invalid_argument);
}

TEST(ThreadPoolSynthetic, StealDelayFollowsTheDocumentedFormula) {
  auto o = synthetic("pack:4 numa:1 core:1 pu:1", "local=10,remote=100");
  o.steal_delay = std::chrono::microseconds(50);
  thread_pool pool(o);
  EXPECT_EQ(pool.steal_delay(0, 0).count(), 0);
  EXPECT_EQ(pool.steal_delay(0, 3), std::chrono::microseconds(450));  // 50 us * (100 - 10) / 10

  auto f = synthetic("pack:2 numa:1 core:1 pu:1");
  f.steal = steal_mode::free;
  EXPECT_EQ(thread_pool(f).steal_delay(0, 1).count(), 0);
  // Nodes are checked whatever the mode (as documented), also where the delay is 0.
  EXPECT_THROW(numaaff::remote_steal_delay(f, *f.topo, 0, 99), std::invalid_argument);
  EXPECT_THROW(numaaff::remote_steal_delay(f, *f.topo, 99, 99), std::invalid_argument);
}

TEST(ThreadPoolSynthetic, StealOrderIsByDistanceFromTheThief) {
  // Asymmetric, as some firmware reports: rows are "from".
  const std::vector<std::vector<int>> m = {{10, 40, 20, 30}, {25, 10, 20, 30}, {30, 20, 10, 20}, {40, 30, 15, 10}};
  auto o = synthetic("pack:4 numa:1 core:1 pu:1");
  o.distances = m;
  thread_pool pool(o);
  EXPECT_EQ(pool.steal_order(0), (std::vector<node_id>{2, 3, 1}));
  EXPECT_EQ(pool.steal_order(3), (std::vector<node_id>{2, 1, 0}));
  EXPECT_EQ(pool.steal_delay(3, 2), std::chrono::microseconds(25));
  EXPECT_EQ(pool.steal_delay(2, 3), std::chrono::microseconds(50));

  o.steal = steal_mode::local;
  EXPECT_TRUE(thread_pool(o).steal_order(0).empty());
}

TEST(ThreadPoolSynthetic, HugeDelaysAndDistancesSaturateInsteadOfOverflowing) {
  using std::chrono::microseconds;
  using std::chrono::nanoseconds;
  // NUMAAFF_STEAL's largest delay over NUMAAFF_DISTANCES' largest distance: 2^31 us * 2^31 / 10.
  auto o = synthetic("pack:2 numa:1 core:1 pu:1", "local=10,remote=2147483647");
  o.steal_delay = microseconds(2147483647);
  EXPECT_EQ(numaaff::remote_steal_delay(o, *o.topo, 0, 1).count(), nanoseconds::max().count());
  // A delay whose nanoseconds do not fit (duration_cast made it -1 us: steal at once).
  auto d = synthetic("pack:2 numa:1 core:1 pu:1");
  d.steal_delay = microseconds::max();
  EXPECT_EQ(numaaff::remote_steal_delay(d, *d.topo, 0, 1).count(), nanoseconds::max().count());
  // Exact up to the limit: the largest delay that fits, at distance 20.
  d.steal_delay = microseconds(std::numeric_limits<std::int64_t>::max() / 1000);
  EXPECT_EQ(numaaff::remote_steal_delay(d, *d.topo, 0, 1).count(), d.steal_delay.count() * 1000);

  // A pool with a delay of "never" never steals (the wrapped delay let node 0 take node 1's
  // task at once).
  d.steal_delay = microseconds::max();
  thread_pool pool(d);
  EXPECT_EQ(pool.steal_delay(0, 1).count(), nanoseconds::max().count());
  gate g;
  arrivals in;
  block_node(pool, 1, g, in);
  in.await(1);
  std::atomic<node_id> ran_on{-1};
  numaaff::task_group tg(pool);
  tg.run(1, [&] { ran_on = worker_node(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ran_on.load(), -1) << "node 0 stole node 1's task although its delay is nanoseconds::max()";
  g.open();
  tg.wait();
  pool.wait();  // the gate's task has left it before it goes
  EXPECT_EQ(ran_on.load(), 1);
}

TEST(ThreadPoolSynthetic, SubmitToANodeRunsOnThatNodesWorkersWithThatHomenode) {
  thread_pool pool(synthetic("pack:4 numa:1 core:2 pu:1"));
  for (node_id n : pool.nodes()) {
    for (int k = 0; k < 20; ++k) {
      auto f = pool.submit(n, [] { return std::make_pair(worker_node(), numaaff::this_homenode()); });
      const auto [ran_on, home] = f.get();
      EXPECT_EQ(ran_on, n);
      EXPECT_EQ(home, n);
    }
  }
}

TEST(ThreadPoolSynthetic, TasksNeverPlaceMemoryOnLogicalNodes) {
  // More logical nodes than a kernel can have (1,024): the last ones must never index a table
  // or reach mbind. A task's memory goes where its thread runs, as for a thread without a
  // homenode; this_homenode() stays the logical node the task was given.
  thread_pool_options o = synthetic("numa:1100 pu:1");
  o.nodes = {1, 1099};
  thread_pool pool(o);
  const int here = numaaff_test::sysfs_nodes().front();  // the host's only node
  for (node_id n : pool.nodes()) {
    auto f = pool.submit(n, [] {
      std::vector<int, numaaff::local_allocator<int>> small(16, 1);
      std::vector<char, numaaff::local_allocator<char>> large(1 << 20, 1);
      std::pmr::vector<char> pmr(1 << 16, 1, &numaaff::local_memory());
      const auto raw = numaaff_test::query_pages(large.data(), large.size());
      const auto raw_pmr = numaaff_test::query_pages(pmr.data(), pmr.size());
      return std::make_tuple(numaaff::this_homenode(), raw.per_node, raw_pmr.per_node, small[15]);
    });
    const auto [home, large_nodes, pmr_nodes, value] = f.get();
    EXPECT_EQ(home, n);
    EXPECT_EQ(large_nodes.size(), 1u);
    EXPECT_EQ(large_nodes.begin()->first, here);
    EXPECT_EQ(pmr_nodes.size(), 1u);
    EXPECT_EQ(value, 1);
  }
  // A node no kernel can have is a caller's mistake, named as such.
  EXPECT_THROW(numaaff::node_allocator<int>(1100), std::invalid_argument);
}

TEST(ThreadPoolSynthetic, RoundRobinCyclesThroughTheNodes) {
  auto o = synthetic("pack:4 numa:1 core:1 pu:1");
  o.policy = node_policy::round_robin;
  thread_pool pool(o);
  std::vector<std::future<node_id>> homes;
  for (int k = 0; k < 12; ++k) homes.push_back(pool.submit([] { return numaaff::this_homenode(); }));
  for (int k = 0; k < 12; ++k) EXPECT_EQ(homes[static_cast<std::size_t>(k)].get(), k % 4);
}

TEST(ThreadPoolSynthetic, ExecPicksTheLeastLoadedNode) {
  auto o = synthetic("pack:4 numa:1 core:1 pu:1");
  o.policy = node_policy::exec;
  o.steal = steal_mode::local;  // keep each task where exec put it
  thread_pool pool(o);
  gate g;
  arrivals in;
  // Load node 0 with three queued tasks behind its blocked worker, node 1 with one.
  for (node_id n : pool.nodes()) block_node(pool, n, g, in);
  in.await(4);
  for (int k = 0; k < 3; ++k) pool.post(0, [] {});
  pool.post(1, [] {});
  std::vector<std::future<node_id>> homes;
  for (int k = 0; k < 8; ++k) homes.push_back(pool.submit([] { return numaaff::this_homenode(); }));
  g.open();
  std::map<node_id, int> count;
  for (auto& f : homes) ++count[f.get()];
  // Loads before: 4, 2, 1, 1 (running + queued). Eight more, always to the least loaded,
  // end level at 4 each: nodes 2 and 3 get three, node 1 two, node 0 none.
  EXPECT_EQ(count[0], 0);
  EXPECT_EQ(count[1], 2);
  EXPECT_EQ(count[2], 3);
  EXPECT_EQ(count[3], 3);
}

TEST(ThreadPoolSynthetic, ForkChildrenInheritTheParentsHomenode) {
  auto o = synthetic("pack:4 numa:1 core:2 pu:1");
  o.policy = node_policy::fork;
  o.steal = steal_mode::local;
  thread_pool pool(o);
  std::vector<node_id> child_homes(16, -1), child_nodes(16, -1);
  pool.submit(2, [&] {
        numaaff::task_group tg(pool);
        for (std::size_t k = 0; k < 16; ++k)
          tg.run([&, k] {
            child_homes[k] = numaaff::this_homenode();
            child_nodes[k] = worker_node();
          });
        tg.wait();
      }).get();
  for (std::size_t k = 0; k < 16; ++k) {
    EXPECT_EQ(child_homes[k], 2);
    EXPECT_EQ(child_nodes[k], 2);
  }
}

TEST(ThreadPoolSynthetic, LocalOnlyNeverCrossesNodes) {
  auto o = synthetic("pack:2 numa:1 core:1 pu:1");
  o.steal = steal_mode::local;
  thread_pool pool(o);
  gate g;
  arrivals in;
  block_node(pool, 0, g, in);
  in.await(1);
  std::atomic<node_id> ran_on{-1};
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(ran_on.load(), -1) << "node 1's idle worker took node 0's work";
    g.open();
  });
  run_stealable_and_wait(pool, 0, [&] { ran_on = worker_node(); });
  opener.join();
  EXPECT_EQ(ran_on.load(), 0);
  EXPECT_EQ(pool.stats().stolen_remote, 0u);
}

TEST(ThreadPoolSynthetic, RemoteStealWaitsForTheDelayAndTheNearestNodeStealsFirst) {
  // Node 1 is near node 0 (delay 10 ms), nodes 2 and 3 are far (90 ms).
  auto o = synthetic("pack:4 numa:1 core:1 pu:1");
  o.distances = {{10, 20, 100, 100}, {20, 10, 100, 100}, {100, 100, 10, 20}, {100, 100, 20, 10}};
  o.steal_delay = std::chrono::milliseconds(10);
  o.policy = node_policy::fork;
  thread_pool pool(o);
  gate g;
  arrivals in;
  block_node(pool, 0, g, in);
  in.await(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the others are asleep by now

  std::atomic<node_id> thief{-1}, home{-1}, child_home{-1};
  std::atomic<long long> waited_us{-1};
  const auto t0 = clock_type::now();
  run_stealable_and_wait(pool, 0, [&] {  // returns while node 0 is blocked: a thief ran it
    waited_us = std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count();
    thief = worker_node();
    home = numaaff::this_homenode();
    // Under fork the child of a stolen task goes home (to node 0), not to the thief's node.
    pool.post([&] { child_home = numaaff::this_homenode(); });
  });
  EXPECT_EQ(thief.load(), 1);
  EXPECT_EQ(home.load(), 0);
  // One task queued for one held worker: taken only once the thief has idled for starve_delays
  // delays (its idle clock starts when the submission wakes it).
  EXPECT_GE(waited_us.load(), 10000 * static_cast<long long>(numaaff::detail::steal_plan::starve_delays))
      << "a lone queued task stolen before the thief starved";
  EXPECT_GE(pool.stats().stolen_remote, 1u);
  g.open();
  pool.wait();
  EXPECT_EQ(child_home.load(), 0);
}

TEST(ThreadPoolSynthetic, AThiefTakesABacklogButLeavesOneTaskPerWorkerHomeUntilItStarves) {
  // Two single-CPU nodes at distance 20: a remote task costs one task time more, so of two
  // tasks queued behind node 0's held worker the thief takes one after the 50 ms delay and
  // leaves the other, which would start within a task time there, until it has idled for
  // starve_delays delays (1 s).
  auto o = synthetic("pack:2 numa:1 core:1 pu:1");
  o.steal_delay = std::chrono::milliseconds(50);
  const auto starve = std::chrono::milliseconds(50) * numaaff::detail::steal_plan::starve_delays;
  thread_pool pool(o);
  gate g;
  arrivals in;
  block_node(pool, 0, g, in);
  in.await(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // node 1 asleep by now
  struct run_record {
    std::atomic<bool> ran{false};
    std::atomic<node_id> node{-1};
    clock_type::time_point at{};
  } runs[2];
  const auto t0 = clock_type::now();
  numaaff::task_group tg(pool);
  for (auto& r : runs)
    tg.run(0, [&r] {
      r.at = clock_type::now();
      r.node = worker_node();
      r.ran.store(true);
    });
  auto first_ran = [&] { return runs[0].ran.load() || runs[1].ran.load(); };
  while (!first_ran()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  run_record& first = runs[0].ran.load() ? runs[0] : runs[1];
  run_record& second = &first == &runs[0] ? runs[1] : runs[0];
  EXPECT_EQ(first.node.load(), 1) << "node 0 is held: only a thief can run it";
  EXPECT_GE(first.at - t0, o.steal_delay) << "stolen before the delay";
  // The thief's idle clock restarts after the first task: it cannot starve for a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(second.ran.load()) << "the last queued task was stolen although it would start within a task time at home";
  while (!second.ran.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(second.node.load(), 1);
  EXPECT_GE(second.at - first.at, starve) << "stolen before the thief starved";
  g.open();
  tg.wait();
}

TEST(ThreadPoolSynthetic, ATaskBlockedOnItsChildsFutureSeesTheChildStolen) {
  // Node 0's single worker has run a task before, then blocks on a future of a child queued
  // behind it: one task queued for one held worker, which only a thief can run. It must, once
  // it has starved (20 delays), however long the blocked task has been running.
  auto o = synthetic("pack:2 numa:1 core:1 pu:1");
  o.steal_delay = std::chrono::milliseconds(1);
  thread_pool pool(o);
  numaaff_test::hang_guard guard(std::chrono::seconds(20), "a child queued behind its blocked parent was never stolen");
  pool.submit(0, [] {}).get();  // bound: it runs on node 0, which now has a task time to average
  std::atomic<node_id> child_ran_on{-1};
  auto parent = pool.submit(0, [&] {
    numaaff::task_group g(pool);
    std::promise<void> done;
    g.run(0, [&] {  // stealable, homed on node 0 (fork would put it there too)
      child_ran_on = worker_node();
      done.set_value();
    });
    done.get_future().get();  // blocks the worker instead of helping
    g.wait();
  });
  parent.get();
  // No lower bound on the wait: node 1's idle clock may have started before the child was
  // queued (it need not have slept since its last look).
  EXPECT_EQ(child_ran_on.load(), 1);
}

TEST(ThreadPoolSynthetic, FreeStealingTakesRemoteWorkAtOnce) {
  auto o = synthetic("pack:2 numa:1 core:1 pu:1");
  o.steal = steal_mode::free;
  thread_pool pool(o);
  gate g;
  arrivals in;
  block_node(pool, 0, g, in);
  in.await(1);
  std::atomic<node_id> thief{-1};
  run_stealable_and_wait(pool, 0, [&] { thief = worker_node(); });
  EXPECT_EQ(thief.load(), 1);
  g.open();
}

TEST(ThreadPoolSynthetic, PartitionsAreContiguousPerNodeInProportionToWorkers) {
  auto o = synthetic("pack:4 numa:1 core:2 pu:1");
  thread_pool pool(o);
  const auto nodes = pool.node_blocks(100, 1100);
  ASSERT_EQ(nodes.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(nodes[k].node, static_cast<node_id>(k));
    EXPECT_EQ(nodes[k].first, 100 + 250 * k);
    EXPECT_EQ(nodes[k].last, 100 + 250 * (k + 1));
  }
  const auto workers = pool.worker_blocks(0, 10);  // OpenMP static: 2,2,1,1,1,1,1,1
  ASSERT_EQ(workers.size(), 8u);
  EXPECT_EQ(workers[0].last - workers[0].first, 2u);
  EXPECT_EQ(workers[2].first, 4u);
  EXPECT_EQ(workers[7].last, 10u);

  auto uneven = synthetic("pack:1 numa:2 core:3 pu:1");
  uneven.threads_per_node = 1;
  uneven.nodes = {0, 1};
  EXPECT_EQ(thread_pool(uneven).node_blocks(0, 5).back().first, 3u);
  EXPECT_TRUE(pool.node_blocks(5, 5).empty());
}

TEST(ThreadPoolSynthetic, ParallelForBlocksRunOnTheirNodes) {
  auto o = synthetic("pack:4 numa:1 core:2 pu:1");
  o.steal = steal_mode::local;
  thread_pool pool(o);
  std::vector<node_id> ran_on(4000, -1);
  pool.parallel_for(0, ran_on.size(), [&](std::size_t i) { ran_on[i] = worker_node(); });
  // The calling thread helps, with blocks of its own node only (-1: the caller ran it).
  const node_id callers = numaaff::current_node();
  for (const auto& b : pool.node_blocks(0, ran_on.size()))
    for (std::size_t i = b.first; i < b.last; ++i) {
      const bool by_caller = b.node == callers && ran_on[i] == -1;
      if (!by_caller) {
        ASSERT_EQ(ran_on[i], b.node) << "index " << i;
      }
    }
}

TEST(ThreadPoolSynthetic, ParallelForReportsBlocksThatCancelDiscarded) {
  // Two nodes: the caller of parallel_for only waits, so only the (blocked) workers run blocks.
  thread_pool pool(synthetic("pack:2 numa:1 core:1 pu:1"));
  gate g;
  arrivals in;
  for (node_id n : pool.nodes()) block_node(pool, n, g, in);
  in.await(static_cast<int>(pool.worker_count()));
  std::atomic<std::size_t> dropped{0};
  std::thread canceller([&] {
    // Cancels once some blocks are queued (those queued later run when the gate opens).
    std::size_t n = 0;
    while ((n = pool.cancel()) == 0) std::this_thread::yield();
    dropped.store(n);
    g.open();
  });
  std::atomic<std::size_t> visited{0};
  try {
    pool.parallel_for(0, 64, [&](std::size_t) { visited.fetch_add(1); }, 1);
    ADD_FAILURE() << "parallel_for returned normally with " << dropped.load() << " of 64 blocks discarded";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::operation_canceled) << e.what();
    EXPECT_NE(std::string(e.what()).find("parallel_for"), std::string::npos) << e.what();
  }
  canceller.join();
  pool.wait();  // the gate's tasks have left it before it goes
  EXPECT_GT(dropped.load(), 0u);
  EXPECT_EQ(visited.load() + dropped.load(), 64u);
}

TEST(ThreadPoolSynthetic, ForEachNodeRunsOnceOnEachNode) {
  auto o = synthetic("pack:4 numa:1 core:2 pu:1");
  o.steal = steal_mode::free;  // even so, for_each_node work is bound to its node
  thread_pool pool(o);
  std::mutex m;
  std::vector<std::pair<node_id, node_id>> calls;
  pool.for_each_node([&](node_id n) {
    std::lock_guard<std::mutex> g(m);
    calls.emplace_back(n, worker_node());
  });
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<std::pair<node_id, node_id>>{{0, 0}, {1, 1}, {2, 2}, {3, 3}}));
}

// ---- environment ------------------------------------------------------------------------

thread_pool_options from(const std::map<std::string, std::string>& env) {
  return thread_pool_options::from_environment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ThreadPoolEnvironment, ValidValues) {
  const auto d = from({});
  EXPECT_EQ(d.policy, node_policy::fork);
  EXPECT_EQ(d.steal, steal_mode::distance);
  EXPECT_EQ(d.threads_per_node, 0);
  const auto o = from({{"NUMAAFF_NODE_POLICY", "exec"}, {"NUMAAFF_THREADS_PER_NODE", "3"}, {"NUMAAFF_STEAL", "distance:200"}});
  EXPECT_EQ(o.policy, node_policy::exec);
  EXPECT_EQ(o.threads_per_node, 3);
  EXPECT_EQ(o.steal_delay, std::chrono::microseconds(200));
  EXPECT_EQ(from({{"NUMAAFF_NODE_POLICY", "round_robin"}}).policy, node_policy::round_robin);
  EXPECT_EQ(from({{"NUMAAFF_STEAL", "local"}}).steal, steal_mode::local);
  EXPECT_EQ(from({{"NUMAAFF_STEAL", "free"}}).steal, steal_mode::free);
}

TEST(ThreadPoolEnvironment, InvalidValuesNameTheVariableAndTheValidForms) {
  const std::vector<std::pair<std::string, std::string>> bad = {{"NUMAAFF_NODE_POLICY", "spread"},
                                                                {"NUMAAFF_THREADS_PER_NODE", "0"},
                                                                {"NUMAAFF_THREADS_PER_NODE", "two"},
                                                                {"NUMAAFF_STEAL", "distance:-5"},
                                                                {"NUMAAFF_STEAL", "sometimes"}};
  for (const auto& [var, value] : bad) {
    try {
      from({{var, value}});
      ADD_FAILURE() << var << "=" << value << " was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(var), std::string::npos) << what;
      EXPECT_NE(what.find("expected"), std::string::npos) << what;
    }
  }
  // A delay beyond an int is refused as out of range, not as a malformed value.
  try {
    from({{"NUMAAFF_STEAL", "distance:99999999999"}});
    ADD_FAILURE() << "NUMAAFF_STEAL=distance:99999999999 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(from({{"NUMAAFF_STEAL", "distance:+-5"}}), std::invalid_argument);
}

TEST(ThreadPoolEnvironment, ADefaultPoolReadsTheEnvironmentAndRespectsTheCpuset) {
  const std::string probe = NUMAAFF_TOPOLOGY_PROBE;
  const std::string out = numaaff_test::run_command(
      "NUMAAFF_NODE_POLICY=round_robin NUMAAFF_STEAL=free " + probe + " pool");
  EXPECT_NE(out.find("policy=round_robin"), std::string::npos) << out;
  EXPECT_NE(out.find("steal=free"), std::string::npos) << out;
  EXPECT_NE(out.find("workers=" + std::to_string(numaaff::topology::system().cpus().size())), std::string::npos) << out;

  const std::string one = numaaff_test::run_command("taskset -c 0 " + probe + " pool");
  EXPECT_NE(one.find("workers=1\n"), std::string::npos) << one;
  EXPECT_NE(one.find("worker0=0@0"), std::string::npos) << one;

  const std::string bad = numaaff_test::run_command("NUMAAFF_NODE_POLICY=sideways " + probe + " pool");
  EXPECT_NE(bad.find("NUMAAFF_NODE_POLICY='sideways'"), std::string::npos) << bad;
  EXPECT_NE(bad.find("exit status"), std::string::npos) << bad;
  const std::string home = numaaff_test::run_command("NUMAAFF_HOMENODE=99 " + probe + " pool");
  EXPECT_NE(home.find("NUMAAFF_HOMENODE='99'"), std::string::npos) << home;
}

TEST(ThreadPoolEnvironment, TheLauncherSetsWhatThePoolReads) {
#if defined(NUMAAFF_LAUNCHER)
  const std::string run = NUMAAFF_LAUNCHER;
  const std::string probe = NUMAAFF_TOPOLOGY_PROBE;
  const node_id home = numaaff::topology::system().nodes().front();
  const std::string out = numaaff_test::run_command(run + " -n " + std::to_string(home) + " -P exec -s local -t 1 -- " + probe + " pool");
  EXPECT_NE(out.find("policy=exec\n"), std::string::npos) << out;
  EXPECT_NE(out.find("steal=local\n"), std::string::npos) << out;
  EXPECT_NE(out.find("homenode=" + std::to_string(home) + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("workers=" + std::to_string(numaaff::topology::system().node_count()) + "\n"), std::string::npos) << out;

  const std::string bad = numaaff_test::run_command(run + " -P sideways -- true");
  EXPECT_NE(bad.find("NUMAAFF_NODE_POLICY='sideways'"), std::string::npos) << bad;
  EXPECT_NE(bad.find("exit status"), std::string::npos) << bad;
  const std::string usage = numaaff_test::run_command(run + " --bogus");
  EXPECT_NE(usage.find("usage:"), std::string::npos) << usage;
  EXPECT_NE(usage.find("exit status"), std::string::npos) << usage;
  const std::string show = numaaff_test::run_command(run + " -P round_robin --show");
  EXPECT_NE(show.find("node policy: round_robin"), std::string::npos) << show;
#else
  GTEST_SKIP() << "tools not built (NUMAAFF_BUILD_TOOLS=OFF)";
#endif
}

TEST(ThreadPoolEnvironment, TheLauncherRejectsBadNumbersWithTheUsage) {
#if defined(NUMAAFF_LAUNCHER)
  const std::string run = NUMAAFF_LAUNCHER;
  // {arguments, what the message must quote}. Each used to wrap (4294967296 was node 0, and
  // --pid 4294967297 process 1), pass a negative node on, or read a prefix ("12abc" as 12).
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"-n 4294967296 -- true", "-n takes a node number, not '4294967296'"},
      {"-N 4294967296 --show", "-N takes a node number, not '4294967296'"},
      {"--homenode -1 -- true", "--homenode takes a node number, not '-1'"},
      {"-n ' 1' -- true", "-n takes a node number, not ' 1'"},
      {"-n 1x -- true", "-n takes a node number, not '1x'"},
      {"--show --pid 4294967297", "--pid takes a process id, not '4294967297'"},
      {"--show -p 12abc", "-p takes a process id, not '12abc'"},
      {"--show -p -5", "-p takes a process id, not '-5'"},
      {"--show -p 0", "-p takes a process id, not '0'"},
      {"-n", "-n needs a value"},
      {"-t 4294967296 -- true", "NUMAAFF_THREADS_PER_NODE='4294967296'"},
      {"-n 99999 -- true", "node 99999 is not one of this machine's nodes"},
      {"--bogus", "unknown option '--bogus'"},
  };
  for (const auto& [args, message] : bad) {
    const std::string out = numaaff_test::run_command(run + " " + args);
    EXPECT_NE(out.find("numaaff-run: " + message), std::string::npos) << args << ":\n" << out;
    EXPECT_NE(out.find("usage:"), std::string::npos) << args << ":\n" << out;
    // pclose's wait status: exit code 2 is 2 << 8.
    EXPECT_NE(out.find("(exit status 512)"), std::string::npos) << args << ":\n" << out;
    EXPECT_EQ(out.find("numaaff: "), std::string::npos) << "the library's prefix after ours: " << out;
  }
  // The largest valid forms still work.
  const node_id last = numaaff::topology::system().nodes().back();
  const std::string ok = numaaff_test::run_command(run + " -n " + std::to_string(last) + " --show --pid " + std::to_string(getpid()));
  EXPECT_NE(ok.find("process " + std::to_string(getpid())), std::string::npos) << ok;
#else
  GTEST_SKIP() << "tools not built (NUMAAFF_BUILD_TOOLS=OFF)";
#endif
}

// ---- layer 2: this host -----------------------------------------------------------------

// The pool-wide wait() waits for a task group's tasks too, also when the group got its work on
// one thread (here an outside one) and completes on another: the pool counts groups that got
// work and groups that completed per thread, and must sum them so that none is missed.
TEST(ThreadPoolHost, PoolWaitWaitsForAGroupThatGotItsWorkOnAnotherThread) {
  numaaff_test::hang_guard guard(std::chrono::seconds(60), "a pool-wide wait for an outside thread's group");
  numaaff::thread_pool pool;
  for (int round = 0; round < 200; ++round) {
    std::atomic<bool> queued{false}, finished{false};
    std::thread outside([&] {
      numaaff::task_group g(pool);
      g.run([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        finished = true;
      });
      queued = true;
      g.wait();
    });
    while (!queued.load()) std::this_thread::yield();
    pool.wait();
    EXPECT_TRUE(finished.load()) << "round " << round << ": wait() returned before the group's task finished";
    outside.join();
  }
}

// A worker that ran a group's task holds its finish back while its next task is of the same
// group (held_finishes). A next task of another group may wait for the first group: the
// worker counts its held finish out before running it, or the wait never ends. One worker, and
// the first task runs until the second is queued behind it, so it is the worker's next task.
TEST(ThreadPoolHost, ATaskWaitingForTheGroupItsWorkerRanBeforeItSeesThatGroupEnd) {
  numaaff_test::hang_guard guard(std::chrono::seconds(60), "a task waiting for the group its worker ran last");
  thread_pool_options o;
  o.nodes = {numaaff::this_homenode()};  // one worker in all: on several nodes, another could steal
  o.threads_per_node = 1;
  thread_pool pool(o);
  for (int round = 0; round < 50; ++round) {
    numaaff::task_group g(pool);
    std::atomic<bool> second_queued{false}, first_ran{false};
    g.run([&] {
      while (!second_queued.load()) std::this_thread::yield();
      first_ran = true;
    });
    // This thread does not help: the one worker runs the first task, then the second.
    std::future<void> waits = pool.submit([&] {
      EXPECT_TRUE(first_ran.load());
      g.wait();
    });
    second_queued = true;
    ASSERT_EQ(waits.wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << "round " << round << ": the group's finish was still held by the worker";
    waits.get();
  }
}

// Work handed between a group and the pool: a group's task that posts (the post is counted by
// the pool, the group then ends), and a post that runs a group of its own on a worker without
// waiting for it there (a worker's counts begin the group). wait() waits for all of it.
TEST(ThreadPoolHost, PoolWaitWaitsForWorkHandedBetweenAGroupAndThePool) {
  numaaff_test::hang_guard guard(std::chrono::seconds(60), "a pool-wide wait for work handed between a group and the pool");
  numaaff::thread_pool pool;
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> finished{0};
    auto slow = [&] {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      finished.fetch_add(1);
    };
    std::atomic<bool> queued{false};
    std::thread outside([&] {
      numaaff::task_group g(pool);
      g.run([&] { pool.post(slow); });
      queued = true;
      g.wait();
    });
    auto group = std::make_shared<std::unique_ptr<numaaff::task_group>>();
    pool.post([&pool, &slow, group] {
      *group = std::make_unique<numaaff::task_group>(pool);
      (*group)->run(slow);
    });
    while (!queued.load()) std::this_thread::yield();
    pool.wait();
    EXPECT_EQ(finished.load(), 2) << "round " << round << ": wait() returned before the work handed on finished";
    outside.join();
    if (*group) (*group)->wait();
  }
}

// Data-affine submission on one node: hinted tasks run (on the only node) whether the data
// is populated or not; a range that is not one is a caller error; run_near and post_near too.
TEST(ThreadPoolHost, SubmitNearRunsNearTheDataOrByThePolicy) {
  numaaff::thread_pool pool;
  std::vector<double> touched(1 << 16, 1.0);
  const long ps = sysconf(_SC_PAGESIZE);
  void* fresh = mmap(nullptr, 64 * static_cast<std::size_t>(ps), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(fresh, MAP_FAILED);
  const node_id here = numaaff_test::sysfs_nodes().front();
  EXPECT_EQ(pool.submit_near(touched, [] { return numaaff::this_homenode(); }).get(), here);
  EXPECT_EQ(pool.submit_near(touched.data() + 7, 100, [] { return numaaff::this_homenode(); }).get(), here);
  EXPECT_EQ(pool.submit_near(fresh, 64 * static_cast<std::size_t>(ps), [] { return numaaff::this_homenode(); }).get(), here);
  EXPECT_THROW(pool.submit_near(nullptr, 8, [] {}), std::invalid_argument);
  std::atomic<int> ran{0};
  pool.post_near(touched.data(), touched.size() * sizeof(double), [&] { ++ran; });
  {
    numaaff::task_group g(pool);
    for (int i = 0; i < 8; ++i) g.run_near(touched.data() + i * 1024, 1024 * sizeof(double), [&] { ++ran; });
    EXPECT_THROW(g.run_near(nullptr, 1, [] {}), std::invalid_argument);
    g.wait();
  }
  pool.wait();
  EXPECT_EQ(ran.load(), 9);
  munmap(fresh, 64 * static_cast<std::size_t>(ps));
}

TEST(ThreadPoolHost, DefaultPoolHasOneBoundWorkerPerAllowedCpu) {
  thread_pool pool;
  const auto& t = numaaff::topology::system();
  EXPECT_EQ(pool.worker_count(), t.cpus().size());
  if (!pool.workers_bound()) GTEST_SKIP() << "this container refuses sched_setaffinity";
  for (std::size_t i = 0; i < pool.worker_count(); ++i) {
    // Bound tasks on one-worker nodes pin down which worker runs; otherwise check the CPU set.
    auto f = pool.submit(pool.worker_node(i), [] {
      const int w = thread_pool::current_worker_index();
      return std::make_pair(w, sched_getcpu());
    });
    const auto [w, cpu] = f.get();
    EXPECT_EQ(cpu, pool.worker_cpu(static_cast<std::size_t>(w)));
  }
}

TEST(ThreadPoolHost, FuturesCarryValuesAndExceptions) {
  thread_pool pool;
  auto a = pool.submit([] { return 6 * 7; });
  auto b = pool.submit([] { throw std::runtime_error("boom"); });
  auto c = pool.submit([]() -> std::string { return "text"; });
  EXPECT_EQ(a.get(), 42);
  EXPECT_THROW(b.get(), std::runtime_error);
  EXPECT_EQ(c.get(), "text");
  // The pool survives: every worker still runs work.
  std::vector<std::future<int>> more;
  for (int k = 0; k < 100; ++k) more.push_back(pool.submit([k] { return k; }));
  int sum = 0;
  for (auto& f : more) sum += f.get();
  EXPECT_EQ(sum, 4950);
}

TEST(ThreadPoolHost, MoveOnlyCallablesAndResults) {
  thread_pool pool;
  auto p = std::make_unique<int>(5);
  auto f = pool.submit([q = std::move(p)] { return std::make_unique<int>(*q + 1); });
  EXPECT_EQ(*f.get(), 6);
}

TEST(ThreadPoolHost, PostedExceptionsReachWaitOnce) {
  thread_pool pool;
  std::atomic<int> ran{0};
  for (int k = 0; k < 50; ++k)
    pool.post([&, k] {
      ran.fetch_add(1);
      if (k == 10) throw std::logic_error("task 10");
    });
  EXPECT_THROW(pool.wait(), std::logic_error);
  EXPECT_EQ(ran.load(), 50);
  EXPECT_NO_THROW(pool.wait());
}

TEST(ThreadPoolHost, WaitCoversNestedSubmissions) {
  thread_pool pool;
  std::atomic<int> leaves{0};
  for (int k = 0; k < 20; ++k)
    pool.post([&] {
      for (int j = 0; j < 20; ++j) pool.post([&] { pool.post([&] { leaves.fetch_add(1); }); });
    });
  pool.wait();
  EXPECT_EQ(leaves.load(), 400);
}

TEST(ThreadPoolHost, WaitFromATaskIsRejected) {
  thread_pool pool;
  auto f = pool.submit([&] { pool.wait(); });
  EXPECT_THROW(f.get(), std::invalid_argument);
}

/// Occupies every worker of a one-node pool until `g` opens, and returns once they all are.
void hold_the_workers(thread_pool& pool, gate& g, arrivals& in) {
  block_node(pool, pool.nodes().front(), g, in);
  in.await(static_cast<int>(pool.workers_on(pool.nodes().front())));
}

/// What a task learns about the thread that runs it: whether it is the thread that made the
/// probe, and whether a wait() for `pool` from there is refused.
struct wait_probe {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> ran_here{false}, rejected{false}, done{false};
  void run_in(thread_pool& pool) {
    ran_here = std::this_thread::get_id() == caller;
    try {
      pool.wait();
    } catch (const std::invalid_argument&) {
      rejected = true;
    }
    done = true;
  }
};

/// Opens the gates once the probe has run (or after 10 s, so that a test fails, not hangs).
std::thread open_after(const wait_probe& p, std::vector<gate*> gates) {
  return std::thread([&p, gates] {
    for (int k = 0; k < 10000 && !p.done.load(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (gate* g : gates) g->open();
  });
}

// An outside thread's wait() runs its own posts while the workers are busy (a one-node pool on
// the node it runs on), and such a task is still one of the pool's: its wait() is refused
// rather than waiting for itself.
TEST(ThreadPoolHost, AnOutsideWaitRunsItsOwnPostsAndTheirWaitIsRejected) {
  if (numaaff::detail::kernel_nodes().size() != 1) GTEST_SKIP() << "outside threads help only on one node";
  numaaff_test::hang_guard guard(std::chrono::seconds(30), "a helped post waiting for its pool");
  thread_pool pool;
  gate g;
  arrivals in;
  hold_the_workers(pool, g, in);
  wait_probe probe;
  pool.post([&] { probe.run_in(pool); });
  std::thread opener = open_after(probe, {&g});
  pool.wait();
  opener.join();
  EXPECT_TRUE(probe.ran_here.load()) << "the post waited for a worker while its poster waited";
  EXPECT_TRUE(probe.rejected.load());
}

// Nested pools: the caller of a.wait() runs its post X, X posts Y to pool b and waits for b,
// so the caller runs Y too; Y is still inside a's task X, so its a.wait() is refused. X's post
// to b took the thread's binding from a: the caller then stops popping a's slot.
TEST(ThreadPoolHost, AWaitInsideNestedHelpedTasksIsRejectedForEveryPoolItIsInside) {
  if (numaaff::detail::kernel_nodes().size() != 1) GTEST_SKIP() << "outside threads help only on one node";
  numaaff_test::hang_guard guard(std::chrono::seconds(30), "a task inside a's task waiting for a");
  thread_pool a, b;
  gate ga, gb;
  arrivals ia, ib;
  hold_the_workers(a, ga, ia);
  hold_the_workers(b, gb, ib);
  wait_probe probe;
  a.post([&] {
    b.post([&] { probe.run_in(a); });
    b.wait();  // also for b's blocked workers: until the opener opens their gate
  });
  std::thread opener = open_after(probe, {&ga, &gb});
  a.wait();
  opener.join();
  b.wait();
  EXPECT_TRUE(probe.ran_here.load());
  EXPECT_TRUE(probe.rejected.load()) << "a task inside a's task waited for a";
}

long fib(thread_pool& pool, int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
  numaaff::task_group g(pool);
  g.run([&] { a = fib(pool, n - 1); });
  b = fib(pool, n - 2);
  g.wait();
  return a + b;
}

TEST(ThreadPoolHost, TenThousandRecursiveTasksDoNotDeadlock) {
  thread_pool pool;
  // fib(20) spawns 10,945 tasks, each waiting on its own group.
  EXPECT_EQ(pool.submit([&] { return fib(pool, 20); }).get(), 6765);
  // The same from outside the pool: the caller helps.
  EXPECT_EQ(fib(pool, 18), 2584);
  // And a chain of 10,000 tasks each posting the next.
  std::atomic<int> depth{0};
  std::function<void()> step = [&] {
    if (depth.fetch_add(1) + 1 < 10000) pool.post(step);
  };
  pool.post(step);
  pool.wait();
  EXPECT_EQ(depth.load(), 10000);
}

TEST(ThreadPoolHost, TaskGroupRethrowsTheFirstExceptionAfterAllFinished) {
  thread_pool pool;
  numaaff::task_group g(pool);
  std::atomic<int> done{0};
  for (int k = 0; k < 100; ++k)
    g.run([&, k] {
      if (k % 10 == 0) throw std::runtime_error("one of ten");
      done.fetch_add(1);
    });
  EXPECT_THROW(g.wait(), std::runtime_error);
  EXPECT_EQ(done.load(), 90);
  EXPECT_NO_THROW(g.wait());
}

/// A callable whose copy fails, as a copy of captured state does when memory runs out.
struct throws_when_copied {
  std::atomic<int>* ran;
  explicit throws_when_copied(std::atomic<int>* r) : ran(r) {}
  throws_when_copied(const throws_when_copied& o) : ran(o.ran) { throw std::bad_alloc(); }
  void operator()() const { ran->fetch_add(1); }
};

TEST(ThreadPoolHost, TaskGroupRunThatThrowsLeavesTheGroupConsistent) {
  // The failed runs used to stay counted as pending: wait() and the destructors hung.
  hang_guard guard(std::chrono::seconds(20), "a task_group after a run() that threw");
  std::atomic<int> ran{0};
  thread_pool pool;
  numaaff::task_group g(pool);
  const throws_when_copied bad(&ran);
  EXPECT_THROW(g.run(bad), std::bad_alloc);
  EXPECT_THROW(g.run(pool.nodes().front(), bad), std::bad_alloc);
  EXPECT_THROW(g.run(-1, [&] { ran.fetch_add(100); }), std::invalid_argument);  // not a pool node
  g.run([&] { ran.fetch_add(1); });
  g.wait();
  EXPECT_EQ(ran.load(), 1);
  pool.wait();
}

TEST(ThreadPoolHost, ParallelForVisitsEveryIndexOnce) {
  thread_pool pool;
  for (std::size_t n : {0u, 1u, 3u, 1000u, 100003u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(0, n, [&](std::size_t i) { hits[i].fetch_add(1); });
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
  std::atomic<std::size_t> blocks{0}, total{0};
  pool.parallel_for(10, 1010, [&](std::size_t lo, std::size_t hi) {
    blocks.fetch_add(1);
    total.fetch_add(hi - lo);
    EXPECT_LE(hi - lo, 64u);
  }, 64);
  EXPECT_EQ(total.load(), 1000u);
  EXPECT_GE(blocks.load(), 1000u / 64);
  EXPECT_THROW(pool.parallel_for(0, 10, [](std::size_t i) { if (i == 7) throw std::out_of_range("7"); }),
               std::out_of_range);
}

// The dynamic NUMA schedule: every index once (index and chunk forms, data-following too), chunks
// never below the grain but at the end, exceptions rethrown after the other chunks ran, and the
// caller mistakes named.
TEST(ThreadPoolHost, DynamicParallelForVisitsEveryIndexOnce) {
  thread_pool pool;
  for (std::size_t n : {0u, 1u, 3u, 1000u, 100003u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(0, n, [&](std::size_t i) { hits[i].fetch_add(1); }, numaaff::dynamic_schedule{7});
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
  std::vector<double> data(50000, 1.0);
  std::vector<std::atomic<int>> hits(data.size());
  std::atomic<std::size_t> small{0};
  pool.parallel_for(5, data.size(), [&](std::size_t lo, std::size_t hi) {
    if (hi - lo < 16 && hi != data.size()) small.fetch_add(1);
    for (std::size_t i = lo; i < hi; ++i) hits[i].fetch_add(1);
  }, numaaff::dynamic_schedule{16}.following(data.data(), sizeof(double)));
  for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(hits[i].load(), i < 5 ? 0 : 1) << i;
  EXPECT_LE(small.load(), 2u * pool.nodes().size()) << "only a segment's last chunk may be short";
  std::vector<std::atomic<int>> chunk_hits(1000);
  EXPECT_THROW(pool.parallel_for(0, 1000, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) chunk_hits[i].fetch_add(1);
    if (lo <= 7 && 7 < hi) throw std::out_of_range("7");
  }, numaaff::dynamic_schedule{1}), std::out_of_range);
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(chunk_hits[i].load(), 1) << "every other chunk still ran: " << i;
  const auto message = [&](numaaff::dynamic_schedule s) {
    return numaaff_test::what_of<std::invalid_argument>([&] { pool.parallel_for(0, 10, [](std::size_t) {}, s); });
  };
  EXPECT_NE(message(numaaff::dynamic_schedule{0}).find("grain is 0"), std::string::npos);
  EXPECT_NE(message(numaaff::dynamic_schedule{4}.following(data.data(), 0)).find("stride is 0"), std::string::npos);
  const std::string wraps = numaaff_test::what_of<std::invalid_argument>([&] {
    pool.parallel_for(0, SIZE_MAX - 1, [](std::size_t) {}, numaaff::dynamic_schedule{4}.following(data.data(), 8));
  });
  EXPECT_NE(wraps.find("wrap the address space"), std::string::npos) << wraps;
}

// On two synthetic nodes with one worker each, a loop whose node-0 part is slow: node 1's
// worker helps from the back, so what node 0's worker ran is a prefix of its part (how long a
// prefix depends on when each thread runs), node 1's part is all node 1's, and every index
// runs once.
TEST(ThreadPoolSynthetic, DynamicLoopHelpsFromTheFarEnd) {
  thread_pool_options o = synthetic("pack:2 numa:1 pu:1");
  o.steal = steal_mode::free;
  thread_pool pool(o);
  const std::size_t n = 4000;
  std::vector<std::atomic<int>> by(n);
  for (auto& b : by) b.store(-1);
  pool.parallel_for(0, n, [&](std::size_t i) {
    const int node = numaaff::this_homenode();
    by[i].store(node);
    if (i < n / 2 && node == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }, numaaff::dynamic_schedule{8});
  // Whatever the timing: in each node's part, what its own worker ran is a prefix and what the
  // other helped with a suffix.
  for (int owner = 0; owner < 2; ++owner) {
    const std::size_t lo = owner == 0 ? 0 : n / 2, hi = owner == 0 ? n / 2 : n;
    std::size_t i = lo;
    while (i < hi && by[i].load() == owner) ++i;
    const std::size_t owned = i;
    while (i < hi && by[i].load() == 1 - owner) ++i;
    EXPECT_EQ(i, hi) << "node " << owner << " ran [" << lo << ", " << owned << "), the other node the rest of its part";
  }
}

// While node 0's only worker is busy, node 1's worker runs every loop task, including the one
// queued on node 0, which it may take before its own is queued: whichever it runs, its
// iterations must see node 1 as their homenode (the node they run on and work for first).
TEST(ThreadPoolSynthetic, ALoopTaskRunByAnotherNodesWorkerHasThatNodeAsHomenode) {
  thread_pool_options o = synthetic("pack:2 numa:1 pu:1");
  o.steal = steal_mode::free;
  thread_pool pool(o);
  gate g;
  arrivals in;
  block_node(pool, 0, g, in);
  in.await(1);
  const std::size_t n = 64;
  std::vector<std::atomic<int>> by(n);
  std::string wrong;
  for (int round = 0; round < 300 && wrong.empty(); ++round) {
    for (auto& b : by) b.store(-1);
    pool.parallel_for(0, n, [&](std::size_t i) { by[i].store(numaaff::this_homenode()); }, numaaff::dynamic_schedule{1});
    for (std::size_t i = 0; i < n && wrong.empty(); ++i)
      if (by[i].load() != 1) wrong = "round " + std::to_string(round) + ", index " + std::to_string(i) + ": homenode " + std::to_string(by[i].load());
  }
  g.open();  // before any assertion can return
  pool.wait();
  EXPECT_EQ(wrong, "");
}

TEST(ThreadPoolHost, CancelDiscardsWhatHasNotStarted) {
  thread_pool pool;
  gate g;
  arrivals in;
  for (node_id n : pool.nodes()) block_node(pool, n, g, in);
  in.await(static_cast<int>(pool.worker_count()));
  std::atomic<int> ran{0};
  std::vector<std::future<void>> futures;
  for (int k = 0; k < 100; ++k) futures.push_back(pool.submit([&] { ran.fetch_add(1); }));
  EXPECT_EQ(pool.cancel(), 100u);
  g.open();
  pool.wait();
  EXPECT_EQ(ran.load(), 0);
  for (auto& f : futures) {
    try {
      f.get();
      ADD_FAILURE() << "a cancelled task's future was satisfied";
    } catch (const std::future_error& e) {
      EXPECT_EQ(e.code(), std::future_errc::broken_promise);
    }
  }
}

TEST(ThreadPoolHost, CancelledTaskGroupTasksMakeWaitThrow) {
  thread_pool pool;
  gate g;
  arrivals in;
  for (node_id n : pool.nodes()) block_node(pool, n, g, in);
  in.await(static_cast<int>(pool.worker_count()));
  numaaff::task_group tg(pool);
  std::atomic<int> ran{0};
  for (int k = 0; k < 10; ++k) tg.run([&] { ran.fetch_add(1); });
  EXPECT_EQ(pool.cancel(), 10u);
  g.open();
  try {
    tg.wait();
    ADD_FAILURE() << "task_group::wait returned normally after cancel() discarded its tasks";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::operation_canceled) << e.what();
    EXPECT_NE(std::string(e.what()).find("cancel()"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran.load(), 0);
  // Reported once; the group is reusable.
  EXPECT_NO_THROW(tg.wait());
  tg.run([&] { ran.fetch_add(1); });
  EXPECT_NO_THROW(tg.wait());
  EXPECT_EQ(ran.load(), 1);
  pool.wait();  // the gate's tasks have left it before it goes
}

TEST(ThreadPoolHost, AForkedChildGetsAClearErrorAndCanDestroyThePool) {
  auto pool = std::make_unique<thread_pool>();
  pool->parallel_for(0, 1000, [](std::size_t) {});  // the workers have run: spinning or asleep
  const std::string child = numaaff_test::run_in_child(10, [&] {
    // Each use must throw the documented error (it used to queue work no worker would run, or
    // wait for it forever); the bits of the exit status say which did not.
    const auto refused = [](auto&& use) {
      try {
        use();
      } catch (const std::system_error& e) {
        return e.code() == numaaff::errc::used_after_fork && std::string(e.what()).find("fork()") != std::string::npos;
      } catch (...) {
      }
      return false;
    };
    int status = 0;
    if (!refused([&] { pool->submit([] { return 1; }); })) status |= 1;
    if (!refused([&] { pool->post([] {}); })) status |= 2;
    if (!refused([&] { pool->parallel_for(0, 100, [](std::size_t) {}); })) status |= 4;
    if (!refused([&] {
          numaaff::task_group g(*pool);
          g.run([] {});
        }))
      status |= 8;
    if (!refused([&] { pool->wait(); })) status |= 16;
    pool.reset();  // must return: nothing to join, nothing to finish
    return status;
  });
  EXPECT_EQ(child, "") << "exit status bits: 1 submit, 2 post, 4 parallel_for, 8 task_group::run, 16 wait";
  // The parent's pool is untouched.
  EXPECT_EQ(pool->submit([] { return 7; }).get(), 7);
}

TEST(ThreadPoolHost, DestructorFinishesPendingWork) {
  std::atomic<int> ran{0};
  {
    thread_pool pool;
    for (int k = 0; k < 2000; ++k)
      pool.post([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        pool.post([&] { ran.fetch_add(1); });
      });
  }
  EXPECT_EQ(ran.load(), 2000);
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

TEST(ThreadPoolHost, AnIdlePoolBurnsNoCpu) {
  thread_pool pool;
  pool.parallel_for(0, 1000, [](std::size_t) {});
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double used = process_cpu_seconds() - before;
  RecordProperty("idle_cpu_seconds", std::to_string(used));
  EXPECT_LT(used, 0.02) << pool.worker_count() << " idle workers used " << used << " s of CPU in 1 s";
  EXPECT_GE(pool.stats().sleeps, pool.worker_count());
}

TEST(ThreadPoolHost, TasksAllocateOnTheirHomenode) {
  thread_pool pool;
  for (node_id n : pool.nodes()) {
    const auto raw = pool.submit(n, [] {
                           std::vector<char, numaaff::local_allocator<char>> v(1 << 20, 1);
                           return numaaff_test::query_pages(v.data(), v.size());
                         }).get();
    EXPECT_EQ(raw.on(n), raw.total);
  }
}

TEST(ThreadPoolHost, OneNodeForkSubmissionsStayOnTheCallersNode) {
  thread_pool pool;
  const node_id here = numaaff::current_node();
  EXPECT_EQ(pool.submit([] { return numaaff::this_homenode(); }).get(),
            std::find(pool.nodes().begin(), pool.nodes().end(), here) != pool.nodes().end() ? here : pool.nodes().front());
}

TEST(ThreadPoolHost, AChildForkedFromATaskCanDestroyItsCopyOfThePool) {
  // The child's copy of the task's thread-local state says it runs a task of the pool; its
  // destructor must still take the forked child's path (leave the parent's work alone).
  auto pool = std::make_unique<numaaff::thread_pool>();
  int status = -1;
  pool->submit([&] {
        const pid_t pid = fork();
        if (pid == 0) {
          pool.reset();
          _exit(0);
        }
        waitpid(pid, &status, 0);
      })
      .get();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(ThreadPoolDeathTest, DestroyedFromItsOwnTaskFailsFastInsteadOfHanging) {
  // The last owner of a pool can be one of its tasks (a shared_ptr released there). Joining
  // itself would hang forever; it must stop the process with a message at once.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        alarm(60);  // a hang ends as SIGALRM, whose death does not match the message
        auto pool = std::make_shared<numaaff::thread_pool>();
        auto last = pool;
        pool.reset();
        last->submit([&last] { last.reset(); }).wait();
      },
      "numaaff: a thread_pool was destroyed from one of its own tasks");
}

// The sleep of idle workers (detail::event_count): producers hand items to a sleeping
// consumer with notify_one() only, the consumer's waits ending at random (every other one
// times out after a microsecond) so that waits end while notifiers decide: no item may be
// left with the consumer asleep. Its untimed waits would sleep forever on a lost wake-up; the
// round then fails at its deadline instead of hanging. (A notify_one() that skipped the wake-up
// while it counted every waiter as woken, with wake-ups counted apart from the waiters, lost
// one in about three rounds.)
TEST(EventCount, NotifyOneNeverLeavesAnItemWithTheWaiterAsleep) {
  using numaaff::detail::event_count;
  constexpr int producers = 2, items_each = 20000, rounds = 30;
  for (int r = 0; r < rounds; ++r) {
    const int consumers = r % 5 == 4 ? 3 : 1;  // and some rounds with several waiters
    event_count ec;
    std::atomic<long> items{0}, taken{0};
    std::atomic<bool> stop{false};
    auto take = [&] {
      long n = items.load();
      while (n > 0)
        if (items.compare_exchange_weak(n, n - 1)) return true;
      return false;
    };
    std::vector<std::thread> threads;
    for (int c = 0; c < consumers; ++c)
      threads.emplace_back([&, c] {
        unsigned round = static_cast<unsigned>(c);
        while (!stop.load()) {
          if (take()) {
            taken.fetch_add(1);
            continue;
          }
          const std::uint32_t key = ec.prepare_wait();
          if (items.load() > 0 || stop.load()) {
            ec.cancel_wait();
            continue;
          }
          ec.commit_wait(key, ++round % 2 == 0 ? std::chrono::nanoseconds(1000) : std::chrono::nanoseconds(-1));
        }
      });
    for (int p = 0; p < producers; ++p)
      threads.emplace_back([&] {
        for (int i = 0; i < items_each; ++i) {
          items.fetch_add(1);
          ec.notify_one();
          if (i % 16 == 0) std::this_thread::yield();
        }
      });
    const long all = long{producers} * items_each;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (taken.load() < all && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long left = all - taken.load();
    stop.store(true);
    ec.notify_all();
    for (auto& t : threads) t.join();
    ASSERT_EQ(left, 0) << "round " << r << ": items left with every consumer asleep (a lost wake-up)";
  }
}

// ---- the work deque under every worker and external slot ----------------------------------

TEST(WorkDeque, TheOwnerPopsTheNewestAndAThiefStealsTheOldest) {
  int v[3] = {0, 1, 2};
  numaaff::detail::work_deque<int*> d(2);
  EXPECT_EQ(d.pop(), nullptr);
  EXPECT_EQ(d.steal(), nullptr);
  for (int& x : v) d.push(&x);  // a third item grows the ring of two
  EXPECT_EQ(d.size_hint(), 3);
  EXPECT_EQ(d.steal(), &v[0]);
  EXPECT_EQ(d.pop(), &v[2]);
  EXPECT_EQ(d.pop(), &v[1]);
  EXPECT_EQ(d.pop(), nullptr);
  EXPECT_EQ(d.steal(), nullptr);
}

// The owner's room check reads the thieves' top only when an older reading of it says the ring
// is full: a stale top must make it read again or grow, never overwrite an item not yet taken.
// Between the owner's pops its top goes stale while the thieves alone empty the deque, so its
// pushes reach a ring that is full by that top and read it again; larger bursts grow the ring.
TEST(WorkDeque, EveryItemIsTakenOnceWhileThievesStealAndTheRingGrows) {
  constexpr int items = 200000;
  std::vector<int> values(items);
  std::vector<std::atomic<int>> taken(items);
  numaaff::detail::work_deque<int*> d(4);
  std::atomic<bool> done{false};
  auto take = [&](int* p) { taken[static_cast<std::size_t>(p - values.data())].fetch_add(1, std::memory_order_relaxed); };
  std::vector<std::thread> thieves;
  for (int k = 0; k < 2; ++k)
    thieves.emplace_back([&] {
      while (!done.load(std::memory_order_acquire))
        if (int* p = d.steal()) take(p);
    });
  int next = 0;
  for (int burst = 0; next < items; ++burst) {
    const int n = burst % 3 == 0 ? 4 : 1 + burst % 37;  // a ring's worth, and more (growth)
    for (int i = 0; i < n && next < items; ++i) d.push(&values[static_cast<std::size_t>(next++)]);
    if (burst % 3 == 0) {
      while (d.size_hint() > 0) std::this_thread::yield();  // the thieves empty it
    } else if (burst % 3 == 1) {
      if (int* p = d.pop()) take(p);
    }
  }
  while (int* p = d.pop()) take(p);
  done.store(true, std::memory_order_release);
  for (auto& t : thieves) t.join();
  while (int* p = d.steal()) take(p);
  int wrong = 0;
  for (int i = 0; i < items; ++i)
    if (taken[static_cast<std::size_t>(i)].load() != 1 && ++wrong <= 5)
      ADD_FAILURE() << "item " << i << " taken " << taken[static_cast<std::size_t>(i)].load() << " times";
  EXPECT_EQ(wrong, 0);
}

}  // namespace
