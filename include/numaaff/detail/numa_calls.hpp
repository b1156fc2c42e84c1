// The NUMA system calls, each routed through detail::call() so errno is captured, EINTR
// retried, and tests can inject failures by name. mbind/move_pages/get_mempolicy come from
// libnuma's numaif.h (thin syscall stubs, no libnuma state, never numa_warn/numa_error);
// set_mempolicy_home_node is newer than Debian 12's libnuma and is called by number.
#pragma once

#include "mappings.hpp"
#include "page.hpp"
#include "syscall.hpp"

#include <numaif.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>
#include <fstream>
#include <string>

#ifndef MPOL_PREFERRED_MANY
#define MPOL_PREFERRED_MANY 5  // Linux 5.15
#endif
#ifndef MPOL_WEIGHTED_INTERLEAVE
#define MPOL_WEIGHTED_INTERLEAVE 6  // Linux 6.9
#endif

namespace numaaff::detail {

// The same number on every architecture: syscalls added after 5.1 share one table.
inline constexpr long nr_set_mempolicy_home_node = 450;

/// The system's weighted-interleave weight of node `n` (sysfs, set by the administrator): 0
/// when the kernel has none (before 6.9).
inline unsigned system_interleave_weight(int n) {
  std::ifstream in("/sys/kernel/mm/mempolicy/weighted_interleave/node" + std::to_string(n));
  unsigned w = 0;
  return in >> w ? w : 0;
}

/**
 * True when the kernel will not make a NUMA call for this process at all: it has no NUMA
 * support (ENOSYS), or a sandbox denies the call (Docker's default seccomp profile without
 * CAP_SYS_NICE answers EPERM). Neither has another cause for the arguments numaaff passes (no
 * MPOL_MF_MOVE_ALL, pid 0); EACCES does (move_pages to a node outside the cpuset's mems) and
 * stays an error. Placement then degrades to counted no-ops instead of failing: see
 * system_report.hpp.
 */
constexpr bool refused(int error) noexcept { return error == ENOSYS || error == EPERM; }

/// What numaaff did not do because the kernel refused the call (process-wide, relaxed).
struct refusal_counters {
  std::atomic<std::uint64_t> policies{0};  ///< policy calls (bind, interleave, ...) that were no-ops
  std::atomic<std::uint64_t> mappings{0};  ///< allocations left to first-touch placement
  std::atomic<std::uint64_t> pages{0};     ///< pages move_to could not move or where() could not locate
  std::atomic<std::uint64_t> pinnings{0};  ///< pin_this_thread calls that could not bind the thread
  std::atomic<std::uint64_t> weighted_fallbacks{0};  ///< weighted interleaves done as plain interleave: no mappings left
  std::atomic<std::uint64_t> huge_page_fallbacks{0};  ///< preferred blocks of explicit huge pages given ordinary pages
};
inline refusal_counters refusals;

/**
 * Splits a transparent huge page that holds pages on both sides of `boundary` (page-aligned):
 * the kernel migrates a huge page whole, so one that straddles the edge of a range would move
 * the neighbours' data with it. MADV_COLD over part of a huge page makes the kernel split it
 * (and marks that one page, the one at `boundary`, cold). Best effort: a huge page shared with
 * another process, or locked, stays whole. Async-signal-safe: the next-touch handler splits
 * again where khugepaged or a busy page undid a split (split_huge_pages marked the regions).
 */
inline void split_huge_page_at(std::uintptr_t boundary) noexcept {
  if (boundary % huge_page_size() == 0 || !huge_pages_seen_so_far()) return;
  call(sys::madvise, [&] { return ::madvise(reinterpret_cast<void*>(boundary), page_size(), MADV_COLD); });
}

/**
 * Splits the huge pages at `boundaries` (page-aligned, any order; sorted in place) within
 * [begin, end), after marking their huge-page regions MADV_NOHUGEPAGE: otherwise khugepaged,
 * which collapses the small pages of a region into one huge page on one node, undoes the
 * placement the split was for seconds later. Adjacent regions are marked as one run (one
 * mapping); when the runs would take more mappings than the process has left above its
 * reserve (two each), the regions from the first to the last are marked as one run instead
 * (no huge pages between them: placement before huge pages), and with no headroom at all
 * nothing is marked. Reads /proc/self/maps only when there are several runs.
 */
inline void split_huge_pages(std::uintptr_t* boundaries, std::size_t n) noexcept {
  if (n == 0 || !huge_pages_possible()) return;
  const std::size_t huge = huge_page_size();
  std::sort(boundaries, boundaries + n);
  std::size_t runs = 0;
  std::uintptr_t first_region = 0, last_region = 0;
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (boundaries[i] % huge == 0) continue;
    const std::uintptr_t region = align_down(boundaries[i], huge);
    if (!any || region > last_region + huge) ++runs;
    if (!any) first_region = region;
    any = true;
    last_region = region;
  }
  if (!any) return;
  const auto mark = [&](std::uintptr_t from, std::uintptr_t to) {
    // Part of a region may be unmapped (the edge of a mapping): madvise marks the rest and
    // says ENOMEM, which changes nothing here.
    call(sys::madvise, [&] { return ::madvise(reinterpret_cast<void*>(from), to - from, MADV_NOHUGEPAGE); });
  };
  std::size_t headroom = 2;
  if (runs > 1) {
    try {
      headroom = mapping_headroom();
    } catch (...) {
      headroom = 0;
    }
  }
  if (2 * runs <= headroom) {
    std::uintptr_t from = 0, to = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (boundaries[i] % huge == 0) continue;
      const std::uintptr_t region = align_down(boundaries[i], huge);
      if (to != 0 && region <= to) {
        to = region + huge;
        continue;
      }
      if (to != 0) mark(from, to);
      from = region;
      to = region + huge;
    }
    mark(from, to);
  } else if (headroom >= 2) {
    mark(first_region, last_region + huge);
  }
  for (std::size_t i = 0; i < n; ++i) split_huge_page_at(boundaries[i]);
}

