/**
 * @file tiers.hpp
 * @brief Memory tiers: which memory is fast, near or large for a thread, and moving data between them.
 *
 * A machine with memory tiers has nodes whose memory differs (DRAM beside HBM, a CXL expander,
 * a memory-only node). For a thread on CPU node `from`, tier `memory_attribute::bandwidth`
 * orders every node's memory fastest first, `latency` nearest first (the firmware's HMAT values
 * through topology::targets_by, else the distance order) and `capacity` by free memory now. A
 * range spills over that order: the first node takes what room it has (MemFree less the
 * kernel's reserves, read at most every 10 ms) and the rest goes to the next (tier_allocator
 * in allocator.hpp places new blocks so). `move_to_tier` moves existing data the same way;
 * `promote` is the bandwidth tier, `demote` the slowest memory first.
 *
 * One node, or a sandbox: as move_to (migration.hpp).
 *
 * @code{.cpp}
 * numaaff::promote(hot, bytes);    // to the fastest memory with room, the rest spills in order
 * numaaff::demote(cold, bytes);    // to the slowest memory (a CXL expander before DRAM)
 * @endcode
 */
#pragma once

#include "detail/arena.hpp"
#include "detail/homenode.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page_span.hpp"
#include "homenode.hpp"
#include "interleave.hpp"
#include "migration.hpp"
#include "placement.hpp"
#include "topology.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace numaaff {

namespace detail {

/// The room cache of one node (node_room).
struct room_slot {
  std::atomic<std::int64_t> read_at{-1};  // steady-clock ns of the last read; -1: never read
  std::atomic<std::uint64_t> bytes{0};
};
inline room_slot& room_of(node_id n) noexcept {
  static room_slot slots[max_nodes];  // constant-initialised: no guard, nothing at fork
  return slots[n];
}
inline constexpr std::uint64_t room_unknown = std::numeric_limits<std::uint64_t>::max();

/// What node `n` can still take (node_available_bytes: MemFree less the kernel's reserves),
/// re-read at most every 10 ms so that a tier allocation costs no file read, less what tier
/// allocations took since (node_room_take: MemFree drops only when pages are touched);
/// room_unknown when it cannot be read (no sysfs: the kernel's fallback decides).
inline std::uint64_t node_room(node_id n) {
  if (n < 0 || n >= max_nodes) return 0;
  room_slot& s = room_of(n);
  constexpr std::int64_t fresh_ns = 10'000'000;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch()).count();
  const std::int64_t read_at = s.read_at.load(std::memory_order_acquire);
  if (read_at >= 0 && now - read_at < fresh_ns) return s.bytes.load(std::memory_order_relaxed);
  std::size_t available = 0;
  const std::uint64_t room = node_available_bytes(n, available) ? available : room_unknown;
  s.bytes.store(room, std::memory_order_relaxed);
  s.read_at.store(now, std::memory_order_release);
  return room;
}

/// Forgets node `n`'s cached room: the next node_room() reads it (after pages were given back).
inline void node_room_forget(node_id n) noexcept {
  if (n >= 0 && n < max_nodes) room_of(n).read_at.store(-1, std::memory_order_release);
}

/// Takes `bytes` from node `n`'s cached room (to 0 at least), so that the tier allocations of
/// the next 10 ms plan with what this one will use.
inline void node_room_take(node_id n, std::uint64_t bytes) noexcept {
  if (n < 0 || n >= max_nodes) return;
  std::atomic<std::uint64_t>& room = room_of(n).bytes;
  std::uint64_t v = room.load(std::memory_order_relaxed);
  while (v != room_unknown && !room.compare_exchange_weak(v, v > bytes ? v - bytes : 0, std::memory_order_relaxed)) {
  }
}

/// a + b, at most room_unknown.
constexpr std::uint64_t room_plus(std::uint64_t a, std::uint64_t b) noexcept { return a > room_unknown - b ? room_unknown : a + b; }

/**
 * Nodes in the order tier `tier` fills them for a thread on `from`: by the memory attributes
 * for bandwidth and latency (topology::targets_by: firmware values, else nearest first), by
 * free memory now for capacity (ties nearest first).
 */
inline std::vector<node_id> tier_order(const topology& t, memory_attribute tier, node_id from) {
  if (tier != memory_attribute::capacity) return t.targets_by(tier, from);
  std::vector<std::pair<std::uint64_t, node_id>> ranked;  // (room, node), nearest first
  for (node_id n : t.nodes_by_distance(from)) ranked.emplace_back(node_room(n), n);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<node_id> order;
  for (const auto& r : ranked) order.push_back(r.second);
  return order;
}

/// The calling thread's node in `t` (its homenode, or where it runs; the first node if neither is in `t`).
inline node_id tier_origin(const topology& t) {
  const node_id from = local_node();
  return t.has_node(from) ? from : t.nodes().front();
}

