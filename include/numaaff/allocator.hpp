/**
 * @file allocator.hpp
 * @brief Memory that lands on a chosen NUMA node: raw blocks, STL allocators, std::pmr resources.
 *
 * Three placements:
 * - **on a node**: `allocate_on_node`, `node_allocator<T>`, `node_resource`: every page on
 *   that node (MPOL_BIND; with `alloc_options::strict = false`, MPOL_PREFERRED: that node
 *   while it has memory).
 * - **interleaved**: `allocate_interleaved`, `interleave_allocator<T>`, `interleave_resource`:
 *   large blocks spread page by page over the nodes; small blocks round-robin over them.
 * - **local**: `local_allocator<T>`, `local_resource`: on the calling thread's homenode (set by
 *   numaaff's thread pool or set_homenode()), else the node it is running on now.
 * - **a memory tier**: `tier_allocator<T>(memory_attribute)`, `tier_resource`: the fastest
 *   (bandwidth), nearest (latency) or largest (capacity) memory for the allocating thread, from
 *   the firmware's HMAT where it has one (topology::best_target).
 *
 * How: blocks above 32 KiB are their own mapping, bound with mbind and unmapped on free (below
 * the huge page size, their pages are first kept for the next block of the same placement; see
 * kind.hpp). Smaller blocks come from per-node arenas of bound 256 KiB slabs with a per-thread
 * cache, so a small
 * allocate/free costs about what malloc does, not a system call (numa_alloc_onnode makes one
 * mmap per call and rounds every block up to a page). Freed memory is reused on its own node only.
 *
 * When pages are placed: at first touch, on the chosen node, by default. `populate = true`
 * places a large block's pages during allocation (and refuses, with std::bad_alloc, a strict
 * block larger than the node's free memory, instead of meeting the OOM killer later).
 * Transparent huge pages (`alloc_options::huge_pages`): a huge page sits on one node whole and
 * migrates whole, so by default (`huge_page_mode::per_block`) no huge page ever holds two
 * blocks: blocks under 2 MiB and the small-block slabs get none (each block keeps its own
 * placement and moves alone); larger blocks are 2 MiB-aligned, so that where the system makes
 * huge pages (THP `always`) they get them, except in their last, partial 2 MiB. `huge_page_mode::always` asks for them everywhere (large per-node
 * arrays); `never` turns them off. Interleaved blocks have none unless `always`.
 *
 * One node: everything works; all memory is on node 0.
 *
 * @code{.cpp}
 * std::vector<double, numaaff::node_allocator<double>> v(1 << 20, 0.0, numaaff::node_allocator<double>(1));
 * numaaff::node_resource on2(2);
 * std::pmr::vector<int> w(&on2);       // pmr containers get it for free
 * @endcode
 */
#pragma once

#include "detail/arena.hpp"
#include "detail/homenode.hpp"
#include "detail/throw.hpp"
#include "homenode.hpp"
#include "interleave.hpp"
#include "placement.hpp"
#include "policy.hpp"
#include "tiers.hpp"
#include "topology.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <memory_resource>
#include <new>
#include <numeric>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {

/**
 * Transparent huge pages in numaaff's own mappings. A huge page sits on one node whole and
 * migrates whole: one shared by two blocks puts both on one node, and moving either block
 * moves the other's data with it.
 */
enum class huge_page_mode : unsigned char {
  per_block,  ///< no huge page ever holds two blocks: none in blocks under 2 MiB (nor in the
              ///< small-block slabs); larger blocks are 2 MiB-aligned and get them except in
              ///< their last, partial 2 MiB
  never,      ///< no huge pages at all (MADV_NOHUGEPAGE)
  always,     ///< 2 MiB-aligned, MADV_HUGEPAGE: large per-node arrays, fewer TLB misses
  /// Explicit 2 MiB pages from the node's reserved pool (hugetlbfs; the administrator reserves
  /// them, e.g. /sys/devices/system/node/nodeN/hugepages/hugepages-2048kB/nr_hugepages). Each
  /// block is whole pages of its own, placed at allocation. Strict: std::bad_alloc (NULL/ENOMEM
  /// in C) when the node's pool has too few free pages; preferred: another node's pool, else
  /// ordinary pages, counted (refusal_stats().huge_page_fallbacks). Not for interleaved blocks.
  reserved_2mib,
  reserved_1gib,  ///< the same with 1 GiB pages (hugepages-1048576kB)
};