/**
 * split_huge_pages at `begin`, `end` and every `chunk` boundary between them (both
 * page-aligned, `chunk` a page multiple no larger than the range), so that each chunk can
 * migrate alone: one boundary per huge-page region at most (under 2,100 for 4 GiB), none
 * where every boundary is huge-page-aligned. Allocates the boundary list (std::bad_alloc).
 */
inline void split_huge_pages_at_chunks(std::uintptr_t begin, std::uintptr_t end, std::size_t chunk) {
  if (!huge_pages_possible() || end <= begin) return;
  const std::size_t huge = huge_page_size();
  std::vector<std::uintptr_t> at{begin, end};
  if (chunk < huge) {  // every region the range covers has a boundary inside it
    for (std::uintptr_t region = align_up(begin, huge); region < end && region != 0; region += huge)
      if (region + page_size() < end) at.push_back(region + page_size());
  } else {
    for (std::uintptr_t off = chunk; off < end - begin; off += chunk) at.push_back(begin + off);
  }
  split_huge_pages(at.data(), at.size());
}

/// Counts numaaff's migrations (a move_pages with targets, an mbind that moves), each counted
/// once it has returned: what a cached "where is this data" answer is checked against (an
/// answer read during a migration carries the epoch from before it, so it is asked again).
/// Lock-free, so the next-touch handler's migrations count too (async-signal-safe).
inline std::atomic<std::uint64_t> migration_epoch{0};

/// Counts every change of placement numaaff makes on memory that is not a fresh mapping of its
/// heap (a policy set on a range, pages moved, a home node), counted before the call: the heap
/// reuses a freed large block's pages only when none happened since the block was mapped (its
/// pages and policy are then still those it was made with). Lock-free (the next-touch handler
/// moves pages).
inline std::atomic<std::uint64_t> placement_epoch{0};

