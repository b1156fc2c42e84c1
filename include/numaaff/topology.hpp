/**
 * @file topology.hpp
 * @brief The machine as numaaff sees it: NUMA nodes, their CPUs and memory, and distances.
 *
 * A machine is a set of NUMA nodes, each identified by the kernel's node number (what
 * `numactl -H`, `move_pages` and `mbind` use). Each node has memory and usually CPUs; every
 * CPU belongs to exactly one node. The distance matrix says how far node `a`'s memory is from
 * node `b`'s CPUs, in ACPI SLIT units: 10 means local, 20 typically one hop away.
 *
 * A `topology` is an immutable snapshot. `topology::system()` is discovered once per process
 * with hwloc and honours what the process may use: started under `taskset -c 1`,
 * `numactl -N 1`, a cgroup cpuset or an MPI launcher's binding, it holds only the allowed CPUs
 * and the nodes they belong to, and `is_restricted()` / `restriction()` say so.
 *
 * Topologies can also be built from an hwloc synthetic description (`"pack:2 numa:2 core:2
 * pu:1"`) or an hwloc XML file, to test logic and plan for machines one does not have. Such a
 * topology is not this system (`is_this_system() == false`): numaaff never binds threads or
 * memory according to it.
 *
 * Environment (read once, by `topology::system()`):
 * - `NUMAAFF_TOPOLOGY`: `synthetic:<hwloc synthetic string>`, `xml:<path>`, or a bare value
 *   (an existing file is read as XML, anything else as a synthetic string).
 * - `NUMAAFF_DISTANCES`: `local=10,remote=100` (uniform) or a full matrix with rows separated
 *   by `;` and entries by `,` in ascending node order, e.g. `10,20;20,10`.
 * - `NUMAAFF_MEMORY_ATTRIBUTES`: bandwidth (MiB/s) and latency (ns) per initiator and target,
 *   replacing the firmware's (for tests, or a machine whose HMAT is missing or wrong), e.g.
 *   `0>0:bandwidth=20000,latency=80;0>2:bandwidth=40000,latency=100`.
 *
 * @code{.cpp}
 * const numaaff::topology& topo = numaaff::topology::system();
 * for (numaaff::node_id n : topo.nodes())
 *   std::printf("node %d: %zu cpus, distance to node 0: %d\n", n, topo.cpus_of(n).size(),
 *               topo.distance(n, topo.nodes().front()));
 * @endcode
 */
#pragma once

#include "detail/hwloc_handle.hpp"
#include "detail/kernel_nodes.hpp"
#include "detail/numa_calls.hpp"
#include "detail/syscall.hpp"
#include "detail/text.hpp"
#include "detail/throw.hpp"
#include "memory_attributes.hpp"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace numaaff {

// node_id (a NUMA node: always the kernel's node number) comes with memory_attributes.hpp.

/// Distance of a node to itself (ACPI SLIT convention).
inline constexpr int local_distance = 10;
/// Distance assumed between distinct nodes when neither firmware nor user gives one.
inline constexpr int default_remote_distance = 20;

namespace detail {

/// The nodes of the calling thread's MPOL_BIND policy (what `numactl --membind` set, inherited
/// by every thread it starts), or null when it has another policy or the call is refused.
inline hwloc_bitmap_ptr membind_nodes() {
  int mode = 0;
  std::vector<int> nodes;
  if (!read_thread_policy(mode, nodes) || mode != MPOL_BIND) return nullptr;
  hwloc_bitmap_ptr out = make_hwloc_bitmap();
  for (int n : nodes) hwloc_bitmap_set(out.get(), static_cast<unsigned>(n));
  return out;
}

}  // namespace detail

/// Where a topology came from.
enum class topology_source { system, synthetic, xml };

/// Where its distance matrix came from.
enum class distance_source {
  firmware,  ///< the ACPI SLIT (or an XML file's distance matrix), through hwloc
  defaults,  ///< none was available: 10 on the diagonal, 20 elsewhere
  user,      ///< `with_distances()` or `NUMAAFF_DISTANCES`
};

// ---- class topology ---------------------------------------------------------------------

/**
 * An immutable snapshot of NUMA nodes, CPUs, memory and distances.
 *
 * Thread safety: all member functions are const and safe to call concurrently. Copyable.
 * Queries do not allocate unless they return a container by value.
 */
class topology {
 public:
  /**
   * The topology of this process, discovered once (first call) and cached for the process.
   *
   * Honours `NUMAAFF_TOPOLOGY` and `NUMAAFF_DISTANCES`, then the process's CPU binding, cgroup
   * cpuset and memory binding.
   * @throws std::invalid_argument if an environment variable is malformed (the message names
   *         the variable, the value and the valid forms); the next call tries again.
   * @throws std::system_error if hwloc cannot discover the machine.
   * @note Thread-safe; blocks concurrent first callers until discovery finishes. On a machine
   *       without NUMA it returns one node holding every allowed CPU.
   */
  static const topology& system();

