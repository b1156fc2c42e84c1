// Where data lives, cheaply: the node of a byte range for scheduling (submit_near, run_near and
// the placement of dataflow tasks), without a page query per task.
//
// The directory remembers the node of pages, shared by every thread. A range is judged by up
// to 16 pages sampled evenly over it (a small range: all its pages); the samples the directory
// does not know are asked in one page query, and the range's node is the one most samples are
// on. Tasks on small tiles share pages, so most of them find every sample known. It also
// learns from execution: a dataflow task that wrote bytes nobody had touched placed them on
// the node it ran on (first touch), so later readers of those bytes follow it with no query.
// A page's node is trusted while numaaff has migrated nothing since (migration_epoch: move_to,
// place_blocks, next touch and every moving bind count) and for at most `ttl`, after which it
// is asked again (pages the kernel moved on its own are seen again; ages are on the coarse
// clock, so "at most" is to a kernel tick). "Not resident" is never remembered: a first touch
// changes it without a migration.
//
// Each thread also keeps its last answers for 128 ranges (begin and length, hashed into 32
// sets of 4; a miss replaces the set's oldest), each from samples that were all resident, with
// the epoch and the age of its oldest sample: the same hint again costs a few compares instead
// of a lock per sampled page, and expires with its pages.
//
// A fixed table of 1024 sets of 4 pages (Fibonacci-hashed; a miss replaces the set's oldest
// page), each set under its own spin lock held for a few loads and stores; no allocation, so
// it is safe anywhere but in a signal handler. Built at static initialisation (no first-use
// guard a forked child could inherit locked).
#pragma once

#include "numa_calls.hpp"
#include "page.hpp"
#include "page_span.hpp"
#include "futex.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <system_error>

namespace numaaff::detail {

inline constexpr std::size_t data_node_samples = 16;

/// Page i of n sampled evenly over `span` (n <= span.pages; the first and the last included).
inline std::uintptr_t sample_page(const page_span& span, std::size_t i, std::size_t n) noexcept {
  const std::size_t page = n == 1 ? 0 : i * (span.pages - 1) / (n - 1);
  return span.first + page * page_size();
}

/// The most common node among page statuses (ties: the lowest), -1 if none is a node.
inline int majority_node(const int* status, std::size_t n) noexcept {
  int best = -1;
  std::size_t best_count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (status[i] < 0) continue;
    std::size_t count = 0;
    for (std::size_t j = 0; j < n; ++j) count += status[j] == status[i] ? 1 : 0;
    if (count > best_count || (count == best_count && status[i] < best)) {
      best = status[i];
      best_count = count;
    }
  }
  return best;
}

