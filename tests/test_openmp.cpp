// The OpenMP bridge on this host and on synthetic machines: team plans follow the thread
// pool's partition, bind_team pins each thread to its CPU (sched_getcpu), first_touch writes
// each thread's schedule(static) block, whatever team OpenMP gives it.
#include <numaaff/openmp.hpp>
#include <numaaff/thread_pool.hpp>

#include "common/process.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using numaaff::node_id;

TEST(OpenmpBridge, PlansSpreadThreadsOverNodesInNodeOrder) {
  const auto t = numaaff::topology::from_synthetic("pack:4 numa:1 core:1 pu:1");
  EXPECT_EQ(numaaff::openmp::plan_team(4, t).node, (std::vector<node_id>{0, 1, 2, 3}));
  EXPECT_EQ(numaaff::openmp::plan_team(2, t).node, (std::vector<node_id>{0, 2}));
  EXPECT_EQ(numaaff::openmp::plan_team(6, t).node, (std::vector<node_id>{0, 1, 2, 3, 0, 1}));
  EXPECT_THROW(numaaff::openmp::plan_team(-1, t), std::invalid_argument);
  // Its CPUs are not this machine's: the plan pins nothing.
  EXPECT_EQ(numaaff::openmp::plan_team(4, t).cpu, (std::vector<int>{-1, -1, -1, -1}));
  EXPECT_EQ(numaaff::openmp::bind_team(numaaff::openmp::plan_team(2, t)), 0);
}

TEST(OpenmpBridge, BlocksMatchTheThreadPoolsPartition) {
  numaaff::thread_pool_options o;
  o.topo = std::make_shared<const numaaff::topology>(numaaff::topology::from_synthetic("pack:4 numa:1 core:2 pu:1"));
  numaaff::thread_pool pool(o);
  const auto plan = numaaff::openmp::plan_team(pool);
  ASSERT_EQ(static_cast<std::size_t>(plan.size()), pool.worker_count());
  const auto blocks = pool.worker_blocks(3, 1003);
  for (int i = 0; i < plan.size(); ++i) {
    const auto [lo, hi] = plan.block(3, 1003, i);
    EXPECT_EQ(lo, blocks[static_cast<std::size_t>(i)].first);
    EXPECT_EQ(hi, blocks[static_cast<std::size_t>(i)].last);
    EXPECT_EQ(plan.node[static_cast<std::size_t>(i)], blocks[static_cast<std::size_t>(i)].node);
  }
  EXPECT_THROW(plan.block(0, 10, plan.size()), std::invalid_argument);
}

TEST(OpenmpBridge, BindTeamPinsEachThreadToItsCpu) {
  const auto plan = numaaff::openmp::plan_team();
  ASSERT_EQ(numaaff::openmp::bind_team(plan), plan.size());
  std::atomic<int> wrong{0};
#pragma omp parallel num_threads(plan.size())
  {
    if (sched_getcpu() != plan.cpu[static_cast<std::size_t>(omp_get_thread_num())]) wrong.fetch_add(1);
  }
  EXPECT_EQ(wrong.load(), 0);
}

TEST(OpenmpBridge, FirstTouchWritesEveryElement) {
  const auto plan = numaaff::openmp::plan_team();
  std::vector<double> v(100003, -1.0);
  numaaff::openmp::first_touch(plan, v.data(), v.size(), [](std::size_t i) { return 0.5 * static_cast<double>(i); });
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], 0.5 * static_cast<double>(i));
  EXPECT_THROW(numaaff::openmp::first_touch(plan, static_cast<double*>(nullptr), 3, [](std::size_t) { return 0.0; }),
               std::invalid_argument);
}

/// `threads` threads that pin nothing: these tests are about which elements get written.
numaaff::openmp::team_plan unpinned_plan(int threads) {
  numaaff::openmp::team_plan p;
  p.node.assign(static_cast<std::size_t>(threads), 0);
  p.cpu.assign(static_cast<std::size_t>(threads), -1);
  return p;
}

double value_of(std::size_t i) { return 0.25 * static_cast<double>(i); }

::testing::AssertionResult all_written(const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != value_of(i)) return ::testing::AssertionFailure() << "element " << i << " of " << v.size() << " is " << v[i];
  return ::testing::AssertionSuccess();
}

TEST(OpenmpBridge, FirstTouchWritesEveryElementWhateverTheTeam) {
  const auto plan = unpinned_plan(4);
  std::vector<double> top(10007, -1.0);
  numaaff::openmp::first_touch(plan, top.data(), top.size(), value_of);
  EXPECT_TRUE(all_written(top));
  // Inside a parallel region with nesting off, first_touch's region gets a team of one thread.
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(1);
  std::vector<double> nested(10007, -1.0);
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    numaaff::openmp::first_touch(plan, nested.data(), nested.size(), value_of);
  }
  omp_set_max_active_levels(levels);
  EXPECT_TRUE(all_written(nested));
}

