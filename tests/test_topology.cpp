// Topology: synthetic machines of 1, 2, 4 and 8 nodes, distance overrides and their
// validation, XML with a firmware-like distance matrix, the real host, and a child started
// under `taskset -c 1`.
#include <numaaff/topology.hpp>

#include "common/placement_check.hpp"
#include "common/exceptions.hpp"
#include "common/process.hpp"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <sched.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

using numaaff::topology;

std::vector<int> iota_vec(int from, int count) {
  std::vector<int> v;
  for (int i = 0; i < count; ++i) v.push_back(from + i);
  return v;
}

struct synthetic_case {
  const char* description;
  int nodes;
  int cpus_per_node;
};

class TopologySynthetic : public ::testing::TestWithParam<synthetic_case> {};

TEST_P(TopologySynthetic, NodesCpusAndDefaultDistances) {
  const synthetic_case c = GetParam();
  const topology t = topology::from_synthetic(c.description);
  EXPECT_FALSE(t.is_this_system());
  EXPECT_EQ(t.source(), numaaff::topology_source::synthetic);
  EXPECT_FALSE(t.is_restricted());
  ASSERT_EQ(t.node_count(), static_cast<std::size_t>(c.nodes));
  EXPECT_EQ(t.nodes(), iota_vec(0, c.nodes));
  EXPECT_EQ(t.cpus(), iota_vec(0, c.nodes * c.cpus_per_node));
  for (int n = 0; n < c.nodes; ++n) {
    EXPECT_EQ(t.cpus_of(n), iota_vec(n * c.cpus_per_node, c.cpus_per_node)) << "node " << n;
    EXPECT_GT(t.memory_of(n), 0u);
    for (int cpu : t.cpus_of(n)) EXPECT_EQ(t.node_of_cpu(cpu), n);
    for (int m = 0; m < c.nodes; ++m) EXPECT_EQ(t.distance(n, m), n == m ? 10 : 20);
  }
  EXPECT_EQ(t.distances_from(), numaaff::distance_source::defaults);
}

INSTANTIATE_TEST_SUITE_P(Machines, TopologySynthetic,
                         ::testing::Values(synthetic_case{"numa:1 core:2 pu:1", 1, 2},
                                           synthetic_case{"pack:2 numa:1 core:2 pu:1", 2, 2},
                                           synthetic_case{"pack:2 numa:2 core:2 pu:1", 4, 2},
                                           synthetic_case{"pack:4 numa:2 core:1 pu:2", 8, 2}),
                         [](const ::testing::TestParamInfo<synthetic_case>& param_info) {
                           return std::to_string(param_info.param.nodes) + "_nodes";
                         });

TEST(Topology, OverrideUniformDistancesLikeThe2002Scheduler) {
  const topology t = topology::from_synthetic("pack:2 numa:2 core:1 pu:1").with_distances("local=10,remote=100");
  EXPECT_EQ(t.distances_from(), numaaff::distance_source::user);
  for (int a : t.nodes())
    for (int b : t.nodes()) EXPECT_EQ(t.distance(a, b), a == b ? 10 : 100);
}