  /// Discovers this machine now, ignoring the environment. Same errors as system().
  static topology discover();

  /**
   * Builds a topology from an hwloc synthetic description such as `"pack:2 numa:2 core:2
   * pu:1"`. Not this system: nothing is ever bound according to it.
   * @throws std::invalid_argument if hwloc rejects the description.
   */
  static topology from_synthetic(const std::string& description);

  /// Loads an hwloc XML file (as written by `lstopo file.xml`). Not this system.
  /// @throws std::invalid_argument if the file is missing or hwloc cannot parse it.
  static topology from_xml_file(const std::string& path);

  /// Parses hwloc XML text. Not this system. @throws std::invalid_argument on bad XML.
  static topology from_xml(const std::string& xml);

  /**
   * Parses a value in `NUMAAFF_TOPOLOGY` syntax (see the file comment); `what` names the input
   * in error messages.
   */
  static topology parse(const std::string& value, const std::string& what = "topology");

  /// Nodes in ascending kernel numbering, with and without CPUs. Never empty.
  const std::vector<node_id>& nodes() const noexcept { return nodes_; }
  /**
   * The nodes that have CPUs this process may use, ascending: where threads can run, hence
   * the nodes a thread_pool gives workers and a node policy picks. Memory-only nodes (CXL
   * expanders, HBM in flat mode, GPU memory) and nodes whose CPUs are all outside the
   * process's binding are left out. Allocates the returned vector.
   */
  std::vector<node_id> cpu_nodes() const {
    std::vector<node_id> out;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (!cpus_of_[i].empty()) out.push_back(nodes_[i]);
    return out;
  }
  /// True when node `n` has CPUs this process may use. @throws std::invalid_argument if `n` is not in this topology.
  bool has_cpus(node_id n) const { return !cpus_of_[checked_index(n, "node")].empty(); }
  std::size_t node_count() const noexcept { return nodes_.size(); }
  bool has_node(node_id n) const noexcept { return index_of(n) != npos; }

  /// Distance from `from`'s CPUs to `to`'s memory; 10 when equal.
  /// @throws std::invalid_argument if either node is not in this topology.
  int distance(node_id from, node_id to) const {
    return distances_[checked_index(from, "from") * nodes_.size() + checked_index(to, "to")];
  }

  /// The whole matrix, rows and columns in nodes() order.
  std::vector<std::vector<int>> distance_matrix() const;

  /// Nodes ordered by distance from `from` (itself first), ties by node number.
  /// @throws std::invalid_argument if `from` is not in this topology.
  std::vector<node_id> nodes_by_distance(node_id from) const;

  /// OS numbers of the usable CPUs of node `n`, ascending; empty for a memory-only node.
  /// @throws std::invalid_argument if `n` is not in this topology.
  std::vector<int> cpus_of(node_id n) const { return cpus_of_[checked_index(n, "node")]; }

  /// Every usable CPU, ascending.
  const std::vector<int>& cpus() const noexcept { return cpus_; }

  /// The node that CPU `cpu` belongs to. @throws std::invalid_argument for an unknown CPU.
  node_id node_of_cpu(int cpu) const;

  /// Bytes of memory attached to node `n` (as reported by the kernel or the description).
  std::uint64_t memory_of(node_id n) const { return memory_of_[checked_index(n, "node")]; }
  /// hwloc's logical index of node `n` (its rank in topology order, which is how oneTBB and
  /// `lstopo -l` number nodes; it differs from the kernel number on some machines).
  int hwloc_logical_index(node_id n) const { return logical_index_[checked_index(n, "node")]; }

  topology_source source() const noexcept { return source_; }
  /// True only for a topology discovered on this machine; numaaff binds only according to it.
  bool is_this_system() const noexcept { return source_ == topology_source::system; }
  distance_source distances_from() const noexcept { return distance_source_; }

