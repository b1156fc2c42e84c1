// Fuzz target: topologies from text. The first byte chooses the form (synthetic description
// or hwloc XML), the rest is the text. A topology is built or std::invalid_argument is thrown;
// a built one is consistent: ascending nodes, distance 10 to itself and more to others, CPUs
// only on CPU nodes, and every query answers for every node.
#include <numaaff/topology.hpp>

#include "fuzz_common.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdlib.h>
#include <stdexcept>
#include <string>
#include <vector>

// hwloc's own XML parser, not its libxml2 plugin: in the process for good (a plugin is
// unloaded before leaks are reported, leaving no frame to tell hwloc's leaks from ours).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("HWLOC_LIBXML_IMPORT", "0", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 65536) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool xml = data[0] & 1;
  if (!xml && !numaaff_fuzz::small_synthetic(text)) return 0;
  try {
    const numaaff::topology t = xml ? numaaff::topology::from_xml(text) : numaaff::topology::from_synthetic(text);
    const auto& nodes = t.nodes();
    if (nodes.empty() || !std::is_sorted(nodes.begin(), nodes.end()) || t.node_count() != nodes.size()) std::abort();
    if (t.is_this_system()) std::abort();
    // Every query is checked from up to 64 nodes spread over the list (all of them on smaller
    // machines): from every node, a description of thousands of nodes is quadratic work under
    // the sanitizers and times the fuzzer out without testing anything more.
    const std::size_t stride = nodes.size() <= 64 ? 1 : nodes.size() / 64;
    for (std::size_t i = 0; i < nodes.size(); i += stride) {
      const numaaff::node_id a = nodes[i];
      if (t.distance(a, a) != numaaff::local_distance) std::abort();
      for (numaaff::node_id b : nodes)
        if (a != b && t.distance(a, b) <= numaaff::local_distance) std::abort();
      (void)t.cpus_of(a);
      // Nearest first: the node itself, then every other node once, by rising distance.
      const auto order = t.nodes_by_distance(a);
      if (order.size() != nodes.size() || order.front() != a) std::abort();
      for (std::size_t k = 2; k < order.size(); ++k)
        if (t.distance(a, order[k - 1]) > t.distance(a, order[k])) std::abort();
      auto sorted = order;
      std::sort(sorted.begin(), sorted.end());
      if (sorted != nodes) std::abort();
    }
    for (numaaff::node_id c : t.cpu_nodes())
      if (t.cpus_of(c).empty() || std::find(nodes.begin(), nodes.end(), c) == nodes.end()) std::abort();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
