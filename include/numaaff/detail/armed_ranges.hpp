// Arming and disarming next-touch ranges (never called from the signal handler). Arm, disarm
// and touch_now serialise on one mutex; the handler never takes it. A range whose chunks have
// all been touched stays registered until the next arm/disarm call sweeps it, because freeing
// its chunk words needs to wait for handlers still inside it, which a handler cannot do.
//
// fork(): the mutex is taken around fork (pthread_atfork), so a child never inherits a range
// half-armed or half-retired, nor the mutex locked; chunks that a handler thread of the parent
// was opening are opened in the child, and the parent's handler threads no longer count.
#pragma once

#include "../errors.hpp"
#include "counter_segment.hpp"
#include "fault_registry.hpp"
#include "mappings.hpp"
#include "numa_calls.hpp"
#include "signal_handler.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <system_error>

namespace numaaff::detail {

/// A child forked while a chunk was being opened has no thread to finish it: finish it here.
inline void finish_ranges_after_fork() noexcept {
  handler_buffers_busy.store(0, std::memory_order_relaxed);  // held by the parent's threads
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    r.users.store(0, std::memory_order_relaxed);  // the parent's threads are not here
    if (r.state.load(std::memory_order_acquire) != slot_active) continue;
    for (std::size_t k = 0; k < r.count; ++k) {
      const std::uint32_t s = r.words[k].load(std::memory_order_acquire) & chunk_state_mask;
      if (s != chunk_claimed && s != chunk_moving) continue;
      sys_mprotect(reinterpret_cast<void*>(chunk_begin(r, k)), chunk_end(r, k + 1) - chunk_begin(r, k),
                   PROT_READ | PROT_WRITE);
      mark_open(r, k, k + 1);
    }
  }
}

/// Holds every signal but the synchronous ones while arm, disarm or touch_now hold chunks: a
/// signal handler touching a chunk its own thread has claimed would wait for itself.
class async_signals_held {
 public:
  async_signals_held() noexcept {
    sigset_t all;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP}) sigdelset(&all, s);
    ::pthread_sigmask(SIG_BLOCK, &all, &saved_);
  }
  ~async_signals_held() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  async_signals_held(const async_signals_held&) = delete;
  async_signals_held& operator=(const async_signals_held&) = delete;

 private:
  sigset_t saved_;
};

inline std::mutex& arm_lock() {
  static std::mutex m;
  static const int registered = ::pthread_atfork([] { m.lock(); }, [] { m.unlock(); },
                                                 [] {
                                                   finish_ranges_after_fork();
                                                   m.unlock();
                                                 });
  (void)registered;
  return m;
}

// First initialised during static initialisation, before any thread can fork: a child forked
// while another thread runs a C++ static's first initialisation waits on its guard forever.
inline const bool arm_lock_ready = (arm_lock(), true);

/**
 * Calls open(b, e) for each run of claimed chunks in [first, last) that is still the mapping
 * we armed, checked chunk by chunk (an application that re-protected or unmapped one chunk
 * gets that one back, not its neighbours), and releases the others: marked open, untouched,
 * counted.
 */
template <class F>
inline void open_ours(armed_range& r, std::size_t first, std::size_t last, F&& open) noexcept {
  for (std::size_t k = first; k < last;) {
    std::size_t e = k;
    while (e < last && still_armed(chunk_begin(r, e), chunk_end(r, e + 1))) ++e;
    if (e > k) {
      open(k, e);
      k = e;
      continue;
    }
    nt_counters.released.fetch_add(1, std::memory_order_relaxed);
    mark_open(r, k, k + 1);
    ++k;
  }
}

/// Opens claimed chunks [first, last) of slot r without migrating them, those still ours. If
/// the kernel is out of mappings for that (ENOMEM), opens the whole slot range instead, which
/// merges it into one mapping.
inline void open_unmigrated(armed_range& r, std::size_t first, std::size_t last) noexcept {
  open_ours(r, first, last, [&r](std::size_t b, std::size_t e) {
    const std::uintptr_t from = chunk_begin(r, b), to = chunk_end(r, e);
    if (!sys_mprotect(reinterpret_cast<void*>(from), to - from, PROT_READ | PROT_WRITE) && fully_mapped(r.begin, r.end)) {
      r.opened_whole.store(true, std::memory_order_seq_cst);
      sys_mprotect(reinterpret_cast<void*>(r.begin), r.end - r.begin, PROT_READ | PROT_WRITE);
    }
    mark_open(r, b, e);
  });
}

