// Helper for test_topology and the multi-node suite: prints what topology::system() sees, one
// key=value per line, so a test can start it under taskset, numactl or an environment.
#include <numaaff/topology.hpp>

#include <cstdio>
#include <exception>

int main() {
  try {
    const numaaff::topology& t = numaaff::topology::system();
    std::printf("nodes=%s\n", numaaff::detail::format_list(t.nodes()).c_str());
    std::printf("cpus=%s\n", numaaff::detail::format_list(t.cpus()).c_str());
    std::printf("restricted=%d\n", t.is_restricted() ? 1 : 0);
    std::printf("restriction=%s\n", t.restriction().c_str());
    std::printf("this_system=%d\n", t.is_this_system() ? 1 : 0);
    if (t.node_count() > 1) std::printf("distance01=%d\n", t.distance(t.nodes()[0], t.nodes()[1]));
    for (numaaff::node_id n : t.nodes())
      std::printf("node%d=%s\n", n, numaaff::detail::format_list(t.cpus_of(n)).c_str());
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
