/**
 * @file interleave.hpp
 * @brief Weighted interleave: a range's pages mixed over nodes in proportion to weights.
 *
 * Plain interleave (policy.hpp) gives every node the same share. A weighted interleave gives
 * node i a share w_i of the pages, mixed through the whole range, so that a stream over any
 * part of it draws on every node in that proportion: a bandwidth-bound array over DRAM and a
 * CXL or HBM node, weights in proportion to their bandwidths (`bandwidth_weights()`, from the
 * firmware's memory attributes). The kernel's own MPOL_WEIGHTED_INTERLEAVE (Linux 6.9+) is
 * used where its system-wide weights give the shares asked for; otherwise numaaff tiles the
 * range into runs, each preferring its node, within a budget of the process's mappings.
 *
 * Ranges and errors as policy.hpp. One node: the pages stay on it.
 *
 * @code{.cpp}
 * numaaff::weighted_interleave(a, bytes, {{0, 3}, {2, 1}});            // 3 pages of 4 on node 0
 * numaaff::weighted_interleave(a, bytes, numaaff::bandwidth_weights()); // by the HMAT's bandwidths
 * @endcode
 */
#pragma once

#include "detail/kernel_nodes.hpp"
#include "detail/mappings.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page_span.hpp"
#include "detail/text.hpp"
#include "detail/throw.hpp"
#include "policy.hpp"
#include "topology.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff {

/// A node and its share of a weighted interleave.
struct node_weight {
  node_id node;     ///< a kernel node (with or without CPUs)
  unsigned weight;  ///< its share; 0 leaves the node out
};

/**
 * Spreads the pages of the range over the nodes in proportion to their weights, for any
 * weights and on every kernel: with {{0, 3}, {2, 1}}, three pages of every four go to node 0
 * and one to node 2, mixed through the whole range (so that a stream over any part of it draws
 * on every node in that proportion), not in two halves. Typical use: a bandwidth-bound array
 * over DRAM and a CXL or HBM node, weights in proportion to their bandwidths.
 *
 * How: equal weights are one MPOL_INTERLEAVE. Weights in the proportion of the system's
 * weighted-interleave weights (Linux 6.9+, system_interleave_weights()) are one
 * MPOL_WEIGHTED_INTERLEAVE: the kernel's own policy, which gives exactly what was asked (one
 * mapping, page by page). The kernel reads the system weights at each page fault, so pages
 * placed after an administrator changes them follow the new ones.
 * Otherwise the range is cut into tiles, and in
 * each tile every node gets a run of pages in proportion to its weight, which prefers that
 * node (MPOL_PREFERRED: a full node spills to its neighbours, as MPOL_INTERLEAVE's pages do;
 * one node alone is preferred the same way); one tile holds one round of the reduced
 * weights (3 + 1 pages above) when the process's map count allows, else the smallest tiles
 * whose mappings (one per run) fit in half of the mappings vm.max_map_count has left. numaaff
 * never writes the system's weights: they are the administrator's, shared by every process.
 * `options.move_existing` moves pages already there. Weights from the memory attributes:
 * `weighted_interleave(p, n, bandwidth_weights())`.
 *
 * Thread-safe (acts on the address space); allocates the run plan; one mbind per run.
 * @throws std::invalid_argument naming `weights` for an empty list, a node the kernel does
 *         not have, a node without memory given a weight, a node listed twice or weights that
 *         are all 0; for a null/wrapping range.
 * @throws std::system_error named "mbind" if a call fails (ENOMEM: out of mappings).
 * @note One node: the pages stay on it. A refused call (sandbox) is a counted no-op.
 */
void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights);
void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights, policy_options options);
void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights, policy_options options,
                         std::error_code& ec) noexcept;

/**
 * Weights for weighted_interleave in proportion to each node's memory bandwidth in `topo`: a
 * node's weight is the best bandwidth any CPU node has to it (the firmware's HMAT or the
 * user's override: topology::bandwidth), reduced by their gcd and scaled to at most 100 (a
 * node is never scaled below 1). A node with no known bandwidth gets 0 (left out) while others
 * have one; without any value (no HMAT) every node gets 1: plain interleave. A node of this
 * system without memory (CPUs only) gets 0.
 * Thread-safe; allocates the result. @note One node: {{0, 1}}.
 */
std::vector<node_weight> bandwidth_weights(const topology& topo = topology::system());

/**
 * The system-wide weighted-interleave weights of `nodes`, as the administrator set them (Linux
 * 6.9+: /sys/kernel/mm/mempolicy/weighted_interleave/nodeN); 1 for a node the kernel gives no
 * weight (older kernels: then plain interleave). Given to weighted_interleave, they select the
 * kernel's MPOL_WEIGHTED_INTERLEAVE, which reads them at each page fault (a later change of the
 * system weights applies to pages placed after it).
 * Thread-safe; reads sysfs. @throws std::invalid_argument naming `nodes` for an empty list or
 * a node the kernel does not have.
 */
std::vector<node_weight> system_interleave_weights(const std::vector<node_id>& nodes);