/// Opens every chunk of slot r that is still armed, one mprotect per run of them (the rest of
/// the range may already belong to a newer armed range that overlaps this one).
inline void open_all_armed(armed_range& r) noexcept {
  for (std::size_t k = 0; k < r.count;) {
    if (!try_claim(r, k, 0)) {
      ++k;
      continue;
    }
    std::size_t last = k + 1;
    while (last < r.count && try_claim(r, last, 0)) ++last;
    open_unmigrated(r, k, last);
    k = last;
  }
}

/// Opens what is still armed, waits for handlers to leave, frees the slot. Holds arm_lock.
/// Handlers inside a retiring slot only wait (they claim nothing new), but one that entered
/// before may give back part of a run it claimed: hence the second sweep, once none is left
/// inside. While draining, handlers keep off the chunk words, which are then unmapped.
inline void retire_slot(armed_range& r) noexcept {
  r.state.store(slot_retiring, std::memory_order_seq_cst);
  open_all_armed(r);
  r.state.store(slot_draining, std::memory_order_seq_cst);
  while (r.users.load(std::memory_order_seq_cst) != 0) ::sched_yield();
  open_all_armed(r);
  sys_munmap(r.words, r.words_bytes);
  r.words = nullptr;
  r.page_nodes = nullptr;
  open_epoch.fetch_add(1, std::memory_order_acq_rel);
  r.state.store(slot_free, std::memory_order_release);
  registry_live.fetch_sub(1, std::memory_order_acq_rel);
}

/// Retires ranges whose chunks have all been opened. Holds arm_lock.
inline void sweep_finished() noexcept {
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    if (r.state.load(std::memory_order_acquire) == slot_active && r.armed_left.load(std::memory_order_acquire) == 0)
      retire_slot(r);
  }
}

/// Opens, without migration, every armed chunk that overlaps [begin, end). Holds arm_lock.
inline void disarm_locked(std::uintptr_t begin, std::uintptr_t end) noexcept {
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    if (r.state.load(std::memory_order_acquire) != slot_active || r.end <= begin || end <= r.begin) continue;
    if (begin <= r.begin && r.end <= end) {
      retire_slot(r);
      continue;
    }
    const std::size_t k0 = (begin > r.begin ? begin - r.begin : 0) / r.chunk;
    const std::size_t k1 = ((end < r.end ? end : r.end) - r.begin + r.chunk - 1) / r.chunk;
    for (std::size_t k = k0; k < k1; ++k) {
      if (try_claim(r, k, 0)) {
        open_unmigrated(r, k, k + 1);
      } else {
        wait_while_claimed(r.words[k]);  // a toucher is opening it: disarm returns once it is open
      }
    }
  }
}

inline void disarm_range(std::uintptr_t begin, std::uintptr_t end) noexcept {
  try {
    std::lock_guard<std::mutex> guard(arm_lock());
    const async_signals_held held;
    disarm_locked(begin, end);
    sweep_finished();
  } catch (...) {  // std::mutex::lock cannot fail here in practice
  }
}

