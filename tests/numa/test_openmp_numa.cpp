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
#include <cstring>
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

// After the data moved (every 16-page block to the next CPU node), blocks_by_data gives each
// thread of a bound team exactly the blocks on its node, and the thread runs there.
TEST(OpenmpNuma, BlocksByDataGiveEachThreadTheDataOnItsNode) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> cpu = numaaff_test::sysfs_cpu_nodes();
  const auto plan = numaaff::openmp::plan_team(static_cast<int>(numaaff::topology::system().cpus().size()));
  ASSERT_EQ(numaaff::openmp::bind_team(plan), plan.size());
  const std::size_t pages = 256, block_pages = 16;
  numaaff_test::scratch m(pages * ps);
  std::vector<int> owners(pages / block_pages);
  for (std::size_t b = 0; b < owners.size(); ++b) owners[b] = cpu[(b + 1) % cpu.size()];
  std::memset(m.p, 3, m.bytes);
  (void)numaaff::place_blocks(m.p, m.bytes, block_pages * ps, owners);
  const auto work = numaaff::openmp::blocks_by_data(plan, m.p, 1, 0, m.bytes);
  std::vector<int> ran_on(static_cast<std::size_t>(plan.size()), -1);
  std::vector<std::size_t> bytes_of(static_cast<std::size_t>(plan.size()), 0);
#pragma omp parallel num_threads(plan.size())
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    ran_on[t] = numaaff_test::sysfs_node_of_cpu(sched_getcpu());
    for (const numaaff::index_block& b : work[t]) {
      for (std::size_t i = b.first; i < b.last; ++i) m.p[i] = 4;
      bytes_of[t] += b.last - b.first;
    }
  }
  std::size_t total = 0;
  for (std::size_t t = 0; t < work.size(); ++t) {
    EXPECT_EQ(ran_on[t], plan.node[t]) << "thread " << t;
    for (const numaaff::index_block& b : work[t]) {
      const auto raw = numaaff_test::query_pages(m.p + b.first, b.last - b.first);
      EXPECT_EQ(raw.on(plan.node[t]), raw.total) << "thread " << t << " block " << b.first;
    }
    total += bytes_of[t];
  }
  EXPECT_EQ(total, m.bytes);
}

}  // namespace
