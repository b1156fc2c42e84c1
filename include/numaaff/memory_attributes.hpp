/**
 * @file memory_attributes.hpp
 * @brief How fast each node's memory is from each CPU node: bandwidth, latency, and its kind.
 *
 * Memory is not all alike: beside DRAM a machine may have HBM, a CXL expander or persistent
 * memory, often as nodes without CPUs. The firmware describes it in the ACPI HMAT, which Linux
 * exposes in sysfs access classes and hwloc 2.3+ as *memory attributes*: the bandwidth (MiB/s)
 * and latency (ns) from an *initiator* (a node's CPUs) to a *target* (a node's memory), 0 where
 * the firmware gives no value for the pair (no HMAT, or an initiator that is not among the
 * target's best: Linux lists only those). hwloc also names a node's *kind* ("HBM", "NVM",
 * "CXL-DRAM"...) where it can. A `memory_attributes` is that table for a set of nodes, an
 * immutable value; `topology` holds one (topology::attributes()) and answers from it
 * (topology::bandwidth, latency, kind_of, targets_by, initiators_of).
 *
 * Ranking: for an initiator, targets with a value come first, by value (bandwidth highest,
 * latency lowest first); the others follow nearest first, so that without an HMAT a ranking
 * is the distance matrix's. `NUMAAFF_MEMORY_ATTRIBUTES` (or topology::with_memory_attributes)
 * replaces the firmware's table: entries `I>T:bandwidth=MiB/s,latency=ns` separated by `;`.
 *
 * @code{.cpp}
 * const numaaff::topology& topo = numaaff::topology::system();
 * for (numaaff::node_id t : topo.targets_by(numaaff::memory_attribute::bandwidth, 0))
 *   std::printf("node %d: %llu MiB/s from node 0 (%s)\n", t,
 *               static_cast<unsigned long long>(topo.bandwidth(0, t)), topo.kind_of(t).c_str());
 * @endcode
 */
#pragma once

#include "detail/text.hpp"
#include "detail/throw.hpp"

#include <hwloc.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace numaaff {

/// A NUMA node: always the kernel's node number.
using node_id = int;

/// Where the memory attributes (bandwidth, latency) came from.
enum class attribute_source {
  firmware,  ///< the ACPI HMAT through hwloc (or an XML file's memory attributes); may be empty
  user,      ///< `with_memory_attributes()` or `NUMAAFF_MEMORY_ATTRIBUTES`
};

/// What targets_by() ranks a node's memory by, as seen from a CPU node.
enum class memory_attribute {
  bandwidth,  ///< highest first (firmware values, else nearest first)
  latency,    ///< lowest first (firmware values, else nearest first)
  capacity,   ///< most memory first (memory_of), ties nearest first
};

class topology;

/**
 * Bandwidth and latency between the nodes of a topology, and each node's memory kind.
 *
 * Thread safety: immutable once built; every member is const and safe to call concurrently.
 * Copyable. Queries do not allocate unless they return a container by value.
 */
class memory_attributes {
 public:
  /// No nodes, no values.
  memory_attributes() = default;

  /// The nodes this table covers, ascending (a topology's nodes()).
  const std::vector<node_id>& nodes() const noexcept { return nodes_; }

  /// MiB/s from `initiator`'s CPUs to `target`'s memory; 0 when unknown.
  /// @throws std::invalid_argument naming `initiator` or `target` for a node not covered.
  std::uint64_t bandwidth(node_id initiator, node_id target) const {
    return bandwidth_[index(initiator, "initiator") * nodes_.size() + index(target, "target")];
  }
  /// ns from `initiator`'s CPUs to `target`'s memory; 0 when unknown. Throws as bandwidth().
  std::uint64_t latency(node_id initiator, node_id target) const {
    return latency_[index(initiator, "initiator") * nodes_.size() + index(target, "target")];
  }
  /// True when the firmware (or the user's override) gave any bandwidth or latency value.
  bool any() const noexcept {
    const auto known = [](std::uint64_t v) { return v != 0; };
    return std::any_of(bandwidth_.begin(), bandwidth_.end(), known) || std::any_of(latency_.begin(), latency_.end(), known);
  }
  attribute_source source() const noexcept { return source_; }
  /// hwloc's name for node `n`'s memory ("DRAM", "HBM", "NVM", "CXL-DRAM"...), "" when it
  /// does not say. @throws std::invalid_argument naming `node` for a node not covered.
  const std::string& kind_of(node_id n) const { return kinds_[index(n, "node")]; }

  /**
   * Every covered node ranked as a target for `initiator` by `a`, best first: targets with a
   * value first, by value; the others by `distance(initiator, target)`, nearest first; ties
   * nearest, then the lower node number. For `capacity` the value is `capacity(target)`.
   * @throws std::invalid_argument naming `initiator` for a node not covered.
   */
  template <class Distance, class Capacity>
  std::vector<node_id> rank_targets(memory_attribute a, node_id initiator, Distance&& distance, Capacity&& capacity) const;