/// Selects the weighted constructors of interleave_allocator and interleave_resource.
struct by_weight_t {
  explicit by_weight_t() = default;
};
inline constexpr by_weight_t by_weight{};

/// Placement options of allocators and resources (see the file comment).
struct alloc_options {
  bool strict = true;     ///< MPOL_BIND (fail rather than spill) instead of MPOL_PREFERRED
  bool populate = false;  ///< place the pages now instead of at first touch (large blocks)
  huge_page_mode huge_pages = huge_page_mode::per_block;  ///< see huge_page_mode

  friend bool operator==(const alloc_options& a, const alloc_options& b) noexcept {
    return a.strict == b.strict && a.populate == b.populate && a.huge_pages == b.huge_pages;
  }
  friend bool operator!=(const alloc_options& a, const alloc_options& b) noexcept { return !(a == b); }
};

namespace detail {

static_assert(static_cast<int>(huge_page_mode::per_block) == static_cast<int>(detail::huge_page_mode::per_block) &&
                  static_cast<int>(huge_page_mode::never) == static_cast<int>(detail::huge_page_mode::never) &&
                  static_cast<int>(huge_page_mode::always) == static_cast<int>(detail::huge_page_mode::always) &&
                  static_cast<int>(huge_page_mode::reserved_2mib) == static_cast<int>(detail::huge_page_mode::reserved_2mib) &&
                  static_cast<int>(huge_page_mode::reserved_1gib) == static_cast<int>(detail::huge_page_mode::reserved_1gib),
              "the arena's huge-page modes mirror the public ones");

/// The arena's form of the public options, for blocks asked for as `kind` (its slabs and its
/// counters).
inline placement_options placement_of(const alloc_options& o, heap_kind kind = heap_kind::node) noexcept {
  placement_options p;
  p.strict = o.strict;
  p.populate = o.populate;
  p.huge_pages = static_cast<detail::huge_page_mode>(o.huge_pages);
  p.kind = kind;
  return p;
}

/// Frees a block allocated with options `o` (any allocator or resource of this header).
inline void release_block(void* p, std::size_t bytes, std::size_t align, const placement_options& o) noexcept {
  numa_deallocate(p, bytes, align, o);
}
inline void release_block(void* p, std::size_t bytes, std::size_t align, const alloc_options& o) noexcept {
  release_block(p, bytes, align, placement_of(o));
}


}  // namespace detail

namespace detail {

inline void* allocate_or_throw(std::size_t bytes, std::size_t align, node_id node, const placement_options& o) {
  if (node < 0 || node >= max_nodes)
    throw_invalid_argument("numaaff: node " + std::to_string(node) + " is not a node a kernel can have (0 to " +
                           std::to_string(max_nodes - 1) + ")");
  failed_call = sys::count_;
  std::error_code ec;
  void* p = numa_allocate(bytes, align, node, o, ec);
  if (p != nullptr) return p;
  if (ec == std::errc::not_enough_memory || ec == std::errc::resource_unavailable_try_again) throw_bad_alloc();
  throw_failure(ec, "allocate");
}
inline void* allocate_or_throw(std::size_t bytes, std::size_t align, node_id node, const alloc_options& o) {
  return allocate_or_throw(bytes, align, node, placement_of(o));
}

/// Shared state of interleaving allocators: the nodes, their weights (none: equal) and a
/// round-robin cursor.
struct interleave_state {
  std::vector<node_id> nodes;
  std::vector<std::uint64_t> weights;  // parallel to nodes, reduced by their gcd; empty: all equal
  std::uint64_t round = 0;             // sum of weights (each < 2^32: no overflow)
  alloc_options options;
  std::atomic<std::size_t> next{0};