  /**
   * Memory performance from `initiator`'s CPUs to `target`'s memory (the firmware's HMAT, or
   * the user's override; see memory_attributes.hpp): bandwidth in MiB/s, latency in ns; 0
   * where the firmware gives no value for the pair.
   * @throws std::invalid_argument for a node not in this topology.
   */
  std::uint64_t bandwidth(node_id initiator, node_id target) const { return attributes_.bandwidth(initiator, target); }
  std::uint64_t latency(node_id initiator, node_id target) const { return attributes_.latency(initiator, target); }
  /// True when the firmware (or the user's override) gave any bandwidth or latency value.
  bool has_memory_attributes() const noexcept { return attributes_.any(); }
  attribute_source memory_attributes_from() const noexcept { return attributes_.source(); }
  /// The whole table of bandwidths, latencies and kinds of this topology's nodes.
  const memory_attributes& attributes() const noexcept { return attributes_; }
  /**
   * What memory node `n` is, as hwloc names it: "DRAM", "HBM", "NVM", "SPM", "GPUMemory",
   * "CXL-DRAM" (hwloc 2.10+)..., or "" when hwloc does not say (it often does not for plain
   * DRAM, nor for a memory-only node whose firmware gives no hint).
   * @throws std::invalid_argument if `n` is not in this topology.
   */
  const std::string& kind_of(node_id n) const { return attributes_.kind_of(n); }
  /**
   * Every node's memory ranked for `initiator`'s CPUs by `a`, best first
   * (memory_attributes::rank_targets over this topology's distances and memory_of): targets
   * with a firmware value first, by value, the others nearest first. `best_target` is its
   * first entry: "fastest" memory for a bandwidth-bound array, "nearest" for a latency-bound
   * one, "largest" for capacity.
   * @throws std::invalid_argument for a node not in this topology.
   */
  std::vector<node_id> targets_by(memory_attribute a, node_id initiator) const {
    return attributes_.rank_targets(a, initiator, [this](node_id i, node_id t) { return distance(i, t); },
                                    [this](node_id t) { return memory_of(t); });
  }
  node_id best_target(memory_attribute a, node_id initiator) const { return targets_by(a, initiator).front(); }
  /// The CPU nodes ranked as initiators of `target`'s memory: highest firmware bandwidth first,
  /// then nearest first. @throws std::invalid_argument for a node not in this topology.
  std::vector<node_id> initiators_of(node_id target) const {
    return attributes_.rank_initiators(target, cpu_nodes(), [this](node_id i, node_id t) { return distance(i, t); });
  }

  /// True when the process may use only part of the machine (binding, cpuset, mempolicy).
  bool is_restricted() const noexcept { return !restriction_.empty(); }
  /// True when the cpuset leaves no node with both an allowed CPU and allowed memory (a cgroup
  /// whose cpuset.mems holds only memory-only nodes, or only nodes whose CPUs it forbids): the
  /// view has no CPU, or is one node 0 with the usable CPUs; restriction() names the cause.
  /// (A task memory binding, `numactl --membind`, restricts the view only where it leaves a
  /// node with usable CPUs: `--cpunodebind=1 --membind=0` keeps node 1, memory remote.)
  bool restriction_is_unusable() const noexcept { return unusable_; }
  /// Human-readable account of the restriction; empty when unrestricted.
  const std::string& restriction() const noexcept { return restriction_; }
  /// NUMA nodes and CPUs of the whole machine, before any restriction.
  std::size_t machine_node_count() const noexcept { return machine_nodes_; }
  std::size_t machine_cpu_count() const noexcept { return machine_cpus_; }

  /// "this system", the synthetic description or the XML file name.
  const std::string& description() const noexcept { return description_; }

  /**
   * A copy with another distance matrix (rows/columns in nodes() order).
   * @throws std::invalid_argument if the matrix is not node_count() x node_count(), the
   *         diagonal is not 10, or an off-diagonal entry is not above 10.
   */
  topology with_distances(const std::vector<std::vector<int>>& matrix) const;

  /// A copy with distances in `NUMAAFF_DISTANCES` syntax; `what` names the input in errors.
  topology with_distances(const std::string& spec, const std::string& what = "distances") const;

  /**
   * A copy whose memory attributes are exactly `spec` (every firmware value dropped), in
   * `NUMAAFF_MEMORY_ATTRIBUTES` syntax: entries `I>T:key=value[,key=value]` separated by `;`,
   * I a node with CPUs (the initiator), T any node, keys `bandwidth` (MiB/s) and `latency`
   * (ns), values whole numbers above 0. An empty spec drops every value (rankings then follow
   * the distances). `what` names the input in errors.
   * @throws std::invalid_argument naming `what`, the entry and the valid form.
   */
  topology with_memory_attributes(const std::string& spec, const std::string& what = "memory attributes") const;

  /// A `numactl -H`-like summary: nodes, CPUs, memory, distance matrix, source, restriction.
  std::string to_string() const;

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  topology() = default;

  std::size_t index_of(node_id n) const noexcept {
    const auto it = std::lower_bound(nodes_.begin(), nodes_.end(), n);
    return it != nodes_.end() && *it == n ? static_cast<std::size_t>(it - nodes_.begin()) : npos;
  }
  std::size_t checked_index(node_id n, const char* what) const;
  void validate_and_set_distances(const std::vector<std::vector<int>>& m, const std::string& what);

  static topology from_hwloc(hwloc_topology_t t, topology_source source, std::string description);
  static topology load(topology_source source, const std::string& input, const std::string& what);

