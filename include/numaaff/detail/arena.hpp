// The memory behind numaaff's allocators and resources.
//
// Large blocks (above small_limit) are their own mmap, bound to the node with mbind. A freed
// one keeps its pages for the next large block of the same placement (spare_extents: bounded by
// kept_bytes_limit(), blocks up to a quarter of that, aged out after a second), as malloc keeps
// what free gives it; larger blocks, and those of other placements, are unmapped. Small blocks
// come from per-node arenas: 256 KiB slabs, each bound to one node (MPOL_BIND, or
// MPOL_PREFERRED for the preferred families), holding blocks of one kind (heap_kind: a family
// per kind and strictness, so that every slab byte counts for one kind) and of one power-of-two
// size class, with a header at the slab start naming the node, family, class and the thread
// caches' bin of its blocks, then a byte of state per block. Each thread keeps a cache of free
// blocks per (node, family, class) for the node and local kinds, as arrays of addresses,
// refilled from and handed back to the node's central free list in batches of addresses
// (bounded per class: 128 KiB of blocks, at least 64), so a small allocate/free pair is a few
// loads and stores, not a lock or a system call (numa_alloc_onnode makes one mmap per call),
// and a block that one thread allocates and another frees has none of its own lines touched.
// A list keeps its slabs per thread (carve slots), so that threads on two CPUs do not get
// blocks side by side (central_list says why). A freed block goes back to the list of the
// node its slab is bound to: memory is reused on its own node only. A slab whose blocks are
// all back in its list is given back: its pages go to the kernel (MADV_DONTNEED; the binding
// stays with the mapping) and the slab to its node's pool, from which any class of the same
// family takes it again. One such slab per list is kept as it is, so that a list that empties
// and refills a slab does not fault its pages in again each time, and so is each slot's slab
// being carved.
//
// A free is checked before it touches any list: a table of every slab (two loads, skipped for
// a block of the slab the thread's last free found there) and a registry of every large
// mapping say whether the pointer is the start of a block of ours, and a small block's state
// byte (1 while handed out) that a second free of it finds 0, at the free or, for a thread
// that frees what others allocate, a batch of frees later (settle_bin says when, and what
// that leaves); a hand-out checks it too. A double free, a foreign pointer, a pointer inside a
// block, or a size that does not fit the block aborts with a message, as glibc's malloc does:
// going on would hand one block to two owners.
#pragma once

#include "armed_ranges.hpp"
#include "cgroup_memory.hpp"
#include "counters.hpp"
#include "futex.hpp"
#include "kernel_nodes.hpp"
#include "numa_calls.hpp"
#include "page.hpp"
#include "proc_files.hpp"
#include "throw.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <unordered_map>
#include <map>
#include <chrono>
#include <iterator>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace numaaff::detail {

/// Huge pages in the arena's mappings (the public `huge_page_mode`, allocator.hpp, documents
/// each choice; allocator.hpp converts).
enum class huge_page_mode : unsigned char { per_block, never, always, reserved_2mib, reserved_1gib };

/// The page size of a mode that takes explicit huge pages from the nodes' reserved pools
/// (hugetlbfs), 0 for the others.
constexpr std::size_t reserved_page_bytes(huge_page_mode m) noexcept {
  return m == huge_page_mode::reserved_2mib ? std::size_t{2} << 20 : m == huge_page_mode::reserved_1gib ? std::size_t{1} << 30 : 0;
}


/// How the arena places a block (the public `alloc_options`, converted by allocator.hpp).
struct placement_options {
  bool strict = true;     // MPOL_BIND, else MPOL_PREFERRED
  bool populate = false;  // fault the pages in now
  huge_page_mode huge_pages = huge_page_mode::per_block;
  // Pages a freed block of the same placement kept may serve it, and its own may be kept for
  // the next (spare_extents). Off for a block whose policy changes after mapping (interleaved).
  bool keep_pages = true;
  // A large block's bytes count on its node (the live counters) when it is mapped. Off for one
  // whose policy is set after mapping (interleaved): spread_large counts it once, where its
  // pages go, so that no snapshot sees it counted on the first node and then taken away.
  bool counted_when_mapped = true;
  heap_kind kind = heap_kind::node;  // what the block was asked for as: its slabs and its counters
};

/// Applies the huge-page choice to a fresh mapping [p, p + len) whose start is
/// huge-page-aligned when it is `len >= huge_page_size()` (per_block) or always.
inline void advise_huge_pages(void* p, std::size_t len, huge_page_mode mode) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t no_huge = at;  // from here to the end: no huge pages
  if (mode == huge_page_mode::always) {
    call(sys::madvise, [&] { return ::madvise(p, len, MADV_HUGEPAGE); });
    return;
  }
  if (mode == huge_page_mode::per_block && len >= huge_page_size()) no_huge = align_down(at + len, huge_page_size());
  if (no_huge < at + len)
    call(sys::madvise, [&] { return ::madvise(reinterpret_cast<void*>(no_huge), at + len - no_huge, MADV_NOHUGEPAGE); });
}

inline constexpr std::size_t small_limit = 32 * 1024;
inline constexpr std::size_t slab_size = 256 * 1024;
inline constexpr int class_count = 12;  // 16 B .. 32 KiB
inline constexpr int max_nodes = 1024;  // the kernel's MAX_NUMNODES on x86-64
inline constexpr int cached_nodes = 16; // thread caches cover nodes below this
/// Blocks a thread cache takes from or hands back to its central list at once: 8 KiB of
/// blocks, at least 32 and at most max_transfer_batch. Each move takes the list's lock, whose
/// line passes between the CPUs of a thread that frees what another allocates: in batches of
/// 128 instead of 32, 64 B blocks handed from one thread to another took 20% less time and
/// 30% less CPU.
inline constexpr std::uint32_t max_transfer_batch = 128;
inline constexpr std::uint32_t transfer_batch_of(int c) noexcept {
  const std::uint32_t by_bytes = std::uint32_t{8192} >> (4 + c);
  return by_bytes > max_transfer_batch ? max_transfer_batch : by_bytes < 32 ? 32 : by_bytes;
}
inline constexpr std::uint32_t slab_magic = 0x4e554d41;  // "NUMA"
/// Slab families, one per kind and strictness: a block of a strict placement never shares a
/// slab, and so a page, with one that may spill elsewhere, nor a block of one kind with one of
/// another (each slab's bytes count for its kind).
inline constexpr int family_count = 2 * static_cast<int>(heap_kind_count);
inline constexpr int family_of(heap_kind k, bool strict) noexcept { return 2 * static_cast<int>(k) + (strict ? 0 : 1); }
inline int family_of(const placement_options& o) noexcept { return family_of(o.kind, o.strict); }
inline constexpr bool family_strict(int f) noexcept { return f % 2 == 0; }
inline constexpr heap_kind family_kind(int f) noexcept { return static_cast<heap_kind>(f / 2); }

/// Thread caches hold blocks of the nodes below cached_nodes, one bin per (node, family, class),
/// for the families of the node and local kinds (the inline fast path's): bins for all ten would
/// make every thread's static TLS 30 KiB. Small blocks of interleave, fastest and capacity go
/// to and from their node's central lists, a lock each.
inline constexpr int cached_families = family_of(heap_kind::local, false) + 1;
static_assert(family_of(heap_kind::node, true) < cached_families && family_of(heap_kind::node, false) < cached_families &&
                  family_of(heap_kind::local, true) < cached_families,
              "the node and local families come first");
/// Bins come in groups, one per (node, family), of one bin per class.
inline constexpr std::uint32_t cache_groups = cached_nodes * cached_families;
inline constexpr std::uint32_t cache_bins = cache_groups * class_count;
/// The group of (node, f), cache_groups when it has none.
inline constexpr std::uint32_t cache_group_of(int node, int f) noexcept {
  if (static_cast<unsigned>(node) >= static_cast<unsigned>(cached_nodes) ||
      static_cast<unsigned>(f) >= static_cast<unsigned>(cached_families))
    return cache_groups;
  return static_cast<std::uint32_t>(node * cached_families + f);
}
/// The group of (node, f) from cache_group_of(0, f) (or cache_groups), in 64 bits: at or past
/// cache_groups when it has none (node -1 or from cached_nodes up).
inline std::uint64_t cache_group_on(std::uint32_t group_on_node_0, int node) noexcept {
  return group_on_node_0 + std::uint64_t{static_cast<std::uint32_t>(node)} * cached_families;
}
/// The group of a kind of heap kind `k` placing on `node` (-1 but for a node kind) with
/// strictness `strict`: a node kind's group, a local kind's on node 0 (cache_group_on adds its
/// node at allocation), cache_groups for interleave, fastest and capacity.
inline constexpr std::uint32_t kind_cache_group(heap_kind k, int node, bool strict) noexcept {
  return k == heap_kind::local  ? cache_group_of(0, family_of(k, strict))
         : k == heap_kind::node ? cache_group_of(node, family_of(k, strict))
                                : cache_groups;
}
inline std::uint32_t cache_bin_of(int node, int f, int c) noexcept {
  const std::uint32_t group = cache_group_of(node, f);
  return group == cache_groups ? cache_bins : group * class_count + static_cast<std::uint32_t>(c);
}

inline int size_class(std::size_t bytes, std::size_t align) noexcept {
  const std::size_t need = bytes > align ? bytes : align;
  if (need <= 16) return 0;
  // The smallest power of two >= need, as an exponent, less 16's.
  return static_cast<int>(sizeof(unsigned long long) * 8) - __builtin_clzll(static_cast<unsigned long long>(need - 1)) - 4;
}
inline std::size_t class_bytes(int c) noexcept { return std::size_t{16} << c; }
inline bool is_small(std::size_t bytes, std::size_t align) noexcept {
  return bytes <= small_limit && align <= small_limit;
}

struct free_block {
  free_block* next;  // in its slab's free list
};

/// A misuse the heap cannot survive: says so and aborts (no allocation, no lock: the heap's
/// own state is what cannot be trusted here).
[[noreturn, gnu::noinline, gnu::cold]] inline void heap_misuse(const char* what, const void* p) noexcept {
  abort_with_message(what, p);
}

/**
 * Which 256 KiB regions of the address space are slabs: one byte per region in leaves of
 * 64 Ki regions (16 GiB of address space each), made on first use and kept, as the slabs
 * are. A lookup is two loads; marking happens once per slab, under its list's lock.
 */
class slab_table {
 public:
  // User space of 4-level paging on x86-64 (47 bits) and of arm64's usual 48-bit VA; mmap
  // never goes higher unasked. A slab mapped above fails its allocation with ENOMEM.
  static constexpr unsigned address_bits = 48;
  static constexpr unsigned slab_bits = 18;
  static constexpr unsigned leaf_bits = 16;
  static constexpr std::size_t leaf_count = std::size_t{1} << (address_bits - slab_bits - leaf_bits);
  static_assert((std::size_t{1} << slab_bits) == slab_size, "one entry per slab");

