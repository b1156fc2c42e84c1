// Topology on a real multi-node kernel (inside the emulated VM): numaaff's view equals the
// kernel's, current_node() follows the thread, and a process started under numactl sees only
// the node it was given.
#include <numaaff/homenode.hpp>
#include <numaaff/topology.hpp>

#include "../common/numa_test.hpp"
#include "../common/process.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

TEST(TopologyNuma, MatchesTheKernel) {
  NUMAAFF_REQUIRE_NODES(2);
  const numaaff::topology& t = numaaff::topology::system();
  EXPECT_EQ(t.nodes(), numaaff_test::sysfs_nodes());
  EXPECT_FALSE(t.is_restricted()) << t.restriction();
  EXPECT_EQ(t.distances_from(), numaaff::distance_source::firmware);
  for (int n : t.nodes()) {
    EXPECT_EQ(t.cpus_of(n), numaaff_test::sysfs_cpus_of(n)) << "node " << n;
    const std::vector<int> row = numaaff_test::sysfs_distances(n);
    for (std::size_t j = 0; j < row.size(); ++j) EXPECT_EQ(t.distance(n, t.nodes()[j]), row[j]);
    EXPECT_GT(t.memory_of(n), 64u << 20);
    const std::vector<int> order = t.nodes_by_distance(n);
    EXPECT_EQ(order.front(), n);
    for (std::size_t k = 1; k < order.size(); ++k) EXPECT_LE(t.distance(n, order[k - 1]), t.distance(n, order[k]));
  }
}

// Memory-only nodes (the tiered guest's nodes without CPUs) are nodes, with memory and
// distances, but not CPU nodes: cpu_nodes() is exactly the kernel's nodes with a cpulist.
TEST(TopologyNuma, CpuNodesAreTheNodesWithCpus) {
  NUMAAFF_REQUIRE_NODES(2);
  const numaaff::topology& t = numaaff::topology::system();
  std::vector<int> with_cpus;
  for (int n : numaaff_test::sysfs_nodes()) {
    if (!numaaff_test::sysfs_cpus_of(n).empty()) with_cpus.push_back(n);
    EXPECT_EQ(t.has_cpus(n), !numaaff_test::sysfs_cpus_of(n).empty()) << "node " << n;
    EXPECT_GT(t.memory_of(n), 64u << 20) << "node " << n;
  }
  EXPECT_EQ(t.cpu_nodes(), with_cpus);
  EXPECT_EQ(t.nodes(), numaaff_test::sysfs_nodes());
}

TEST(TopologyNuma, CurrentNodeFollowsTheThread) {
  NUMAAFF_REQUIRE_NODES(2);
  const numaaff::topology& t = numaaff::topology::system();
  for (int n : t.cpu_nodes()) {
    int seen = -2;
    std::thread th([&] {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : t.cpus_of(n)) CPU_SET(static_cast<std::size_t>(c), &set);
      if (sched_setaffinity(0, sizeof set, &set) == 0) seen = numaaff::current_node();
    });
    th.join();
    EXPECT_EQ(seen, n);
  }
}

TEST(TopologyNuma, NumactlCpuNodeBindRestrictsTheView) {
  NUMAAFF_REQUIRE_NODES(2);
  int last = -1;
  for (int n : numaaff_test::sysfs_nodes())
    if (!numaaff_test::sysfs_cpus_of(n).empty()) last = n;
  const std::string out = numaaff_test::run_command("numactl -N " + std::to_string(last) + " " NUMAAFF_TOPOLOGY_PROBE);
  // The bound node, and the memory-only nodes: CPU binding leaves their memory usable.
  std::vector<int> view{last};
  for (int n : numaaff_test::sysfs_memory_only_nodes()) view.push_back(n);
  EXPECT_NE(out.find("nodes=" + numaaff::detail::format_list(view) + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("restricted=1"), std::string::npos) << out;
  const std::string free_run = numaaff_test::run_command(NUMAAFF_TOPOLOGY_PROBE);
  EXPECT_NE(free_run.find("restricted=0"), std::string::npos) << free_run;
}

TEST(TopologyNuma, PinThisThreadRunsTheThreadOnThatNodeWithThatHomenode) {
  NUMAAFF_REQUIRE_NODES(2);
  for (int n : numaaff_test::sysfs_nodes()) {
    if (numaaff_test::sysfs_cpus_of(n).empty()) continue;
    std::thread([n] {
      numaaff::pin_this_thread(n);
      EXPECT_EQ(numaaff::this_homenode(), n);
      for (int i = 0; i < 50; ++i) {  // wherever the scheduler puts it, it is on node n
        unsigned cpu = 0, node = 0;
        ASSERT_EQ(getcpu(&cpu, &node), 0);
        ASSERT_EQ(static_cast<int>(node), n) << "cpu " << cpu;
        sched_yield();
      }
    }).join();
  }
}

}  // namespace