  void set_weights(const std::vector<node_weight>& list) {
    std::uint64_t g = 0;
    for (const node_weight& w : list) g = std::gcd(g, std::uint64_t{w.weight});
    for (const node_weight& w : list) {
      if (w.weight == 0) continue;
      nodes.push_back(w.node);
      weights.push_back(w.weight / g);
      round += w.weight / g;
    }
    if (std::all_of(weights.begin(), weights.end(), [](std::uint64_t w) { return w == 1; })) weights.clear();
  }
  /// The node of the next small block: node i for weights[i] turns of every round.
  node_id pick() noexcept {
    const std::size_t turn = next.fetch_add(1, std::memory_order_relaxed);
    if (weights.empty()) return nodes[turn % nodes.size()];
    std::uint64_t at = turn % round;
    std::size_t i = 0;
    while (at >= weights[i]) at -= weights[i++];
    return nodes[i];
  }
  std::vector<node_weight> weight_list() const {
    std::vector<node_weight> out;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      out.push_back({nodes[i], weights.empty() ? 1u : static_cast<unsigned>(weights[i])});
    return out;
  }
};

/// @throws std::invalid_argument naming `fn` and `weights` for a list weighted_interleave refuses.
inline void require_weights(const char* fn, const std::vector<node_weight>& weights) {
  const std::string why = weights_error(weights);
  if (!why.empty()) throw_invalid_argument(std::string(fn) + ": " + why);
}

/// Reads an interleave_allocator's shared state (for its converting constructor and
/// comparison across element types) without making it part of the public interface.
struct interleave_access {
  template <class A>
  static const std::shared_ptr<interleave_state>& state(const A& a) noexcept {
    return a.state_;
  }
};

/// How a large interleaved block is mapped: a huge page lands on one node whole, so
/// page-by-page interleaving has none unless the caller asked for them. Its pages are its own:
/// pages kept from a freed block of the first node are resident there, and an interleave
/// policy leaves a page where it is when its node is one of the policy's (even with
/// MPOL_MF_MOVE). Its bytes are counted once, where its pages go (spread_large).
inline placement_options interleaved_mapping(const alloc_options& o) noexcept {
  using mode = numaaff::huge_page_mode;
  return {false, false, o.huge_pages == mode::always ? huge_page_mode::always : huge_page_mode::never, false, false,
          heap_kind::interleave};
}

inline void* interleave_allocate(interleave_state& s, std::size_t bytes, std::size_t align) {
  if (is_small(bytes, align)) return allocate_or_throw(bytes, align, s.pick(), placement_of(s.options, heap_kind::interleave));
  // A large block: map it on the first node, then interleave its pages over all of them.
  const std::vector<node_weight> weights = s.weights.empty() ? std::vector<node_weight>{} : s.weight_list();
  void* p = allocate_or_throw(bytes, align, s.nodes.front(), interleaved_mapping(s.options));
  failed_call = sys::count_;
  std::error_code ec;  // both calls are noexcept
  if (weights.empty()) {
    interleave(p, bytes, s.nodes, policy_options{}, ec);
  } else {
    weighted_interleave(p, bytes, weights, policy_options{}, ec);
  }
  if (ec) {
    release_block(p, bytes, align, interleaved_mapping(s.options));
    // Out of mappings (mbind's ENOMEM) is out of memory for an allocator: std::bad_alloc.
    if (ec == std::errc::not_enough_memory) throw_bad_alloc();
    throw_failure(ec, s.weights.empty() ? "interleave" : "weighted_interleave");
  }
  // Its bytes count for every node it is interleaved over (the live counters), by weight; a
  // node named twice is one node to the kernel's node mask.
  arena_table::spread over;
  try {
    for (std::size_t i = 0; i < s.nodes.size(); ++i)
      if (std::none_of(over.begin(), over.end(), [&](const auto& e) { return e.first == s.nodes[i]; }))
        over.emplace_back(s.nodes[i], s.weights.empty() ? 1 : s.weights[i]);
  } catch (...) {
    over.clear();  // no memory for the record: counted where it was mapped
  }
  spread_large(p, std::move(over));
  if (s.options.populate) {
    const std::size_t ps = page_size();
    for (std::size_t off = 0; off < bytes; off += ps) static_cast<volatile char*>(p)[off] = 0;
  }
  return p;
}

inline void interleave_deallocate(const interleave_state& s, void* p, std::size_t bytes, std::size_t align) noexcept {
  release_block(p, bytes, align, is_small(bytes, align) ? placement_of(s.options) : interleaved_mapping(s.options));
}

/// The nodes a `NUMAAFF_INTERLEAVE_NODES` value names; every kernel node for none.
inline std::vector<node_id> interleave_nodes_from(const char* value) {
  if (value == nullptr || trim(value).empty()) return kernel_nodes();
  std::vector<node_id> nodes;
  if (!parse_list(value, nodes, max_nodes) || nodes.empty() ||
      !std::all_of(nodes.begin(), nodes.end(), [](node_id n) { return valid_node(n); }))
    throw_invalid_argument(std::string("NUMAAFF_INTERLEAVE_NODES='") + value +
                           "': expected a list of the kernel's nodes such as 0-3 or 0,2 (nodes: " +
                           format_list(kernel_nodes()) + ")");
  return nodes;
}

/// NUMAAFF_INTERLEAVE_NODES as read at start-up: the state, or why the value is wrong.
struct default_interleave {
  std::shared_ptr<interleave_state> state;
  std::exception_ptr error;  // std::invalid_argument naming the variable, or std::bad_alloc
};

inline default_interleave read_default_interleave() noexcept {
  default_interleave d;
  try {
    d.state = std::make_shared<interleave_state>();
    d.state->nodes = interleave_nodes_from(std::getenv("NUMAAFF_INTERLEAVE_NODES"));
  } catch (...) {
    d.state.reset();
    d.error = std::current_exception();
  }
  return d;
}

/// Read during static initialisation, like the process tables (detail/page_span.hpp), so that no
/// thread can be inside a first initialisation when another forks; a wrong value throws at
/// the first use, not at start-up.
inline const default_interleave default_interleave_setting = read_default_interleave();

/// Shared by every default-constructed interleave_allocator and by allocate_interleaved.
/// @throws std::invalid_argument if NUMAAFF_INTERLEAVE_NODES was wrong at start-up.
inline const std::shared_ptr<interleave_state>& default_interleave_state() {
  if (default_interleave_setting.error) std::rethrow_exception(default_interleave_setting.error);
  return default_interleave_setting.state;
}

}  // namespace detail

