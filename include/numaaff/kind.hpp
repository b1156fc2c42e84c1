/**
 * @file kind.hpp
 * @brief The heap by kind: memory asked for by what it should be (on a node, local,
 * interleaved, the fastest, the largest), freed without its size, resized in place or moved.
 *
 * The model: a `kind` names where a block's pages go, resolved when the block is allocated:
 * - `kind::on_node(n)`: node n.
 * - `kind::local()`: the calling thread's homenode (this_homenode()), else the node it runs on.
 *   For small blocks the node it runs on is read where the kernel keeps it in the thread's
 *   rseq area (Linux 6.3 on, with glibc 2.35 on): a thread the kernel moves gets them on its
 *   new node at once. Elsewhere getcpu, which costs more than the allocation, is read once
 *   per 64 of them: from the 65th on at the latest; one pinned by numaaff, or given a
 *   homenode, at once.
 * - `kind::interleave()`: over the nodes (`NUMAAFF_INTERLEAVE_NODES`, else every node): a
 *   large block page by page, small blocks round-robin, as allocate_interleaved.
 * - `kind::fastest()`: the highest-bandwidth memory for the caller's node by the firmware's
 *   HMAT (HBM, say); without an HMAT, the nearest memory, i.e. local DRAM.
 * - `kind::capacity()`: the memory with the most room now (ties: the nearest), e.g. a CXL
 *   expander.
 * and how: `strict()` (the default) keeps every page on the chosen node (MPOL_BIND); a large
 * block bigger than the node's free memory at allocation fails with std::bad_alloc
 * (NULL/ENOMEM in C). Small blocks are not checked one by one, and memory others take between
 * the allocation and the first touch still meets the OOM killer, as with any MPOL_BIND.
 * `preferred()` lets the pages spill: a large block of fastest or capacity in attribute order
 * (as tier_allocator does), everything else where the kernel's fallback puts them.
 * `with_pages(huge_page_mode)` picks transparent huge pages (per_block, the default: none
 * shared by two blocks; never; always) or explicit ones from the node's reserved pool
 * (reserved_2mib, reserved_1gib: each block whole huge pages of its own, placed at
 * allocation; strict fails with std::bad_alloc when the node's pool is short, preferred takes
 * another node's pool, else ordinary pages, counted in refusal_stats(); not for interleave).
 *
 * One heap holds every kind: the slabs of allocator.hpp (256 KiB, bound to one node, one
 * family per kind and strictness, a per-thread cache) for blocks up to 32 KiB, a mapping of its own for
 * larger ones. Memory goes back to the system: a slab whose blocks are all free gives its pages
 * back (but one per node, kind, strictness and class, and the slabs of blocks held in thread caches),
 * and a freed large block keeps its pages for the next large block of its node and strictness
 * (1/32 of the memory the process may have at most: the machine's, its cgroup limit, four
 * times its smallest node; between 32 MiB and 1 GiB, blocks up to a quarter of that; unmapped
 * once unused for a second, at the next large allocation or free, or when a strict block
 * finds their node short; never after numaaff changed its placement: a block must be freed
 * with the placement and protections it was given; a block of a huge page or more made of
 * kept pages holds them up to its next huge page boundary, usable_size() says). reallocate() to the same kind resizes a large
 * block without copying it where it can. So `deallocate(p)` needs no size and no kind, any
 * thread may free any block, and a double free or a pointer the heap did not give aborts with a
 * message, as with allocate_on_node (at the free; for a thread that frees blocks others
 * allocated, when it next checks its frees, before the block is handed out again; two threads
 * that free one block at the same instant, a race ThreadSanitizer reports, can escape the
 * check). Small blocks of different kinds never share a slab, and
 * so a page, even on one node (a local block and an on_node block of the node it resolves to
 * included): each kind's bytes per node are counted apart (node_counters::heap_by_kind).
 * A small block of a node or local kind found in the thread's cache takes no lock, no system
 * call and no exception path (kind_cached_block); everything else goes the full way.
 *
 * One node, or a sandbox that refuses mbind: every kind works and gives node 0's memory (the
 * refusal is counted in system_report()).
 *
 * @code{.cpp}
 * double* hot = static_cast<double*>(numaaff::allocate(numaaff::kind::fastest().preferred(), n * sizeof(double)));
 * hot = static_cast<double*>(numaaff::reallocate(numaaff::kind::fastest().preferred(), hot, 2 * n * sizeof(double)));
 * numaaff::deallocate(hot);
 * std::vector<int, numaaff::kind_allocator<int>> v(numaaff::kind_allocator<int>(numaaff::kind::capacity()));
 * @endcode
 */
