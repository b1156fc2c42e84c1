// Proves the multi-node rig itself, with raw kernel interfaces only: the guest has the nodes
// and distances the rig was asked for (as hwloc and numactl both see them), pages really move
// between nodes, a thread bound to a node's CPU runs there, and a node's memory is really
// limited to its size.
#include "../common/numa_test.hpp"
#include "../common/process.hpp"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using numaaff_test::query_pages;
using numaaff_test::sysfs_cpus_of;
using numaaff_test::sysfs_nodes;

// The matrix the rig configured, from NUMAAFF_VM_DISTANCES ("10,20;20,10").
std::vector<std::vector<int>> configured_distances() {
  std::vector<std::vector<int>> m;
  const char* spec = std::getenv("NUMAAFF_VM_DISTANCES");
  if (spec == nullptr) return m;
  std::stringstream rows(spec);
  std::string row;
  while (std::getline(rows, row, ';')) {
    std::vector<int> r;
    std::stringstream cells(row);
    std::string cell;
    while (std::getline(cells, cell, ',')) r.push_back(std::stoi(cell));
    m.push_back(r);
  }
  return m;
}

TEST(Rig, HwlocAndNumactlSeeTheConfiguredNodesAndDistances) {
  NUMAAFF_REQUIRE_NODES(2);
  const auto expected = configured_distances();
  const int nodes = numaaff_test::vm_int("NUMAAFF_VM_NODES", static_cast<int>(sysfs_nodes().size()));
  ASSERT_FALSE(expected.empty()) << "NUMAAFF_VM_DISTANCES not set: run under tests/vm/run-numa-suite";
  ASSERT_EQ(static_cast<int>(expected.size()), nodes);

  hwloc_topology_t t = nullptr;
  ASSERT_EQ(hwloc_topology_init(&t), 0);
  ASSERT_EQ(hwloc_topology_load(t), 0);
  EXPECT_EQ(hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE), nodes);
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  ASSERT_EQ(hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, &d, 0, 0), 0);
  ASSERT_EQ(nr, 1u);
  ASSERT_EQ(static_cast<int>(d->nbobjs), nodes);
  for (unsigned i = 0; i < d->nbobjs; ++i)
    for (unsigned j = 0; j < d->nbobjs; ++j)
      EXPECT_EQ(static_cast<int>(d->values[i * d->nbobjs + j]), expected[d->objs[i]->os_index][d->objs[j]->os_index])
          << "hwloc distance " << i << "->" << j;
  hwloc_distances_release(t, d);
  hwloc_topology_destroy(t);

  const std::string numactl = numaaff_test::run_command("numactl -H");
  EXPECT_NE(numactl.find("available: " + std::to_string(nodes) + " nodes"), std::string::npos) << numactl;
  std::stringstream lines(numactl.substr(numactl.find("node distances:")));
  std::string line;
  std::getline(lines, line);  // "node distances:"
  std::getline(lines, line);  // header
  for (int i = 0; i < nodes; ++i) {
    ASSERT_TRUE(std::getline(lines, line)) << numactl;
    std::stringstream cells(line.substr(line.find(':') + 1));
    for (int j = 0; j < nodes; ++j) {
      int v = 0;
      cells >> v;
      EXPECT_EQ(v, expected[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) << "numactl " << i << "->" << j;
    }
  }
  EXPECT_EQ(numaaff_test::sysfs_distances(nodes - 1), expected.back());
}

TEST(Rig, RawMovePagesMovesEveryPageAndKeepsTheData) {
  NUMAAFF_REQUIRE_NODES(2);
  const int target = sysfs_nodes().back();
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t count = 256;
  char* p = static_cast<char*>(mmap(nullptr, count * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  madvise(p, count * ps, MADV_NOHUGEPAGE);
  for (std::size_t i = 0; i < count * ps; ++i) p[i] = static_cast<char>(i * 7 + 3);
  std::vector<void*> pages(count);
  std::vector<int> dest(count, target), status(count, -1);
  for (std::size_t i = 0; i < count; ++i) pages[i] = p + i * ps;
  ASSERT_EQ(move_pages(0, count, pages.data(), dest.data(), status.data(), MPOL_MF_MOVE), 0) << std::strerror(errno);
  const auto placed = query_pages(p, count * ps);
  EXPECT_EQ(placed.on(target), count);
  for (std::size_t i = 0; i < count * ps; ++i) ASSERT_EQ(p[i], static_cast<char>(i * 7 + 3)) << "byte " << i;
  munmap(p, count * ps);
}

TEST(Rig, ThreadBoundToEachNodeRunsThere) {
  NUMAAFF_REQUIRE_NODES(2);
  for (int node : numaaff_test::sysfs_cpu_nodes()) {
    const std::vector<int> cpus = sysfs_cpus_of(node);
    ASSERT_FALSE(cpus.empty()) << "node " << node;
    std::vector<int> seen;
    std::thread t([&] {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(static_cast<std::size_t>(c), &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) return;
      for (int i = 0; i < 20; ++i) {
        seen.push_back(sched_getcpu());
        sched_yield();
      }
    });
    t.join();
    ASSERT_EQ(seen.size(), 20u);
    for (int c : seen) EXPECT_EQ(numaaff_test::sysfs_node_of_cpu(c), node) << "cpu " << c;
  }
}

// A child binds its memory to one node and touches more than the node holds: it must be
// stopped (OOM kill) before it gets there, because nothing may spill to another node.
TEST(Rig, NodeMemoryLimitIsReal) {
  NUMAAFF_REQUIRE_NODES(2);
  const int target = sysfs_nodes().back();
  const long node_mib = numaaff_test::vm_int("NUMAAFF_VM_MEM_PER_NODE", 256);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    unsigned long mask = 1UL << target;
    if (set_mempolicy(MPOL_BIND, &mask, sizeof(mask) * 8) != 0) _exit(3);
    const std::size_t mib = 1 << 20;
    const std::size_t total = static_cast<std::size_t>(node_mib + 32) * mib;
    char* p = static_cast<char*>(mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) _exit(4);
    for (std::size_t off = 0; off < total; off += mib) {
      std::memset(p + off, 1, mib);
      const int done = static_cast<int>(off / mib) + 1;
      if (write(fds[1], &done, sizeof done) != sizeof done) _exit(5);
    }
    _exit(0);  // touched more than the node has: the limit is not real
  }
  close(fds[1]);
  int last = 0, v = 0;
  while (read(fds[0], &v, sizeof v) == sizeof v) last = v;
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status)) << "child exited normally with " << WEXITSTATUS(status) << " after touching "
                                   << last << " MiB bound to node " << target;
  EXPECT_LT(last, node_mib) << "MiB placed on a " << node_mib << " MiB node";
  EXPECT_GT(last, node_mib / 4) << "the child died long before filling the node";
}

}  // namespace