namespace detail {

/// What is wrong with a weight list ("" when nothing); `with_memory`: the nodes that have memory.
inline std::string weights_error(const std::vector<node_weight>& weights, const std::vector<node_id>& with_memory = memory_nodes()) {
  if (weights.empty()) return "weights: the list is empty";
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!valid_node(weights[i].node)) return "weights: " + node_error(weights[i].node);
    if (weights[i].weight != 0 && std::find(with_memory.begin(), with_memory.end(), weights[i].node) == with_memory.end())
      return "weights: node " + std::to_string(weights[i].node) + " has no memory (nodes with memory: " + format_list(with_memory) + ")";
    for (std::size_t j = 0; j < i; ++j)
      if (weights[j].node == weights[i].node) return "weights: node " + std::to_string(weights[i].node) + " is listed twice";
    total += weights[i].weight;
  }
  return total == 0 ? "weights: every weight is 0" : "";
}

/// A run of `pages` pages from page `first` of a range, for entry `owner` of a weight list.
struct page_run {
  std::size_t first;
  std::size_t pages;
  std::size_t owner;
};

/**
 * The runs of a weighted interleave of `pages` pages over `weights` (not all 0), at most about
 * `max_runs` of them. The weights are reduced by their gcd to a round of W pages; a tile is k
 * rounds, with k the smallest that keeps the runs within max_runs (at least 1), and entry i
 * gets k * w_i consecutive pages of each tile, in list order. The last, partial tile is split
 * by the same proportions (rounded to nearest at each cumulative boundary). Pure: calls
 * f(page_run) in address order.
 */
template <class F>
void for_each_weighted_run(std::size_t pages, const std::vector<std::uint64_t>& weights, std::size_t max_runs, F&& f) {
  // Reduced by the gcd; a round of more than 2^20 pages is scaled down to 2^20 (a relative
  // error below 1e-6, far under one page of any range a round fits in), which keeps every
  // product below in 64 bits.
  constexpr std::uint64_t round_max = std::uint64_t{1} << 20;
  std::uint64_t g = 0, total = 0;
  std::size_t used = 0;
  for (std::uint64_t w : weights) {
    if (w == 0) continue;
    g = std::gcd(g, w);
    ++used;
  }
  if (used == 0 || pages == 0) return;
  std::vector<std::uint64_t> share(weights.size(), 0);
  for (std::size_t i = 0; i < weights.size(); ++i) total += share[i] = weights[i] / g;
  if (total > round_max) {
    std::uint64_t scaled = 0;
    for (std::size_t i = 0; i < weights.size(); ++i)
      if (share[i] != 0) scaled += share[i] = std::max<std::uint64_t>(1, share[i] * round_max / total);
    total = scaled;
  }
  const std::size_t tiles_allowed = std::max<std::size_t>(1, max_runs / used);
  const std::uint64_t per_tile_min = (pages + tiles_allowed - 1) / tiles_allowed;  // pages a tile must hold
  const std::uint64_t k = std::max<std::uint64_t>(1, (per_tile_min + total - 1) / total);
  const std::uint64_t tile = k * total;  // <= per_tile_min + total: no overflow
  std::size_t at = 0;
  const auto split = [&](std::uint64_t span_pages) {
    // Entry i's run covers [round(span * C_i / W), round(span * C_(i+1) / W)), C the running
    // sum: rounded to nearest, so that no entry is favoured by its place in the list.
    std::uint64_t before = 0, start = 0;
    for (std::size_t i = 0; i < share.size(); ++i) {
      before += share[i];
      const std::uint64_t end = span_pages / total * before + (span_pages % total * before + total / 2) / total;
      if (end > start) f(page_run{at + static_cast<std::size_t>(start), static_cast<std::size_t>(end - start), i});
      start = end;
    }
    at += static_cast<std::size_t>(span_pages);
  };
  while (pages - at >= tile) split(tile);
  if (at < pages) split(pages - at);
}

/// Most mappings one weighted interleave adds: 1 GiB in 2 MiB tiles of two runs each. More
/// would take map count from the rest of the program (next-touch arming splits mappings too)
/// for a finer mix that only a single sequential stream could notice.
inline constexpr std::size_t weighted_runs_max = 1024;

/**
 * Mappings one weighted interleave may add: weighted_runs_max, or half of what is left above
 * the reserve (mapping_reserve) if that is less; 0 when nothing is. Process-wide by
 * construction: it is computed from the process's real mapping count, so all the calls
 * together (and whatever the program unmapped meanwhile) never take the process past the
 * reserve.
 */
inline std::size_t mapping_budget() { return std::min(weighted_runs_max, mapping_headroom() / 2); }

/// True when the kernel's MPOL_WEIGHTED_INTERLEAVE gives `shares` of `nodes` exactly: the
/// system weights exist and are in the same proportion.
inline bool system_weights_match(const std::vector<node_id>& nodes, const std::vector<std::uint64_t>& shares) {
  std::vector<std::uint64_t> sys(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if ((sys[i] = system_interleave_weight(nodes[i])) == 0) return false;
  for (std::size_t i = 1; i < nodes.size(); ++i)
    if (shares[i] * sys[0] != shares[0] * sys[i]) return false;  // weights < 2^32: no overflow
  return true;
}

}  // namespace detail

