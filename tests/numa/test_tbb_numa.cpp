// The oneTBB bridge on a real multi-node kernel (inside the emulated VM): oneTBB's NUMA ids map
// to the kernel's nodes, and each node's arena runs work on that node (sched_getcpu + sysfs).
#include <numaaff/tbb.hpp>

#include "../common/numa_test.hpp"

#include <gtest/gtest.h>
#include <oneapi/tbb/parallel_for.h>
#include <sched.h>

#include <atomic>
#include <set>
#include <vector>

namespace {

using numaaff::node_id;

int kernel_node_here() { return numaaff_test::sysfs_node_of_cpu(sched_getcpu()); }

TEST(TbbNuma, OneTbbSeesEveryNodeAndTheIdsConvert) {
  NUMAAFF_REQUIRE_NODES(2);
  ASSERT_TRUE(numaaff::tbb_binds()) << "tbbbind was not loaded in the guest";
  std::set<node_id> mapped;
  for (int id : tbb::info::numa_nodes()) mapped.insert(numaaff::node_of_tbb_numa_id(id));
  const auto kernel = numaaff_test::sysfs_nodes();
  EXPECT_EQ(mapped, std::set<node_id>(kernel.begin(), kernel.end()));
}

TEST(TbbNuma, TheArenaOfNodeNRunsOnNodeN) {
  NUMAAFF_REQUIRE_NODES(2);
  numaaff::node_arenas arenas;
  EXPECT_EQ(arenas.nodes(), numaaff_test::sysfs_cpu_nodes());
  for (node_id n : arenas.nodes()) {
    EXPECT_EQ(arenas.run_on(n, kernel_node_here).get(), n);
    std::atomic<int> elsewhere{0};
    arenas.execute(n, [&] {
      tbb::parallel_for(0, 256, [&](int) {
        if (kernel_node_here() != n) elsewhere.fetch_add(1);
      });
    });
    EXPECT_EQ(elsewhere.load(), 0) << "node " << n;
  }
}

}  // namespace