#pragma once

#include "allocator.hpp"
#include "detail/arena.hpp"
#include "detail/throw.hpp"
#include "homenode.hpp"
#include "tiers.hpp"
#include "topology.hpp"

#include <cstddef>
#include <cstring>
#include <memory_resource>
#include <new>
#include <string>
#include <system_error>

namespace numaaff {

/// A kind of memory: where its pages go and how strictly (see the file comment). A plain
/// value: copy it freely; two kinds are equal when they place memory alike.
class kind {
 public:
  /// Where a kind puts memory.
  enum class target : unsigned char { node, local, interleave, fastest, capacity };

  /// Memory on node `n`. @throws std::invalid_argument naming `node` for a node the kernel
  /// does not have.
  static kind on_node(node_id n) {
    detail::require_node("kind::on_node", n);
    return kind(target::node, n);
  }
  /// The calling thread's homenode at allocation, else the node it runs on.
  static kind local() noexcept { return kind(target::local, -1); }
  /// Over the interleave nodes (allocate_interleaved's).
  static kind interleave() noexcept { return kind(target::interleave, -1); }
  /// The highest-bandwidth memory for the caller's node (local DRAM without an HMAT).
  static kind fastest() noexcept { return kind(target::fastest, -1); }
  /// The memory with the most room now (ties: the nearest to the caller).
  static kind capacity() noexcept { return kind(target::capacity, -1); }

  /// This kind, with every page on its node (the default); no room: the allocation fails.
  kind strict() const noexcept {
    kind k = *this;
    k.strict_ = true;
    k.cache_group_ = k.cache_group();
    return k;
  }
  /// This kind, with pages that spill when its node is full (attribute order for fastest
  /// and capacity).
  kind preferred() const noexcept {
    kind k = *this;
    k.strict_ = false;
    k.cache_group_ = k.cache_group();
    return k;
  }
  /// This kind, with transparent huge pages chosen by `mode` (allocator.hpp's huge_page_mode).
  kind with_pages(huge_page_mode mode) const noexcept {
    kind k = *this;
    k.pages_ = mode;
    k.cache_group_ = k.cache_group();
    return k;
  }

  target where() const noexcept { return target_; }
  /// The node of an on_node kind; -1 for the others (they choose at allocation).
  node_id node() const noexcept { return node_; }
  bool is_strict() const noexcept { return strict_; }
  huge_page_mode pages() const noexcept { return pages_; }

  friend bool operator==(const kind& a, const kind& b) noexcept {
    return a.target_ == b.target_ && a.node_ == b.node_ && a.strict_ == b.strict_ && a.pages_ == b.pages_;
  }
  friend bool operator!=(const kind& a, const kind& b) noexcept { return !(a == b); }

 private:
  // The inline allocation reads cache_group_.
  friend void* allocate(const kind& k, std::size_t bytes, std::size_t align);
  friend void* allocate(const kind& k, std::size_t bytes, std::size_t align, std::error_code& ec) noexcept;
  kind(target t, node_id n) noexcept : target_(t), node_(n), cache_group_(cache_group()) {}

  /// Which group of the thread caches' bins holds this kind's small blocks
  /// (detail::cache_group_of): a node kind's; a local kind's on node 0, its node being added
  /// at allocation (detail::cache_group_on); none (cache_groups) for a kind no cache holds:
  /// interleave, fastest, capacity, a node from cached_nodes up, and pages other than
  /// per_block and never (whose small blocks take the full way).
  std::uint32_t cache_group() const noexcept {
    if (pages_ != huge_page_mode::per_block && pages_ != huge_page_mode::never) return detail::cache_groups;
    return detail::kind_cache_group(static_cast<detail::heap_kind>(target_), node_, strict_);
  }