namespace detail {

/// The bandwidth of node `n`'s memory from its best CPU node (0 when unknown): a property of
/// the memory, as the kernel's memory tiers see it, where topology::bandwidth is per pair
/// (and Linux reports only a target's best initiators).
inline std::uint64_t node_bandwidth(const topology& topo, node_id n) {
  std::uint64_t best = 0;
  for (node_id i : topo.cpu_nodes()) best = std::max(best, topo.bandwidth(i, n));
  return best;
}

}  // namespace detail

inline std::vector<node_weight> bandwidth_weights(const topology& topo) {
  std::vector<std::uint64_t> best(topo.node_count(), 0);
  std::vector<bool> has_memory(topo.node_count(), true);  // a node without memory takes no share
  const auto& with_memory = detail::memory_nodes();
  std::uint64_t g = 0, most = 0;
  for (std::size_t j = 0; j < best.size(); ++j) {
    if (topo.is_this_system())
      has_memory[j] = std::find(with_memory.begin(), with_memory.end(), topo.nodes()[j]) != with_memory.end();
    best[j] = has_memory[j] ? detail::node_bandwidth(topo, topo.nodes()[j]) : 0;
    g = std::gcd(g, best[j]);
    most = std::max(most, best[j]);
  }
  std::vector<node_weight> out;
  for (std::size_t j = 0; j < best.size(); ++j) {
    std::uint64_t w = most == 0 ? (has_memory[j] ? 1 : 0) : best[j] / g;
    if (most != 0 && most / g > 100 && w != 0)  // g is 0 when no node has a value
      w = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(100.0 * static_cast<double>(best[j]) / static_cast<double>(most) + 0.5));
    out.push_back({topo.nodes()[j], static_cast<unsigned>(w)});
  }
  return out;
}

inline std::vector<node_weight> system_interleave_weights(const std::vector<node_id>& nodes) {
  detail::require_nodes("system_interleave_weights", nodes);
  std::vector<node_weight> out;
  for (node_id n : nodes) out.push_back({n, std::max(1u, detail::system_interleave_weight(n))});
  return out;
}

inline void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights,
                                policy_options o, std::error_code& ec) noexcept {
  ec.clear();
  try {
    detail::page_span span;
    if (!detail::make_span(addr, bytes, span) || !detail::weights_error(weights).empty()) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    std::vector<node_id> nodes;
    std::vector<std::uint64_t> shares;
    for (const node_weight& w : weights) {
      if (w.weight == 0) continue;
      nodes.push_back(w.node);
      shares.push_back(w.weight);
    }
    std::string why;
    // One policy for the whole range where the kernel has one that gives exactly this.
    const bool equal = std::all_of(shares.begin(), shares.end(), [&](std::uint64_t s) { return s == shares.front(); });
    const int mode = equal ? (nodes.size() == 1 ? MPOL_PREFERRED : MPOL_INTERLEAVE)
                           : detail::system_weights_match(nodes, shares) ? MPOL_WEIGHTED_INTERLEAVE : MPOL_DEFAULT;
    if (mode != MPOL_DEFAULT) {
      std::vector<unsigned long> mask;
      detail::make_mask(nodes, mask, why);
      detail::apply_policy(span, mode, mask, o, ec);
      if (mode != MPOL_WEIGHTED_INTERLEAVE || ec != std::errc::invalid_argument) return;
      ec.clear();  // a kernel that lists weights but lacks the mode: the method below
    }
    // Too few mappings left for one run per node: plain interleave (one policy, counted)
    // rather than taking the mappings the rest of the program needs.
    const std::size_t budget = detail::mapping_budget();
    if (budget < nodes.size()) {
      std::vector<unsigned long> mask;
      detail::make_mask(nodes, mask, why);
      detail::refusals.weighted_fallbacks.fetch_add(1, std::memory_order_relaxed);
      detail::apply_policy(span, MPOL_INTERLEAVE, mask, o, ec);
      return;
    }
    std::vector<std::vector<unsigned long>> masks;
    detail::single_node_masks(nodes, masks, why);  // nodes validated above
    const std::size_t ps = detail::page_size();
    bool refused = false;  // a sandbox: one counted no-op, not one per run
    detail::for_each_weighted_run(span.pages, shares, budget, [&](const detail::page_run& r) {
      if (ec || refused) return;
      detail::apply_policy(detail::page_span{span.first + r.first * ps, r.pages}, MPOL_PREFERRED, masks[r.owner], o, ec,
                           &refused);
    });
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}
inline void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights,
                                policy_options o) {
  detail::require_range("weighted_interleave", addr, bytes);
  const std::string why = detail::weights_error(weights);
  if (!why.empty()) detail::throw_invalid_argument("weighted_interleave: " + why);
  detail::or_throw("weighted_interleave", [&](std::error_code& ec) { weighted_interleave(addr, bytes, weights, o, ec); });
}
inline void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights) {
  weighted_interleave(addr, bytes, weights, policy_options{});
}

}  // namespace numaaff