// ---- raw blocks -------------------------------------------------------------------------

/**
 * `bytes` of memory on `node`, page-aligned for large blocks (and 16-byte or more aligned
 * always). Free with deallocate(p, bytes) giving the same size.
 *
 * Thread-safe. Small blocks take no system call in the common case.
 * @throws std::invalid_argument for a node the kernel does not have.
 * @throws std::bad_alloc when memory runs out (or a strict populated block exceeds the node's
 *         free memory); std::system_error named "mbind" if the kernel refuses the placement.
 */
inline void* allocate_on_node(std::size_t bytes, node_id node, alloc_options options = {}) {
  detail::require_node("allocate_on_node", node);
  return detail::allocate_or_throw(bytes, alignof(std::max_align_t), node, options);
}
/// Same, reporting failure as nullptr + ec.
inline void* allocate_on_node(std::size_t bytes, node_id node, alloc_options options, std::error_code& ec) noexcept {
  if (!detail::valid_node(node)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  return detail::numa_allocate(bytes, alignof(std::max_align_t), node, detail::placement_of(options), ec);
}
/// Frees a block from allocate_on_node or allocate_interleaved; the pointer says what kind of
/// block it is, so `options` need not be the allocation's. Thread-safe, never throws; aborts
/// with a message for a block freed twice, a pointer numaaff did not give, or a size that
/// does not fit the block (see the file comment).
inline void deallocate(void* p, std::size_t bytes, alloc_options options = {}) noexcept {
  detail::release_block(p, bytes, alignof(std::max_align_t), options);
}

/**
 * `bytes` of memory spread over the nodes: a block above 32 KiB page by page over all of
 * them, a smaller one whole on the next node in turn. Over `NUMAAFF_INTERLEAVE_NODES` if set,
 * else every node. Free with deallocate(p, bytes) (default options).
 *
 * Thread-safe. @throws std::bad_alloc when memory runs out; std::system_error named "mbind"
 * if the kernel refuses the policy; std::invalid_argument for a malformed
 * `NUMAAFF_INTERLEAVE_NODES`.
 */
inline void* allocate_interleaved(std::size_t bytes) {
  return detail::interleave_allocate(*detail::default_interleave_state(), bytes, alignof(std::max_align_t));
}

// ---- STL allocators ---------------------------------------------------------------------

/// The propagate traits of numaaff's stateful allocators (node, interleave, tier): an
/// allocator travels with its container on copy assignment, move assignment and swap, and two
/// allocators are equal only when they place alike.
struct propagating_allocator {
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;
};

/**
 * A standard allocator placing every element on one node. Stateful: two allocators are equal
 * when they place on the same node with the same options, and the propagate traits are true,
 * so containers carry their node along on copy, move and swap.
 *
 * Thread-safe (allocate/deallocate may be called from any thread; memory freed is reused on
 * its own node). Throws std::bad_alloc when out of memory.
 */
template <class T>
class node_allocator : public propagating_allocator {
 public:
  using value_type = T;

  /**
   * On the homenode of the thread that constructs it (this_homenode(); a logical node of a
   * synthetic-topology pool is never used), fixed from then on: a container member of a class
   * gets the node of the thread that builds the object, and keeps it when copied or moved.
   * @throws std::invalid_argument when `NUMAAFF_HOMENODE` is not a kernel node.
   */
  node_allocator() : node_(detail::local_node()) {}
  /// @throws std::invalid_argument for a node the kernel does not have.
  explicit node_allocator(node_id node, alloc_options options = {}) : node_(node), options_(options) {
    detail::require_node("node_allocator", node);
  }
  template <class U>
  node_allocator(const node_allocator<U>& other) noexcept : node_(other.node()), options_(other.options()) {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) detail::throw_bad_array_new_length();
    return static_cast<T*>(detail::allocate_or_throw(n * sizeof(T), alignof(T), node_, options_));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::release_block(p, n * sizeof(T), alignof(T), options_); }

  node_id node() const noexcept { return node_; }
  const alloc_options& options() const noexcept { return options_; }

  template <class U>
  friend bool operator==(const node_allocator& a, const node_allocator<U>& b) noexcept {
    return a.node() == b.node() && a.options() == b.options();
  }
  template <class U>
  friend bool operator!=(const node_allocator& a, const node_allocator<U>& b) noexcept {
    return !(a == b);
  }

 private:
  node_id node_;
  alloc_options options_;
};