  target target_;
  node_id node_;
  bool strict_ = true;
  huge_page_mode pages_ = huge_page_mode::per_block;
  // Derived from the others, kept so that the inline allocation tests one value (compared
  // by none: operator== looks at what it is derived from).
  std::uint32_t cache_group_;
};

namespace detail {

static_assert(static_cast<int>(kind::target::node) == static_cast<int>(heap_kind::node) &&
                  static_cast<int>(kind::target::local) == static_cast<int>(heap_kind::local) &&
                  static_cast<int>(kind::target::interleave) == static_cast<int>(heap_kind::interleave) &&
                  static_cast<int>(kind::target::fastest) == static_cast<int>(heap_kind::fastest) &&
                  static_cast<int>(kind::target::capacity) == static_cast<int>(heap_kind::capacity),
              "the heap's kinds mirror kind::target");
inline constexpr heap_kind heap_kind_of(kind::target t) noexcept { return static_cast<heap_kind>(t); }

/// The memory tier of a fastest or capacity kind.
inline memory_attribute tier_of(const kind& k) noexcept {
  return k.where() == kind::target::fastest ? memory_attribute::bandwidth : memory_attribute::capacity;
}

/// The node a kind other than interleave resolves to for the calling thread now.
inline node_id kind_node(const kind& k) {
  switch (k.where()) {
    case kind::target::node: return k.node();
    case kind::target::fastest:
    case kind::target::capacity: return tier_order_here(tier_of(k)).front();
    case kind::target::local:
    case kind::target::interleave: break;
  }
  return local_node();
}

/// False when `bytes` more of strict kind `k` would not fit on `node`. A strict block larger than
/// what its node can still take would end in the OOM killer at first touch: it is refused
/// instead. The room is the node's free memory, re-read at most every 10 ms; nothing is taken
/// from it here, since a block freed right after would not give it back (an allocate/free
/// loop would run the room down to nothing). Small blocks come from slabs and are not checked
/// one by one; explicit huge pages come from the node's pool, which map_reserved checks. Pages
/// the heap keeps from freed blocks (spare_extents) are given back before a block is refused.
inline bool kind_has_room(const kind& k, node_id node, std::size_t bytes) {
  if (!k.is_strict() || reserved_page_bytes(static_cast<detail::huge_page_mode>(k.pages())) != 0) return true;
  std::uint64_t room = node_room(node);
  if (room != room_unknown && room < bytes && give_back_kept(node) != 0) {
    node_room_forget(node);
    room = node_room(node);
  }
  return room == room_unknown || room >= bytes;
}

/// A block of kind `k`. @throws std::bad_alloc when a strict kind's node has no room for it
/// (or memory runs out); std::system_error if the kernel refuses a placement it should take.
/// `k` by value: the slow path of an inline allocation then never takes the address of the
/// caller's kind, which stays in registers across the caller's loop (by reference, 64 blocks of
/// 16 B allocated and freed took 353-359 ns; by value, 312-315).
inline void* kind_allocate(kind k, std::size_t bytes, std::size_t align) {
  if (bytes == 0) bytes = 1;
  alloc_options o;
  o.strict = k.is_strict();
  o.huge_pages = k.pages();
  if (k.where() == kind::target::interleave) {
    if (reserved_page_bytes(static_cast<detail::huge_page_mode>(k.pages())) != 0)
      throw_invalid_argument("numaaff::allocate: kind::interleave() takes no reserved huge pages (with_pages)");
    interleave_state& s = *default_interleave_state();
    if (s.options == o) return interleave_allocate(s, bytes, align);
    // Other options: small blocks take turns on the shared cursor; a large block is
    // interleaved page by page, so a state of its own (no cursor needed) carries the options.
    if (is_small(bytes, align)) return allocate_or_throw(bytes, align, s.pick(), placement_of(o, heap_kind::interleave));
    interleave_state mine;
    mine.nodes = s.nodes;
    mine.options = o;
    return interleave_allocate(mine, bytes, align);
  }
  // A preferred large block of a tier spills in attribute order, segment by segment
  // (tier_allocate); small blocks, and blocks with a huge-page choice of their own, are
  // preferred on the tier's first node and spill where the kernel's fallback puts them.
  if (!k.is_strict() && (k.where() == kind::target::fastest || k.where() == kind::target::capacity) &&
      !is_small(bytes, align) && k.pages() == numaaff::huge_page_mode::per_block)
    return tier_allocate(tier_of(k), bytes, align);
  const node_id n = kind_node(k);
  if (!is_small(bytes, align) && !kind_has_room(k, n, bytes)) throw_bad_alloc();
  return allocate_or_throw(bytes, align, n, placement_of(o, heap_kind_of(k.where())));
}

/// The fast path of a small block of a node or local kind: a block from the calling thread's
/// cache, with no system call, lock or exception; nullptr sends the caller to kind_allocate
/// (an empty bin, another kind, a block that is not small, a node that cannot be read). The
/// same block kind_allocate would give: small blocks of these kinds come from the slabs of
/// their node and family, with no huge pages (per_block and never alike).
/// `cache_group`: the kind's (kind::cache_group), `local`: whether it is a local kind. The
/// kind's where, node, strictness and pages come down to that one value: the loop of a caller
/// that allocates took 4% less time than when they were each tested (64 blocks of 16 and 64 B
/// allocated and freed on one thread: 294-298 ns against 307-316).
inline void* kind_cached_block(std::uint32_t cache_group, bool local, std::size_t bytes, std::size_t align) noexcept {
  if (bytes - 1 >= small_limit || align > small_limit) return nullptr;
  const std::uint64_t group = local ? cache_group_on(cache_group, local_node_cached()) : cache_group;
  if (group >= cache_groups) return nullptr;
  const int c = size_class(bytes, align);
  return cached_block_in(static_cast<std::uint32_t>(group) * class_count + static_cast<std::uint32_t>(c), c);
}

/// The same for a kind given by its parts, with no page choice (the C API's kind calls).
inline void* cached_block_for(kind::target where, node_id node, bool strict, std::size_t bytes, std::size_t align) noexcept {
  return kind_cached_block(kind_cache_group(heap_kind_of(where), node, strict), where == kind::target::local, bytes, align);
}

/// numaaff::allocate's error for an `align` that is not a power of two, out of line: the
/// string it builds would make allocate too big for the compiler to inline at every call.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_bad_kind_align(std::size_t align) {
  throw_invalid_argument("numaaff::allocate: align " + std::to_string(align) + " is not a power of two");
}

/// Resizes the live block `p` (not null) to `bytes` (0: frees it, nullptr): the same block
/// when its size class (a slab block) or page count (a mapping of its own) is already right;
/// a large block that stays large is resized without a copy (remap_large: pages and placement
/// kept) where `may_remap(placed, have, bytes)` allows it, `placed` being how it was placed
/// (placed_block: the node and strictness it was mapped with, its kind) and `have` its size; else a block from `allocate(bytes)`
/// (which throws or returns nullptr on failure, leaving `p` as it was) with the contents copied
/// up to the smaller size.
template <class Allocate, class MayRemap>
void* reallocate_with(void* p, std::size_t bytes, Allocate&& allocate, MayRemap&& may_remap) {
  if (bytes == 0) {
    numa_free(p);
    return nullptr;
  }
  const std::size_t have = numa_usable_size(p);
  const std::size_t align = alignof(std::max_align_t);
  if (slabs.holds(p)) {
    if (is_small(bytes, align) && class_bytes(size_class(bytes, align)) == have) return p;
  } else if (align_up(bytes, page_size()) == have) {  // a mapping of its own keeps its pages
    return p;
  } else if (!is_small(bytes, align) && may_remap(large_placement(p), have, bytes)) {
    if (void* q = remap_large(p, bytes)) return q;
  }
  void* q = allocate(bytes);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, have < bytes ? have : bytes);
  numa_free(p);
  return q;
}

