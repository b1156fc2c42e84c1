// The OpenMP bridge on a real multi-node kernel (inside the emulated VM): a team bound by the
// bridge puts thread i on the node of block i (sched_getcpu + sysfs), and first_touch places
// each block's pages on that node (raw move_pages query).
#include <numaaff/openmp.hpp>
#include <numaaff/thread_pool.hpp>

#include "../common/numa_test.hpp"
#include "../common/scratch.hpp"

#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <vector>

namespace {

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

TEST(OpenmpNuma, BoundTeamPutsThreadIOnTheNodeOfBlockI) {
  NUMAAFF_REQUIRE_NODES(2);
  const auto plan = numaaff::openmp::plan_team(static_cast<int>(numaaff::topology::system().cpus().size()));
  ASSERT_EQ(numaaff::openmp::bind_team(plan), plan.size());
  std::vector<int> node_of_thread(static_cast<std::size_t>(plan.size()), -1);
  for (int region = 0; region < 3; ++region) {  // the binding holds for later regions
#pragma omp parallel num_threads(plan.size())
    node_of_thread[static_cast<std::size_t>(omp_get_thread_num())] = numaaff_test::sysfs_node_of_cpu(sched_getcpu());
    EXPECT_EQ(node_of_thread, plan.node);
  }
}

TEST(OpenmpNuma, FirstTouchPlacesEachBlockOnItsThreadsNode) {
  NUMAAFF_REQUIRE_NODES(2);
  numaaff::thread_pool pool;
  const auto plan = numaaff::openmp::plan_team(pool);
  const std::size_t pages = 1024;
  numaaff_test::scratch m(pages * ps);
  struct page {
    char bytes[4096];
  };
  ASSERT_EQ(ps, sizeof(page));
  numaaff::openmp::first_touch(plan, reinterpret_cast<page*>(m.p), pages, [](std::size_t) { return page{}; });
  for (int i = 0; i < plan.size(); ++i) {
    const auto [lo, hi] = plan.block(0, pages, i);
    const auto raw = numaaff_test::query_pages(m.p + lo * ps, (hi - lo) * ps);
    EXPECT_EQ(raw.on(plan.node[static_cast<std::size_t>(i)]), raw.total) << "thread " << i;
  }
  // The pool's parallel_for blocks are the same: each node's block is already local.
  for (const auto& b : pool.node_blocks(0, pages)) {
    const auto raw = numaaff_test::query_pages(m.p + b.first * ps, (b.last - b.first) * ps);
    EXPECT_EQ(raw.on(b.node), raw.total);
  }
}

}  // namespace