  std::vector<node_id> nodes_;
  std::vector<std::vector<int>> cpus_of_;
  std::vector<std::uint64_t> memory_of_;
  std::vector<int> logical_index_;  // hwloc's logical index of each node (oneTBB's NUMA id)
  std::vector<int> cpus_;
  std::vector<node_id> node_of_cpu_;  // indexed by OS cpu number, -1 where unknown
  std::vector<int> distances_;        // row-major, nodes_ order
  memory_attributes attributes_;
  topology_source source_ = topology_source::system;
  distance_source distance_source_ = distance_source::defaults;
  std::string restriction_;
  bool unusable_ = false;
  std::string description_;
  std::size_t machine_nodes_ = 0;
  std::size_t machine_cpus_ = 0;
};

/**
 * The node of the CPU running the calling thread, as the kernel reports it (getcpu).
 *
 * The answer may be stale as soon as it returns unless the thread is bound to one node.
 * Thread-safe, does not allocate, does not block. On a one-node machine it returns that node.
 * @throws std::system_error if getcpu fails (it does not on Linux >= 2.6.19).
 */
node_id current_node();
/// Same, reporting failure through `ec` and returning -1.
node_id current_node(std::error_code& ec) noexcept;

/// The CPU running the calling thread (sched_getcpu). Same contract as current_node().
int current_cpu();

// ---- implementation ---------------------------------------------------------------------