/// Zeroes the block of `bytes` the calling thread has just allocated, for calloc: a small block
/// is reused and holds old data, and so does a large one made of kept pages (spare_extents); a
/// fresh mapping comes zeroed from the kernel (clearing it would touch every page for nothing).
inline void clear_fresh_block(void* p, std::size_t bytes) noexcept {
  if (p != nullptr && (slabs.holds(p) || last_large_block_reused)) std::memset(p, 0, bytes);
}

}  // namespace detail

/**
 * `bytes` of memory of kind `k`, aligned to `align` (a power of two; default: any object).
 * Free with deallocate(p), from any thread.
 *
 * Thread-safe; small blocks take no system call in the common case.
 * @throws std::invalid_argument naming `align` when it is not a power of two.
 * @throws std::bad_alloc when the kind's memory runs out (a strict kind's node has no room).
 * @throws std::system_error named "mbind" when the kernel refuses a placement it should take.
 */
inline void* allocate(const kind& k, std::size_t bytes, std::size_t align = alignof(std::max_align_t)) {
  if (align == 0 || (align & (align - 1)) != 0)
    detail::throw_bad_kind_align(align);
  if (void* p = detail::kind_cached_block(k.cache_group_, k.target_ == kind::target::local, bytes, align)) return p;
  return detail::kind_allocate(k, bytes, align);
}