/**
 * A standard allocator spreading memory over several nodes: a large block (above 32 KiB) page
 * by page, small blocks round-robin. Copies share one cursor and compare equal.
 */
template <class T>
class interleave_allocator : public propagating_allocator {
 public:
  using value_type = T;

  /**
   * Over the nodes `NUMAAFF_INTERLEAVE_NODES` lists at start-up (kernel syntax: "0-3", "0,2"; read
   * during static initialisation, like OMP_ variables: setting it later has no effect), else every
   * node of the kernel. All default-constructed allocators share one cursor and compare equal.
   * @throws std::invalid_argument if `NUMAAFF_INTERLEAVE_NODES` is malformed or names a node
   *         the kernel does not have (the message names the variable).
   */
  interleave_allocator() : state_(detail::default_interleave_state()) {}
  /// @throws std::invalid_argument for an empty list or a node the kernel does not have.
  explicit interleave_allocator(std::vector<node_id> nodes, alloc_options options = {}) {
    detail::require_nodes("interleave_allocator", nodes);
    state_ = std::make_shared<detail::interleave_state>();
    state_->nodes = std::move(nodes);
    state_->options = options;
  }
  /**
   * In proportion to `weights` (as weighted_interleave): a large block's pages, and small
   * blocks in turn (node i takes weights[i] of every round):
   * `interleave_allocator<double>(numaaff::by_weight, {{0, 3}, {2, 1}})`. With
   * `bandwidth_weights()`, a bandwidth-bound container draws on every tier at once. (The tag
   * keeps `interleave_allocator<T>({0, 1})` and `{{0, 1}}` node lists.)
   * @throws std::invalid_argument naming `weights` (as weighted_interleave).
   */
  interleave_allocator(by_weight_t, const std::vector<node_weight>& weights, alloc_options options = {}) {
    detail::require_weights("interleave_allocator", weights);
    state_ = std::make_shared<detail::interleave_state>();
    state_->set_weights(weights);
    state_->options = options;
  }
  template <class U>
  interleave_allocator(const interleave_allocator<U>& other) noexcept : state_(detail::interleave_access::state(other)) {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) detail::throw_bad_array_new_length();
    return static_cast<T*>(detail::interleave_allocate(*state_, n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::interleave_deallocate(*state_, p, n * sizeof(T), alignof(T)); }

  const std::vector<node_id>& nodes() const noexcept { return state_->nodes; }
  /// The nodes with their reduced weights (1 each when interleaving evenly).
  std::vector<node_weight> weights() const { return state_->weight_list(); }

  template <class U>
  friend bool operator==(const interleave_allocator& a, const interleave_allocator<U>& b) noexcept {
    return a.state_ == detail::interleave_access::state(b);
  }
  template <class U>
  friend bool operator!=(const interleave_allocator& a, const interleave_allocator<U>& b) noexcept {
    return !(a == b);
  }

 private:
  friend struct detail::interleave_access;
  std::shared_ptr<detail::interleave_state> state_;
};

/**
 * A stateless standard allocator placing memory on the calling thread's homenode at the time
 * of each allocation (this_homenode()). All instances are equal: memory may be freed from any
 * thread and returns to the node it came from. Inside a task of a pool built on a synthetic or
 * XML topology, whose homenodes are logical, memory goes where it would for a thread without
 * a homenode (`NUMAAFF_HOMENODE`, else the node the thread runs on).
 */
template <class T>
class local_allocator {
 public:
  using value_type = T;
  using is_always_equal = std::true_type;