  /**
   * `candidates` (CPU nodes) ranked as initiators of `target`'s memory: highest bandwidth
   * first, then nearest (`distance(initiator, target)`), then the lower node number.
   * @throws std::invalid_argument naming `target` for a node not covered.
   */
  template <class Distance>
  std::vector<node_id> rank_initiators(node_id target, std::vector<node_id> candidates, Distance&& distance) const;

  /**
   * A table over `nodes` with exactly the values of `spec` (source user), in
   * `NUMAAFF_MEMORY_ATTRIBUTES` syntax; `initiators` are the nodes with CPUs (only they may
   * be an I); the kinds are kept from `kinds_from`. `what` names the input in errors.
   * @throws std::invalid_argument naming `what`, the entry and the valid form.
   */
  static memory_attributes parse(const std::string& spec, const memory_attributes& kinds_from,
                                 const std::vector<node_id>& initiators, const std::string& what);

  /// The values as lines "  node I -> node T: B MiB/s, L ns" with a heading naming the
  /// source, or one line saying there are none (the end of topology::to_string()).
  std::string to_string() const;

 private:
  friend class topology;

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  /// Nodes `nodes` (ascending), kinds `kinds` (one each), no values.
  memory_attributes(std::vector<node_id> nodes, std::vector<std::string> kinds)
      : nodes_(std::move(nodes)), kinds_(std::move(kinds)) {
    bandwidth_.assign(nodes_.size() * nodes_.size(), 0);
    latency_.assign(nodes_.size() * nodes_.size(), 0);
  }

  /// The values hwloc has (hwloc 2.3+) from each node of `objs` that `initiator` marks (a CPU
  /// node) to each node of `objs`; `objs` and the covered nodes in the same order.
  void read_hwloc(hwloc_topology_t t, const std::vector<hwloc_obj_t>& objs, const std::vector<bool>& initiator);

  std::size_t find(node_id n) const noexcept {
    const auto it = std::lower_bound(nodes_.begin(), nodes_.end(), n);
    return it != nodes_.end() && *it == n ? static_cast<std::size_t>(it - nodes_.begin()) : npos;
  }
  std::size_t index(node_id n, const char* what) const {
    const std::size_t i = find(n);
    if (i == npos)
      detail::throw_invalid_argument(std::string(what) + " node " + std::to_string(n) + " is not in this topology (nodes: " +
                                     detail::format_list(nodes_) + ")");
    return i;
  }

  std::vector<node_id> nodes_;
  std::vector<std::uint64_t> bandwidth_, latency_;  // row-major [initiator][target], 0: unknown
  std::vector<std::string> kinds_;                   // hwloc's subtype of each node, "" if none
  attribute_source source_ = attribute_source::firmware;
};

// ---- implementation ---------------------------------------------------------------------

template <class Distance, class Capacity>
std::vector<node_id> memory_attributes::rank_targets(memory_attribute a, node_id initiator, Distance&& distance,
                                                     Capacity&& capacity) const {
  const std::size_t row = index(initiator, "initiator");
  const std::size_t n = nodes_.size();
  std::vector<node_id> order = nodes_;
  const auto value = [&](node_id t) -> std::uint64_t {
    switch (a) {
      case memory_attribute::bandwidth: return bandwidth_[row * n + find(t)];
      case memory_attribute::latency: return latency_[row * n + find(t)];
      case memory_attribute::capacity: return capacity(t);
    }
    return 0;
  };
  const auto distance_to = [&](node_id t) { return t == initiator ? 0 : distance(initiator, t); };
  std::sort(order.begin(), order.end(), [&](node_id x, node_id y) {
    const std::uint64_t vx = value(x), vy = value(y);
    if ((vx != 0) != (vy != 0)) return vx != 0;  // a firmware value first
    if (vx != vy) return a == memory_attribute::latency ? vx < vy : vx > vy;
    if (distance_to(x) != distance_to(y)) return distance_to(x) < distance_to(y);
    return x < y;
  });
  return order;
}

template <class Distance>
std::vector<node_id> memory_attributes::rank_initiators(node_id target, std::vector<node_id> candidates,
                                                        Distance&& distance) const {
  const std::size_t col = index(target, "target");
  const std::size_t n = nodes_.size();
  const auto bw = [&](node_id i) { return bandwidth_[find(i) * n + col]; };
  const auto dist = [&](node_id i) { return i == target ? 0 : distance(i, target); };
  std::sort(candidates.begin(), candidates.end(), [&](node_id x, node_id y) {
    if (bw(x) != bw(y)) return bw(x) > bw(y);
    if (dist(x) != dist(y)) return dist(x) < dist(y);
    return x < y;
  });
  return candidates;
}

