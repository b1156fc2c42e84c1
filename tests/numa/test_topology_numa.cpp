// Topology on a real multi-node kernel (inside the emulated VM): numaaff's view equals the
// kernel's, current_node() follows the thread, and a process started under numactl sees only
// the node it was given.
#include <numaaff/homenode.hpp>
#include <numaaff/topology.hpp>

#include "../common/numa_test.hpp"
#include "../common/process.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
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

// Memory attributes equal what the kernel shows from the firmware's HMAT (sysfs access0: the
// best initiators of each target and their read bandwidth and latency), and the rankings
// follow them; without an HMAT (every topology but tiered) the rankings are the distances'.
TEST(TopologyNuma, MemoryAttributesAreTheFirmwaresAndRankTheTargets) {
  NUMAAFF_REQUIRE_NODES(2);
  const numaaff::topology& t = numaaff::topology::system();
  const auto read = [](const std::string& path) -> std::uint64_t {
    std::ifstream in(path);
    std::uint64_t v = 0;
    return in >> v ? v : 0;
  };
  bool any = false;
  for (int i : t.cpu_nodes()) {
    int best_bw = -1, best_lat = -1;
    std::uint64_t max_bw = 0, min_lat = 0;
    for (int target : t.nodes()) {
      const std::string dir = "/sys/devices/system/node/node" + std::to_string(target) + "/access0/initiators/";
      if (!std::ifstream(dir + "read_bandwidth") || access((dir + "node" + std::to_string(i)).c_str(), F_OK) != 0) continue;
      const std::uint64_t bw = read(dir + "read_bandwidth"), lat = read(dir + "read_latency");
      any = true;
      EXPECT_EQ(t.bandwidth(i, target), bw) << i << " -> " << target;
      EXPECT_EQ(t.latency(i, target), lat) << i << " -> " << target;
      if (bw > max_bw) max_bw = bw, best_bw = target;
      if (best_lat < 0 || lat < min_lat) min_lat = lat, best_lat = target;
    }
    if (best_bw >= 0) {
      EXPECT_EQ(t.best_target(numaaff::memory_attribute::bandwidth, i), best_bw) << "from node " << i;
      EXPECT_EQ(t.best_target(numaaff::memory_attribute::latency, i), best_lat) << "from node " << i;
    } else {
      EXPECT_EQ(t.targets_by(numaaff::memory_attribute::bandwidth, i), t.nodes_by_distance(i)) << "from node " << i;
      EXPECT_EQ(t.targets_by(numaaff::memory_attribute::latency, i), t.nodes_by_distance(i)) << "from node " << i;
    }
  }
  EXPECT_EQ(t.has_memory_attributes(), any);
  // The tiered guest has an HMAT; the others have none.
  EXPECT_EQ(any, !numaaff_test::sysfs_memory_only_nodes().empty());
  for (int target : t.nodes()) {
    const std::vector<int> from = t.initiators_of(target);
    EXPECT_EQ(from.size(), t.cpu_nodes().size());
    if (t.has_cpus(target) && !any) {
      EXPECT_EQ(from.front(), target);
    }
  }
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

// numactl --membind seen from a process that already has a second thread (an MPI rank: hwloc
// cannot answer for the whole process then): memory bound to one node restricts the view; a
// preferred node (numaaff-run -n) does not; CPUs of one node with memory bound to another keep
// the CPUs' node (the binding leaves no node to run on otherwise).
TEST(TopologyNuma, MemoryBindingIsSeenInAThreadedProcess) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  const std::vector<int> nodes = numaaff_test::sysfs_cpu_nodes();
  const std::string a = std::to_string(nodes.front()), b = std::to_string(nodes.back());
  const std::string bound = numaaff_test::run_command("numactl --membind=" + a + " " NUMAAFF_TOPOLOGY_PROBE " threaded");
  EXPECT_NE(bound.find("nodes=" + a + "\n"), std::string::npos) << bound;
  EXPECT_NE(bound.find("memory binding"), std::string::npos) << bound;
  EXPECT_NE(bound.find("unusable=0"), std::string::npos) << bound;
  const std::string preferred = numaaff_test::run_command("numactl --preferred=" + a + " " NUMAAFF_TOPOLOGY_PROBE " threaded");
  EXPECT_NE(preferred.find("restricted=0"), std::string::npos) << preferred;
  const std::string crossed =
      numaaff_test::run_command("numactl --cpunodebind=" + b + " --membind=" + a + " " NUMAAFF_TOPOLOGY_PROBE " threaded");
  EXPECT_NE(crossed.find("unusable=0"), std::string::npos) << crossed;
  EXPECT_NE(crossed.find("node" + b + "="), std::string::npos) << crossed;
  EXPECT_EQ(crossed.find("memory binding"), std::string::npos) << crossed;
}

// A cgroup whose cpuset.mems holds only a memory-only node leaves no node with both CPUs and
// memory: the view says it is unusable and names the cgroup (the MPI bridge's error).
TEST(TopologyNuma, ACgroupWithOnlyMemoryOnlyNodesIsAnUnusableRestriction) {
  NUMAAFF_REQUIRE_MEMORY_TIERS();
  const std::string m = std::to_string(numaaff_test::sysfs_memory_only_nodes().front());
  const std::string out = numaaff_test::run_command(
      "sh -c 'cg=/sys/fs/cgroup; ([ -e $cg/cgroup.controllers ] || mount -t cgroup2 none $cg) && echo +cpuset > $cg/cgroup.subtree_control && "
      "mkdir -p $cg/numaaff_test && echo " + m + " > $cg/numaaff_test/cpuset.mems && echo $$ > $cg/numaaff_test/cgroup.procs && "
      "exec " NUMAAFF_TOPOLOGY_PROBE " threaded'");
  EXPECT_NE(out.find("unusable=1"), std::string::npos) << out;
  EXPECT_NE(out.find("cgroup mems"), std::string::npos) << out;
  EXPECT_NE(out.find("memory nodes " + m + ")"), std::string::npos) << out;
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