  local_allocator() noexcept = default;
  template <class U>
  local_allocator(const local_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) detail::throw_bad_array_new_length();
    return static_cast<T*>(detail::allocate_or_throw(n * sizeof(T), alignof(T), detail::local_node(),
                                                     detail::placement_of(alloc_options{}, detail::heap_kind::local)));
  }
  void deallocate(T* p, std::size_t n) noexcept { detail::release_block(p, n * sizeof(T), alignof(T), alloc_options{}); }

  template <class U>
  friend bool operator==(const local_allocator&, const local_allocator<U>&) noexcept {
    return true;
  }
  template <class U>
  friend bool operator!=(const local_allocator&, const local_allocator<U>&) noexcept {
    return false;
  }
};

namespace detail {

/// How a tier's blocks are mapped: small blocks from the node's bound slabs (a mapping each
/// would cost a page per block); large blocks preferred on each segment's node.
inline alloc_options tier_options(std::size_t bytes, std::size_t align) noexcept {
  alloc_options o;
  o.strict = is_small(bytes, align);
  return o;
}

/**
 * A block of tier `tier` for the calling thread. A small block comes from the slabs of the
 * first node in tier order with room for a slab. A large block is planned over the tier order
 * (tier_plan): the fast tier takes what it has room for and the rest spills to the next tiers
 * in attribute order, each segment preferred on its node (so that memory that runs out between
 * the plan and the first touch still spills, where the kernel's fallback goes). Segments are
 * whole huge pages in a block of 2 MiB or more, so that no huge page straddles two tiers.
 */
inline void* tier_allocate(memory_attribute tier, std::size_t bytes, std::size_t align) {
  const std::vector<node_id>& order = tier_order_here(tier);
  const alloc_options options = tier_options(bytes, align);
  placement_options o = placement_of(options, tier == memory_attribute::capacity ? heap_kind::capacity : heap_kind::fastest);
  if (is_small(bytes, align)) {
    const auto roomy = std::find_if(order.begin(), order.end(), [](node_id n) { return node_room(n) >= 2 * slab_size; });
    const node_id n = roomy != order.end() ? *roomy : order.front();
    void* p = allocate_or_throw(bytes, align, n, o);
    node_room_take(n, class_bytes(size_class(bytes, align)));
    return p;
  }
  const std::size_t ps = page_size(), len = align_up(bytes, ps);
  const std::vector<tier_segment> plan = tier_plan(order, len, len >= huge_page_size() ? huge_page_size() : ps, node_room);
  std::vector<std::vector<unsigned long>> masks(plan.size());  // before the mapping: nothing to leak
  std::string why;
  for (std::size_t i = 1; i < plan.size(); ++i) make_mask({plan[i].node}, masks[i], why);
  // Its bytes count for each segment's node (the live counters), once the segments are placed.
  arena_table::spread over;
  try {
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const node_id n = i == 0 || masks[i].empty() ? plan.front().node : plan[i].node;  // no mask: the first node's policy
      const auto e = std::find_if(over.begin(), over.end(), [&](const auto& w) { return w.first == n; });
      if (e == over.end()) over.emplace_back(n, plan[i].bytes);
      else e->second += plan[i].bytes;
    }
  } catch (...) {
    over.clear();  // no memory for the record: counted where it was mapped
  }
  // A block over several nodes is mapped fresh and counted once its segments are placed: kept
  // pages would be resident on the first node already, where a segment's policy leaves them.
  o.counted_when_mapped = o.keep_pages = over.size() < 2;
  void* p = allocate_or_throw(bytes, align, plan.front().node, o);
  std::size_t at = plan.front().bytes;
  failed_call = sys::count_;
  std::error_code ec;  // apply_policy is noexcept
  for (std::size_t i = 1; i < plan.size() && !ec; at += plan[i++].bytes) {
    if (masks[i].empty()) continue;  // not a kernel node (a synthetic topology): the first node's policy
    apply_policy(page_span{reinterpret_cast<std::uintptr_t>(p) + at, plan[i].bytes / ps}, MPOL_PREFERRED, masks[i], {}, ec);
  }
  if (ec) {
    release_block(p, bytes, align, o);
    if (ec == std::errc::not_enough_memory) throw_bad_alloc();  // out of mappings
    throw_failure(ec, "mbind");
  }
  if (!o.counted_when_mapped) spread_large(p, std::move(over));
  for (const tier_segment& s : plan) node_room_take(s.node, s.bytes);
  return p;
}

}  // namespace detail

