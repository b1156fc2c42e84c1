// A caller's range as whole pages (page_span), checked once and walked in bounded batches:
// the shape every policy, migration and placement query works on. Also what mincore says about
// pages when move_pages is refused (a sandbox).
#pragma once

#include "kernel_nodes.hpp"
#include "numa_calls.hpp"
#include "page.hpp"
#include "throw.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace numaaff::detail {

/// Pages per move_pages batch. See benchmarks/README.md: throughput is flat from 1024 pages
/// up, and 4096 pages (16 MiB of 4 KiB pages) bounds scratch to 64 KiB.
inline constexpr std::size_t migration_batch = 4096;

/// The tables that allocation, arming and freeing read are first built during static
/// initialisation (as libnuma reads sysfs when it is loaded), before any thread can fork: a
/// child forked while another thread runs a C++ static's first initialisation waits on its
/// guard forever.
inline bool build_process_tables() noexcept {
  try {
    (void)page_size();
    (void)huge_page_size();
    (void)huge_pages_possible();
  } catch (...) {  // out of memory at start-up: built on first use instead
  }
  return true;
}
inline const bool process_tables_ready = build_process_tables();

/// A validated, page-rounded range.
struct page_span {
  std::uintptr_t first = 0;  // first page address
  std::size_t pages = 0;
  void* address() const noexcept { return reinterpret_cast<void*>(first); }
  std::size_t bytes() const noexcept { return pages * page_size(); }
};

/// Validates a caller's range and rounds it outward to pages. Allocates nothing, so the
/// noexcept overloads can use it; require_range() words the error for the throwing ones.
inline bool make_span(const void* addr, std::size_t bytes, page_span& span) noexcept {
  span = {};
  if (bytes == 0) return true;
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
  if (addr == nullptr || a + bytes < a || align_up(a + bytes, page_size()) < a) return false;
  span.first = align_down(a, page_size());
  span.pages = (align_up(a + bytes, page_size()) - span.first) / page_size();
  return true;
}

/// Throwing forms check their arguments first, so caller errors carry a message naming them.
inline void require_range(const char* fn, const void* addr, std::size_t bytes) {
  page_span span;
  if (make_span(addr, bytes, span)) return;
  if (addr == nullptr) throw_invalid_argument(std::string(fn) + ": addr is null with bytes = " + std::to_string(bytes));
  throw_invalid_argument(std::string(fn) + ": the range at " + std::to_string(reinterpret_cast<std::uintptr_t>(addr)) +
                         " of " + std::to_string(bytes) + " bytes wraps the address space");
}

/**
 * Placement statuses for pages[0, n) when move_pages is refused: what mincore can tell.
 * A page that is not resident is unpopulated (-ENOENT); a resident one is on the kernel's only
 * node when it has one, and unknown (-EPERM) otherwise. mincore counts a page that was only
 * read (the shared zero page) as resident, where move_pages says unpopulated.
 */
inline void residency_status(void* const* pages, std::size_t n, int* status) {
  const std::size_t ps = page_size();
  const std::vector<int>& nodes = kernel_nodes();
  const int resident = nodes.size() == 1 ? nodes.front() : -EPERM;
  std::vector<unsigned char> vec(n);
  // The pages of a batch are consecutive: one call, or one per page where the range has holes.
  const bool whole = call(sys::mincore, [&] { return ::mincore(pages[0], n * ps, vec.data()); }).error == 0;
  std::uint64_t unknown = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!whole && !call(sys::mincore, [&] { return ::mincore(pages[i], ps, &vec[i]); })) vec[i] = 0;
    status[i] = (vec[i] & 1) != 0 ? resident : -ENOENT;
    unknown += status[i] == -EPERM ? 1 : 0;
  }
  refusals.pages.fetch_add(unknown, std::memory_order_relaxed);
}

/// Pages of a span in batches: calls f(count) with `pages` filled in, until f returns false;
/// true when every batch was seen.
template <class F>
inline bool for_each_batch(const page_span& span, std::vector<void*>& pages, F&& f) {
  const std::size_t ps = page_size();
  for (std::size_t done = 0; done < span.pages;) {
    const std::size_t n = std::min(migration_batch, span.pages - done);
    pages.resize(n);
    for (std::size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(span.first + (done + i) * ps);
    if (!f(n)) return false;
    done += n;
  }
  return true;
}

}  // namespace numaaff::detail