TEST(Topology, AsymmetricMatrixAndDistanceOrder) {
  const topology base = topology::from_synthetic("pack:4 numa:1 core:1 pu:1");
  const std::vector<std::vector<int>> m = {{10, 20, 30, 40}, {25, 10, 20, 30}, {30, 20, 10, 20}, {40, 30, 15, 10}};
  const topology t = base.with_distances(m);
  EXPECT_EQ(t.distance_matrix(), m);
  EXPECT_EQ(t.distance(0, 1), 20);
  EXPECT_EQ(t.distance(1, 0), 25);  // not mirrored
  EXPECT_EQ(t.nodes_by_distance(0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(t.nodes_by_distance(3), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(t.nodes_by_distance(1), (std::vector<int>{1, 2, 0, 3}));
  // The string form gives the same matrix.
  EXPECT_EQ(base.with_distances("10,20,30,40; 25,10,20,30; 30,20,10,20; 40,30,15,10").distance_matrix(), m);
}

// Without firmware memory attributes (a synthetic topology has none) every ranking is the
// distance matrix's, nearest first; capacity ranks by memory, then distance.
TEST(Topology, MemoryRankingsFallBackToTheDistances) {
  const numaaff::topology t =
      numaaff::topology::from_synthetic("pack:2 numa:2 core:1 pu:1").with_distances("10,20,30,40;20,10,20,30;30,20,10,20;40,30,20,10");
  EXPECT_FALSE(t.has_memory_attributes());
  for (numaaff::node_id n : t.nodes()) {
    EXPECT_EQ(t.targets_by(numaaff::memory_attribute::bandwidth, n), t.nodes_by_distance(n));
    EXPECT_EQ(t.targets_by(numaaff::memory_attribute::latency, n), t.nodes_by_distance(n));
    EXPECT_EQ(t.targets_by(numaaff::memory_attribute::capacity, n), t.nodes_by_distance(n));  // equal memory
    EXPECT_EQ(t.best_target(numaaff::memory_attribute::bandwidth, n), n);
    EXPECT_EQ(t.bandwidth(n, n), 0u);
    EXPECT_EQ(t.latency(n, n), 0u);
    EXPECT_EQ(t.initiators_of(n).front(), n);
  }
  EXPECT_EQ(t.targets_by(numaaff::memory_attribute::bandwidth, 1), (std::vector<numaaff::node_id>{1, 0, 2, 3}));
  EXPECT_EQ(t.initiators_of(3), (std::vector<numaaff::node_id>{3, 2, 1, 0}));
  EXPECT_EQ(t.cpu_nodes(), t.nodes());
  EXPECT_THROW((void)t.bandwidth(0, 9), std::invalid_argument);
  EXPECT_THROW((void)t.targets_by(numaaff::memory_attribute::latency, 9), std::invalid_argument);
  EXPECT_NE(t.to_string().find("memory attributes: none from the firmware"), std::string::npos) << t.to_string();
}

TEST(Topology, BadDistancesAreRejectedWithTheInputNamed) {
  const topology t = topology::from_synthetic("pack:2 numa:1 core:1 pu:1");
  const auto message_of = [](auto&& f) { return numaaff_test::what_of<std::invalid_argument>(f); };
  const std::string wrong_size = message_of([&] { (void)t.with_distances({{10, 20, 30}, {20, 10, 30}, {30, 30, 10}}); });
  EXPECT_NE(wrong_size.find("needs 2 rows"), std::string::npos) << wrong_size;
  const std::string diagonal = message_of([&] { (void)t.with_distances({{10, 20}, {20, 12}}); });
  EXPECT_NE(diagonal.find("to itself is 12"), std::string::npos) << diagonal;
  const std::string remote = message_of([&] { (void)t.with_distances({{10, 5}, {20, 10}}); });
  EXPECT_NE(remote.find("is 5"), std::string::npos) << remote;
  const std::string env = message_of([&] { (void)t.with_distances("10,2x;20,10", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(env.find("NUMAAFF_DISTANCES='10,2x;20,10'"), std::string::npos) << env;
  EXPECT_NE(env.find("'2x' is not a whole number"), std::string::npos) << env;
  EXPECT_NE(env.find("valid forms"), std::string::npos) << env;
  const std::string ragged = message_of([&] { (void)t.with_distances("10,20;20", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(ragged.find("row 1 (node 1) has 1 entries"), std::string::npos) << ragged;
  const std::string key = message_of([&] { (void)t.with_distances("local=10,far=30", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(key.find("far=30"), std::string::npos) << key;
  const std::string no_remote = message_of([&] { (void)t.with_distances("local=10", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(no_remote.find("'remote=' is missing"), std::string::npos) << no_remote;
  const std::string local = message_of([&] { (void)t.with_distances("local=12,remote=30", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(local.find("must be 10"), std::string::npos) << local;
  // Beyond an int: out of range, not "not a whole number" or "cannot read".
  const std::string huge = message_of([&] { (void)t.with_distances("10,99999999999;20,10", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(huge.find("'99999999999' is out of range"), std::string::npos) << huge;
  const std::string huge_remote = message_of([&] { (void)t.with_distances("local=10,remote=99999999999", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(huge_remote.find("'99999999999' is out of range"), std::string::npos) << huge_remote;
  const std::string sign = message_of([&] { (void)t.with_distances("10,+-20;20,10", "NUMAAFF_DISTANCES"); });
  EXPECT_NE(sign.find("'+-20' is not a whole number"), std::string::npos) << sign;
}

TEST(Topology, UnknownNodesAndCpusAreCallerErrors) {
  const topology t = topology::from_synthetic("pack:2 numa:1 core:1 pu:1");
  EXPECT_THROW((void)t.distance(0, 7), std::invalid_argument);
  EXPECT_THROW((void)t.cpus_of(-1), std::invalid_argument);
  EXPECT_THROW((void)t.memory_of(2), std::invalid_argument);
  EXPECT_THROW((void)t.nodes_by_distance(9), std::invalid_argument);
  EXPECT_THROW((void)t.node_of_cpu(2), std::invalid_argument);
  EXPECT_THROW((void)t.node_of_cpu(-1), std::invalid_argument);
  try {
    (void)t.distance(0, 7);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("node 7 is not in this topology (nodes: 0,1)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(t.has_node(7));
  EXPECT_TRUE(t.has_node(1));
}

TEST(Topology, ParseAcceptsEveryDocumentedFormAndRejectsGarbage) {
  EXPECT_EQ(topology::parse("synthetic:pack:2 numa:1 core:1 pu:1").node_count(), 2u);
  EXPECT_EQ(topology::parse("pack:3 numa:1 core:1 pu:1").node_count(), 3u);
  try {
    (void)topology::parse("banana:7", "NUMAAFF_TOPOLOGY");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("NUMAAFF_TOPOLOGY='banana:7'"), std::string::npos) << m;
    EXPECT_NE(m.find("valid forms"), std::string::npos) << m;
  }
  EXPECT_THROW((void)topology::parse("xml:/nonexistent/topo.xml", "NUMAAFF_TOPOLOGY"), std::invalid_argument);
  EXPECT_THROW((void)topology::parse("  ", "NUMAAFF_TOPOLOGY"), std::invalid_argument);
  EXPECT_THROW((void)topology::from_xml("<not xml"), std::invalid_argument);
}

// hwloc XML of a synthetic machine after `edit` changed it (as lstopo would write one of a
// machine whose firmware says more); "" if hwloc fails.
template <class Edit>
std::string xml_of(const char* synthetic, Edit&& edit) {
  hwloc_topology_t h = nullptr;
  if (hwloc_topology_init(&h) != 0) return "";
  std::string text;
  char* xml = nullptr;
  int len = 0;
  if (hwloc_topology_set_synthetic(h, synthetic) == 0 && hwloc_topology_load(h) == 0 && edit(h) &&
      hwloc_topology_export_xmlbuffer(h, &xml, &len, 0) == 0) {
    text = xml;
    hwloc_free_xmlbuffer(h, xml);
  }
  hwloc_topology_destroy(h);
  return text;
}

// An XML topology with a distance matrix stands for a machine whose firmware reports one.
TEST(Topology, XmlDistancesAreReadAsFirmwareDistances) {
  const std::string text = xml_of("pack:2 numa:1 core:2 pu:1", [](hwloc_topology_t h) {
    hwloc_obj_t objs[2] = {hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, 0), hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, 1)};
    hwloc_uint64_t values[4] = {10, 21, 21, 10};
    hwloc_distances_add_handle_t handle =
        hwloc_distances_add_create(h, "NUMALatency", HWLOC_DISTANCES_KIND_FROM_OS | HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0);
    return handle != nullptr && hwloc_distances_add_values(h, handle, 2, objs, values, 0) == 0 &&
           hwloc_distances_add_commit(h, handle, 0) == 0;
  });
  ASSERT_FALSE(text.empty());

  const topology t = topology::from_xml(text);
  EXPECT_FALSE(t.is_this_system());
  EXPECT_EQ(t.source(), numaaff::topology_source::xml);
  EXPECT_EQ(t.distances_from(), numaaff::distance_source::firmware);
  EXPECT_EQ(t.distance(0, 1), 21);
  EXPECT_EQ(t.cpus_of(1), (std::vector<int>{2, 3}));

  const std::string path = ::testing::TempDir() + "numaaff_topology.xml";
  std::ofstream(path) << text;
  const topology f = topology::parse(path);  // a bare existing path is XML
  EXPECT_EQ(f.distance(1, 0), 21);
  EXPECT_NE(f.description().find(path), std::string::npos);
  EXPECT_EQ(topology::parse("xml:" + path).node_count(), 2u);
  std::remove(path.c_str());
}

// hwloc's subtype of a NUMA node (HBM, NVM, GPUMemory, CXL-DRAM...) is the node's kind.
TEST(Topology, NodeKindIsHwlocsSubtype) {
  const std::string text = xml_of("pack:2 numa:1 core:1 pu:1", [](hwloc_topology_t h) {
    hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, 1)->subtype = strdup("HBM");  // hwloc frees it
    return true;
  });
  ASSERT_FALSE(text.empty());

  const topology t = topology::from_xml(text);
  EXPECT_EQ(t.kind_of(0), "");
  EXPECT_EQ(t.kind_of(1), "HBM");
  EXPECT_NE(t.to_string().find("node 1 cpus: 1 (HBM)"), std::string::npos) << t.to_string();
  EXPECT_THROW((void)t.kind_of(7), std::invalid_argument);
}

// NUMAAFF_MEMORY_ATTRIBUTES (with_memory_attributes) replaces the firmware's values: rankings
// follow it, the report says so, and a bad entry is named with the valid form.
TEST(Topology, MemoryAttributesOverride) {
  const topology base = topology::from_synthetic("pack:2 numa:2 core:1 pu:1").with_distances("10,20,30,40;20,10,20,30;30,20,10,20;40,30,20,10");
  const topology t = base.with_memory_attributes("0>0:bandwidth=20000,latency=80; 0>3:bandwidth=50000,latency=300;0>1:latency=90",
                                                 "NUMAAFF_MEMORY_ATTRIBUTES");
  EXPECT_EQ(t.memory_attributes_from(), numaaff::attribute_source::user);
  EXPECT_EQ(base.memory_attributes_from(), numaaff::attribute_source::firmware);
  EXPECT_TRUE(t.has_memory_attributes());
  EXPECT_EQ(t.bandwidth(0, 3), 50000u);
  EXPECT_EQ(t.latency(0, 3), 300u);
  EXPECT_EQ(t.bandwidth(0, 1), 0u);
  EXPECT_EQ(t.best_target(numaaff::memory_attribute::bandwidth, 0), 3);
  EXPECT_EQ(t.targets_by(numaaff::memory_attribute::bandwidth, 0), (std::vector<numaaff::node_id>{3, 0, 1, 2}));
  EXPECT_EQ(t.targets_by(numaaff::memory_attribute::latency, 0), (std::vector<numaaff::node_id>{0, 1, 3, 2}));
  EXPECT_EQ(t.initiators_of(3).front(), 0);
  EXPECT_NE(t.to_string().find("user override"), std::string::npos) << t.to_string();
  EXPECT_NE(t.to_string().find("node 0 -> node 3: 50000 MiB/s, 300 ns"), std::string::npos) << t.to_string();
  EXPECT_FALSE(t.with_memory_attributes("").has_memory_attributes());

  const auto message_of = [&](const std::string& spec) {
    return numaaff_test::what_of<std::invalid_argument>([&] { (void)base.with_memory_attributes(spec, "NUMAAFF_MEMORY_ATTRIBUTES"); });
  };
  for (const char* bad : {"0-3:bandwidth=1", "0>3", "0>3:bw=5", "0>3:bandwidth=0", "0>3:latency=-4", "0>3:latency=4x", "9>0:latency=1",
                          "0>9:latency=1"}) {
    const std::string m = message_of(bad);
    EXPECT_NE(m.find(std::string("NUMAAFF_MEMORY_ATTRIBUTES='") + bad + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("valid form"), std::string::npos) << m;
  }
}

TEST(Topology, HostMatchesTheKernel) {
  const topology& t = topology::system();
  EXPECT_TRUE(t.is_this_system());
  EXPECT_EQ(&t, &topology::system());  // discovered once
  EXPECT_EQ(t.nodes(), numaaff_test::sysfs_nodes());
  for (int n : t.nodes()) {
    for (int cpu : t.cpus_of(n)) EXPECT_EQ(numaaff_test::sysfs_node_of_cpu(cpu), n) << "cpu " << cpu;
    const std::vector<int> row = numaaff_test::sysfs_distances(n);
    ASSERT_EQ(row.size(), t.node_count());
    for (std::size_t j = 0; j < row.size(); ++j) EXPECT_EQ(t.distance(n, t.nodes()[j]), row[j]);
  }
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  EXPECT_EQ(static_cast<int>(t.cpus().size()), CPU_COUNT(&mask));
  EXPECT_EQ(numaaff::current_node(), numaaff_test::sysfs_node_of_cpu(numaaff::current_cpu()));
  std::error_code ec;
  EXPECT_GE(numaaff::current_node(ec), 0);
  EXPECT_FALSE(ec);
  const std::string text = t.to_string();
  EXPECT_NE(text.find("node distances:"), std::string::npos) << text;
}

// Runs the probe helper (tests/topology_probe.cpp) under a shell prefix and returns its output.
std::string run_probe(const std::string& prefix) {
  return numaaff_test::run_command(prefix + " " + NUMAAFF_TOPOLOGY_PROBE);
}

TEST(Topology, ChildUnderTasksetSeesOnlyItsCpu) {
  const std::vector<int> all = topology::system().cpus();
  if (all.size() < 2) GTEST_SKIP() << "needs two cpus";
  const int cpu = all.back();
  const std::string out = run_probe("taskset -c " + std::to_string(cpu));
  EXPECT_NE(out.find("cpus=" + std::to_string(cpu) + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("restricted=1"), std::string::npos) << out;
  EXPECT_NE(out.find("cpu binding"), std::string::npos) << out;
  const std::string free_run = run_probe("");
  EXPECT_NE(free_run.find("restricted=0"), std::string::npos) << free_run;
}

TEST(Topology, EnvironmentOverridesReachSystem) {
  const std::string out = run_probe("NUMAAFF_TOPOLOGY='pack:2 numa:2 core:1 pu:1' NUMAAFF_DISTANCES='local=10,remote=100'");
  EXPECT_NE(out.find("nodes=0-3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("this_system=0"), std::string::npos) << out;
  EXPECT_NE(out.find("distance01=100"), std::string::npos) << out;
  const std::string bad = run_probe("NUMAAFF_DISTANCES='10,20;20,10;x'");
  EXPECT_NE(bad.find("NUMAAFF_DISTANCES='10,20;20,10;x'"), std::string::npos) << bad;
  EXPECT_NE(bad.find("(exit status"), std::string::npos) << bad;
  const std::string bad_topo = run_probe("NUMAAFF_TOPOLOGY='numa:0x'");
  EXPECT_NE(bad_topo.find("NUMAAFF_TOPOLOGY='numa:0x'"), std::string::npos) << bad_topo;
}

}  // namespace