namespace detail {

inline std::vector<int> bitmap_to_vector(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (hwloc_bitmap_weight(set) < 0) return out;  // infinite sets do not occur for our uses
  for (int i = hwloc_bitmap_first(set); i != -1; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

inline std::string_view distance_source_name(distance_source s) noexcept {
  switch (s) {
    case distance_source::firmware: return "firmware (ACPI SLIT via hwloc)";
    case distance_source::defaults: return "defaults (10 local, 20 remote; none reported)";
    case distance_source::user: return "user override";
  }
  return "?";
}

}  // namespace detail

inline std::size_t topology::checked_index(node_id n, const char* what) const {
  const std::size_t i = index_of(n);
  if (i == npos) {
    detail::throw_invalid_argument(std::string(what) + " node " + std::to_string(n) +
                                   " is not in this topology (nodes: " +
                                   detail::format_list(nodes_) + ")");
  }
  return i;
}

inline node_id topology::node_of_cpu(int cpu) const {
  if (cpu < 0 || static_cast<std::size_t>(cpu) >= node_of_cpu_.size() ||
      node_of_cpu_[static_cast<std::size_t>(cpu)] < 0) {
    detail::throw_invalid_argument("cpu " + std::to_string(cpu) +
                                   " is not a usable cpu of this topology (cpus: " +
                                   detail::format_list(cpus_) + ")");
  }
  return node_of_cpu_[static_cast<std::size_t>(cpu)];
}

inline std::vector<std::vector<int>> topology::distance_matrix() const {
  const std::size_t n = nodes_.size();
  std::vector<std::vector<int>> m(n, std::vector<int>(n));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) m[i][j] = distances_[i * n + j];
  return m;
}

inline std::vector<node_id> topology::nodes_by_distance(node_id from) const {
  const std::size_t row = checked_index(from, "from");
  // Sorted as (distance, node) pairs: a comparator that looked each node's index up again
  // made a 2000-node description take seconds per call.
  const std::size_t n = nodes_.size();
  std::vector<std::pair<int, node_id>> by_distance(n);
  for (std::size_t i = 0; i < n; ++i) by_distance[i] = {i == row ? 0 : distances_[row * n + i], nodes_[i]};
  std::sort(by_distance.begin(), by_distance.end());
  std::vector<node_id> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = by_distance[i].second;
  return order;
}

inline void topology::validate_and_set_distances(const std::vector<std::vector<int>>& m,
                                                 const std::string& what) {
  const std::size_t n = nodes_.size();
  if (m.size() != n) {
    detail::throw_invalid_argument(what + ": a distance matrix needs " + std::to_string(n) +
                                   " rows (one per node: " + detail::format_list(nodes_) +
                                   "), got " + std::to_string(m.size()));
  }
  std::vector<int> flat(n * n);
  for (std::size_t i = 0; i < n; ++i) {
    if (m[i].size() != n) {
      detail::throw_invalid_argument(what + ": row " + std::to_string(i) + " (node " +
                                     std::to_string(nodes_[i]) + ") has " +
                                     std::to_string(m[i].size()) + " entries, expected " +
                                     std::to_string(n));
    }
    for (std::size_t j = 0; j < n; ++j) {
      const int d = m[i][j];
      if (i == j && d != local_distance) {
        detail::throw_invalid_argument(what + ": the distance of node " + std::to_string(nodes_[i]) +
                                       " to itself is " + std::to_string(d) + "; it must be 10");
      }
      if (i != j && d <= local_distance) {
        detail::throw_invalid_argument(what + ": the distance from node " + std::to_string(nodes_[i]) +
                                       " to node " + std::to_string(nodes_[j]) + " is " +
                                       std::to_string(d) + "; distinct nodes need a value above 10");
      }
      flat[i * n + j] = d;
    }
  }
  distances_ = std::move(flat);
}

inline topology topology::with_distances(const std::vector<std::vector<int>>& matrix) const {
  topology copy = *this;
  copy.validate_and_set_distances(matrix, "distance matrix");
  copy.distance_source_ = distance_source::user;
  return copy;
}

inline topology topology::with_distances(const std::string& spec, const std::string& what) const {
  const std::string valid =
      " (valid forms: 'local=10,remote=100', or one row per node separated by ';' with entries "
      "separated by ',', e.g. '10,20;20,10' for 2 nodes)";
  const std::string_view s = detail::trim(spec);
  const std::size_t n = nodes_.size();
  std::vector<std::vector<int>> m;
  if (s.find('=') != std::string_view::npos) {
    int local = local_distance;
    int remote = -1;
    for (std::string_view field : detail::split(s, ',')) {
      const std::size_t eq = field.find('=');
      const std::string_view key = detail::trim(field.substr(0, eq == std::string_view::npos ? 0 : eq));
      int value = 0;
      const std::errc e =
          eq == std::string_view::npos ? std::errc::invalid_argument : detail::parse_int_status(field.substr(eq + 1), value);
      if (e == std::errc::result_out_of_range && (key == "local" || key == "remote")) {
        detail::throw_invalid_argument(what + "='" + spec + "': '" + std::string(detail::trim(field.substr(eq + 1))) +
                                       "' is out of range (distances are at most 2147483647)" + valid);
      }
      if (e != std::errc() || (key != "local" && key != "remote")) {
        detail::throw_invalid_argument(what + "='" + spec + "': cannot read '" + std::string(field) +
                                       "'" + valid);
      }
      (key == "local" ? local : remote) = value;
    }
    if (remote < 0) detail::throw_invalid_argument(what + "='" + spec + "': 'remote=' is missing" + valid);
    m.assign(n, std::vector<int>(n, remote));
    for (std::size_t i = 0; i < n; ++i) m[i][i] = local;
  } else {
    for (std::string_view row : detail::split(s, ';')) {
      std::vector<int> r;
      for (std::string_view cell : detail::split(row, ',')) {
        int value = 0;
        const std::errc e = detail::parse_int_status(cell, value);
        if (e != std::errc()) {
          const char* why = e == std::errc::result_out_of_range ? "' is out of range (distances are at most 2147483647)"
                                                                : "' is not a whole number";
          detail::throw_invalid_argument(what + "='" + spec + "': '" + std::string(detail::trim(cell)) + why + valid);
        }
        r.push_back(value);
      }
      m.push_back(std::move(r));
    }
  }
  topology copy = *this;
  copy.validate_and_set_distances(m, what + "='" + spec + "'");
  copy.distance_source_ = distance_source::user;
  return copy;
}

inline topology topology::with_memory_attributes(const std::string& spec, const std::string& what) const {
  topology copy = *this;
  copy.attributes_ = memory_attributes::parse(spec, attributes_, cpu_nodes(), what);
  return copy;
}

inline topology topology::from_hwloc(hwloc_topology_t t, topology_source source, std::string description) {
  topology topo;
  topo.source_ = source;
  topo.description_ = std::move(description);
  const bool live = source == topology_source::system;

  // Which CPUs may we use? The cgroup cpuset (hwloc's "allowed" set) and the process binding
  // (taskset, numactl -N, MPI launchers), which hwloc does not fold into "allowed".
  hwloc_const_cpuset_t complete = hwloc_topology_get_complete_cpuset(t);
  detail::hwloc_bitmap_ptr usable = detail::copy_hwloc_bitmap(hwloc_topology_get_allowed_cpuset(t));
  hwloc_bitmap_and(usable.get(), usable.get(), complete);
  std::string why;
  if (live) {
    if (!hwloc_bitmap_isequal(usable.get(), complete)) why = "cgroup cpuset";
    detail::hwloc_bitmap_ptr bound = detail::make_hwloc_bitmap();
    if (hwloc_get_cpubind(t, bound.get(), HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound.get()) &&
        !hwloc_bitmap_isincluded(usable.get(), bound.get())) {
      hwloc_bitmap_and(usable.get(), usable.get(), bound.get());
      why += std::string(why.empty() ? "" : ", ") + "cpu binding";
    }
  }
  detail::hwloc_bitmap_ptr mems = detail::copy_hwloc_bitmap(hwloc_topology_get_allowed_nodeset(t));
  detail::hwloc_bitmap_ptr membind;
  if (live) {
    if (!hwloc_bitmap_isequal(mems.get(), hwloc_topology_get_complete_nodeset(t)))
      why += std::string(why.empty() ? "" : ", ") + "cgroup mems";
    // The memory binding `numactl --membind` (or a launcher) gave the process: the calling
    // thread's policy, which every thread inherits (hwloc reports a preferred node as a
    // binding, and answers for the process only while it has one thread, so not from hwloc).
    // Applied only where it leaves a node we may run on: memory bound elsewhere (an HBM or
    // CXL node without CPUs) leaves the CPUs' nodes in the view rather than none.
    membind = detail::membind_nodes();
  }

  // Each PU belongs to one node: the first memory child of its nearest ancestor that has
  // memory. (In hwloc 2 a NUMA node's cpuset is its locality, which for a memory-only node
  // attached at the machine level would wrongly claim every CPU.)
  const int depth = hwloc_get_type_depth(t, HWLOC_OBJ_NUMANODE);
  const unsigned node_objs = hwloc_get_nbobjs_by_depth(t, depth);
  std::vector<hwloc_obj_t> all_nodes;
  for (unsigned i = 0; i < node_objs; ++i) all_nodes.push_back(hwloc_get_obj_by_depth(t, depth, i));
  std::sort(all_nodes.begin(), all_nodes.end(), [](hwloc_obj_t a, hwloc_obj_t b) { return a->os_index < b->os_index; });
  std::vector<std::vector<int>> machine_cpus_of(all_nodes.size());
  const auto slot_of = [&](hwloc_obj_t node) {
    return static_cast<std::size_t>(std::find(all_nodes.begin(), all_nodes.end(), node) - all_nodes.begin());
  };
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu)) {
    hwloc_obj_t a = pu;
    while (a != nullptr && a->memory_arity == 0) a = a->parent;
    if (a == nullptr) continue;
    hwloc_obj_t first = nullptr;
    for (hwloc_obj_t m = a->memory_first_child; m != nullptr; m = m->next_sibling)
      if (m->type == HWLOC_OBJ_NUMANODE && (first == nullptr || m->os_index < first->os_index)) first = m;
    if (first != nullptr) machine_cpus_of[slot_of(first)].push_back(static_cast<int>(pu->os_index));
  }

  if (membind != nullptr && !hwloc_bitmap_isincluded(mems.get(), membind.get())) {
    detail::hwloc_bitmap_ptr bound = detail::copy_hwloc_bitmap(mems.get());
    hwloc_bitmap_and(bound.get(), bound.get(), membind.get());
    bool runs_somewhere = false;
    for (std::size_t k = 0; k < all_nodes.size() && !runs_somewhere; ++k)
      if (hwloc_bitmap_isset(bound.get(), all_nodes[k]->os_index))
        for (int c : machine_cpus_of[k]) runs_somewhere = runs_somewhere || hwloc_bitmap_isset(usable.get(), static_cast<unsigned>(c));
    if (runs_somewhere) {
      hwloc_bitmap_copy(mems.get(), bound.get());
      why += std::string(why.empty() ? "" : ", ") + "memory binding";
    }
  }

  std::vector<hwloc_obj_t> kept;  // the hwloc node of each of topo.nodes_
  std::vector<std::string> kinds;  // and its subtype
  topo.machine_nodes_ = all_nodes.size();
  topo.machine_cpus_ = static_cast<std::size_t>(std::max(0, hwloc_bitmap_weight(complete)));
  for (std::size_t k = 0; k < all_nodes.size(); ++k) {
    hwloc_obj_t obj = all_nodes[k];
    std::vector<int> cpus;
    for (int c : machine_cpus_of[k])
      if (hwloc_bitmap_isset(usable.get(), static_cast<unsigned>(c))) cpus.push_back(c);
    std::sort(cpus.begin(), cpus.end());
    const bool mem_ok = hwloc_bitmap_isset(mems.get(), obj->os_index) != 0;
    // A node with CPUs is usable when we may run on one of them; a memory-only node when we
    // may allocate from it.
    if (!mem_ok || (cpus.empty() && !machine_cpus_of[k].empty())) continue;
    topo.nodes_.push_back(static_cast<node_id>(obj->os_index));
    topo.memory_of_.push_back(obj->attr != nullptr ? obj->attr->numanode.local_memory : 0);
    topo.logical_index_.push_back(static_cast<int>(obj->logical_index));
    topo.cpus_of_.push_back(std::move(cpus));
    kinds.emplace_back(obj->subtype != nullptr ? obj->subtype : "");
    kept.push_back(obj);
  }
  topo.unusable_ = live && !why.empty() && !all_nodes.empty() && topo.nodes_.empty();
  if (topo.nodes_.empty()) {
    // No NUMA information at all (or an impossible restriction): one node 0 with every usable
    // CPU keeps every caller working, which is what a non-NUMA kernel means.
    topo.nodes_.push_back(0);
    topo.memory_of_.push_back(hwloc_get_root_obj(t)->total_memory);
    topo.logical_index_.push_back(0);
    topo.cpus_of_.push_back(detail::bitmap_to_vector(usable.get()));
    kinds.emplace_back();
  }
  for (std::size_t k = 0; k < topo.nodes_.size(); ++k) {
    for (int c : topo.cpus_of_[k]) {
      topo.cpus_.push_back(c);
      if (static_cast<std::size_t>(c) >= topo.node_of_cpu_.size()) topo.node_of_cpu_.resize(static_cast<std::size_t>(c) + 1, -1);
      topo.node_of_cpu_[static_cast<std::size_t>(c)] = topo.nodes_[k];
    }
  }
  std::sort(topo.cpus_.begin(), topo.cpus_.end());
  topo.unusable_ = topo.unusable_ || (live && !why.empty() && topo.cpus_.empty());
  if (!why.empty()) {
    topo.restriction_ = "restricted by " + why + ": cpus " + detail::format_list(topo.cpus_) + " of " +
                        std::to_string(topo.machine_cpus_) + ", nodes " + detail::format_list(topo.nodes_) +
                        " of " + std::to_string(topo.machine_nodes_);
    if (topo.unusable_)
      topo.restriction_ += "; unusable: no node has both an allowed CPU and allowed memory (cpus " +
                           detail::format_list(detail::bitmap_to_vector(usable.get())) + ", memory nodes " +
                           detail::format_list(detail::bitmap_to_vector(mems.get())) + ")";
  }

  // Distances: the first NUMA-node matrix hwloc has (Linux: sysfs node*/distance, from the
  // ACPI SLIT; XML: whatever was exported), else defaults.
  const std::size_t n = topo.nodes_.size();
  topo.distances_.assign(n * n, default_remote_distance);
  for (std::size_t i = 0; i < n; ++i) topo.distances_[i * n + i] = local_distance;
  unsigned nr = 1;
  hwloc_distances_s* dist = nullptr;
  bool firmware = false;
  if (hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, &dist, 0, 0) == 0 && nr == 1 && dist != nullptr) {
    std::vector<std::size_t> at(n, npos);  // our index -> index in the hwloc matrix
    for (unsigned k = 0; k < dist->nbobjs; ++k) {
      const std::size_t i = topo.index_of(static_cast<node_id>(dist->objs[k]->os_index));
      if (i != npos) at[i] = k;
    }
    firmware = std::find(at.begin(), at.end(), npos) == at.end();
    if (firmware) {
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
          topo.distances_[i * n + j] = static_cast<int>(dist->values[at[i] * dist->nbobjs + at[j]]);
    }
    hwloc_distances_release(t, dist);
  }
  topo.distance_source_ = firmware ? distance_source::firmware : distance_source::defaults;

  // Memory attributes per (initiator, target): hwloc's, from the HMAT where the firmware has
  // one (an initiator is a node's whole CPU set, as HMAT proximity domains are).
  topo.attributes_ = memory_attributes(topo.nodes_, std::move(kinds));
  std::vector<bool> initiator(kept.size());
  for (std::size_t i = 0; i < kept.size(); ++i) initiator[i] = !topo.cpus_of_[i].empty();
  topo.attributes_.read_hwloc(t, kept, initiator);
  return topo;
}

