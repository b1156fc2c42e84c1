// tour: the README's short tour, compiled and run here so that it stays true. Memory on a
// node through an STL and a pmr container, moved at a phase change and checked with where(),
// then armed for next touch. It exits with status 1 when a page of the moved array is not
// counted exactly once, or, where placement works, is not on the target node.
//! [tour]
#include <numaaff/numaaff.hpp>
#include <cstdio>
#include <vector>

int main() {
  const numaaff::topology& topo = numaaff::topology::system();   // discovered once, cpuset-aware
  const numaaff::node_id first = topo.nodes().front(), last = topo.nodes().back();

  // Memory on a node, for STL and pmr containers alike.
  numaaff::node_vector<double> a(1 << 20, 0.0, numaaff::node_allocator<double>(last));
  numaaff::node_resource on_last(last);
  std::pmr::vector<int> b(1 << 20, 0, &on_last);

  // Move it when the phase changes, and check where it is.
  const numaaff::move_result r = numaaff::move_to(a.data(), a.size() * sizeof(double), first);
  const numaaff::placement p = numaaff::where(a.data(), a.size() * sizeof(double));
  std::printf("moved %zu pages, %zu already there; %.0f%% on node %d\n", r.moved, r.already_there,
              100 * p.fraction_on(first), first);

  // Or let the next thread that touches each chunk pull it to its own node.
  numaaff::affinity_on_next_touch(b.data(), b.size() * sizeof(int));
  b[0] = 1;  // this thread's node now holds that chunk

  // Every page is counted once: moved, already there, never written, or failed.
  if (r.moved + r.already_there + r.unpopulated + r.failed != r.total || p.total() != r.total) return 1;
  if (!numaaff::system_report().placement_effective()) {   // one node, or migration forbidden
    std::puts("placement calls are correct no-ops here");
    return 0;
  }
  return r.complete() && p.fraction_on(first) == 1.0 ? 0 : 1;
}
//! [tour]