  /// Records the slab at `slab` (slab-aligned). False when no leaf can be mapped.
  bool mark(std::uintptr_t slab) noexcept {
    const std::uintptr_t region = slab >> slab_bits;
    if ((region >> leaf_bits) >= leaf_count) return false;
    std::atomic<std::uint8_t>* leaf = leaves_[region >> leaf_bits].load(std::memory_order_acquire);
    if (leaf == nullptr) {
      const auto m = sys_mmap(leaf_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
      if (!m) return false;
      auto* made = static_cast<std::atomic<std::uint8_t>*>(m.value);
      if (leaves_[region >> leaf_bits].compare_exchange_strong(leaf, made, std::memory_order_acq_rel)) {
        leaf = made;
      } else {
        sys_munmap(made, leaf_size);  // another list made it first; `leaf` is theirs
      }
    }
    leaf[region & (leaf_entries - 1)].store(1, std::memory_order_release);
    return true;
  }
  /// True when `p` lies in a slab.
  bool holds(const void* p) const noexcept {
    const std::uintptr_t region = reinterpret_cast<std::uintptr_t>(p) >> slab_bits;
    if ((region >> leaf_bits) >= leaf_count) return false;
    const std::atomic<std::uint8_t>* leaf = leaves_[region >> leaf_bits].load(std::memory_order_acquire);
    return leaf != nullptr && leaf[region & (leaf_entries - 1)].load(std::memory_order_acquire) != 0;
  }

 private:
  static constexpr std::size_t leaf_entries = std::size_t{1} << leaf_bits;
  static constexpr std::size_t leaf_size = leaf_entries * sizeof(std::atomic<std::uint8_t>);
  std::atomic<std::atomic<std::uint8_t>*> leaves_[leaf_count] = {};
};
inline slab_table slabs;  // constant-initialised: usable before any constructor runs

/// The slab that a free on this thread last found in the table (1: none yet, never a slab's
/// start). A slab is never unmapped and the table never forgets one, so a block of the same
/// slab needs no lookup: frees come in runs from one slab.
inline thread_local std::uintptr_t last_slab_freed = 1;

/// slabs.holds(p) for a free: the lookup only when p is not in the slab last found.
inline bool freeing_slab_block(const void* p) noexcept {
  const std::uintptr_t slab = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{slab_size - 1};
  if (slab == last_slab_freed) return true;
  if (!slabs.holds(p)) return false;
  last_slab_freed = slab;
  return true;
}
struct slab_header {
  std::uint32_t magic;
  int node;
  int size_class;
  int family;  // family_of the placement its blocks were asked with
  /// The thread caches' bin of its blocks (cache_bin_of), cache_bins when its node or family has none:
  /// a free finds its bin with one load.
  std::uint32_t cache_bin;
  /// End of the blocks carved so far (offset from the slab start): written under the list's
  /// lock before a block leaves it, so a free of any block handed out sees it past the block;
  /// 0 while the slab is in its node's pool, so that a free into it aborts.
  std::atomic<std::uint32_t> carved;
  // Under the central list's lock: the slab's free blocks, and its links in its owner's chain
  // of slabs that have some (in the node's pool, `next` links the pool).
  std::uint32_t free_count;
  std::uint32_t owner;  // the carve slot (carve_slot_here) whose chain holds it
  free_block* free_head;
  slab_header* prev;
  slab_header* next;
};
static_assert(sizeof(slab_header) <= 64, "a slab's state map starts 64 bytes in");

/// A slab's layout by class: its header, then its state map, a byte for each `size` bytes of
/// the slab (1 while the block starting there is handed out, 0 while it is free or not carved
/// yet; the entries of the header's and the map's own bytes are never used), then its blocks,
/// from the first multiple of the block size past the map. The map, not the block, is what a
/// free checks for a double free: a block handed from one thread to another then crosses CPUs
/// as an address in a batch and a state among 64 on a line, and no line of the block itself
/// is touched.
inline constexpr std::size_t state_map_offset = 64;
inline constexpr std::size_t first_block_offset_of(int c) noexcept {
  const std::size_t size = std::size_t{16} << c;
  return (state_map_offset + slab_size / size + size - 1) / size * size;
}
inline constexpr std::uint32_t first_block_offsets[class_count] = {
    first_block_offset_of(0), first_block_offset_of(1), first_block_offset_of(2),  first_block_offset_of(3),
    first_block_offset_of(4), first_block_offset_of(5), first_block_offset_of(6),  first_block_offset_of(7),
    first_block_offset_of(8), first_block_offset_of(9), first_block_offset_of(10), first_block_offset_of(11)};
static_assert(class_count == 12, "one offset per class");
inline std::size_t first_block_offset(int c) noexcept { return first_block_offsets[c]; }
inline std::uint32_t blocks_per_slab(int c) noexcept {
  return static_cast<std::uint32_t>((slab_size - first_block_offset(c)) / class_bytes(c));
}
/// A block's state, its byte in the map. Every byte of a map is `free` but those of handed-out
/// blocks: a new slab's map is zeroes, a slab taken from the pool to serve a class has that
/// class's map cleared (new_slab: what lay there before may be another class's blocks), and
/// a byte goes to `handed_out` only when its block, carved, is handed out. So a byte that reads
/// `handed_out` is that of a carved block, and a free that reads it needs only to check that
/// the pointer is a multiple of the block size (is_block_aligned); a free that defers its read
/// checks the rest as well (is_block_start). An enumeration, not a char type:
/// a char's store may alias any object, and the inline paths would read the bin, the slab
/// header and the caller's data again after each.
enum class block_state : std::uint8_t {
  free = 0,
  handed_out = 1,
  freed_unsettled = 3,  // handed out, then freed by a bin that defers (settle_bin)
};
/// The state a free that defers leaves: the mark ORed in, untested (so that a block already
/// free gets 2, which its settle refuses).
inline block_state with_unsettled_mark(block_state s) noexcept {
  return static_cast<block_state>(static_cast<std::uint8_t>(s) | 2);
}
/// The state byte of the block at `offset` (a block's start) in slab `h` of class `c`.
inline block_state& state_at(const void* h, int c, std::uintptr_t offset) noexcept {
  return reinterpret_cast<block_state*>(reinterpret_cast<char*>(const_cast<void*>(h)) + state_map_offset)[offset >> (4 + c)];
}
/// Whether `offset` in a slab of class `c` is a multiple of the class's size: the start of a
/// block when its state says that it is handed out.
inline bool is_block_aligned(int c, std::uintptr_t offset) noexcept { return (offset & (class_bytes(c) - 1)) == 0; }
/// Whether `offset` in slab `h` of class `c` is the start of a block carved so far (what a
/// free that does not read the block's state checks).
inline bool is_block_start(const slab_header* h, int c, std::uintptr_t offset) noexcept {
  return offset >= first_block_offset(c) && is_block_aligned(c, offset) &&
         offset + class_bytes(c) <= h->carved.load(std::memory_order_relaxed);
}
/// The state byte of block `blk` of class `c`.
inline block_state& state_of(const free_block* blk, int c) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(blk);
  const std::uintptr_t slab = at & ~std::uintptr_t{slab_size - 1};
  return state_at(reinterpret_cast<const void*>(slab), c, at - slab);
}

/// Blocks of one slab go to one thread at a time, as far as the list allows: a CPU that frees
/// blocks next to blocks another CPU writes (1 KiB blocks 32 apart, handed out in turns) has
/// the hardware prefetcher pull the other CPU's lines into its cache at every pass, and the
/// two bounce those lines: two threads allocating and freeing 1 KiB blocks of one class took
/// 2.4 times as long per block as either alone (64 blocks each, in runs of 32 blocks given out
/// in turns; the same blocks in runs of 128 per thread cost nothing). So each list keeps its
/// slabs per carve slot, and a thread holds a slot of its own from its first central take to
/// its exit (the lowest free one; beyond carve_slots live threads, slots are shared in turn).
/// A thread that starts after another exited takes its slot, and with it the free blocks that
/// thread left (a thread whose exit hook could not be set keeps its slot: later threads then
/// share slots sooner). A forked child holds only its own thread's. Slots by the CPU a thread
/// ran on were tried: two threads that started on one CPU shared a slot for good (a thread that
/// recycles its own cached blocks never asks again), and two threads on two CPUs then ran at
/// half speed from start to end, in some processes and not others. Whole batches of freed blocks (central_list::batches) still go to any thread:
/// they are what one thread hands to another.
inline constexpr unsigned carve_slots = 8;
inline std::atomic<std::uint32_t> carve_slots_held{0};  // a bit per slot a live thread holds
inline std::atomic<unsigned> carve_slot_turn{0};         // shared slots, once all are held
struct carve_slot_state {
  unsigned slot = carve_slots;  // carve_slots: none yet
  bool held = false;            // its bit in carve_slots_held is this thread's
};
inline thread_local carve_slot_state this_carve_slot{};

/// Takes the calling thread's slot (out of line: once per thread).
[[gnu::noinline]] inline unsigned take_carve_slot() noexcept {
  carve_slot_state& me = this_carve_slot;
  constexpr std::uint32_t all = (std::uint32_t{1} << carve_slots) - 1;
  std::uint32_t held = carve_slots_held.load(std::memory_order_relaxed);
  while (held != all) {
    const auto s = static_cast<unsigned>(__builtin_ctz(~held));
    if (carve_slots_held.compare_exchange_weak(held, held | std::uint32_t{1} << s, std::memory_order_relaxed)) {
      me = {s, true};
      return s;
    }
  }
  me = {carve_slot_turn.fetch_add(1, std::memory_order_relaxed) % carve_slots, false};
  return me.slot;
}
/// The calling thread's carve slot.
inline unsigned carve_slot_here() noexcept {
  const unsigned s = this_carve_slot.slot;
  return s != carve_slots ? s : take_carve_slot();
}
/// In a forked child, which runs only the thread that forked: the others' slots are free.
inline void keep_own_carve_slot_only() noexcept {
  const carve_slot_state& me = this_carve_slot;
  carve_slots_held.store(me.held ? std::uint32_t{1} << me.slot : 0, std::memory_order_relaxed);
}
/// At the calling thread's exit: its slot is free for the next thread. It goes on with a
/// shared one (a later exit hook may still allocate), never taking a slot again.
inline void leave_carve_slot() noexcept {
  carve_slot_state& me = this_carve_slot;
  if (me.held) carve_slots_held.fetch_and(~(std::uint32_t{1} << me.slot), std::memory_order_relaxed);
  me = {me.slot == carve_slots ? 0 : me.slot, false};
}

struct central_list {
  futex_lock lock;  // not a std::mutex: the fork handler holds every list's (futex_lock says why)
  // Whole batches that thread caches handed back, as arrays of block addresses, copied whole
  // into the bin of the thread that takes one: no line of their blocks is touched on the way.
  // (Room for them only in the lists of cached families: node_arena's batch_store.)
  static constexpr int max_batches = 16;
  free_block* (*batches)[max_transfer_batch] = nullptr;  // transfer_batch_of(c) used in each
  int batch_count = 0;
  // Per carve slot: the slabs with blocks in their free lists, doubly linked, and the unused
  // tail of the slot's newest slab.
  struct slot {
    slab_header* partial = nullptr;
    char* bump = nullptr;
    char* bump_end = nullptr;
  };
  slot slots[carve_slots];
  slab_header* spare = nullptr;  // a slab whose blocks are all free, kept with its pages

