// tbb_arenas: a oneTBB code that keeps each node's work and data together. node_arenas holds
// one tbb::task_arena per node, addressed by the kernel's node number (oneTBB numbers nodes by
// hwloc's logical index; tbb_numa_id() converts, and only there). run_on(node, f) runs a task
// on a thread of that node; execute(node, f) runs f, and the parallel algorithms inside it, on
// that node's threads, so a tbb::parallel_for there writes an array held on the node by a
// node_allocator with that node's CPUs only.
// Asserted on any machine: the conversion round-trips, every task and every loop body of a
// node's arena runs on a CPU of that node (each arena pins its threads whether or not oneTBB
// found its tbbbind library), the loop writes every element, and the array's pages are on the
// node where the placement can be known.
// Prints one line per node and "tbb_arenas: ok".
#include <numaaff/numaaff.hpp>
#include <numaaff/tbb.hpp>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tbb_arenas: FAILED: %s\n", what);
    std::exit(1);
  }
}

// What one node's part of main() must have done.
void check_node(numaaff::node_id node, numaaff::node_id ran_on, int off_node,
                const numaaff::node_vector<double>& part) {
  const numaaff::placement p = numaaff::where(part.data(), part.size() * sizeof(double));
  std::printf("node %d (oneTBB NUMA id %d): task ran on node %d; its array: %s\n", node, numaaff::tbb_numa_id(node),
              ran_on, p.to_string().c_str());
  require(numaaff::node_of_tbb_numa_id(numaaff::tbb_numa_id(node)) == node, "tbb_numa_id round-trips");
  require(ran_on == node, "run_on runs the task on the node's CPUs");
  require(off_node == 0, "execute runs the loop on the node's CPUs");
  for (std::size_t i = 0; i < part.size(); ++i)
    require(part[i] == static_cast<double>(i), "the loop wrote every element");
  require(p.unpopulated() == 0, "every page is written");
  if (numaaff::topology::system().node_count() == 1 || !numaaff::system_report().numa_calls_forbidden())
    require(p.pages_on(node) == p.total(), "the node's array is on the node");
}

}  // namespace

int main() {
  const std::size_t n = 1 << 19;  // 4 MiB of doubles per node

  //! [arenas]
  // One arena per node with CPUs this process may use, each sized to that node's CPUs.
  numaaff::node_arenas arenas;
  std::printf("oneTBB enforces NUMA constraints itself: %s\n", numaaff::tbb_binds() ? "yes" : "no (numaaff pins)");
  for (numaaff::node_id node : arenas.nodes()) {
    // A task on one of the node's threads.
    const numaaff::node_id ran_on = arenas.run_on(node, [] { return numaaff::current_node(); }).get();

    // The node's data, and a parallel loop over it by the node's threads only.
    numaaff::node_vector<double> part(n, 0.0, numaaff::node_allocator<double>(node));
    std::atomic<int> off_node{0};
    arenas.execute(node, [&] {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n), [&](const tbb::blocked_range<std::size_t>& r) {
        if (numaaff::current_node() != node) off_node.fetch_add(1, std::memory_order_relaxed);
        for (std::size_t i = r.begin(); i != r.end(); ++i) part[i] = static_cast<double>(i);
      });
    });
    check_node(node, ran_on, off_node.load(), part);
  }
  //! [arenas]
  std::puts("tbb_arenas: ok");
  return 0;
}
