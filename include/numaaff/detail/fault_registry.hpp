// The state behind affinity_on_next_touch: a fixed-capacity table of armed ranges, one 32-bit
// word per chunk, process-wide counters, and the code the SIGSEGV handler runs for a fault on
// an armed chunk. Everything the handler touches is preallocated and lock-free; it calls only
// mprotect, move_pages, getcpu, futex and clock_gettime, all plain system calls.
//
// Chunk word: bits 0-7 state, bits 8-23 node+1 of the thread that claimed it (adaptive
// granularity looks at its neighbours), bit 31 "someone waits on the futex".
//   armed --claim (CAS, one winner)--> claimed --mprotect RW--> moving --move_pages--> open
// Threads faulting on a claimed chunk sleep on its futex until it is unprotected, then retry
// the access; threads faulting on a moving or open chunk retry at once (the kernel serialises
// accesses with the migration itself, so no write is lost).
#pragma once

#include "futex.hpp"
#include "numa_calls.hpp"
#include "page.hpp"
#include "syscall.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>

namespace numaaff::detail {

inline constexpr std::uint32_t chunk_open = 0;
inline constexpr std::uint32_t chunk_armed = 1;
inline constexpr std::uint32_t chunk_claimed = 2;
inline constexpr std::uint32_t chunk_moving = 3;
inline constexpr std::uint32_t chunk_state_mask = 0xff;
inline constexpr std::uint32_t chunk_waiters = 1u << 31;

inline constexpr int slot_free = 0;
inline constexpr int slot_setup = 1;
inline constexpr int slot_active = 2;
inline constexpr int slot_retiring = 3;

inline constexpr std::size_t registry_capacity = 4096;
/// Pages per move_pages call in the handler: the arrays live on the (possibly alternate,
/// possibly small) signal stack, 16 bytes per page.
inline constexpr std::size_t handler_batch = 128;

enum class touch_target : int { current_node, homenode };

struct armed_range {
  std::atomic<int> state{slot_free};
  std::atomic<int> users{0};  // handlers inside this slot right now
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::size_t chunk = 0;  // bytes, a page multiple
  std::size_t count = 0;  // chunks
  std::atomic<std::uint32_t>* words = nullptr;
  std::size_t words_bytes = 0;
  touch_target target = touch_target::current_node;
  bool adaptive = false;
  std::uint32_t max_run = 1;
  std::atomic<std::uint32_t> run{1};          // adaptive: chunks claimed per fault now
  std::atomic<std::size_t> armed_left{0};     // chunks not yet claimed
};

struct next_touch_counters {
  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> chunks{0};
  std::atomic<std::uint64_t> pages_moved{0};
  std::atomic<std::uint64_t> pages_failed{0};
  std::atomic<std::uint64_t> pages_unpopulated{0};
  std::atomic<std::uint64_t> widened{0};
  std::atomic<std::uint64_t> waits{0};
  std::atomic<std::uint64_t> handler_ns{0};
};

inline armed_range registry[registry_capacity];
inline std::atomic<std::size_t> registry_high{0};      // every used slot is below this index
inline std::atomic<std::size_t> registry_live{0};      // slots not free
inline std::atomic<std::uint64_t> registry_generation{0};  // bumped whenever a slot retires
inline next_touch_counters nt_counters;

/// Sets a chunk's state, keeping nothing but the node bits, and wakes sleepers if any.
inline void publish(std::atomic<std::uint32_t>& w, std::uint32_t state, std::uint32_t node_bits) noexcept {
  const std::uint32_t old = w.exchange(node_bits | state, std::memory_order_acq_rel);
  if ((old & chunk_waiters) != 0) futex_wake(w);
}

/// Claims chunk k if it is armed. Async-signal-safe.
inline bool try_claim(armed_range& r, std::size_t k, std::uint32_t node_bits) noexcept {
  std::uint32_t w = r.words[k].load(std::memory_order_acquire);
  while ((w & chunk_state_mask) == chunk_armed) {
    if (r.words[k].compare_exchange_weak(w, (w & chunk_waiters) | node_bits | chunk_claimed, std::memory_order_acq_rel)) {
      r.armed_left.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

/// Moves [start, start + len) to `node` in handler_batch-page calls, counting the outcome.
inline void move_span(std::uintptr_t start, std::size_t len, int node) noexcept {
  const std::size_t ps = page_size();
  void* pages[handler_batch];
  int nodes[handler_batch];
  int status[handler_batch];
  for (std::uintptr_t at = start; at < start + len;) {
    std::size_t n = 0;
    for (; n < handler_batch && at < start + len; ++n, at += ps) {
      pages[n] = reinterpret_cast<void*>(at);
      nodes[n] = node;
    }
    const auto r = sys_move_pages(n, pages, nodes, status, MPOL_MF_MOVE);
    if (!r) {
      if (r.error != ENOSYS) nt_counters.pages_failed.fetch_add(n, std::memory_order_relaxed);
      continue;  // ENOSYS: no NUMA, nothing to move; the chunk is open all the same
    }
    bool busy = false;
    for (std::size_t i = 0; i < n; ++i) busy |= status[i] == -EBUSY;
    // Tail pages of a transparent huge page report EBUSY although the huge page moved.
    if (busy) sys_move_pages(n, pages, nullptr, status, 0);
    std::uint64_t moved = 0, unpopulated = 0, failed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (status[i] == node) {
        ++moved;
      } else if (status[i] == -ENOENT || status[i] == -EFAULT) {
        ++unpopulated;
      } else {
        ++failed;
      }
    }
    nt_counters.pages_moved.fetch_add(moved, std::memory_order_relaxed);
    nt_counters.pages_unpopulated.fetch_add(unpopulated, std::memory_order_relaxed);
    nt_counters.pages_failed.fetch_add(failed, std::memory_order_relaxed);
  }
}

inline std::uintptr_t chunk_begin(const armed_range& r, std::size_t k) noexcept { return r.begin + k * r.chunk; }
inline std::uintptr_t chunk_end(const armed_range& r, std::size_t k) noexcept {
  const std::uintptr_t e = r.begin + k * r.chunk;
  return e < r.end ? e : r.end;
}

/// Opens claimed chunks [first, last) and migrates them to `node`. When mprotect runs out of
/// mappings (ENOMEM: vm.max_map_count), the span is widened over armed neighbours up to the
/// nearest open ones, so that the new opening merges with existing ones instead of splitting.
/// Returns false only if the chunks could not be opened at all.
inline bool open_and_move(armed_range& r, std::size_t first, std::size_t last, int node, std::uint32_t node_bits) noexcept {
  auto result = sys_mprotect(reinterpret_cast<void*>(chunk_begin(r, first)), chunk_end(r, last) - chunk_begin(r, first),
                             PROT_READ | PROT_WRITE);
  if (!result && result.error == ENOMEM) {
    nt_counters.widened.fetch_add(1, std::memory_order_relaxed);
    while (last < r.count && try_claim(r, last, node_bits)) ++last;
    while (first > 0 && try_claim(r, first - 1, node_bits)) --first;
    result = sys_mprotect(reinterpret_cast<void*>(chunk_begin(r, first)), chunk_end(r, last) - chunk_begin(r, first),
                          PROT_READ | PROT_WRITE);
    if (!result && result.error == ENOMEM) {
      // Still too many mappings: open the whole range (it becomes one mapping again) and mark
      // every other armed chunk open without migrating it. Data stays reachable; the rest of
      // this phase loses next-touch. Chunks other threads hold are left to them.
      result = sys_mprotect(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_READ | PROT_WRITE);
      if (result) {
        for (std::size_t k = 0; k < r.count; ++k)
          if ((k < first || k >= last) && try_claim(r, k, 0)) publish(r.words[k], chunk_open, 0);
      }
    }
  }
  if (!result) return false;
  for (std::size_t k = first; k < last; ++k) publish(r.words[k], chunk_moving, node_bits);
  move_span(chunk_begin(r, first), chunk_end(r, last) - chunk_begin(r, first), node);
  for (std::size_t k = first; k < last; ++k) publish(r.words[k], chunk_open, node_bits);
  nt_counters.chunks.fetch_add(last - first, std::memory_order_relaxed);
  return true;
}

/// The node the toucher's chunk goes to.
inline int fault_target(const armed_range& r, int homenode) noexcept {
  if (r.target == touch_target::homenode && homenode >= 0) return homenode;
  unsigned cpu = 0, node = 0;
  if (!call(sys::getcpu, [&] { return ::getcpu(&cpu, &node); })) return 0;
  return static_cast<int>(node);
}

/// Outcome of a fault inside one armed range.
enum class chunk_verdict {
  handled,   ///< opened (by us or by the thread we waited for): retry the access
  open,      ///< this range has the chunk open: the fault is stale, or a newer range owns it
  failed,    ///< ours, but it could not be opened: a real crash
};

/// A fault at `addr` inside active slot r (users already counted).
inline chunk_verdict handle_chunk_fault(armed_range& r, std::uintptr_t addr, int homenode) noexcept {
  const std::size_t k = (addr - r.begin) / r.chunk;
  std::atomic<std::uint32_t>& w = r.words[k];
  for (;;) {
    std::uint32_t v = w.load(std::memory_order_acquire);
    const std::uint32_t state = v & chunk_state_mask;
    if (state == chunk_open || state == chunk_moving) return chunk_verdict::open;
    if (state == chunk_claimed) {
      // Another thread is unprotecting it: sleep until the word changes.
      if ((v & chunk_waiters) == 0 && !w.compare_exchange_weak(v, v | chunk_waiters, std::memory_order_acq_rel)) continue;
      nt_counters.waits.fetch_add(1, std::memory_order_relaxed);
      futex_wait(w, v | chunk_waiters);
      if ((w.load(std::memory_order_acquire) & chunk_state_mask) != chunk_claimed) return chunk_verdict::handled;
      continue;
    }
    const int node = fault_target(r, homenode);
    const std::uint32_t node_bits = (static_cast<std::uint32_t>(node + 1) & 0xffffu) << 8;
    if (!try_claim(r, k, node_bits)) continue;  // lost the race: look again
    std::size_t last = k + 1;
    if (r.adaptive) {
      // Grow the claim while consecutive chunks are touched from the same node; fall back to
      // one chunk as soon as a neighbour was claimed from another node.
      std::uint32_t run = r.run.load(std::memory_order_relaxed);
      if (k > 0) {
        const std::uint32_t prev = r.words[k - 1].load(std::memory_order_relaxed);
        const std::uint32_t prev_state = prev & chunk_state_mask;
        const std::uint32_t prev_node = prev & 0x00ffff00u;
        if (prev_state != chunk_armed && prev_node == node_bits) {
          run = run * 2 < r.max_run ? run * 2 : r.max_run;
        } else if (prev_state != chunk_armed && prev_node != 0) {
          run = 1;
        }
      }
      r.run.store(run, std::memory_order_relaxed);
      while (last < r.count && last - k < run && try_claim(r, last, node_bits)) ++last;
    }
    return open_and_move(r, k, last, node, node_bits) ? chunk_verdict::handled : chunk_verdict::failed;
  }
}

/// Looks the address up among armed ranges. 1: handled (retry the access); 0: not ours;
/// -1: ours but it could not be opened. Ranges may overlap when a newer one re-armed part of
/// an older one: the range holding the chunk armed (or being opened) decides; a range that
/// has it open only says the access may be retried.
inline int handle_fault(std::uintptr_t addr, int homenode) noexcept {
  const std::uint64_t generation = registry_generation.load(std::memory_order_acquire);
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  bool seen_open = false;
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    const int seen = r.state.load(std::memory_order_acquire);
    if (seen != slot_active && seen != slot_retiring) continue;
    r.users.fetch_add(1, std::memory_order_acq_rel);
    const int state = r.state.load(std::memory_order_acquire);
    int verdict = 0;
    if ((state == slot_active || state == slot_retiring) && addr >= r.begin && addr < r.end) {
      const std::uint64_t t0 = monotonic_ns();
      if (state == slot_retiring) {
        ::sched_yield();  // being re-opened by disarm: retry once it is done
        seen_open = true;
      } else {
        switch (handle_chunk_fault(r, addr, homenode)) {
          case chunk_verdict::handled:
            nt_counters.faults.fetch_add(1, std::memory_order_relaxed);
            verdict = 1;
            break;
          case chunk_verdict::failed: verdict = -1; break;
          case chunk_verdict::open: seen_open = true; break;
        }
      }
      nt_counters.handler_ns.fetch_add(monotonic_ns() - t0, std::memory_order_relaxed);
    }
    r.users.fetch_sub(1, std::memory_order_acq_rel);
    if (verdict != 0) return verdict;
  }
  // Open somewhere, or a range retired while we looked (it is open now): retry the access.
  if (seen_open) return 1;
  return registry_generation.load(std::memory_order_acquire) != generation ? 1 : 0;
}

}  // namespace numaaff::detail