/**
 * A standard allocator placing memory on a memory tier for the allocating thread, chosen at
 * each allocation: `memory_attribute::bandwidth` the fastest memory from the thread's homenode
 * (an HBM or CXL node with more bandwidth, per the firmware's HMAT), `latency` the nearest,
 * `capacity` the node with the most free memory. Without an HMAT, bandwidth and latency mean
 * the nearest node (the distance order). When the tier is full, memory spills in attribute
 * order: a large block takes what room the best node has left and the rest from the next
 * nodes of topology::targets_by (not the kernel's fallback, which goes by distance from the
 * full node and would pass over a faster tier); a small block comes from the bound slabs of
 * the first node in that order with room. Room is MemFree less the kernel's reserves, read at
 * most every 10 ms. All allocators of one tier are equal; memory may be freed from any thread.
 *
 * Thread-safe. @throws std::bad_alloc when memory runs out.
 * @note One node: everything is on it.
 */
template <class T>
class tier_allocator : public propagating_allocator {
 public:
  using value_type = T;

  explicit tier_allocator(memory_attribute tier = memory_attribute::bandwidth) noexcept : tier_(tier) {}
  template <class U>
  tier_allocator(const tier_allocator<U>& other) noexcept : tier_(other.tier()) {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) detail::throw_bad_array_new_length();
    return static_cast<T*>(detail::tier_allocate(tier_, n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    detail::release_block(p, n * sizeof(T), alignof(T), detail::tier_options(n * sizeof(T), alignof(T)));
  }
  memory_attribute tier() const noexcept { return tier_; }

  template <class U>
  friend bool operator==(const tier_allocator& a, const tier_allocator<U>& b) noexcept {
    return a.tier() == b.tier();
  }
  template <class U>
  friend bool operator!=(const tier_allocator& a, const tier_allocator<U>& b) noexcept {
    return !(a == b);
  }

 private:
  memory_attribute tier_;
};

// ---- std::pmr resources ------------------------------------------------------------------

/**
 * A `std::pmr::memory_resource` placing every block on one node (same placement as
 * node_allocator). Thread-safe. Equal to another node_resource with the same node and options.
 */
class node_resource final : public std::pmr::memory_resource {
 public:
  /// @throws std::invalid_argument for a node the kernel does not have.
  explicit node_resource(node_id node, alloc_options options = {}) : node_(node), options_(options) {
    detail::require_node("node_resource", node);
  }
  node_id node() const noexcept { return node_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    return detail::allocate_or_throw(bytes, align, node_, options_);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    detail::release_block(p, bytes, align, options_);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* o = dynamic_cast<const node_resource*>(&other);
    return o != nullptr && o->node_ == node_ && o->options_ == options_;
  }
  node_id node_;
  alloc_options options_;
};

/// A `std::pmr::memory_resource` interleaving over nodes (same placement as interleave_allocator).
class interleave_resource final : public std::pmr::memory_resource {
 public:
  /// @throws std::invalid_argument for an empty list or a node the kernel does not have.
  explicit interleave_resource(std::vector<node_id> nodes, alloc_options options = {}) {
    detail::require_nodes("interleave_resource", nodes);
    state_.nodes = std::move(nodes);
    state_.options = options;
  }
  /// In proportion to `weights` (as interleave_allocator). @throws std::invalid_argument naming `weights`.
  interleave_resource(by_weight_t, const std::vector<node_weight>& weights, alloc_options options = {}) {
    detail::require_weights("interleave_resource", weights);
    state_.set_weights(weights);
    state_.options = options;
  }
  const std::vector<node_id>& nodes() const noexcept { return state_.nodes; }
  std::vector<node_weight> weights() const { return state_.weight_list(); }

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override { return detail::interleave_allocate(state_, bytes, align); }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    detail::interleave_deallocate(state_, p, bytes, align);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
  detail::interleave_state state_;
};

/// A `std::pmr::memory_resource` allocating on the calling thread's homenode (as local_allocator).
class local_resource final : public std::pmr::memory_resource {
 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    return detail::allocate_or_throw(bytes, align, detail::local_node(), detail::placement_of(alloc_options{}, detail::heap_kind::local));
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    detail::release_block(p, bytes, align, alloc_options{});
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return dynamic_cast<const local_resource*>(&other) != nullptr;
  }
};

