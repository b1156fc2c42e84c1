// 02_placement: memory goes where numaaff says, moves when asked, and follows its next toucher.
//
// On every node: a node_vector is allocated there; then one buffer is moved node to node with
// move_to; then an "AMR phase change": a buffer filled by one thread is armed with
// affinity_on_next_touch and each node's thread touches its part. After each step a table in
// the style of numa_test shows the share of pages per node, read back with where().
// On a one-node machine every row says 100% on node 0: run it in the emulated VM
// (tests/vm/numaaff-vm -- build/.../02_placement) to see several nodes.
//
// Usage: 02_placement [MiB per buffer, default 16]
#include <numaaff/numaaff.hpp>

#include <sched.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

void run_on(numaaff::node_id node, const std::vector<int>& cpus_of_node) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus_of_node) CPU_SET(static_cast<std::size_t>(c), &set);
  sched_setaffinity(0, sizeof set, &set);
  numaaff::set_homenode(node);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 16;
  if (argc > 2 || (argc == 2 && (std::atoi(argv[1]) <= 0 || std::atoi(argv[1]) > 4096))) {
    std::fprintf(stderr, "usage: %s [MiB per buffer, 1..4096]\n", argv[0]);
    return 2;
  }
  if (argc == 2) mib = static_cast<std::size_t>(std::atoi(argv[1]));
  try {
    const numaaff::topology& topo = numaaff::topology::system();
    const std::vector<numaaff::node_id>& nodes = topo.nodes();
    const std::size_t bytes = mib << 20;
    std::printf("%zu node(s); buffers of %zu MiB; placement effective: %s\n\n", nodes.size(), mib,
                numaaff::system_report().placement_effective() ? "yes" : "no");

    // 1. Allocators: one vector per node.
    std::vector<std::pair<std::string, numaaff::placement>> rows;
    std::vector<numaaff::node_vector<char>> per_node;
    for (numaaff::node_id n : nodes) {
      per_node.emplace_back(bytes, 1, numaaff::node_allocator<char>(n));
      rows.emplace_back("node_vector(" + std::to_string(n) + ")", numaaff::where(per_node.back().data(), bytes));
    }
    std::printf("1. node_allocator: each vector on its node\n%s\n", numaaff::placement_table(rows).c_str());

    // 2. move_to: one buffer visits every node.
    rows.clear();
    numaaff::node_vector<char> wanderer(bytes, 2, numaaff::node_allocator<char>(nodes.front()));
    for (numaaff::node_id n : nodes) {
      const numaaff::move_result r = numaaff::move_to(wanderer.data(), bytes, n);
      rows.emplace_back("move_to(" + std::to_string(n) + "): moved " + std::to_string(r.moved),
                        numaaff::where(wanderer.data(), bytes));
    }
    std::printf("2. move_to: the same buffer, moved node to node\n%s\n", numaaff::placement_table(rows).c_str());

    // 3. Phase change: filled on the first node, then each node's thread takes its part.
    rows.clear();
    // A transparent huge page migrates whole: if one 2 MiB page held parts of two owners, the
    // last toucher would take all of it. Parts smaller than 2 MiB therefore need THP off for
    // the buffer, before its first touch.
    numaaff::node_allocator<char> on_first(nodes.front());
    char* grid = on_first.allocate(bytes);
    madvise(grid, bytes, MADV_NOHUGEPAGE);
    std::memset(grid, 3, bytes);
    rows.emplace_back("before the phase change", numaaff::where(grid, bytes));
    numaaff::reset_next_touch_stats();
    numaaff::affinity_on_next_touch(grid, bytes);
    const std::size_t part = bytes / nodes.size();
    std::vector<std::thread> owners;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      owners.emplace_back([&, i] {
        run_on(nodes[i], topo.cpus_of(nodes[i]));
        for (std::size_t b = i * part; b < (i + 1) * part; b += 4096) grid[b] = static_cast<char>(grid[b] + 1);
      });
    }
    for (std::thread& t : owners) t.join();
    for (std::size_t i = 0; i < nodes.size(); ++i)
      rows.emplace_back("part " + std::to_string(i) + " after, touched on node " + std::to_string(nodes[i]),
                        numaaff::where(grid + i * part, part));
    const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
    std::printf("3. affinity_on_next_touch: an AMR-style phase change\n%s", numaaff::placement_table(rows).c_str());
    std::printf("   %llu faults, %llu chunks migrated, %llu pages moved, %llu failed, %.1f ms in the handler\n",
                static_cast<unsigned long long>(s.faults), static_cast<unsigned long long>(s.chunks_migrated),
                static_cast<unsigned long long>(s.pages_moved), static_cast<unsigned long long>(s.pages_failed),
                static_cast<double>(s.handler_time.count()) / 1e6);
    on_first.deallocate(grid, bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