  void link(slab_header* h) noexcept {
    slab_header*& partial = slots[h->owner].partial;
    h->prev = nullptr;
    h->next = partial;
    if (partial != nullptr) partial->prev = h;
    partial = h;
  }
  void unlink(slab_header* h) noexcept {
    (h->prev != nullptr ? h->prev->next : slots[h->owner].partial) = h->next;
    if (h->next != nullptr) h->next->prev = h->prev;
    h->prev = h->next = nullptr;
  }
  /// A slab of another slot with free blocks, moved to slot `s` (whose own chain is empty and
  /// whose newest slab is used up), with the rest of that slot's newest slab when it is this
  /// one; nullptr: none. Only a slab none of whose blocks is in use, or one behind the head of
  /// its slot's chain: the head is where that slot's thread takes blocks next, and taking from
  /// it too would put the two threads' blocks side by side again. So a slot keeps at most one
  /// slab of free blocks from the others (and the uncarved rest of its newest slab, address
  /// space only), and free blocks are otherwise reused whoever freed them.
  slab_header* steal_for(unsigned s, std::size_t first_offset, std::size_t size) noexcept {
    for (unsigned i = 1; i < carve_slots; ++i) {
      slot& other = slots[(s + i) % carve_slots];
      slab_header* h = other.partial;
      if (h == nullptr) continue;
      const std::size_t carved_blocks = (h->carved.load(std::memory_order_relaxed) - first_offset) / size;
      if (h->free_count != carved_blocks) h = h->next;
      if (h == nullptr) continue;
      unlink(h);
      h->owner = s;
      link(h);
      const char* const start = reinterpret_cast<char*>(h);
      if (other.bump != other.bump_end && start < other.bump && other.bump < start + slab_size) {
        slots[s].bump = other.bump;
        slots[s].bump_end = other.bump_end;
        other.bump = other.bump_end = nullptr;
      }
      return h;
    }
    return nullptr;
  }
};
struct node_arena {
  central_list lists[family_count][class_count];
  std::mutex pool_lock;                     // taken after a list's lock, never before
  slab_header* pool[family_count] = {};     // slabs given back, their pages with the kernel
  // Not zeroed: a batch is read only after it is filled, and its pages stay untouched until then.
  free_block* batch_store[cached_families][class_count][central_list::max_batches][max_transfer_batch];
  node_arena() noexcept {
    for (int f = 0; f < cached_families; ++f)
      for (int c = 0; c < class_count; ++c) lists[f][c].batches = batch_store[f][c];
  }
};

/// mbind a fresh mapping to one node. MPOL_PREFERRED when not strict.
inline std::error_code bind_mapping(void* p, std::size_t len, int node, const placement_options& o) noexcept {
  constexpr std::size_t bits = 8 * sizeof(unsigned long);
  unsigned long mask[max_nodes / bits] = {};
  mask[static_cast<std::size_t>(node) / bits] |= 1UL << (static_cast<std::size_t>(node) % bits);
  const auto r = sys_mbind_fresh(p, len, o.strict ? MPOL_BIND : MPOL_PREFERRED, mask, max_nodes + 1);
  if (r) return {};
  if (!refused(r.error)) return r.failure();
  // No NUMA, or a sandbox: the memory is still good, placed by its first touch.
  if (r.error != ENOSYS) refusals.mappings.fetch_add(1, std::memory_order_relaxed);
  return {};
}