TEST(OpenmpBridge, FirstTouchUnderOmpThreadLimitAndDynamic) {
  // The environment caps the team below the plan: this test program again, in a child.
  const std::string self = "/proc/" + std::to_string(getpid()) + "/exe";
  const std::string tests = " --gtest_filter=OpenmpBridge.FirstTouchWritesEveryElement:"
                            "OpenmpBridge.FirstTouchWritesEveryElementWhateverTheTeam";
  for (const char* env : {"OMP_THREAD_LIMIT=1", "OMP_DYNAMIC=true", "OMP_THREAD_LIMIT=1 OMP_DYNAMIC=true"}) {
    const std::string out = numaaff_test::run_command(std::string(env) + " " + self + tests);
    EXPECT_NE(out.find("[  PASSED  ] 2 tests"), std::string::npos) << env << ":\n" << out;
  }
}

// blocks_by_data: every index once; the threads of the data's node share it in thread order;
// a thread whose node holds none of the data gets nothing; unpopulated data goes to its
// schedule(static) owner; caller mistakes are named.
TEST(OpenmpBridge, BlocksByDataFollowTheData) {
  const int node = numaaff::topology::system().nodes().front();
  std::vector<double> touched(100000, 1.0);
  numaaff::openmp::team_plan plan;
  plan.node = {node, node, node + 1000, node + 1000};  // two threads on a node with no data
  plan.cpu = {-1, -1, -1, -1};
  const auto work = numaaff::openmp::blocks_by_data(plan, touched.data(), sizeof(double), 0, touched.size());
  std::vector<int> hits(touched.size(), 0);
  std::size_t per_thread[4] = {};
  for (std::size_t t = 0; t < 4; ++t)
    for (const numaaff::index_block& b : work[t]) {
      EXPECT_EQ(b.node, plan.node[t]);
      per_thread[t] += b.last - b.first;
      for (std::size_t i = b.first; i < b.last; ++i) ++hits[i];
    }
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), static_cast<long>(touched.size()));
  EXPECT_EQ(per_thread[0], 50000u);
  EXPECT_EQ(per_thread[1], 50000u);
  EXPECT_EQ(per_thread[2] + per_thread[3], 0u);
  EXPECT_LT(work[0].back().last, work[1].front().first + 1) << "thread 0 has the front of the node's share";
  // Never touched: the static owners (threads 2 and 3 own the back half).
  const std::size_t bytes = 64 * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(fresh, MAP_FAILED);
  const auto cold = numaaff::openmp::blocks_by_data(plan, fresh, 8, 0, bytes / 8);
  std::size_t cold_back = 0;
  for (const numaaff::index_block& b : cold[2]) cold_back += b.last - b.first;
  for (const numaaff::index_block& b : cold[3]) cold_back += b.last - b.first;
  // (In the sandbox the kernel cannot be asked: on one node every block is that node's.)
  EXPECT_EQ(cold_back, std::getenv("NUMAAFF_TEST_SANDBOX") != nullptr ? 0 : bytes / 16);
  munmap(fresh, bytes);
  EXPECT_THROW((void)numaaff::openmp::blocks_by_data(plan, touched.data(), 0, 0, 10), std::invalid_argument);
  EXPECT_THROW((void)numaaff::openmp::blocks_by_data(plan, touched.data(), 8, 0, 10, 0), std::invalid_argument);
  EXPECT_THROW((void)numaaff::openmp::blocks_by_data(plan, nullptr, 8, 0, 10), std::invalid_argument);
  EXPECT_THROW((void)numaaff::openmp::blocks_by_data(numaaff::openmp::team_plan{}, touched.data(), 8, 0, 10), std::invalid_argument);
}

TEST(OpenmpBridge, FirstTouchThrowsOutsideTheRegion) {
  std::vector<double> v(1000, -1.0);
  // Thrown inside the region, rethrown after it (it used to end in std::terminate).
  EXPECT_THROW(numaaff::openmp::first_touch(unpinned_plan(4), v.data(), v.size(),
                                            [](std::size_t i) -> double {
                                              if (i == 600) throw std::runtime_error("no value for 600");
                                              return 0.0;
                                            }),
               std::runtime_error);
  // A plan no team can follow is refused before the region.
  EXPECT_THROW(numaaff::openmp::first_touch(numaaff::openmp::team_plan{}, v.data(), v.size(), value_of),
               std::invalid_argument);
  auto ragged = unpinned_plan(4);
  ragged.cpu.pop_back();
  EXPECT_THROW(numaaff::openmp::first_touch(ragged, v.data(), v.size(), value_of), std::invalid_argument);
  EXPECT_NO_THROW(numaaff::openmp::first_touch(numaaff::openmp::team_plan{}, v.data(), 0, value_of));
}

}  // namespace
