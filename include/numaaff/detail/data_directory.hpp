// Where data lives, cheaply: the node of a byte range for scheduling (submit_near, run_near and
// the placement of dataflow tasks), without a page query per task.
//
// The directory remembers answers per range (address and size), shared by every thread, and
// learns from execution: a dataflow task that wrote bytes nobody had touched placed them on
// the node it ran on (first touch), so later readers of those bytes follow it with no query.
// An answer is trusted while numaaff has migrated nothing since (migration_epoch: move_to,
// place_blocks, next touch and every moving bind count) and for at most `ttl`, after which it
// is verified by a sampled query (pages the kernel moved on its own are seen again). "Not
// resident" is never remembered: a first touch changes it without a migration.
//
// A fixed table of 256 sets of 4 ranges (Fibonacci-hashed, so blocks a power of two apart
// spread over every set; a miss replaces the set's oldest answer), each set under its own spin
// lock held for a few loads and stores; no allocation, so it is safe anywhere but in a signal
// handler. Built at static initialisation (no first-use guard a forked child could inherit
// locked).
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

/// The node most of `span`'s sampled pages are on (-1: none resident, not known, or the query
/// failed: `ec`; a refused query is not an error).
inline int sampled_node(const page_span& span, std::error_code& ec) noexcept {
  if (span.pages == 0) return -1;
  void* pages[data_node_samples];
  int status[data_node_samples];
  const std::size_t n = std::min(data_node_samples, span.pages);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t page = n == 1 ? 0 : i * (span.pages - 1) / (n - 1);
    pages[i] = reinterpret_cast<void*>(span.first + page * page_size());
  }
  const auto q = sys_move_pages(n, pages, nullptr, status, 0);
  if (!q) {
    if (!refused(q.error)) report(q, ec);
    return -1;
  }
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

class data_directory {
 public:
  static constexpr std::chrono::milliseconds ttl{50};

  /// The kernel node holding most of [addr, addr + bytes), -1 if not resident or not known (a
  /// hint is never an error: a failed or refused query is -1 too).
  int node_of(const void* addr, std::size_t bytes) noexcept {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
    set& s = set_of(a, bytes);
    const std::uint64_t epoch = migration_epoch.load(std::memory_order_acquire);
    const std::uint64_t now = monotonic_ns();
    {
      std::lock_guard<spin_lock> lock(s.lock);
      for (const entry& e : s.ways)
        if (e.addr == a && e.bytes == bytes && e.node >= 0 && e.epoch == epoch && now - e.at < ttl_ns) return e.node;
    }
    page_span span;
    if (!make_span(addr, bytes, span)) return -1;
    std::error_code ec;
    const int n = sampled_node(span, ec);
    if (n >= 0) store(s, a, bytes, epoch, now, n);
    return n;
  }

  /// Remembers that [addr, addr + bytes) is on `node` as of migration epoch `epoch` (read
  /// before the bytes were placed: a migration since then makes the answer stale).
  void learn(const void* addr, std::size_t bytes, int node, std::uint64_t epoch) noexcept {
    if (node < 0 || bytes == 0) return;
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
    store(set_of(a, bytes), a, bytes, epoch, monotonic_ns(), node);
  }

 private:
  static constexpr std::uint64_t ttl_ns = static_cast<std::uint64_t>(std::chrono::nanoseconds(ttl).count());
  static constexpr std::size_t ways_per_set = 4;
  struct entry {
    std::uintptr_t addr = 0;
    std::size_t bytes = 0;
    std::uint64_t epoch = 0;
    std::uint64_t at = 0;
    int node = -1;
  };
  struct set {
    spin_lock lock;
    entry ways[ways_per_set];
  };

  set& set_of(std::uintptr_t a, std::size_t bytes) noexcept {
    const std::uint64_t key = (static_cast<std::uint64_t>(a) ^ (static_cast<std::uint64_t>(bytes) << 1)) * 0x9E3779B97F4A7C15ull;
    return sets_[key >> 56];  // the top 8 bits
  }
  static void store(set& s, std::uintptr_t a, std::size_t bytes, std::uint64_t epoch, std::uint64_t now, int node) noexcept {
    std::lock_guard<spin_lock> lock(s.lock);
    entry* victim = &s.ways[0];
    for (entry& e : s.ways) {
      if (e.addr == a && e.bytes == bytes) {
        victim = &e;
        break;
      }
      if (e.at < victim->at) victim = &e;
    }
    *victim = entry{a, bytes, epoch, now, node};
  }

  set sets_[256];
};

/// The process's directory.
inline data_directory directory{};

}  // namespace numaaff::detail
