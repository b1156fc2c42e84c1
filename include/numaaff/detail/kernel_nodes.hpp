// The kernel's node list (online nodes, nodes with memory), read once during static
// initialisation, and the one check and nodemask of a caller's node numbers. Every node number
// numaaff is given is checked against this list (a topology may be synthetic).
#pragma once

#include "text.hpp"
#include "throw.hpp"

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

namespace numaaff::detail {

/// A node list from sysfs (kernel list syntax: "0-3,5"); empty when unreadable.
inline std::vector<int> sysfs_node_list(const char* path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  std::vector<int> out;
  if (!parse_list(text, out)) out.clear();
  return out;
}

/// The nodes the running kernel has (online), read once; {0} on a kernel without NUMA. Every
/// node number a caller gives is checked against this list (a topology may be synthetic).
inline const std::vector<int>& kernel_nodes() {
  static const std::vector<int> nodes = [] {
    std::vector<int> out = sysfs_node_list("/sys/devices/system/node/online");
    if (out.empty()) out.assign(1, 0);
    return out;
  }();
  return nodes;
}
/// The kernel's nodes that have memory (sysfs has_memory; a node with CPUs only has none);
/// every node when the kernel does not say.
inline const std::vector<int>& memory_nodes() {
  static const std::vector<int> nodes = [] {
    std::vector<int> out = sysfs_node_list("/sys/devices/system/node/has_memory");
    return out.empty() ? kernel_nodes() : out;
  }();
  return nodes;
}
/// Read during static initialisation, before any thread can fork: a child forked while another
/// thread runs a C++ static's first initialisation waits on its guard forever.
inline const bool kernel_nodes_ready = [] {
  try {
    (void)kernel_nodes();
    (void)memory_nodes();
  } catch (...) {  // out of memory at start-up: read on first use instead
  }
  return true;
}();

/// The kernel's distances from node `from` to each of kernel_nodes(), in that order (sysfs
/// nodeN/distance), whatever CPUs and memory this process may use, unlike a topology, which
/// keeps only the nodes it may; empty when the kernel does not say. Reads a file: call it once,
/// not per allocation.
inline std::vector<int> kernel_distances_from(int from) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(from) + "/distance");
  std::string text;
  std::getline(in, text);
  std::vector<int> row;
  for (std::string_view field : split(trim(text), ' ')) {
    int d = 0;
    if (field.empty()) continue;
    if (!parse_int(field, d)) return {};
    row.push_back(d);
  }
  if (row.size() != kernel_nodes().size()) row.clear();
  return row;
}

inline bool valid_node(int n) {
  const auto& nodes = kernel_nodes();
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

inline std::string node_error(int n) {
  return "node " + std::to_string(n) + " does not exist on this kernel (nodes: " + format_list(kernel_nodes()) + ")";
}

/// The one check of a caller's node: std::invalid_argument naming the call otherwise.
inline void require_node(const char* fn, int node) {
  if (!valid_node(node)) throw_invalid_argument(std::string(fn) + ": " + node_error(node));
}

/// Node list -> nodemask for mbind; why is set for an empty list or unknown node.
inline bool make_mask(const std::vector<int>& nodes, std::vector<unsigned long>& mask, std::string& why) {
  if (nodes.empty()) {
    why = "the node list is empty";
    return false;
  }
  constexpr std::size_t bits = 8 * sizeof(unsigned long);
  mask.assign(static_cast<std::size_t>(kernel_nodes().back()) / bits + 1, 0);
  for (int n : nodes) {
    if (!valid_node(n)) {
      why = node_error(n);
      return false;
    }
    mask[static_cast<std::size_t>(n) / bits] |= 1UL << (static_cast<std::size_t>(n) % bits);
  }
  return true;
}

/// One single-node mask per entry of `nodes` (for calls that bind runs of a range to one node
/// each); false, with `why`, for a node the kernel does not have.
inline bool single_node_masks(const std::vector<int>& nodes, std::vector<std::vector<unsigned long>>& masks,
                              std::string& why) {
  masks.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!make_mask({nodes[i]}, masks[i], why)) return false;
  return true;
}

inline void require_nodes(const char* fn, const std::vector<int>& nodes) {
  std::vector<unsigned long> mask;
  std::string why;
  if (!make_mask(nodes, mask, why)) throw_invalid_argument(std::string(fn) + ": " + why);
}

}  // namespace numaaff::detail