/// A process-wide local_resource, e.g. for `std::pmr::set_default_resource(&numaaff::local_memory())`.
inline local_resource& local_memory() noexcept {
  static local_resource resource;
  return resource;
}

/// A `std::pmr::memory_resource` on a memory tier for the allocating thread (as tier_allocator).
class tier_resource final : public std::pmr::memory_resource {
 public:
  explicit tier_resource(memory_attribute tier = memory_attribute::bandwidth) noexcept : tier_(tier) {}
  memory_attribute tier() const noexcept { return tier_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    return detail::tier_allocate(tier_, bytes, align);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    detail::release_block(p, bytes, align, detail::tier_options(bytes, align));
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* o = dynamic_cast<const tier_resource*>(&other);
    return o != nullptr && o->tier_ == tier_;
  }
  memory_attribute tier_;
};

// ---- convenience types --------------------------------------------------------------------

/// A vector whose elements live on one node: `numaaff::node_vector<double> v(n, node_allocator<double>(1));`
template <class T>
using node_vector = std::vector<T, node_allocator<T>>;

/// Deleter for arrays from make_unique_on_node.
template <class T>
struct node_array_deleter {
  std::size_t count = 0;
  alloc_options options{};
  void operator()(T* p) const noexcept {
    if (p == nullptr) return;
    for (std::size_t i = count; i > 0; --i) p[i - 1].~T();
    detail::release_block(p, count * sizeof(T), alignof(T), options);
  }
};
template <class T>
using unique_node_array = std::unique_ptr<T[], node_array_deleter<T>>;

/**
 * `count` value-initialised elements on `node`, owned by a unique_ptr.
 * @throws as node_allocator::allocate, or what T's constructor throws (nothing leaks).
 */
template <class T>
unique_node_array<T> make_unique_on_node(std::size_t count, node_id node, alloc_options options = {}) {
  node_allocator<T> a(node, options);
  T* p = a.allocate(count);
  std::size_t built = 0;
  try {
    for (; built < count; ++built) ::new (static_cast<void*>(p + built)) T();
  } catch (...) {
    for (std::size_t i = built; i > 0; --i) p[i - 1].~T();
    a.deallocate(p, count);
    throw;
  }
  return unique_node_array<T>(p, node_array_deleter<T>{count, options});
}

}  // namespace numaaff