/// mbind of a heap mapping no one else has seen yet: not a change of placement.
inline sys_result<long> sys_mbind_fresh(void* addr, std::size_t len, int mode, const unsigned long* mask,
                                        unsigned long maxnode) noexcept {
  return call(sys::mbind, [&] { return ::mbind(addr, len, mode, mask, maxnode, 0); });
}

inline sys_result<long> sys_mbind(void* addr, std::size_t len, int mode, const unsigned long* mask,
                                  unsigned long maxnode, unsigned flags) noexcept {
  placement_epoch.fetch_add(1, std::memory_order_acq_rel);
  const auto r = call(sys::mbind, [&] { return ::mbind(addr, len, mode, mask, maxnode, flags); });
  if ((flags & (MPOL_MF_MOVE | MPOL_MF_MOVE_ALL)) != 0) migration_epoch.fetch_add(1, std::memory_order_release);
  return r;
}

inline sys_result<long> sys_move_pages(unsigned long count, void** pages, const int* nodes, int* status,
                                       int flags) noexcept {
  if (nodes != nullptr) placement_epoch.fetch_add(1, std::memory_order_acq_rel);
  const auto r = call(sys::move_pages, [&] { return ::move_pages(0, count, pages, nodes, status, flags); });
  if (nodes != nullptr) migration_epoch.fetch_add(1, std::memory_order_release);
  return r;
}

inline sys_result<long> sys_get_mempolicy(int* mode, unsigned long* mask, unsigned long maxnode, void* addr,
                                          unsigned flags) noexcept {
  return call(sys::get_mempolicy, [&] { return ::get_mempolicy(mode, mask, maxnode, addr, flags); });
}

/// The calling thread's memory policy: its mode (MPOL_*, the mode flags stripped) and its
/// nodes, ascending; false when get_mempolicy is refused or fails. Allocates the node list.
inline bool read_thread_policy(int& mode, std::vector<int>& nodes) {
  constexpr unsigned long bits = 4096;  // above any kernel's MAX_NUMNODES
  constexpr unsigned long word = 8 * sizeof(unsigned long);
  unsigned long mask[bits / word] = {};
  int raw = 0;
  if (!sys_get_mempolicy(&raw, mask, bits, nullptr, 0)) return false;
  mode = raw & 0xff;  // the high bits are mode flags (static/relative nodes)
  nodes.clear();
  for (unsigned long n = 0; n < bits; ++n)
    if ((mask[n / word] >> (n % word)) & 1UL) nodes.push_back(static_cast<int>(n));
  return true;
}

inline sys_result<long> sys_set_mempolicy_home_node(void* addr, std::size_t len, unsigned long home_node,
                                                    unsigned long flags) noexcept {
  placement_epoch.fetch_add(1, std::memory_order_acq_rel);
  return call(sys::set_mempolicy_home_node,
              [&] { return ::syscall(nr_set_mempolicy_home_node, addr, len, home_node, flags); });
}

inline sys_result<void*> sys_mmap(std::size_t len, int prot, int flags) noexcept {
  return call(sys::mmap, [&] { return ::mmap(nullptr, len, prot, flags, -1, 0); });
}

inline sys_result<int> sys_munmap(void* addr, std::size_t len) noexcept {
  return call(sys::munmap, [&] { return ::munmap(addr, len); });
}

/// Moves or resizes a mapping, its pages and its memory policy with it (MREMAP_MAYMOVE).
inline sys_result<void*> sys_mremap(void* addr, std::size_t old_len, std::size_t new_len) noexcept {
  return call(sys::mremap, [&] { return ::mremap(addr, old_len, new_len, MREMAP_MAYMOVE); });
}

inline sys_result<int> sys_mprotect(void* addr, std::size_t len, int prot) noexcept {
  return call(sys::mprotect, [&] { return ::mprotect(addr, len, prot); });
}

}  // namespace numaaff::detail