/// A mapping of `len` bytes (page multiple) whose start is aligned to `align` (power of two).
inline void* map_aligned(std::size_t len, std::size_t align, std::error_code& ec) noexcept {
  const std::size_t ps = page_size();
  if (align < ps) align = ps;
  const std::size_t span = len + align - ps;
  if (span < len) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  const auto m = sys_mmap(span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
  if (!m) {
    ec = m.failure();
    return nullptr;
  }
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(m.value);
  const std::uintptr_t start = align_up(base, align);
  if (start > base) sys_munmap(m.value, start - base);
  const std::uintptr_t end = base + span;
  if (end > start + len) sys_munmap(reinterpret_cast<void*>(start + len), end - start - len);
  return reinterpret_cast<void*>(start);
}

/// MemFree of one node in bytes, from sysfs; 0 when unknown.
inline std::size_t node_free_bytes(int node) {
  const long long b = node_meminfo_bytes(node, "MemFree:");
  return b > 0 ? static_cast<std::size_t>(b) : 0;
}

/**
 * What an allocation bound to one node can still take from it, in `available`: MemFree less
 * what the kernel keeps back in each of the node's zones (/proc/zoneinfo): its low watermark,
 * plus the largest lowmem reserve ("protection") that keeps user pages out of DMA zones,
 * capped at the zone's free pages; and no more than the process's memory cgroup still allows.
 * An allocation that reaches into either ends in the OOM killer (a 256 MiB node can keep
 * 12 MiB back). False when the node's MemFree cannot be read.
 */
inline bool node_available_bytes(int node, std::size_t& available) {
  const std::size_t free_bytes = node_free_bytes(node);
  if (free_bytes == 0) return false;
  std::ifstream in("/proc/zoneinfo");
  std::string line;
  std::size_t reserved_pages = 0, zone_free = 0, zone_keep = 0;
  int current = -1;
  const auto close_zone = [&] {
    if (current == node) reserved_pages += zone_keep < zone_free ? zone_keep : zone_free;
    zone_free = zone_keep = 0;
  };
  while (std::getline(in, line)) {
    if (line.rfind("Node ", 0) == 0) {
      close_zone();
      current = std::atoi(line.c_str() + 5);
      continue;
    }
    const std::size_t at = line.find_first_not_of(' ');
    if (at == std::string::npos) continue;
    const char* rest = line.c_str() + at;
    if (line.compare(at, 11, "pages free ") == 0) {
      zone_free = static_cast<std::size_t>(std::strtoull(rest + 11, nullptr, 10));
    } else if (line.compare(at, 4, "low ") == 0) {
      zone_keep += static_cast<std::size_t>(std::strtoull(rest + 4, nullptr, 10));
    } else if (line.compare(at, 12, "protection: ") == 0) {
      std::size_t most = 0;
      for (const char* p = std::strchr(rest, '('); p != nullptr && *p != '\0' && *p != ')';) {
        char* next = nullptr;
        const auto v = static_cast<std::size_t>(std::strtoull(p + 1, &next, 10));
        if (next == p + 1) break;
        most = v > most ? v : most;
        p = next;
      }
      zone_keep += most;
    }
  }
  close_zone();
  const std::size_t reserved = reserved_pages * page_size();
  available = free_bytes > reserved ? free_bytes - reserved : 0;
  // A memory cgroup caps the process whatever the node has free.
  const cgroup_memory cg = cgroup_memory_now();
  if (cg.limited && cg.room() < available) available = static_cast<std::size_t>(cg.room());
  return true;
}

/// The page size of a large block's mapping: its explicit huge pages, else the base page.
inline std::size_t mapping_granule(const placement_options& o) noexcept {
  const std::size_t reserved = reserved_page_bytes(o.huge_pages);
  return reserved != 0 ? reserved : page_size();
}

/// The length of the mapping of a large block of `bytes`: whole pages of its granule; 0 when
/// it overflows.
inline std::size_t mapping_length(std::size_t bytes, const placement_options& o) noexcept {
  const std::size_t len = align_up(bytes, mapping_granule(o));
  return len < bytes ? 0 : len;
}

/**
 * A block of explicit huge pages from `node`'s reserved pool: a hugetlb mapping, bound, and
 * populated at once, so that a node without free pages fails here (nullptr, ENOMEM) instead of
 * with SIGBUS at first touch. A preferred block takes the pages of another node's pool when its
 * own has none (the kernel's MPOL_PREFERRED fallback); nullptr with ENOMEM when no pool has any.
 */
inline void* map_reserved(std::size_t len, std::size_t align, int node, const placement_options& o,
                          std::error_code& ec) noexcept {
  const std::size_t hp = reserved_page_bytes(o.huge_pages);
  if (align > hp) {  // the kernel aligns a hugetlb mapping to its page size, no more
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  const int size_flag = (hp == (std::size_t{2} << 20) ? 21 : 30) << MAP_HUGE_SHIFT;
  const auto m = sys_mmap(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | size_flag);
  if (!m) {  // no pool of that size, or not enough free pages in all of them
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  void* p = m.value;
  ec = bind_mapping(p, len, node, o);
  if (ec) {
    sys_munmap(p, len);
    return nullptr;
  }
  const auto r = call(sys::madvise, [&] { return ::madvise(p, len, MADV_POPULATE_WRITE); });
  if (!r) {
    if (r.error != EINVAL) {  // the node's pool (a strict block) or every pool ran out
      sys_munmap(p, len);
      ec = std::make_error_code(std::errc::not_enough_memory);
      return nullptr;
    }
    // Before Linux 5.14: check the node's pool, then touch (a page taken by someone else in
    // between would still end in SIGBUS: the kernel offers nothing better there).
    long free_pages = -1;
    try {
      free_pages = hugetlb_pool_of(node, hp).free;
    } catch (...) {
    }
    if (o.strict && free_pages >= 0 && static_cast<std::size_t>(free_pages) < len / hp) {
      sys_munmap(p, len);
      ec = std::make_error_code(std::errc::not_enough_memory);
      return nullptr;
    }
    for (std::size_t off = 0; off < len; off += hp) static_cast<volatile char*>(p)[off] = 0;
  }
  return p;
}

/// A large block: its own mapping, bound, optionally huge-page aligned and populated.
inline void* map_on_node(std::size_t bytes, std::size_t align, int node, const placement_options& o,
                         std::error_code& ec) noexcept {
  const std::size_t len = mapping_length(bytes, o);
  if (len == 0) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  if (reserved_page_bytes(o.huge_pages) != 0) {
    void* p = map_reserved(len, align, node, o, ec);
    if (p != nullptr || o.strict || ec == std::errc::invalid_argument) return p;
    // Preferred: ordinary pages, placed as a per-block mapping would be, and counted.
    refusals.huge_page_fallbacks.fetch_add(1, std::memory_order_relaxed);
    placement_options plain = o;
    plain.huge_pages = huge_page_mode::per_block;
    return map_on_node(len, align, node, plain, ec);
  }
  const bool huge_aligned =
      o.huge_pages == huge_page_mode::always || (o.huge_pages == huge_page_mode::per_block && len >= huge_page_size());
  if (huge_aligned && align < huge_page_size()) align = huge_page_size();
  // A strict, populated block larger than what the node can still give would end in the OOM
  // killer; refuse it up front instead.
  if (o.populate && o.strict) {
    std::size_t available = 0;
    bool known = false;
    try {
      known = node_available_bytes(node, available);
    } catch (...) {
    }
    if (known && len > available) {
      ec = std::make_error_code(std::errc::not_enough_memory);
      return nullptr;
    }
  }
  void* p = map_aligned(len, align, ec);
  if (p == nullptr) return nullptr;
  advise_huge_pages(p, len, o.huge_pages);
  ec = bind_mapping(p, len, node, o);
  if (ec) {
    sys_munmap(p, len);
    return nullptr;
  }
  if (o.populate) {
    const auto r = call(sys::madvise, [&] { return ::madvise(p, len, MADV_POPULATE_WRITE); });
    if (!r) {
      if (r.error == ENOMEM) {
        sys_munmap(p, len);
        ec = r.failure();
        return nullptr;
      }
      const std::size_t ps = page_size();  // kernel before 5.14: touch each page
      for (std::size_t off = 0; off < len; off += ps) static_cast<volatile char*>(p)[off] = 0;
    }
  }
  return p;
}

// ---- freed large blocks kept for reuse ---------------------------------------------------

/// How a reusable large block is placed: bound to `node` (strict: MPOL_BIND, else
/// MPOL_PREFERRED), and whether its mapping may hold transparent huge pages (`huge`: a
/// per_block block of a huge page or more, huge-page-aligned; else no huge page at all);
/// node -1: its pages are never reused.
struct extent_key {
  int node = -1;
  bool strict = true;
  bool huge = false;
  friend bool operator==(extent_key a, extent_key b) noexcept {
    return a.node == b.node && a.strict == b.strict && a.huge == b.huge;
  }
};

/// How many bytes of freed large blocks are kept at most: 1/32 of the memory the process may
/// have (the machine's, its cgroup's limit, four times its smallest memory node: at most an
/// eighth of any node), at least 32 MiB and at most 1 GiB. A fixed figure would either keep
/// much of a small node (the 256 MiB nodes of the test guests, an HBM node) or a small
/// container, or give a large block back to the kernel on a big machine, where each reuse
/// saves a fault per page. Read once, during static initialisation (kept_limit_ready).
inline std::size_t kept_bytes_limit() noexcept {
  static const std::size_t limit = [] {
    const std::size_t low = std::size_t{32} << 20, high = std::size_t{1} << 30;
    const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return low;
    std::uint64_t memory = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size);
    try {
      if (const cgroup_memory cg = cgroup_memory_now(); cg.limited && cg.smallest_limit < memory) memory = cg.smallest_limit;
      for (int n : memory_nodes())
        if (const long long total = node_meminfo_bytes(n, "MemTotal:"); total > 0 && 4 * static_cast<std::uint64_t>(total) < memory)
          memory = 4 * static_cast<std::uint64_t>(total);
    } catch (...) {  // unreadable: the machine's memory decides
    }
    // Whole MiB: trim() cuts extents by what is over it, in whole pages.
    const std::uint64_t share = memory / 32 >> 20 << 20;
    return share < low ? low : share > high ? high : static_cast<std::size_t>(share);
  }();
  return limit;
}
/// Read before any thread can fork: a child forked while another thread runs a C++ static's
/// first initialisation waits on its guard forever.
inline const bool kept_limit_ready = kept_bytes_limit() != 0;

/// The smallest block whose pages are never kept: a quarter of what is kept at most, so that a
/// few blocks of that size fit at once.
inline std::size_t reusable_bytes() noexcept { return kept_bytes_limit() / 4; }

/// The key of a large block of `len` bytes (not 0) mapped with `o` on `node`, when its pages can
/// serve another block: transparent or no huge pages as map_on_node leaves them for per_block
/// and never (not always: a block that asks for huge pages is aligned and advised as such), no
/// reserved huge pages, not populated at allocation.
inline extent_key reusable_key(std::size_t len, int node, const placement_options& o) noexcept {
  const bool plain = o.keep_pages && !o.populate && reserved_page_bytes(o.huge_pages) == 0 &&
                     o.huge_pages != huge_page_mode::always && len != 0 && len < reusable_bytes();
  if (!plain) return extent_key{};
  return extent_key{node, o.strict, o.huge_pages == huge_page_mode::per_block && len >= huge_page_size()};
}

/// Set by each large allocation of the calling thread: whether its pages were kept from a freed
/// block (and so may hold its data). Read right after the allocation by calloc's clearing.
inline thread_local bool last_large_block_reused = false;

/**
 * Freed large blocks whose pages stay mapped and resident for the next block of their
 * placement, as malloc keeps what free gives it: a block of the same key is carved from the
 * best-fitting extent (its pages already there, no system call), a block that grows takes the
 * extent right after it, and a freed block joins its neighbours. Bounded (at most
 * kept_bytes_limit() bytes, `max_count` extents) and aged: an extent unused for `max_age_ns` is unmapped at the
 * next large-block call. A freed block is kept only when no placement change (placement_epoch)
 * happened since it was mapped and nothing is armed for next touch: its pages and policy are
 * then still those of its key. Not thread-safe: under arena_table::large_lock.
 */
class spare_extents {
 public:
  /// Unmaps [at, at + len), part of a larger mapping perhaps: where the kernel cannot split it
  /// (ENOMEM at vm.max_map_count) its pages still go back (MADV_DONTNEED); the addresses stay.
  static void unmap_or_release(std::uintptr_t at, std::size_t len) noexcept {
    if (!sys_munmap(reinterpret_cast<void*>(at), len))
      (void)call(sys::madvise, [&] { return ::madvise(reinterpret_cast<void*>(at), len, MADV_DONTNEED); });
  }

  static constexpr std::size_t max_count = 512;
  static constexpr std::int64_t max_age_ns = 1'000'000'000;

  /// `len` bytes (page multiple) of key `k`, page-aligned (huge-page-aligned for a `huge` key,
  /// as map_on_node maps them), from the smallest extent that holds them; nullptr when none
  /// does. `taken` is what the block gets: `len`, or for a huge key up to the next huge page
  /// boundary (the extent's end at most), so that no huge page holds two blocks and the rest
  /// starts on a boundary, where the next huge block can take it.
  void* take(std::size_t len, extent_key k, std::size_t& taken) noexcept {
    auto best = extents_.end();
    const std::size_t align = k.huge ? huge_page_size() : 1;
    for (auto it = extents_.begin(); it != extents_.end(); ++it)
      if (it->second.key == k && it->second.len >= len && it->first % align == 0 &&
          (best == extents_.end() || it->second.len < best->second.len))
        best = it;
    if (best == extents_.end()) return nullptr;
    const std::uintptr_t at = best->first;
    taken = k.huge ? std::min(best->second.len, align_up(len, huge_page_size())) : len;
    cut_front(best, taken);
    return reinterpret_cast<void*>(at);
  }
  /// Takes `len` bytes of key `k` at exactly `at` (the start of an extent); false when there are none.
  bool take_at(std::uintptr_t at, std::size_t len, extent_key k) noexcept {
    const auto it = extents_.find(at);
    if (it == extents_.end() || !(it->second.key == k) || it->second.len < len) return false;
    cut_front(it, len);
    return true;
  }
  /// Keeps [at, at + len) of key `k`, joined to its neighbours of the same key; unmaps it (and
  /// what the bounds push out) instead when it cannot be kept.
  void give(std::uintptr_t at, std::size_t len, extent_key k, std::int64_t now) noexcept {
    auto next = extents_.lower_bound(at);
    if (next != extents_.begin()) {
      const auto prev = std::prev(next);
      if (prev->second.key == k && prev->first + prev->second.len == at) {  // grow the one before
        prev->second.len += len;
        prev->second.used_at = now;
        bytes_ += len;
        if (next != extents_.end() && next->second.key == k && at + len == next->first) {
          prev->second.len += next->second.len;
          extents_.erase(next);
        }
        trim(now);
        return;
      }
    }
    extent e{len, k, now};
    if (next != extents_.end() && next->second.key == k && at + len == next->first) {  // take in the one after
      e.len += next->second.len;
      extents_.erase(next);
      bytes_ -= e.len - len;
    }
    try {
      extents_.emplace(at, e);
      bytes_ += e.len;
    } catch (...) {  // no room for the entry: the pages go back to the kernel
      unmap_or_release(at, e.len);
    }
    trim(now);
  }
  /// Unmaps the extents unused for max_age_ns (checked at most every tenth of that).
  void age(std::int64_t now) noexcept {
    if (now - aged_at_ < max_age_ns / 10) return;
    aged_at_ = now;
    for (auto it = extents_.begin(); it != extents_.end();)
      it = now - it->second.used_at >= max_age_ns ? drop(it) : std::next(it);
  }
  std::size_t bytes() const noexcept { return bytes_; }
  /// Unmaps every extent of `node`. @return the bytes given back.
  std::size_t drop_node(int node) noexcept {
    const std::size_t had = bytes_;
    for (auto it = extents_.begin(); it != extents_.end();) it = it->second.key.node == node ? drop(it) : std::next(it);
    return had - bytes_;
  }

 private:
  struct extent {
    std::size_t len;
    extent_key key;
    std::int64_t used_at;  // steady clock, ns
  };
  using map = std::map<std::uintptr_t, extent>;

  /// Hands out the first `len` bytes of `it`; the rest stays (its entry moved, not made).
  void cut_front(map::iterator it, std::size_t len) noexcept {
    bytes_ -= len;
    if (it->second.len == len) {
      extents_.erase(it);
      return;
    }
    auto node = extents_.extract(it);
    node.key() += len;
    node.mapped().len -= len;
    extents_.insert(std::move(node));
  }
  map::iterator drop(map::iterator it) noexcept {
    unmap_or_release(it->first, it->second.len);
    bytes_ -= it->second.len;
    return extents_.erase(it);
  }
  /// Unmaps the least recently used extents while over a bound; of the last one only what is
  /// over (joined extents can be far larger than the excess).
  void trim(std::int64_t now) noexcept {
    age(now);
    const std::size_t limit = kept_bytes_limit();
    while (bytes_ > limit || extents_.size() > max_count) {
      auto oldest = extents_.begin();
      for (auto it = extents_.begin(); it != extents_.end(); ++it)
        if (it->second.used_at < oldest->second.used_at) oldest = it;
      const std::size_t excess = bytes_ > limit ? bytes_ - limit : 0;  // page multiples, as every extent
      if (extents_.size() <= max_count && excess < oldest->second.len) {
        oldest->second.len -= excess;
        unmap_or_release(oldest->first + oldest->second.len, excess);
        bytes_ -= excess;
        return;
      }
      drop(oldest);
    }
  }

  map extents_;
  std::size_t bytes_ = 0;
  std::int64_t aged_at_ = 0;
};

inline std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Blocks a bin may hold before it hands a batch back: 128 KiB of blocks, at most 512 and at
/// least two batches (64 blocks: 2 MiB for the 32 KiB class).
constexpr std::uint32_t bin_limit_of(int c) noexcept {
  const std::size_t by_bytes = (std::size_t{128} << 10) >> (4 + c);
  const std::size_t least = 2 * std::size_t{transfer_batch_of(c)};
  return static_cast<std::uint32_t>(by_bytes > 512 ? 512 : by_bytes < least ? least : by_bytes);
}
/// Where each bin's slots lie in a (node, family)'s: each class's `of[c]` slots start at
/// `at[c]`, with one slot before them and one after them that are never written (the gaps: a
/// fresh mapping's zeroes, thread_cache::bin says why).
struct bin_limits {
  std::uint32_t of[class_count];
  std::uint32_t at[class_count];
  std::uint32_t per_group;  // slots of one (node, family): every class's limit and the gaps
  constexpr bin_limits() : of(), at(), per_group(1) {
    for (int c = 0; c < class_count; ++c) {
      of[c] = bin_limit_of(c);
      at[c] = per_group;
      per_group += of[c] + 1;
    }
  }
};
inline constexpr bin_limits bin_limit{};

/// Where the bins of a cache that is not live point: a gap, so that an allocation finds them
/// empty (a free tests their mode first).
inline free_block* empty_bin_slot[1] = {nullptr};

/// Each thread's cache of free blocks per (node, family, class), kept as arrays of their
/// addresses, as jemalloc and tcmalloc keep theirs: an allocation or a free moves an address,
/// and a block another thread freed is not followed as a link, whose every line the other
/// CPU last wrote (one dependent miss per block). The bin headers are plain data, constant-
/// initialised and trivially destructible, so that reaching them needs no thread_local
/// initialisation guard (in an executable, one TLS offset); the arrays (bin_slots) are mapped
/// when the thread first fills or gives a block to its cache, with the pthread key whose
/// destructor hands its blocks back to the central lists at thread exit. glibc runs it after
/// the thread's C++ thread_local destructors, so blocks they free are handed back too; a block
/// freed after it (by a later key's destructor) goes to the central list (`gone`).
///
/// A bin is its `top` and its `mode`, and has no count: the slot below its first is a gap,
/// null, so an allocation that reads null below `top` has found the bin empty; the slot after
/// its last is a gap too, so a free that reads null at `top` may have found it full (or a slot
/// not written yet: the slow path counts, bin_count). An allocation or a free then stores `top`
/// and nothing else of the bin: with a count as well, 64 blocks of 16 B allocated and freed on
/// one thread took 360-371 ns, without it 306-316.
struct thread_cache {
  struct bin {
    free_block** top = empty_bin_slot + 1;  // one past the newest address
    /// What a free does with the bin, one word that each fast path tests: `unusable` while
    /// the cache is not live (fresh or gone: the slow paths); `plain` (a free checks and sets
    /// its block's state); from `deferring` on, frees OR a mark into their blocks' states
    /// untested and leave them unsettled, the newest `mode - deferring` of them (settle_bin).
    /// A bin defers from the time it hands a batch back (its thread frees more than it
    /// allocates: what another thread allocated, most likely) to its thread's next allocation
    /// of the class.
    std::uint32_t mode = unusable;
    enum : std::uint32_t { unusable = 0, plain = 1, deferring = 2 };
    std::uint32_t unsettled() const noexcept { return mode > deferring ? mode - deferring : 0; }
  };
  enum : std::uint8_t { fresh, live, gone };  // no exit hook yet; hooked; hook ran (or none)
  std::uint8_t state = fresh;  // the fast paths read their bin's mode instead: unusable unless live
  bin bins[cache_bins];        // by cache_bin_of
  free_block** slots = nullptr;  // every bin's slots (bin_slots), while live
};
inline thread_local thread_cache tcache;
static_assert([] { return thread_cache{}.state == thread_cache::fresh; }(),
              "a thread cache is constant-initialised: no TLS guard at each use");

/// The slots of every bin of a thread cache, in one mapping per thread (touched page by page as
/// bins are used: a thread that uses one class of one node touches one or two pages). A thread
/// that exits leaves its mapping to the next thread that starts, so a program that starts and
/// ends threads maps as many as it has threads at once.
struct bin_slots {
  static constexpr std::size_t bytes =
      (std::size_t{cached_nodes} * cached_families * bin_limit.per_group * sizeof(free_block*) + 4095) & ~std::size_t{4095};
  futex_lock lock;  // held around fork with the arena's locks
  free_block** unused = nullptr;  // mappings of exited threads, linked through their first bin's first slot

  /// A mapping for the calling thread; nullptr when none can be mapped.
  free_block** take() noexcept {
    {
      std::lock_guard<futex_lock> guard(lock);
      if (free_block** s = unused; s != nullptr) {
        unused = reinterpret_cast<free_block**>(s[link]);
        return s;
      }
    }
    const auto m = sys_mmap(bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    return m ? static_cast<free_block**>(m.value) : nullptr;
  }
  void give(free_block** s) noexcept {
    std::lock_guard<futex_lock> guard(lock);
    s[link] = reinterpret_cast<free_block*>(unused);
    unused = s;
  }
  static constexpr std::size_t link = bin_limit.at[0];  // a slot, not a gap
  /// Where bin `bin` (cache_bin_of) starts in a mapping.
  static free_block** start_of(free_block** s, std::uint32_t bin) noexcept {
    const std::uint32_t group = bin / class_count, c = bin % class_count;
    return s + std::size_t{group} * bin_limit.per_group + bin_limit.at[c];
  }
};
inline bin_slots thread_bin_slots;

/// The blocks bin `b` of the calling thread's live cache holds.
inline std::uint32_t bin_count(const thread_cache::bin& b) noexcept {
  const auto bin = static_cast<std::uint32_t>(&b - tcache.bins);
  return static_cast<std::uint32_t>(b.top - bin_slots::start_of(tcache.slots, bin));
}

// ---- small blocks -----------------------------------------------------------------------

/// Every node's arena, created on first use. fork(): every lock is taken around fork
/// (pthread_atfork, as malloc does), so a child forked while another thread allocates or
/// frees never inherits a list locked by a thread it does not have.
struct arena_table {
  std::atomic<node_arena*> arenas[max_nodes] = {};
  std::mutex create;
  std::mutex large_lock;  // guards `large`, `spare` and `spreads`: a large block costs a system call, the lock is noise
  /// The nodes a block's pages are spread over (interleaved, or in a tier's segments), with
  /// their weights: its bytes count for each node in proportion (heap_share), not for the node
  /// it was first mapped on.
  using spread = std::vector<std::pair<int, std::uint64_t>>;
  struct large_block {
    std::size_t len;      // of its mapping
    std::size_t granule;  // its page size: what a sized free rounds up to
    extent_key key;       // how it is placed, when its pages may be reused (spare_extents)
    std::uint64_t epoch;  // placement_epoch when it was mapped
    extent_key placed;    // the node and strictness it was mapped with, reusable or not
    std::uint32_t spread = 0;  // 1 + its index in `spreads` when spread; 0: all on placed.node
    bool counted = true;       // false until spread_large counts it (placement_options::counted_when_mapped)
    heap_kind kind = heap_kind::node;
  };
  std::unordered_map<std::uintptr_t, large_block> large;  // start of each large block -> its mapping
  spare_extents spare;
  // Each distinct spread of the live blocks once, with its count of blocks: a slot no block
  // uses any more is taken by the next new spread, so the table is as long as the most distinct
  // spreads live at once (a tier's segments differ from block to block).
  std::vector<spread> spreads;
  std::vector<std::size_t> spread_users;

  arena_table() {
    ::pthread_atfork([] { instance().lock_all(); }, [] { instance().unlock_all(); },
                     [] {
                       instance().unlock_all();
                       keep_own_carve_slot_only();
                     });
  }
  static arena_table& instance() {
    // Never destroyed: blocks may be freed by threads and destructors that run after static
    // destruction has begun, and the registry of large blocks must still answer then.
    static arena_table* table = new arena_table;
    return *table;
  }
  void lock_all() {
    create.lock();
    large_lock.lock();
    thread_bin_slots.lock.lock();
    for (auto& a : arenas)
      if (node_arena* p = a.load(std::memory_order_acquire))
        for (auto& family : p->lists)
          for (central_list& l : family) l.lock.lock();
    for (auto& a : arenas)
      if (node_arena* p = a.load(std::memory_order_acquire)) p->pool_lock.lock();
  }
  void unlock_all() {
    for (auto& a : arenas)
      if (node_arena* p = a.load(std::memory_order_acquire)) p->pool_lock.unlock();
    for (auto& a : arenas)
      if (node_arena* p = a.load(std::memory_order_acquire))
        for (auto& family : p->lists)
          for (central_list& l : family) l.lock.unlock();
    thread_bin_slots.lock.unlock();
    large_lock.unlock();
    create.unlock();
  }
};

// First initialised during static initialisation, before any thread can fork: a child forked
// while another thread runs a C++ static's first initialisation waits on its guard forever.
inline const bool arena_table_ready = (arena_table::instance(), true);

inline node_arena& arena_of(int node) {
  arena_table& t = arena_table::instance();
  node_arena* a = t.arenas[node].load(std::memory_order_acquire);
  if (a != nullptr) return *a;
  std::lock_guard<std::mutex> guard(t.create);
  a = t.arenas[node].load(std::memory_order_relaxed);
  if (a == nullptr) {
    a = new node_arena();  // lives for the process: blocks may be freed until exit
    t.arenas[node].store(a, std::memory_order_release);
  }
  return *a;
}

inline slab_header* slab_of(const void* p) noexcept {
  return reinterpret_cast<slab_header*>(align_down(reinterpret_cast<std::uintptr_t>(p), slab_size));
}

/// A slab for class `c` of family `f` on `node`: one from the node's pool (its pages come back
/// bound, on first touch), else a new mapping, bound and recorded. nullptr with ec on failure.
inline slab_header* new_slab(node_arena& arena, int node, int f, int c, unsigned owner, std::error_code& ec) noexcept {
  slab_header* h = nullptr;
  {
    std::lock_guard<std::mutex> guard(arena.pool_lock);
    h = arena.pool[f];
    if (h != nullptr) arena.pool[f] = h->next;
  }
  if (h == nullptr) {
    void* slab = map_aligned(slab_size, slab_size, ec);
    if (slab == nullptr) return nullptr;
    advise_huge_pages(slab, slab_size, huge_page_mode::never);  // many blocks share a slab
    placement_options bind;
    bind.strict = family_strict(f);
    ec = bind_mapping(slab, slab_size, node, bind);
    if (!ec && !slabs.mark(reinterpret_cast<std::uintptr_t>(slab))) ec = std::make_error_code(std::errc::not_enough_memory);
    if (ec) {
      sys_munmap(slab, slab_size);
      return nullptr;
    }
    count_heap_bytes(node, family_strict(f), family_kind(f), static_cast<std::int64_t>(slab_size));  // mapped for the process
    h = static_cast<slab_header*>(slab);
    h->magic = slab_magic;
    h->node = node;
    h->family = f;
  } else {
    // The pool keeps the header's page, and on it blocks of the class the slab served last
    // (from 128 B up, some lie there), with their contents: where this class's map lies, those
    // bytes would read as blocks handed out.
    std::memset(reinterpret_cast<char*>(h) + state_map_offset, 0, slab_size >> (4 + c));
  }
  h->size_class = c;
  h->cache_bin = cache_bin_of(node, f, c);
  h->carved.store(0, std::memory_order_relaxed);
  h->free_count = 0;
  h->owner = owner;
  h->free_head = nullptr;
  h->prev = h->next = nullptr;
  return h;
}

/// Takes up to `want` blocks of class `c` of family `f` on `node` from the central list, for
/// the calling thread's carve slot: the free blocks of the slot's slabs, fresh ones carved from
/// its newest slab, free blocks of another slot's (steal_for), then a new slab. Writes their
/// addresses to `out` (room for `want`) and their count to `got`; ec when it is 0.
inline void central_take(int node, int f, int c, std::uint32_t want, free_block** out, std::uint32_t& got,
                         std::error_code& ec) noexcept {
  got = 0;
  node_arena* arena = nullptr;
  try {
    arena = &arena_of(node);
  } catch (...) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return;
  }
  central_list* list = &arena->lists[f][c];
  const std::size_t size = class_bytes(c);
  const unsigned s = carve_slot_here();
  central_list::slot& mine = list->slots[s];
  std::lock_guard<futex_lock> guard(list->lock);
  // The slot's own free blocks, then the rest of its newest slab, then free blocks of another
  // slot's slabs, and only then a new slab.
  auto take_free = [&](slab_header* h) {
    if (h == list->spare) list->spare = nullptr;
    while (got < want && h->free_head != nullptr) {
      free_block* b = h->free_head;
      h->free_head = b->next;
      --h->free_count;
      out[got++] = b;
    }
    if (h->free_head == nullptr) list->unlink(h);
  };
  auto carve = [&] {
    while (got < want && mine.bump != mine.bump_end) {
      // Its state is already free: carving goes on only in a slab new_slab gave, map cleared.
      auto* b = reinterpret_cast<free_block*>(mine.bump);
      mine.bump += size;
      slab_of(b)->carved.store(static_cast<std::uint32_t>(mine.bump - reinterpret_cast<char*>(slab_of(b))),
                               std::memory_order_relaxed);
      out[got++] = b;
    }
  };
  while (got < want && mine.partial != nullptr) take_free(mine.partial);
  carve();
  for (slab_header* h; got < want && (h = list->steal_for(s, first_block_offset(c), size)) != nullptr;) {
    take_free(h);
    carve();
  }
  while (got < want) {
    slab_header* h = new_slab(*arena, node, f, c, s, ec);
    if (h == nullptr) break;
    mine.bump = reinterpret_cast<char*>(h) + first_block_offset(c);
    mine.bump_end = reinterpret_cast<char*>(h) + slab_size;
    carve();
  }
  if (got > 0) ec.clear();
}

/// Puts a chain of free blocks back in their slabs' lists. A slab whose blocks are then all
/// free is kept as the list's spare, or, when it has one, given back: its pages to the kernel
/// and the slab to the node's pool (after the list's lock: madvise takes a while).
inline void central_give(int node, int f, int c, free_block* chain) noexcept {
  node_arena& arena = arena_of(node);  // exists: the blocks came from it
  central_list& list = arena.lists[f][c];
  const std::uint32_t all = blocks_per_slab(c);
  slab_header* emptied = nullptr;
  {
    std::lock_guard<futex_lock> guard(list.lock);
    while (chain != nullptr) {
      free_block* next = chain->next;
      slab_header* h = slab_of(chain);
      chain->next = h->free_head;
      h->free_head = chain;
      if (h->free_count++ == 0) list.link(h);
      // Every block free means every block was carved: the slab is not the one being carved.
      if (h->free_count == all) {
        if (list.spare == nullptr) {
          list.spare = h;
        } else {
          list.unlink(h);
          h->carved.store(0, std::memory_order_relaxed);
          h->next = emptied;
          emptied = h;
        }
      }
      chain = next;
    }
  }
  while (emptied != nullptr) {
    slab_header* h = emptied;
    emptied = h->next;
    // The header's page stays: it links the pool. A failure leaves the pages where they are.
    const std::size_t keep = page_size();
    (void)call(sys::madvise, [&] { return ::madvise(reinterpret_cast<char*>(h) + keep, slab_size - keep, MADV_DONTNEED); });
    std::lock_guard<std::mutex> guard(arena.pool_lock);
    h->next = arena.pool[f];
    arena.pool[f] = h;
  }
}

/// Puts the batches the list of (node, f, c) holds back in their slabs, so that slabs whose
/// blocks are all free can be given back.
inline void drain_batches(int node, int f, int c) noexcept {
  node_arena* arena = arena_table::instance().arenas[node].load(std::memory_order_acquire);
  if (arena == nullptr) return;
  central_list& list = arena->lists[f][c];
  free_block* chain = nullptr;
  {
    std::lock_guard<futex_lock> guard(list.lock);
    for (; list.batch_count > 0; --list.batch_count)
      for (std::uint32_t i = 0; i < transfer_batch_of(c); ++i) {
        free_block* blk = list.batches[list.batch_count - 1][i];
        blk->next = chain;
        chain = blk;
      }
  }
  if (chain != nullptr) central_give(node, f, c, chain);
}

/// Puts `n` free blocks of (node, f, c), given as addresses, back in their slabs' lists.
inline void give_to_slabs(int node, int f, int c, free_block** blocks, std::uint32_t n) noexcept {
  for (std::uint32_t i = 0; i + 1 < n; ++i) blocks[i]->next = blocks[i + 1];
  blocks[n - 1]->next = nullptr;
  central_give(node, f, c, blocks[0]);
}

/// Checks and records the frees of a bin's unsettled blocks (of class `c`), oldest first: each
/// state must be 1 | freed_unsettled (handed out when its free added the mark), else the block
/// was freed twice (or never handed out), and this aborts.
///
/// Why frees are left unsettled: a thread that frees what another allocates (its bin fills and
/// hands batches back, thread_cache::bin::mode) would read each block's state right after the
/// allocating thread wrote it on another CPU, and that read, which the free's branch waits
/// for, cost three times the rest of the free (64 B blocks handed from one thread to another:
/// 2.3-2.5 us per 64 blocks with it, 0.8-0.9 us without). Such a bin's free ORs its mark into
/// the state, which nothing waits for, and puts the address in the bin; the states are read a
/// batch at a time, by when they are those of blocks allocated a batch earlier, 64 to a line. A
/// thread that frees what it allocated reads each state at the free.
///
/// A double free through a deferring bin is found when the block's state is next read: a free
/// of it (a reading free wants 1; at a settle, the first to settle leaves 0 for the other), a
/// refill from the batch that holds its other copy (wants 0), or the settle of this free (finds
/// a block free when the mark went in, or handed out and marked since). Its address cannot be
/// handed out by this thread before that settle, and whoever hands out the other copy first
/// leaves a state that the settle refuses: no block has two owners at once. At the free itself
/// it is found only when the block is the newest in the bin. As with any allocator, a second
/// free that comes after the block was handed out again is taken for a free of the new owner's
/// block. Also missed: two frees of one block at the same moment on two CPUs. Two reading
/// frees can both read 1 before either writes 0; a deferring free's OR (a plain
/// read-modify-write) can write back the mark another thread's settle just cleared. Both bins
/// then hold the block. Only a program that frees a block twice from two threads at once gets
/// there (ThreadSanitizer reports its race); closing it takes a locked instruction in every
/// free, reading ones included, the path the one-thread targets measure.
[[gnu::noinline]] inline void settle_bin(thread_cache::bin& b, int c) noexcept {
  free_block** const end = b.top;
  for (free_block** p = end - b.unsettled(); p != end; ++p) {
    const auto at = reinterpret_cast<std::uintptr_t>(*p);
    const auto* h = reinterpret_cast<const slab_header*>(at & ~std::uintptr_t{slab_size - 1});
    const std::uintptr_t offset = at - reinterpret_cast<std::uintptr_t>(h);
    // Checked at the free, but that was a while ago: a block freed twice may have let its slab
    // go back to the pool and on to another class since, and its map be another's.
    if (h->size_class != c || offset + class_bytes(c) > h->carved.load(std::memory_order_relaxed))
      heap_misuse("double free (the block's slab was given back meanwhile)", *p);
    block_state& state = state_at(h, c, offset);
    if (state != block_state::freed_unsettled) heap_misuse("double free", *p);
    state = block_state::free;
  }
  if (b.mode > thread_cache::bin::deferring) b.mode = thread_cache::bin::deferring;
}

/// A thread's exit hook: its cached blocks go back to their slabs, and the batches of the lists
/// it used with them (threads that exit are when a program's work winds down).
inline void flush_thread_cache(void* cache) noexcept {
  auto* t = static_cast<thread_cache*>(cache);
  t->state = thread_cache::gone;
  leave_carve_slot();
  for (int n = 0; n < cached_nodes; ++n)
    for (int f = 0; f < cached_families; ++f)
      for (int c = 0; c < class_count; ++c) {
        thread_cache::bin& b = t->bins[cache_bin_of(n, f, c)];
        if (const std::uint32_t count = b.mode == thread_cache::bin::unusable ? 0 : bin_count(b); count != 0) {
          settle_bin(b, c);
          give_to_slabs(n, f, c, b.top - count, count);
          drain_batches(n, f, c);
        }
        b = {};
      }
  if (t->slots != nullptr) thread_bin_slots.give(t->slots);
  t->slots = nullptr;
}

inline pthread_key_t cache_key;
inline pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;
inline bool cache_key_made = false;

/// Sets the calling thread's exit hook; without a key (the process ran out) the thread uses
/// the central lists, correct but slower.
[[gnu::noinline, gnu::cold]] inline void hook_thread_cache() noexcept {
  // A thread_local with a destructor keeps the library that holds this code loaded until the
  // thread exits (glibc counts them per object), as the key's destructor needs: a dlclose'd
  // library would otherwise leave the key pointing at unmapped code.
  struct keep_loaded {
    ~keep_loaded() {}  // NOLINT: not trivial, on purpose
  };
  static thread_local keep_loaded keep;
  (void)&keep;
  ::pthread_once(&cache_key_once, [] { cache_key_made = ::pthread_key_create(&cache_key, flush_thread_cache) == 0; });
  // Central lists meanwhile: pthread_setspecific may allocate, and a heap built on this one
  // must not come back here.
  tcache.state = thread_cache::gone;
  // The key first: once it is set, the exit hook gives the carve slot back whatever follows.
  if (!cache_key_made || ::pthread_setspecific(cache_key, &tcache) != 0) return;
  free_block** const slots = thread_bin_slots.take();
  if (slots == nullptr) return;
  for (std::uint32_t bin = 0; bin < cache_bins; ++bin)
    tcache.bins[bin] = {bin_slots::start_of(slots, bin), thread_cache::bin::plain};
  tcache.slots = slots;
  tcache.state = thread_cache::live;
}

/// Copies a whole batch another thread's cache handed back to the list of (node, f, c) to
/// `out`; false when it holds none.
inline bool take_batch(int node, int f, int c, free_block** out) noexcept {
  node_arena* arena = arena_table::instance().arenas[node].load(std::memory_order_acquire);
  if (arena == nullptr) return false;
  central_list& list = arena->lists[f][c];
  std::lock_guard<futex_lock> guard(list.lock);
  if (list.batch_count == 0) return false;
  std::memcpy(out, list.batches[--list.batch_count], transfer_batch_of(c) * sizeof out[0]);
  return true;
}

/// Refills the empty bin of (node, f, c) and takes a block from it (out of line: once per
/// batch).
[[gnu::noinline]] inline free_block* refill_and_take(int node, int f, int c, std::error_code& ec) noexcept {
  if (tcache.state == thread_cache::fresh) hook_thread_cache();
  std::uint32_t got = 0;
  if (tcache.state == thread_cache::gone) {
    free_block* one = nullptr;
    central_take(node, f, c, 1, &one, got, ec);
    return one;
  }
  thread_cache::bin& b = tcache.bins[cache_bin_of(node, f, c)];
  b.mode = thread_cache::bin::plain;  // the bin is empty (nothing unsettled) and its thread allocates
  free_block** const first = b.top;   // its slots start here
  if (take_batch(node, f, c, first)) {
    got = transfer_batch_of(c);
    // Another thread's frees, settled: a block not free here is in the heap twice (a second
    // free by a bin that defers, settle_bin says how) and would be handed to a second owner.
    for (std::uint32_t i = 0; i < got; ++i)
      if (state_of(first[i], c) != block_state::free)
        heap_misuse("double free (a block freed twice was about to be handed out again)", first[i]);
  } else {
    central_take(node, f, c, transfer_batch_of(c), first, got, ec);
    if (got == 0) return nullptr;
  }
  b.top = first + got - 1;
  return *b.top;
}

/// Says which check a free of `p` (of `bytes`, 0: any) failed, and aborts.
[[noreturn, gnu::noinline, gnu::cold]] inline void small_misuse(const void* p, std::size_t bytes) noexcept {
  const slab_header* h = slab_of(p);
  const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(h);
  const int c = h->size_class;
  if (!is_block_aligned(c, offset)) heap_misuse("free of a pointer inside a block, not at its start", p);
  if (!is_block_start(h, c, offset)) heap_misuse("free of a pointer numaaff did not allocate (in a slab, not one of its blocks)", p);
  if (bytes > class_bytes(c)) heap_misuse("free with a size larger than the block", p);
  heap_misuse("double free", p);
}

/// Checks that block `blk` of class `c` (at a multiple of its size) is handed out and records it
/// free: a free that settles at once.
inline void settle_free(const free_block* blk, int c) noexcept {
  block_state& state = state_of(blk, c);
  if (state != block_state::handed_out) small_misuse(blk, 0);
  state = block_state::free;
}

/// Records free block `blk` of class `c` as handed out.
inline void mark_handed_out(const free_block* blk, int c) noexcept { state_of(blk, c) = block_state::handed_out; }

/// cached_block for a bin with unsettled frees (out of line: the inline allocation keeps to
/// the registers a few loads and stores need).
[[gnu::noinline]] inline free_block* settle_and_take(thread_cache::bin& b, int c) noexcept {
  settle_bin(b, c);
  b.mode = thread_cache::bin::plain;
  free_block* blk = *--b.top;
  mark_handed_out(blk, c);
  return blk;
}

/// A block of class `c` from bin `bin` (below cache_bins) of the calling thread's cache,
/// nullptr when the bin is empty (the inline fast path of small_allocate and of the heap by kind).
inline void* cached_block_in(std::uint32_t bin, int c) noexcept {
  // No look at the cache's state: it holds blocks only while live (a fresh one has none yet,
  // and the exit hook empties every bin as it marks the cache gone).
  thread_cache::bin& b = tcache.bins[bin];
  free_block** const top = b.top;
  free_block* const blk = top[-1];
  if (blk == nullptr) return nullptr;  // the gap: empty (or not live)
  if (b.mode != thread_cache::bin::plain) return settle_and_take(b, c);  // holds blocks: live
  b.top = top - 1;
  mark_handed_out(blk, c);
  return blk;
}
/// The same from the bin of (node, f, c), nullptr when it has none.
inline void* cached_block(int node, int f, int c) noexcept {
  const std::uint32_t bin = cache_bin_of(node, f, c);
  return bin < cache_bins ? cached_block_in(bin, c) : nullptr;
}

inline void* small_allocate(int node, int f, int c, std::error_code& ec) noexcept {
  if (void* p = cached_block(node, f, c)) return p;
  free_block* blk = nullptr;
  if (cache_bin_of(node, f, c) < cache_bins) {
    blk = refill_and_take(node, f, c, ec);
  } else {
    // The exit hook gives back the carve slot central_take may take for this thread.
    if (tcache.state == thread_cache::fresh) hook_thread_cache();
    std::uint32_t got = 0;
    central_take(node, f, c, 1, &blk, got, ec);
  }
  if (blk == nullptr) return nullptr;
  mark_handed_out(blk, c);
  return blk;
}

/// Hands the newest batch of a full bin back to its central list, whole where the list has
/// room for one more (out of line: once per batch). `h`: the slab of the block being freed,
/// which says whose list it is (read here: the fast path reads none of its fields but the class).
[[gnu::noinline]] inline void spill_bin(thread_cache::bin& b, const slab_header* h) noexcept {
  const int node = h->node, f = h->family, c = h->size_class;
  settle_bin(b, c);
  b.mode = thread_cache::bin::deferring;
  const std::uint32_t n = transfer_batch_of(c);
  b.top -= n;
  free_block** const give = b.top;
  central_list& list = arena_of(node).lists[f][c];  // exists: the blocks came from it
  {
    std::lock_guard<futex_lock> guard(list.lock);
    if (list.batches != nullptr && list.batch_count < central_list::max_batches) {
      std::memcpy(list.batches[list.batch_count++], give, n * sizeof give[0]);
      return;
    }
  }
  give_to_slabs(node, f, c, give, n);
}

/// push_to_bin for a bin that defers its frees' states, or that is full or has not used the
/// slot at its top yet (out of line: the inline free keeps to the registers a few loads and
/// stores need, with no call to keep them across).
[[gnu::noinline]] inline void push_to_bin_slow(thread_cache::bin& b, free_block* blk, const slab_header* h, int c) noexcept {
  const bool full = bin_count(b) == bin_limit.of[c];
  if (b.mode == thread_cache::bin::plain) {
    settle_free(blk, c);
    if (full) spill_bin(b, h);  // this block settled, the next ones deferred
    *b.top++ = blk;
    return;
  }
  // This free does not read the block's state, which alone says that a block was carved.
  if (!is_block_start(h, c, reinterpret_cast<std::uintptr_t>(blk) - reinterpret_cast<std::uintptr_t>(h))) small_misuse(blk, 0);
  if (b.top[-1] == blk) heap_misuse("double free", blk);  // the newest block in the bin: free
  if (full) spill_bin(b, h);
  *b.top++ = blk;
  // ORed in, not tested: nothing waits for the line the allocating thread is writing.
  block_state& state = state_of(blk, c);
  state = with_unsettled_mark(state);
  if (++b.mode - thread_cache::bin::deferring == transfer_batch_of(c)) settle_bin(b, c);  // a batch at most
}

/// Puts a free block at a multiple of its size (is_block_aligned) in its bin of the calling
/// thread's cache: its state (which says whether it is a carved block, handed out) is checked and
/// set here, or, while the bin defers them, when the bin's frees are
/// settled (settle_bin says why and when). The bin stays bounded. False, with nothing done, for
/// a bin that is unusable (its cache is not live).
inline bool push_to_bin(thread_cache::bin& b, free_block* blk, const slab_header* h, int c) noexcept {
  // Null at the top: the gap after the last slot (full), or a slot not written yet.
  if (__builtin_expect(b.mode != thread_cache::bin::plain || *b.top == nullptr, 0)) {
    if (b.mode == thread_cache::bin::unusable) return false;
    push_to_bin_slow(b, blk, h, c);
    return true;
  }
  block_state& state = state_at(h, c, reinterpret_cast<std::uintptr_t>(blk) - reinterpret_cast<std::uintptr_t>(h));
  if (state != block_state::handed_out) small_misuse(blk, 0);  // freed, or not a block
  state = block_state::free;
  *b.top++ = blk;
  return true;
}

/// A checked block that the calling thread's cache cannot take: the exit hook is set first,
/// or the thread's cache is gone, or the node or family is not cached (out of line: each free
/// of a node above cached_nodes, or of an interleave, fastest or capacity block, comes here).
[[gnu::noinline]] inline void small_free_slow(free_block* blk, const slab_header* h) noexcept {
  const int node = h->node, f = h->family, c = h->size_class;
  if (tcache.state == thread_cache::fresh) hook_thread_cache();
  // A live cache's bins are usable.
  if (const std::uint32_t bin = cache_bin_of(node, f, c); bin < cache_bins && push_to_bin(tcache.bins[bin], blk, h, c)) return;
  settle_free(blk, c);
  blk->next = nullptr;
  central_give(node, f, c, blk);
}

/// Frees a small block after checking that `p` is one, of at least `bytes` (0: any), and live.
/// Blocks start at a multiple of their size and are `size` apart, so a block's offset in its
/// slab is a multiple of its size; a handed-out block's state is 1 (else: a double free),
/// checked at the free, or, by a bin that defers, when its frees are settled (settle_bin says
/// why and when).
inline void small_deallocate(void* p, std::size_t bytes) noexcept {
  const slab_header* h = slab_of(p);
  const int c = h->size_class;
  const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(h);
  auto* blk = static_cast<free_block*>(p);
  if (!is_block_aligned(c, offset) || bytes > class_bytes(c)) small_misuse(p, bytes);
  const std::uint32_t bin = h->cache_bin;
  // A bin is unusable while its cache is not live: push_to_bin's one test covers both.
  if (__builtin_expect(bin < cache_bins, 1) && push_to_bin(tcache.bins[bin], blk, h, c)) return;
  small_free_slow(blk, h);
}

// ---- the entry points used by allocators and resources -----------------------------------

/// Gives the pages kept on `node` back to the kernel, for an allocation that finds the node
/// short of room. @return the bytes given back.
inline std::size_t give_back_kept(int node) noexcept {
  arena_table& t = arena_table::instance();
  std::lock_guard<std::mutex> guard(t.large_lock);
  return t.spare.drop_node(node);
}

/// Whether the pages of registry entry `b` may serve another block: its key allows it, no
/// placement changed since it was mapped, and nothing is armed for next touch.
inline bool pages_reusable(const arena_table::large_block& b) noexcept {
  return b.key.node >= 0 && b.epoch == placement_epoch.load(std::memory_order_acquire) &&
         registry_live.load(std::memory_order_acquire) == 0;
}

/// A node's part of `len` bytes spread by weight `w` over a total weight `total`: at most `len`
/// (the remainder's product is taken in 128 bits).
inline std::uint64_t heap_share(std::uint64_t len, std::uint64_t w, std::uint64_t total) noexcept {
  __extension__ using wide = unsigned __int128;
  return static_cast<std::uint64_t>(static_cast<wide>(len) * w / total);
}

/// Changes what large block `b` counts on its nodes from `from` bytes to `to` (0: nothing), one
/// add per node; nothing for a block not counted yet. Called with the table's large_lock held
/// (it reads `spreads`).
inline void count_large(const arena_table& t, const arena_table::large_block& b, std::size_t from, std::size_t to) noexcept {
  if (!b.counted) return;
  auto add = [&](int node, std::uint64_t was, std::uint64_t now) {
    if (was != now) count_heap_bytes(node, b.placed.strict, b.kind, static_cast<std::int64_t>(now) - static_cast<std::int64_t>(was));
  };
  if (b.spread == 0 || b.spread > t.spreads.size()) {
    add(b.placed.node, from, to);
    return;
  }
  const arena_table::spread& nodes = t.spreads[b.spread - 1];
  std::uint64_t total = 0;
  for (const auto& [node, w] : nodes) total += w;
  // The first node takes what the others' shares leave, so that the parts add up to the
  // block's length exactly and a free gives back what the allocation counted.
  std::uint64_t given_from = 0, given_to = 0;
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    const std::uint64_t was = heap_share(from, nodes[i].second, total), now = heap_share(to, nodes[i].second, total);
    given_from += was;
    given_to += now;
    add(nodes[i].first, was, now);
  }
  add(nodes[0].first, from - given_from, to - given_to);
}

/// Large block `p` (mapped without being counted: placement_options::counted_when_mapped) has
/// its pages spread over `nodes` now (by weight: interleaved, or a tier's segments in bytes):
/// its bytes count for them from here on, once, and its free gives them back there. Without
/// memory for the record, or with no node of weight, it counts where it was mapped.
inline void spread_large(void* p, arena_table::spread nodes) noexcept {
  arena_table& t = arena_table::instance();
  std::lock_guard<std::mutex> guard(t.large_lock);
  const auto it = t.large.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == t.large.end() || it->second.counted) return;
  std::uint64_t total = 0;
  for (const auto& [node, w] : nodes) total += w;
  std::size_t id = 0;
  while (id < t.spreads.size() && t.spreads[id] != nodes) ++id;
  if (total != 0 && id == t.spreads.size()) {
    id = 0;
    while (id < t.spreads.size() && t.spread_users[id] != 0) ++id;
    try {
      if (id == t.spreads.size()) {
        t.spreads.reserve(2 * id + 1);  // doubling; both reserved before either grows
        t.spread_users.reserve(2 * id + 1);
        t.spreads.push_back(std::move(nodes));
        t.spread_users.push_back(0);
      } else {
        t.spreads[id] = std::move(nodes);
      }
    } catch (...) {
      total = 0;
    }
  }
  if (total != 0) {
    it->second.spread = static_cast<std::uint32_t>(id + 1);
    ++t.spread_users[id];
  }
  it->second.counted = true;
  count_large(t, it->second, 0, it->second.len);
}

