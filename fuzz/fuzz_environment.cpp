// Fuzz target: every NUMAAFF_* value parser, and parse_list / parse_int beneath them. The input
// is split at NUL bytes into the values of the variables, in a fixed order. Each parser must
// accept a value or reject it with std::invalid_argument naming the variable; nothing else
// may escape, crash or hang, and an accepted value must mean what it says.
#include <numaaff/allocator.hpp>
#include <numaaff/thread_pool.hpp>
#include <numaaff/topology.hpp>

#include "fuzz_common.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<std::string> fields(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      out.emplace_back();
    } else {
      out.back().push_back(static_cast<char>(data[i]));
    }
  }
  return out;
}

/// Runs f; an std::invalid_argument must name `variable`.
template <class F>
void parses_or_names(const char* variable, F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find(variable) == std::string::npos) std::abort();
  }
}

const numaaff::topology& four_nodes() {
  static const numaaff::topology t = numaaff::topology::from_synthetic("pack:2 numa:2 core:2 pu:1");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::vector<std::string> v = fields(data, size);
  const auto at = [&](std::size_t i) -> const char* { return i < v.size() ? v[i].c_str() : nullptr; };
  parses_or_names("NUMAAFF_", [&] {
    const auto o = numaaff::thread_pool_options::from_environment([&](const char* name) -> const char* {
      const std::string n = name;
      return n == "NUMAAFF_NODE_POLICY" ? at(0) : n == "NUMAAFF_THREADS_PER_NODE" ? at(1) : n == "NUMAAFF_STEAL" ? at(2) : nullptr;
    });
    if (o.threads_per_node < 0 || o.steal_delay.count() < 0) std::abort();
  });
  parses_or_names("NUMAAFF_INTERLEAVE_NODES", [&] {
    const std::vector<numaaff::node_id> nodes = numaaff::detail::interleave_nodes_from(at(3));
    for (numaaff::node_id n : nodes)
      if (!numaaff::detail::valid_node(n)) std::abort();
  });
  parses_or_names("NUMAAFF_DISTANCES", [&] {
    if (at(4) == nullptr) return;
    const numaaff::topology t = four_nodes().with_distances(at(4), "NUMAAFF_DISTANCES");
    for (numaaff::node_id a : t.nodes()) {
      if (t.distance(a, a) != numaaff::local_distance) std::abort();
      for (numaaff::node_id b : t.nodes())
        if (t.distance(a, b) <= 0) std::abort();
    }
  });
  parses_or_names("NUMAAFF_MEMORY_ATTRIBUTES", [&] {
    if (at(5) != nullptr) (void)four_nodes().with_memory_attributes(at(5), "NUMAAFF_MEMORY_ATTRIBUTES");
  });
  parses_or_names("NUMAAFF_TOPOLOGY", [&] {
    // Synthetic descriptions only (a path could name /dev/zero), of bounded size (see
    // fuzz_topology for why): the parser's own logic, not hwloc's memory.
    if (at(6) != nullptr && v[6].find('/') == std::string::npos && numaaff_fuzz::small_synthetic(v[6]))
      (void)numaaff::topology::parse(at(6), "NUMAAFF_TOPOLOGY");
  });
  if (at(7) != nullptr) {
    std::vector<int> list;
    if (numaaff::detail::parse_list(v[7], list, 1 << 12))
      for (int n : list)
        if (n < 0 || n >= (1 << 12)) std::abort();
    int n = 0;
    (void)numaaff::detail::parse_int(v[7], n);
  }
  return 0;
}
