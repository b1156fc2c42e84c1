// The OpenMP bridge on this host and on synthetic machines: team plans follow the thread
// pool's partition, bind_team pins each thread to its CPU (sched_getcpu), first_touch writes
// each thread's schedule(static) block.
#include <numaaff/openmp.hpp>

#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <atomic>
#include <memory>
#include <stdexcept>
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

}  // namespace