inline topology topology::load(topology_source source, const std::string& input, const std::string& what) {
  detail::hwloc_topology_ptr t = detail::make_hwloc_topology();
  std::string description = "this system";
  switch (source) {
    case topology_source::system:
      // See disallowed CPUs and nodes too, so that a restriction can be reported as such.
      if (hwloc_topology_set_flags(t.get(), HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0)
        detail::throw_hwloc_error("hwloc_topology_set_flags");
      break;
    case topology_source::synthetic:
      if (hwloc_topology_set_synthetic(t.get(), input.c_str()) != 0) {
        detail::throw_invalid_argument(what + "='" + input +
                                       "' is not an hwloc synthetic description (example: "
                                       "'pack:2 numa:2 core:2 pu:1')");
      }
      description = "synthetic '" + input + "'";
      break;
    case topology_source::xml:
      if (hwloc_topology_set_xmlbuffer(t.get(), input.c_str(), static_cast<int>(input.size() + 1)) != 0) {
        detail::throw_invalid_argument(what + " is not hwloc XML (write one with 'lstopo file.xml')");
      }
      description = "XML";
      break;
  }
  if (hwloc_topology_load(t.get()) != 0) {
    if (source == topology_source::system) detail::throw_hwloc_error("hwloc_topology_load");
    detail::throw_invalid_argument(what + ": hwloc could not build a topology from it");
  }
  return from_hwloc(t.get(), source, std::move(description));
}

inline topology topology::discover() { return load(topology_source::system, {}, "system"); }

inline topology topology::from_synthetic(const std::string& description) {
  return load(topology_source::synthetic, description, "synthetic topology");
}

inline topology topology::from_xml(const std::string& xml) {
  return load(topology_source::xml, xml, "XML topology");
}

inline topology topology::from_xml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::throw_invalid_argument("XML topology file '" + path + "' cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  topology topo = load(topology_source::xml, text.str(), "XML topology file '" + path + "'");
  topo.description_ = "XML file '" + path + "'";
  return topo;
}

inline topology topology::parse(const std::string& value, const std::string& what) {
  const std::string valid =
      " (valid forms: 'synthetic:pack:2 numa:2 core:2 pu:1', 'xml:/path/topo.xml', or a bare "
      "synthetic description or XML file path)";
  const std::string_view v = detail::trim(value);
  if (v.empty()) detail::throw_invalid_argument(what + " is empty" + valid);
  if (v.rfind("synthetic:", 0) == 0) {
    const std::string desc(v.substr(10));
    try {
      return from_synthetic(desc);
    } catch (const std::invalid_argument&) {
      detail::throw_invalid_argument(what + "='" + value + "': hwloc rejects the synthetic description '" +
                                     desc + "'" + valid);
    }
  }
  const bool tagged_xml = v.rfind("xml:", 0) == 0;
  const std::string path(tagged_xml ? v.substr(4) : v);
  if (tagged_xml || std::ifstream(path).good()) {
    try {
      return from_xml_file(path);
    } catch (const std::invalid_argument&) {
      detail::throw_invalid_argument(what + "='" + value + "': '" + path +
                                     "' cannot be read as hwloc XML" + valid);
    }
  }
  try {
    return from_synthetic(path);
  } catch (const std::invalid_argument&) {
    detail::throw_invalid_argument(what + "='" + value +
                                   "' is neither an existing XML file nor an hwloc synthetic description" + valid);
  }
}

inline const topology& topology::system() {
  static const topology instance = [] {
    const char* forced = std::getenv("NUMAAFF_TOPOLOGY");
    topology t = forced != nullptr ? parse(forced, "NUMAAFF_TOPOLOGY") : discover();
    if (const char* d = std::getenv("NUMAAFF_DISTANCES")) t = t.with_distances(d, "NUMAAFF_DISTANCES");
    if (const char* a = std::getenv("NUMAAFF_MEMORY_ATTRIBUTES"))
      t = t.with_memory_attributes(a, "NUMAAFF_MEMORY_ATTRIBUTES");
    return t;
  }();
  return instance;
}

inline std::string topology::to_string() const {
  std::string s = "available: " + std::to_string(nodes_.size()) + " node" + (nodes_.size() == 1 ? "" : "s") +
                  " (" + detail::format_list(nodes_) + ")\n";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    std::string cpus;
    for (int c : cpus_of_[i]) cpus += " " + std::to_string(c);
    std::string notes = cpus.empty() ? "memory only" : "";
    if (!kind_of(nodes_[i]).empty()) notes += (notes.empty() ? "" : ", ") + kind_of(nodes_[i]);
    s += "node " + std::to_string(nodes_[i]) + " cpus:" + (cpus.empty() ? std::string(" none") : cpus) +
         (notes.empty() ? "" : " (" + notes + ")") + "\n";
    s += "node " + std::to_string(nodes_[i]) + " size: " + std::to_string(memory_of_[i] >> 20) + " MB\n";
  }
  s += "node distances:\nnode ";
  char cell[16];
  for (node_id n : nodes_) {
    std::snprintf(cell, sizeof cell, "%4d", n);
    s += cell;
  }
  s += "\n";
  const std::size_t n = nodes_.size();
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(cell, sizeof cell, "%3d: ", nodes_[i]);
    s += cell;
    for (std::size_t j = 0; j < n; ++j) {
      std::snprintf(cell, sizeof cell, "%4d", distances_[i * n + j]);
      s += cell;
    }
    s += "\n";
  }
  s += "source: " + description_ + "; distances: " + std::string(detail::distance_source_name(distance_source_)) + "\n";
  s += attributes_.to_string();
  if (is_restricted()) s += restriction_ + "\n";
  return s;
}

inline node_id current_node(std::error_code& ec) noexcept {
  unsigned cpu = 0;
  unsigned node = 0;
  const auto r = detail::call(detail::sys::getcpu, [&] { return ::getcpu(&cpu, &node); });
  if (!detail::report(r, ec)) return -1;
  ec.clear();
  return static_cast<node_id>(node);
}

inline node_id current_node() {
  return detail::or_throw("current_node", [](std::error_code& ec) { return current_node(ec); });
}

inline int current_cpu() {
  const auto r = detail::call(detail::sys::getcpu, [] { return ::sched_getcpu(); });
  return detail::check(r);
}

}  // namespace numaaff
