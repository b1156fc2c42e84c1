// 01_topology: what numaaff sees on this machine and what it will do about it.
//
// Prints the capability report (node count, whether pages may be migrated, which kernel
// features exist, and numaaff's consequence for each) followed by the topology in
// `numactl -H` form: nodes, CPUs, memory and the distance matrix.
//
// Usage: 01_topology [--topology SPEC]
//   SPEC is anything NUMAAFF_TOPOLOGY accepts (e.g. "pack:2 numa:2 core:2 pu:1" or an XML
//   file), to look at a machine one does not have. Without it, this machine is shown.
#include <numaaff/numaaff.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace {
int usage(const char* prog) {
  std::fprintf(stderr, "usage: %s [--topology SPEC]\n", prog);
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  std::string spec;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--topology") == 0 && i + 1 < argc) {
      spec = argv[++i];
    } else {
      return usage(argv[0]);
    }
  }
  try {
    std::printf("numaaff %s\n\n", numaaff::version());
    if (!spec.empty()) {
      const numaaff::topology topo = numaaff::topology::parse(spec, "--topology");
      std::printf("%s", topo.to_string().c_str());
      return 0;
    }
    std::printf("%s\n", numaaff::system_report().to_string().c_str());
    std::printf("%s", numaaff::topology::system().to_string().c_str());
    std::printf("\nthis thread runs on cpu %d, node %d\n", numaaff::current_cpu(), numaaff::current_node());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