/// tier_order for the calling thread on this system: from its homenode (or the node it runs
/// on). The bandwidth and latency orders are fixed: the last one is kept per thread (no guard
/// a fork could leave held), and returned without a copy; the capacity order is recomputed.
/// Valid until the thread's next call.
inline const std::vector<node_id>& tier_order_here(memory_attribute tier) {
  const topology& t = topology::system();
  const node_id from = tier_origin(t);
  thread_local memory_attribute cached_tier = memory_attribute::capacity;
  thread_local node_id cached_from = -1;
  thread_local std::vector<node_id> cached;
  if (tier == memory_attribute::capacity || cached_from != from || cached_tier != tier) {
    cached = tier_order(t, tier, from);
    cached_from = from;
    cached_tier = tier;
  }
  return cached;
}

/// A piece of a tier block: `bytes` on `node`.
struct tier_segment {
  node_id node;
  std::size_t bytes;
};

/**
 * How `bytes` spill over the nodes of `order`: each node in turn takes what `room(node)` says
 * it has left, in whole `unit`s; what none has room for goes, last, to the first node (whose
 * preferred policy then spills where the kernel's fallback goes). Pure but for `room`.
 */
template <class Room>
std::vector<tier_segment> tier_plan(const std::vector<node_id>& order, std::size_t bytes, std::size_t unit, Room&& room) {
  std::vector<tier_segment> plan;
  std::size_t left = bytes;
  for (node_id n : order) {
    if (left == 0) break;
    const std::uint64_t r = room(n);
    const std::size_t take = r >= left ? left : static_cast<std::size_t>(r / unit * unit);
    if (take != 0) plan.push_back({n, take});
    left -= take;
  }
  if (left != 0 || plan.empty()) plan.push_back({order.front(), left});
  return plan;
}

}  // namespace detail

namespace detail {

/// Where demoted data goes for a thread on `from`: nodes whose memory has a known bandwidth
/// (node_bandwidth: from its best CPU node, as the kernel's own demotion tiers rank memory),
/// slowest first, then the others; ties farthest from `from` first.
inline std::vector<node_id> demotion_order(const topology& t, node_id from) {
  std::vector<std::pair<std::uint64_t, node_id>> ranked;  // (bandwidth, node), farthest first
  const std::vector<node_id> near_first = t.nodes_by_distance(from);
  for (auto it = near_first.rbegin(); it != near_first.rend(); ++it) ranked.emplace_back(node_bandwidth(t, *it), *it);
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    if ((x.first != 0) != (y.first != 0)) return x.first != 0;
    return x.first < y.first;
  });
  std::vector<node_id> order;
  for (const auto& r : ranked) order.push_back(r.second);
  return order;
}

/// Moves a range over `order` as tier_plan spills it, counting the range's own pages as room.
inline move_result move_in_order(const char* fn, void* addr, std::size_t bytes, const std::vector<node_id>& order) {
  require_range(fn, addr, bytes);
  if (bytes == 0) return {};
  const std::size_t ps = page_size();
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(addr) / ps * ps;
  const std::size_t len = detail::align_up(reinterpret_cast<std::uintptr_t>(addr) + bytes, ps) - first;
  const placement here = where(reinterpret_cast<void*>(first), len);
  const std::vector<tier_segment> plan =
      tier_plan(order, len, ps, [&](node_id n) { return room_plus(node_room(n), std::uint64_t{here.pages_on(n)} * ps); });
  return place_blocks(reinterpret_cast<void*>(first), len, ps, [&](std::size_t block) {
    std::size_t at = block * ps, i = 0;
    while (i + 1 < plan.size() && at >= plan[i].bytes) at -= plan[i++].bytes;
    return plan[i].node;
  });
}

}  // namespace detail

/**
 * Moves the pages of a range to memory tier `tier` for the calling thread (as tier_allocator
 * places): the first node in tier order takes what room it has (the range's own pages there
 * count as room) and the rest goes to the next nodes in that order, in one batched
 * place_blocks. Unpopulated pages stay unpopulated.
 *
 * Thread-safe; allocates O(pages); blocks for the copies. The result counts as place_blocks'.
 * @throws std::invalid_argument for a null or wrapping range; std::system_error named
 *         "move_pages" if the call fails as a whole.
 * @note One node, or a sandbox: as move_to.
 */
inline move_result move_to_tier(void* addr, std::size_t bytes, memory_attribute tier) {
  return detail::move_in_order("move_to_tier", addr, bytes, detail::tier_order_here(tier));
}
/// Hot data to the fastest memory: move_to_tier(addr, bytes, memory_attribute::bandwidth).
inline move_result promote(void* addr, std::size_t bytes) { return move_to_tier(addr, bytes, memory_attribute::bandwidth); }
/**
 * Cold data to the slowest memory, spilling towards faster memory when it is full: nodes by
 * the bandwidth of their memory (from its best CPU node, as the kernel ranks memory tiers),
 * slowest first (a CXL expander before DRAM), nodes without a value last; ties, and every node
 * without an HMAT, farthest from the calling thread first. Same contract as move_to_tier.
 */
inline move_result demote(void* addr, std::size_t bytes) {
  const topology& t = topology::system();
  return detail::move_in_order("demote", addr, bytes, detail::demotion_order(t, detail::tier_origin(t)));
}

}  // namespace numaaff