/// The node most of `span`'s sampled pages are on, asked of the kernel (-1: none resident, not
/// known, or the query failed: `ec`; a refused query is not an error).
inline int sampled_node(const page_span& span, std::error_code& ec) noexcept {
  if (span.pages == 0) return -1;
  void* pages[data_node_samples];
  int status[data_node_samples];
  const std::size_t n = std::min(data_node_samples, span.pages);
  for (std::size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(sample_page(span, i, n));
  const auto q = sys_move_pages(n, pages, nullptr, status, 0);
  if (!q) {
    if (!refused(q.error)) report(q, ec);
    return -1;
  }
  return majority_node(status, n);
}

class data_directory {
 public:
  static constexpr std::chrono::milliseconds ttl{50};

  /// The kernel node most of [addr, addr + bytes)'s sampled pages are on, -1 if none is
  /// resident or known (a hint is never an error: a failed or refused query is -1 too).
  int node_of(const void* addr, std::size_t bytes) noexcept {
    const std::uint64_t epoch = migration_epoch.load(std::memory_order_acquire);
    const std::uint64_t now = coarse_monotonic_ns();
    const auto begin = reinterpret_cast<std::uintptr_t>(addr);
    range_answer* const memo = memo_of(begin, bytes);  // only valid, non-empty ranges are remembered
    range_answer* victim = memo;
    for (std::size_t w = 0; w < memo_ways; ++w) {
      range_answer& m = memo[w];
      if (m.begin == begin && m.bytes == bytes) {
        if (m.epoch == epoch && now - m.at < ttl_ns) return m.node;
        victim = &m;
        break;
      }
      if (m.at < victim->at) victim = &m;
    }
    page_span span;
    if (!make_span(addr, bytes, span) || span.pages == 0) return -1;
    const std::size_t n = std::min(data_node_samples, span.pages);
    int status[data_node_samples];
    void* ask[data_node_samples];
    std::size_t asked_at[data_node_samples];
    std::size_t misses = 0;
    std::uint64_t oldest = now;  // the answer is as old as its oldest sample
    for (std::size_t i = 0; i < n; ++i) {
      const std::uintptr_t page = sample_page(span, i, n);
      status[i] = find(page, epoch, now, oldest);
      if (status[i] < 0) {
        ask[misses] = reinterpret_cast<void*>(page);
        asked_at[misses++] = i;
      }
    }
    if (misses != 0) {
      int got[data_node_samples];
      if (!sys_move_pages(misses, ask, nullptr, got, 0)) return majority_node(status, n);
      for (std::size_t k = 0; k < misses; ++k) {
        status[asked_at[k]] = got[k];
        if (got[k] >= 0) store(reinterpret_cast<std::uintptr_t>(ask[k]), epoch, now, got[k]);
      }
    }
    const int node = majority_node(status, n);
    // Only an answer every sample gave: a page not resident yet changes it at its first
    // touch, with no migration to tell.
    if (std::all_of(status, status + n, [](int st) { return st >= 0; })) *victim = range_answer{begin, bytes, epoch, oldest, node};
    return node;
  }

  /// Remembers that [addr, addr + bytes) is on `node` as of migration epoch `epoch` (read
  /// before the bytes were placed: a migration since then makes the answer stale); the pages
  /// node_of samples for this range.
  void learn(const void* addr, std::size_t bytes, int node, std::uint64_t epoch) noexcept {
    page_span span;
    if (node < 0 || !make_span(addr, bytes, span) || span.pages == 0) return;
    const std::uint64_t now = coarse_monotonic_ns();
    const std::size_t n = std::min(data_node_samples, span.pages);
    for (std::size_t i = 0; i < n; ++i) store(sample_page(span, i, n), epoch, now, node);
  }

 private:
  static constexpr std::uint64_t ttl_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(ttl).count());
  static constexpr std::size_t ways_per_set = 4;
  struct entry {
    std::uintptr_t page = 0;
    std::uint64_t epoch = 0;
    std::uint64_t at = 0;
    int node = -1;
  };
  struct set {
    spin_lock lock;
    entry ways[ways_per_set];
  };

  set& set_of(std::uintptr_t page) noexcept {
    const std::uint64_t key = static_cast<std::uint64_t>(page / page_size()) * 0x9E3779B97F4A7C15ull;
    return sets_[key >> 54];  // the top 10 bits
  }
  int find(std::uintptr_t page, std::uint64_t epoch, std::uint64_t now, std::uint64_t& oldest) noexcept {
    set& s = set_of(page);
    std::lock_guard<spin_lock> lock(s.lock);
    for (const entry& e : s.ways)
      if (e.page == page && e.node >= 0 && e.epoch == epoch && now - e.at < ttl_ns) {
        oldest = std::min(oldest, e.at);
        return e.node;
      }
    return -1;
  }
  void store(std::uintptr_t page, std::uint64_t epoch, std::uint64_t now, int node) noexcept {
    set& s = set_of(page);
    std::lock_guard<spin_lock> lock(s.lock);
    entry* victim = &s.ways[0];
    for (entry& e : s.ways) {
      if (e.page == page) {
        victim = &e;
        break;
      }
      if (e.at < victim->at) victim = &e;
    }
    *victim = entry{page, epoch, now, node};
  }

  /// A range's last whole answer on this thread: a repeated hint costs one compare, not a lock
  /// per sampled page.
  struct range_answer {
    std::uintptr_t begin = 0;
    std::size_t bytes = 0;
    std::uint64_t epoch = 0, at = 0;
    int node = -1;
  };
  static constexpr std::size_t memo_ways = 4;
  /// The set of 4 ways (of 32 sets) where `begin` and `bytes` may be remembered.
  static range_answer* memo_of(std::uintptr_t begin, std::size_t bytes) noexcept {
    static thread_local range_answer memo[32 * memo_ways];
    const std::uint64_t key = (static_cast<std::uint64_t>(begin) ^ (static_cast<std::uint64_t>(bytes) << 20)) * 0x9E3779B97F4A7C15ull;
    return &memo[(key >> 59) * memo_ways];  // the top 5 bits
  }
  set sets_[1024];
};

/// The process's directory.
inline data_directory directory{};

}  // namespace numaaff::detail