/// Arms [begin, end) (page-aligned) in chunks of `chunk` bytes. With `page_nodes` (one node
/// per page of the range, copied), each opened page goes to its own node, whoever touches it.
inline void arm_range(std::uintptr_t begin, std::uintptr_t end, std::size_t chunk, touch_target target, bool adaptive,
                      std::uint32_t max_run, const std::uint16_t* page_nodes, std::error_code& ec) noexcept {
  publish_counters();  // before any fault can count
  try {
    std::lock_guard<std::mutex> guard(arm_lock());
    ec = install_segv_handler_locked();
    if (ec) return;
    const async_signals_held held;
    sweep_finished();
    disarm_locked(begin, end);  // re-arming what is armed replaces it
    // Opened chunks are made read-write: arming anything else would change its protection
    // (a read-only mapping made writable, or a read-only shared file mapping that cannot be
    // opened at all and faults forever). Checked after the disarm, which opens what we armed.
    if (first_not_read_write(begin, end) != end) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    armed_range* slot = nullptr;
    for (std::size_t i = 0; i < registry_capacity && slot == nullptr; ++i) {
      int expected = slot_free;
      if (registry[i].state.compare_exchange_strong(expected, slot_setup, std::memory_order_acq_rel)) {
        slot = &registry[i];
        std::size_t high = registry_high.load(std::memory_order_acquire);
        while (high < i + 1 && !registry_high.compare_exchange_weak(high, i + 1, std::memory_order_acq_rel)) {
        }
      }
    }
    if (slot == nullptr) {
      ec = make_error_code(errc::too_many_ranges);
      return;
    }
    if (chunk > end - begin) chunk = end - begin;  // one chunk; and no overflow below
    const std::size_t count = (end - begin + chunk - 1) / chunk;
    const std::size_t node_table = page_nodes != nullptr ? (end - begin) / page_size() * sizeof(std::uint16_t) : 0;
    const std::size_t words_bytes = align_up(count * sizeof(std::uint32_t) + node_table, page_size());
    const auto m = sys_mmap(words_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
    if (!m) {
      slot->state.store(slot_free, std::memory_order_release);
      ec = m.failure();
      return;
    }
    slot->words = static_cast<std::atomic<std::uint32_t>*>(m.value);
    for (std::size_t k = 0; k < count; ++k) slot->words[k].store(chunk_armed, std::memory_order_relaxed);
    slot->words_bytes = words_bytes;
    slot->page_nodes = nullptr;
    if (page_nodes != nullptr) {
      auto* table = reinterpret_cast<std::uint16_t*>(static_cast<char*>(m.value) + count * sizeof(std::uint32_t));
      std::memcpy(table, page_nodes, node_table);
      slot->page_nodes = table;
    }
    slot->begin = begin;
    slot->end = end;
    slot->chunk = chunk;
    slot->count = count;
    slot->target = target;
    slot->adaptive = adaptive;
    slot->max_run = max_run < 1 ? 1 : max_run;
    slot->run.store(1, std::memory_order_relaxed);
    slot->armed_left.store(count, std::memory_order_relaxed);
    slot->opened_whole.store(false, std::memory_order_relaxed);
    // Each chunk must migrate alone: no huge page may span two chunks (or the range's edge).
    // With per-page targets only the range's edges matter: a huge page inside the range moves
    // where its pages' targets say, whichever chunk's touch moves it (the caller splits where
    // two targets meet).
    if (page_nodes == nullptr) {
      try {
        split_huge_pages_at_chunks(begin, end, chunk);
      } catch (const std::bad_alloc&) {  // no room for the boundary list: split without marking
        for (std::uintptr_t at = begin; at < end; at += chunk) split_huge_page_at(at);
        split_huge_page_at(end);
      }
    } else {
      std::uintptr_t edges[2] = {begin, end};
      split_huge_pages(edges, 2);
    }
    registry_live.fetch_add(1, std::memory_order_acq_rel);
    open_epoch.fetch_add(1, std::memory_order_acq_rel);
    slot->state.store(slot_active, std::memory_order_release);  // before protecting: see below
    // Published first, protected second: a fault can only happen once the range is protected,
    // and by then the handler finds it.
    const auto p = sys_mprotect(reinterpret_cast<void*>(begin), end - begin, PROT_NONE);
    if (!p) {
      ec = p.failure();
      retire_slot(*slot);
    }
  } catch (...) {
    ec = std::make_error_code(std::errc::resource_unavailable_try_again);
  }
}

/**
 * Opens and migrates now every armed chunk overlapping [begin, end), as the calling thread's
 * next touch would, and waits for chunks other threads are opening: afterwards the kernel can
 * read and write the range (a system call meets no armed page). Takes arm_lock.
 */
inline void touch_range(std::uintptr_t begin, std::uintptr_t end, std::error_code& ec) noexcept {
  try {
    std::lock_guard<std::mutex> guard(arm_lock());
    const async_signals_held held;
    const std::size_t high = registry_high.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < high && !ec; ++i) {
      armed_range& r = registry[i];
      if (r.state.load(std::memory_order_acquire) != slot_active || r.end <= begin || end <= r.begin) continue;
      const int node = fault_target(r, memory_homenode());
      const std::uint32_t node_bits = node_bits_of(node);
      const std::size_t k0 = (begin > r.begin ? begin - r.begin : 0) / r.chunk;
      const std::size_t k1 = ((end < r.end ? end : r.end) - r.begin + r.chunk - 1) / r.chunk;
      for (std::size_t k = k0; k < k1 && !ec;) {
        if (!try_claim(r, k, node_bits)) {
          wait_while_claimed(r.words[k++]);  // a toucher is opening it
          continue;
        }
        std::size_t last = k + 1;
        while (last < k1 && try_claim(r, last, node_bits)) ++last;
        open_ours(r, k, last, [&](std::size_t b, std::size_t e) {
          if (ec) return unclaim(r, b, e);  // an earlier run failed: leave these armed
          std::size_t from = b, to = e;
          if (const int error = open_claimed(r, from, to, node_bits); error != 0) {
            unclaim(r, from, to);
            ec = std::error_code(error, std::generic_category());
            failed_call = sys::mprotect;  // open_claimed's one call
          } else {
            move_opened(r, from, to, node, node_bits);
          }
        });
        k = last;
      }
    }
    sweep_finished();
  } catch (...) {  // std::mutex::lock cannot fail here in practice
    ec = std::make_error_code(std::errc::resource_unavailable_try_again);
  }
}