/// A large block whose entry is gone: its bytes leave the counters, then its spread (which
/// count_large reads) loses a user (large_lock held).
inline void forget_large(arena_table& t, const arena_table::large_block& b) noexcept {
  count_large(t, b, b.len, 0);
  if (b.spread != 0 && b.spread <= t.spread_users.size()) --t.spread_users[b.spread - 1];
}

/// A large block: pages kept from a freed block of the same placement, else its own mapping;
/// recorded in the registry that numa_deallocate checks. Out of line, so that the small-block
/// path stays a few instructions.
[[gnu::noinline]] inline void* allocate_large(std::size_t bytes, std::size_t align, int node, const placement_options& o,
                                              std::error_code& ec) noexcept {
  std::size_t len = mapping_length(bytes, o);
  if (len == 0) {  // the size overflows a mapping
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  const extent_key key = reusable_key(len, node, o);
  arena_table& t = arena_table::instance();
  void* p = nullptr;
  if (key.node >= 0 && align <= (key.huge ? huge_page_size() : page_size())) {
    std::lock_guard<std::mutex> guard(t.large_lock);
    t.spare.age(steady_now_ns());
    p = t.spare.take(len, key, len);
  }
  last_large_block_reused = p != nullptr;
  if (p == nullptr) p = map_on_node(bytes, align, node, o, ec);  // a preferred fallback maps as much
  if (p == nullptr) return nullptr;
  const std::uint64_t epoch = placement_epoch.load(std::memory_order_acquire);
  try {
    std::lock_guard<std::mutex> guard(t.large_lock);
    // An entry left at this address means its block was unmapped behind our back: replaced.
    if (const auto stale = t.large.find(reinterpret_cast<std::uintptr_t>(p)); stale != t.large.end())
      forget_large(t, stale->second);
    t.large.insert_or_assign(reinterpret_cast<std::uintptr_t>(p),
                             arena_table::large_block{len, mapping_granule(o), key, epoch, extent_key{node, o.strict}, 0,
                                                      o.counted_when_mapped, o.kind});
  } catch (...) {  // no room for the entry
    sys_munmap(p, len);
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  if (o.counted_when_mapped) count_heap_bytes(node, o.strict, o.kind, static_cast<std::int64_t>(len));
  ec.clear();
  return p;
}

/// Frees a large block after checking it against the registry (out of line, as
/// allocate_large); `bytes` 0 frees it whatever its size. Its pages are kept for the next block
/// of its placement where they may be (spare_extents), else unmapped.
[[gnu::noinline]] inline void free_large(void* p, std::size_t bytes) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  arena_table& t = arena_table::instance();
  std::unique_lock<std::mutex> guard(t.large_lock);
  const auto it = t.large.find(at);
  if (it == t.large.end()) heap_misuse("free of a pointer numaaff did not allocate, or a double free", p);
  // A size rounds up to the block's pages (explicit huge pages are whole ones); a huge block
  // made of kept pages may hold up to its next huge page boundary (spare_extents::take), so
  // its size is anything from what it asked to what it holds.
  if (bytes != 0) {
    const std::size_t pages = align_up(bytes, it->second.granule), len = it->second.len;
    const std::size_t slack = it->second.key.huge ? huge_page_size() : it->second.granule;
    if (pages > len || pages + slack <= len) heap_misuse("free with a size that does not match the block's", p);
  }
  const arena_table::large_block b = it->second;
  t.large.erase(it);
  forget_large(t, b);
  if (pages_reusable(b)) {
    t.spare.give(at, b.len, b.key, steady_now_ns());
    return;
  }
  guard.unlock();
  // A freed block must not stay armed for next-touch: its addresses will be reused.
  if (registry_live.load(std::memory_order_acquire) != 0) disarm_range(at, at + b.len);
  spare_extents::unmap_or_release(at, b.len);  // it may be the front of a mapping kept pages came from
}

/// The large block at `p` resized to `bytes` without copying: in place where its own pages or
/// the kept pages right after it allow (the tail of a smaller block is kept), else by moving
/// its mapping (mremap: its pages and memory policy go with it). nullptr, the block untouched,
/// when it cannot be: a block of explicit huge pages, one spread over several nodes
/// (interleaved, or a tier's segments: its counts per node would no longer say where its pages
/// are), one whose placement split it into several mappings (the kernel moves one mapping at a
/// time), or no room in the address space. A next-touch arming of the block is undone first:
/// its addresses may change.
[[gnu::noinline]] inline void* remap_large(void* p, std::size_t bytes) noexcept {
  const std::size_t ps = page_size();
  const std::size_t len = align_up(bytes, ps);
  if (len < bytes) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  arena_table& t = arena_table::instance();
  std::unique_lock<std::mutex> guard(t.large_lock);
  auto it = t.large.find(at);
  if (it == t.large.end()) heap_misuse("resize of a pointer numaaff did not allocate, or of a freed block", p);
  if (registry_live.load(std::memory_order_acquire) != 0) {
    // Its arming is undone first, outside the registry's lock: disarming waits for handlers.
    const std::size_t armed = it->second.len;
    guard.unlock();
    disarm_range(at, at + armed);
    guard.lock();
    it = t.large.find(at);
    if (it == t.large.end()) heap_misuse("resize of a block freed while it was resized", p);
  }
  arena_table::large_block& b = it->second;
  if (b.granule != ps || b.spread != 0) return nullptr;
  if (pages_reusable(b) && len < reusable_bytes()) {
    if (len < b.len) {
      t.spare.give(at + len, b.len - len, b.key, steady_now_ns());
      count_large(t, b, b.len, len);
      b.len = len;
      return p;
    }
    if (t.spare.take_at(at + b.len, len - b.len, b.key)) {
      count_large(t, b, b.len, len);
      b.len = len;
      return p;
    }
  }
  const auto r = sys_mremap(p, b.len, len);
  if (!r) return nullptr;
  // The entry is moved, not made: the table holds as many entries as before, so nothing
  // allocates or rehashes. A block grown past the size whose pages are kept is kept no more.
  count_large(t, b, b.len, len);
  auto entry = t.large.extract(it);
  entry.key() = reinterpret_cast<std::uintptr_t>(r.value);
  entry.mapped().len = len;
  if (len >= reusable_bytes()) entry.mapped().key = extent_key{};
  if (const auto stale = t.large.find(entry.key()); stale != t.large.end()) {  // a block unmapped behind our back
    forget_large(t, stale->second);
    t.large.erase(stale);
  }
  t.large.insert(std::move(entry));
  return r.value;
}

/// How a live large block was placed: the node and strictness it was mapped with, and the kind
/// it counts for.
struct placed_block {
  extent_key placed;
  heap_kind kind;
};
/// How the large block at `p` was placed. Aborts with a message for a pointer that is not a
/// live large block.
inline placed_block large_placement(const void* p) noexcept {
  arena_table& t = arena_table::instance();
  std::lock_guard<std::mutex> guard(t.large_lock);
  const auto it = t.large.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == t.large.end()) heap_misuse("resize of a pointer numaaff did not allocate, or of a freed block", p);
  return {it->second.placed, it->second.kind};
}

