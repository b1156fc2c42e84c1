// A consumer of the installed package: includes the umbrella header and uses the topology.
#include <numaaff/numaaff.hpp>

#include <cstdio>

int main() {
  const numaaff::topology& t = numaaff::topology::system();
  std::printf("numaaff %s: %zu node(s), this thread on node %d\n", numaaff::version(), t.node_count(),
              numaaff::current_node());
  return t.node_count() >= 1 && t.has_node(numaaff::current_node()) ? 0 : 1;
}