inline memory_attributes memory_attributes::parse(const std::string& spec, const memory_attributes& kinds_from,
                                                  const std::vector<node_id>& initiators, const std::string& what) {
  const std::string valid =
      " (valid form: entries 'I>T:bandwidth=MiB/s,latency=ns' separated by ';', I a node with CPUs, "
      "e.g. '0>0:bandwidth=20000,latency=80;0>2:bandwidth=40000')";
  const auto fail = [&](const std::string& why) { detail::throw_invalid_argument(what + "='" + spec + "': " + why + valid); };
  memory_attributes out(kinds_from.nodes_, kinds_from.kinds_);
  out.source_ = attribute_source::user;
  const std::size_t n = out.nodes_.size();
  for (std::string_view entry : detail::split(detail::trim(spec), ';')) {
    entry = detail::trim(entry);
    if (entry.empty()) continue;
    const std::size_t arrow = entry.find('>'), colon = entry.find(':');
    int from = -1, to = -1;
    if (arrow == std::string_view::npos || colon == std::string_view::npos || colon < arrow ||
        detail::parse_int_status(entry.substr(0, arrow), from) != std::errc() ||
        detail::parse_int_status(entry.substr(arrow + 1, colon - arrow - 1), to) != std::errc())
      fail("cannot read '" + std::string(entry) + "'");
    const std::size_t i = out.find(from), j = out.find(to);
    if (i == npos || j == npos)
      fail("'" + std::string(entry) + "' names a node not in this topology (nodes: " + detail::format_list(out.nodes_) + ")");
    if (std::find(initiators.begin(), initiators.end(), from) == initiators.end())
      fail("'" + std::string(entry) + "': initiator node " + std::to_string(from) + " has no CPUs");
    for (std::string_view field : detail::split(entry.substr(colon + 1), ',')) {
      const std::size_t eq = field.find('=');
      const std::string_view key = detail::trim(field.substr(0, eq == std::string_view::npos ? 0 : eq));
      std::uint64_t value = 0;
      const std::string_view text = eq == std::string_view::npos ? std::string_view{} : detail::trim(field.substr(eq + 1));
      const auto [end, e] = std::from_chars(text.data(), text.data() + text.size(), value);
      if ((key != "bandwidth" && key != "latency") || e != std::errc() || end != text.data() + text.size() || value == 0)
        fail("cannot read '" + std::string(detail::trim(field)) + "' in '" + std::string(entry) + "'");
      (key == "bandwidth" ? out.bandwidth_ : out.latency_)[i * n + j] = value;
    }
  }
  return out;
}

inline void memory_attributes::read_hwloc(hwloc_topology_t t, const std::vector<hwloc_obj_t>& objs,
                                          const std::vector<bool>& initiator) {
#if HWLOC_API_VERSION >= 0x00020300  // memory attributes came with hwloc 2.3
  const std::size_t n = nodes_.size();
  for (std::size_t i = 0; i < objs.size(); ++i) {
    // Initiators are CPU nodes: a memory-only node's cpuset is its locality (the CPUs of the
    // package it hangs off), and as an initiator it would borrow their values.
    if (!initiator[i] || objs[i]->cpuset == nullptr || hwloc_bitmap_iszero(objs[i]->cpuset)) continue;
    hwloc_location from{};
    from.type = HWLOC_LOCATION_TYPE_CPUSET;
    from.location.cpuset = objs[i]->cpuset;
    for (std::size_t j = 0; j < objs.size(); ++j) {
      hwloc_uint64_t v = 0;
      if (hwloc_memattr_get_value(t, HWLOC_MEMATTR_ID_BANDWIDTH, objs[j], &from, 0, &v) == 0) bandwidth_[i * n + j] = v;
      if (hwloc_memattr_get_value(t, HWLOC_MEMATTR_ID_LATENCY, objs[j], &from, 0, &v) == 0) latency_[i * n + j] = v;
    }
  }
#else
  (void)t;
  (void)objs;
  (void)initiator;
#endif
}

inline std::string memory_attributes::to_string() const {
  if (!any()) return "memory attributes: none from the firmware (rankings follow the distances)\n";
  std::string s = std::string("memory attributes (") + (source_ == attribute_source::user ? "user override" : "firmware HMAT") +
                  "; initiator -> target: MiB/s, ns):\n";
  const std::size_t n = nodes_.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (bandwidth_[i * n + j] == 0 && latency_[i * n + j] == 0) continue;
      s += "  node " + std::to_string(nodes_[i]) + " -> node " + std::to_string(nodes_[j]) + ": " +
           std::to_string(bandwidth_[i * n + j]) + " MiB/s, " + std::to_string(latency_[i * n + j]) + " ns\n";
    }
  return s;
}

}  // namespace numaaff