/// Memory for `bytes` aligned to `align` on `node`; nullptr and ec on failure.
inline void* numa_allocate(std::size_t bytes, std::size_t align, int node, const placement_options& o,
                           std::error_code& ec) noexcept {
  ec.clear();
  if (node < 0 || node >= max_nodes) {  // every table and mask below is max_nodes wide
    ec = std::make_error_code(std::errc::invalid_argument);
    return nullptr;
  }
  if (bytes == 0) bytes = 1;
  if (is_small(bytes, align) && !o.populate && o.huge_pages != huge_page_mode::always &&
      reserved_page_bytes(o.huge_pages) == 0) {
    return small_allocate(node, family_of(o), size_class(bytes, align), ec);
  }
  return allocate_large(bytes, align, node, o, ec);
}

/// Frees what numa_allocate returned, given the same size (the options are not needed: the
/// pointer says which kind of block it is). Aborts with a message on a pointer that is not a
/// live block of ours, or a size that does not fit it.
inline void numa_deallocate(void* p, std::size_t bytes, std::size_t /*align*/, const placement_options& /*o*/) noexcept {
  if (p == nullptr) return;
  if (bytes == 0) bytes = 1;
  if (freeing_slab_block(p)) return small_deallocate(p, bytes);
  free_large(p, bytes);
}

/// Frees what numa_allocate returned without its size (the heap by kind): the slab header or
/// the registry knows it. The same checks as numa_deallocate, less the size's.
inline void numa_free(void* p) noexcept {
  if (p == nullptr) return;
  if (freeing_slab_block(p)) return small_deallocate(p, 0);
  free_large(p, 0);
}

/// The bytes a block numa_allocate returned can hold (its size class, or its mapping's
/// length). Aborts with a message for a pointer that is not the start of a live block.
inline std::size_t numa_usable_size(const void* p) noexcept {
  if (slabs.holds(p)) {
    const slab_header* h = slab_of(p);
    const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(h);
    const int c = h->size_class;
    if (!is_block_start(h, c, offset)) heap_misuse("usable size of a pointer that is not the start of a block", p);
    if (state_at(h, c, offset) != block_state::handed_out) heap_misuse("usable size of a freed block", p);
    return class_bytes(c);
  }
  arena_table& t = arena_table::instance();
  std::lock_guard<std::mutex> guard(t.large_lock);
  const auto it = t.large.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == t.large.end()) heap_misuse("usable size of a pointer numaaff did not allocate, or of a freed block", p);
  return it->second.len;
}

}  // namespace numaaff::detail