/// Same, reporting failure as nullptr + ec (invalid_argument, not_enough_memory, or the
/// failed call's errno) instead of throwing.
inline void* allocate(const kind& k, std::size_t bytes, std::size_t align, std::error_code& ec) noexcept {
  ec.clear();
  if (align == 0 || (align & (align - 1)) != 0) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  if (void* p = detail::kind_cached_block(k.cache_group_, k.target_ == kind::target::local, bytes, align)) return p;
  try {
    return detail::kind_allocate(k, bytes, align);
  } catch (const std::system_error& e) {
    ec = e.code();
  } catch (const std::invalid_argument&) {
    ec = std::make_error_code(std::errc::invalid_argument);
  } catch (...) {  // std::bad_alloc and anything else an allocation can meet
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
  return nullptr;
}

/// Frees a block of any kind, of allocate_on_node or allocate_interleaved, without its size.
/// nullptr is a no-op. Thread-safe, never throws; aborts with a message for a block freed
/// twice or a pointer the heap did not give.
inline void deallocate(void* p) noexcept { detail::numa_free(p); }

/// The bytes the block at `p` can hold (at least what was asked). Aborts with a message for a
/// pointer that is not the start of a live block of the heap.
inline std::size_t usable_size(const void* p) noexcept { return detail::numa_usable_size(p); }

/**
 * The block at `p` resized to `bytes`: its contents are kept up to the smaller size. The same
 * block, where it already is, when its size class (a small block) or page count (a large
 * one) is already right; else a new block of kind `k`, the old one freed. nullptr
 * `p`: allocate(k, bytes). `bytes` 0: frees `p` and returns nullptr.
 *
 * @throws as allocate; on a throw, `p` is untouched and still owned by the caller.
 */
inline void* reallocate(const kind& k, void* p, std::size_t bytes) {
  if (p == nullptr) return allocate(k, bytes);
  constexpr std::size_t align = alignof(std::max_align_t);
  // Resized in place only when `k` places memory as the block is placed (an interleave kind's
  // block is placed by page, a kind with its own huge-page choice maps otherwise), and a growth
  // fits in its node.
  const auto same_placement = [&](detail::placed_block b, std::size_t have, std::size_t n) {
    if (k.where() == kind::target::interleave ||
        (k.pages() != numaaff::huge_page_mode::per_block && k.pages() != numaaff::huge_page_mode::never))
      return false;
    // The same kind too: a block resized in place keeps counting for the kind it was made as.
    if (b.placed.node != detail::kind_node(k) || b.placed.strict != k.is_strict() || b.kind != detail::heap_kind_of(k.where()))
      return false;
    // A preferred tier block grows through tier_allocate, which spills in attribute order; grown
    // in place, its new pages would go where the kernel's fallback sends them.
    if (!k.is_strict() && (k.where() == kind::target::fastest || k.where() == kind::target::capacity)) return n <= have;
    return n <= have || detail::kind_has_room(k, b.placed.node, n - have);
  };
  return detail::reallocate_with(p, bytes, [&](std::size_t n) { return detail::kind_allocate(k, n, align); }, same_placement);
}

/// A standard allocator of kind `k` (see the file comment). All allocators of equal kinds
/// are equal: memory of one may be freed by another, from any thread.
template <class T>
class kind_allocator : public propagating_allocator {
 public:
  using value_type = T;
  explicit kind_allocator(const kind& k = kind::local()) noexcept : kind_(k) {}
  template <class U>
  kind_allocator(const kind_allocator<U>& other) noexcept : kind_(other.memory_kind()) {}

  /// @throws std::bad_alloc when `n` objects do not fit in a size_t or the kind's memory runs out.
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) detail::throw_bad_alloc();
    return static_cast<T*>(detail::kind_allocate(kind_, n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, std::size_t) noexcept { detail::numa_free(p); }
  const kind& memory_kind() const noexcept { return kind_; }

  template <class U>
  friend bool operator==(const kind_allocator& a, const kind_allocator<U>& b) noexcept {
    return a.memory_kind() == b.memory_kind();
  }
  template <class U>
  friend bool operator!=(const kind_allocator& a, const kind_allocator<U>& b) noexcept {
    return !(a == b);
  }

 private:
  kind kind_;
};

/// A std::pmr resource of kind `k`. Thread-safe; equal to another kind_resource of an equal
/// kind (their blocks are interchangeable).
class kind_resource final : public std::pmr::memory_resource {
 public:
  explicit kind_resource(const kind& k = kind::local()) noexcept : kind_(k) {}
  const kind& memory_kind() const noexcept { return kind_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override { return numaaff::allocate(kind_, bytes, align); }
  void do_deallocate(void* p, std::size_t, std::size_t) noexcept override { detail::numa_free(p); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* o = dynamic_cast<const kind_resource*>(&other);
    return o != nullptr && o->kind_ == kind_;
  }
  kind kind_;
};

}  // namespace numaaff