/// True if any chunk overlapping [begin, end) is still armed.
inline bool range_is_armed(std::uintptr_t begin, std::uintptr_t end) noexcept {
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    if (r.state.load(std::memory_order_acquire) != slot_active) continue;
    r.users.fetch_add(1, std::memory_order_seq_cst);  // keeps the words alive while we look
    bool armed = false;
    if (r.state.load(std::memory_order_seq_cst) == slot_active && r.begin < end && begin < r.end) {
      const std::size_t k0 = (begin > r.begin ? begin - r.begin : 0) / r.chunk;
      const std::size_t k1 = ((end < r.end ? end : r.end) - r.begin + r.chunk - 1) / r.chunk;
      for (std::size_t k = k0; k < k1 && !armed; ++k)
        armed = (r.words[k].load(std::memory_order_acquire) & chunk_state_mask) == chunk_armed;
    }
    r.users.fetch_sub(1, std::memory_order_acq_rel);
    if (armed) return true;
  }
  return false;
}

// ---- the I/O guard (src/io_guard.cpp, libnumaaff_ioguard) ---------------------------------

/// Opens, for the calling thread, the chunks this copy of numaaff armed in [addr, addr +
/// bytes), as touch_now does: the I/O guard calls it before a read, recv, write ... on the
/// buffer. One load when nothing is armed. 0 or an errno value.
inline int io_guard_open(const void* addr, std::size_t bytes) noexcept {
  if (registry_live.load(std::memory_order_acquire) == 0 || bytes == 0) return 0;
  const auto at = reinterpret_cast<std::uintptr_t>(addr);
  if (at + bytes < at) return EINVAL;
  const std::uintptr_t begin = align_down(at, page_size()), end = align_up(at + bytes, page_size());
  if (!range_is_armed(begin, end)) return 0;
  std::error_code ec;
  touch_range(begin, end, ec);
  return ec.value();
}

/// Gives io_guard_open to the I/O guard when the process has it (preloaded or linked: loaded,
/// hence found, before any static initialisation of ours), once per copy of numaaff: each copy
/// (a program's compiled-in one, the C library's) has its own registry, so the guard asks each.
inline bool offer_io_guard_opener() noexcept {
  using register_fn = int (*)(int (*)(const void*, std::size_t));
  if (void* f = ::dlsym(RTLD_DEFAULT, "numaaff_io_guard_register")) (void)reinterpret_cast<register_fn>(f)(io_guard_open);
  return true;
}
// During static initialisation, before any thread can fork: a child forked while another
// thread was in a once-only initialisation would wait for it forever.
inline const bool io_guard_offered = offer_io_guard_opener();

}  // namespace numaaff::detail
