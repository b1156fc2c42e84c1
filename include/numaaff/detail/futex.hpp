// Waiting on a 32-bit atomic word. C++17 has no atomic::wait, and what C++20's libstdc++ does
// on Linux is this same futex call; calling it directly also gives us timed waits (the thread
// pool's remote-steal delay) and keeps it async-signal-safe (the next-touch handler).
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

namespace numaaff::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "futex needs a plain 32-bit word behind std::atomic");

/// Sleeps while `word` holds `expected`, at most `timeout` (negative: no limit). Returns on a
/// wake, a timeout, a signal or at once if the word differs: callers re-check their condition.
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       std::chrono::nanoseconds timeout = std::chrono::nanoseconds(-1)) noexcept {
  timespec ts{};
  timespec* limit = nullptr;
  if (timeout.count() >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
    limit = &ts;
  }
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, limit, nullptr, 0);
}

/// Wakes up to `count` threads sleeping on `word`.
inline void futex_wake(std::atomic<std::uint32_t>& word, int count = INT_MAX) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

inline std::uint64_t clock_ns(clockid_t clock) noexcept {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}
inline std::uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }
/// The same clock to the kernel's tick (1-10 ms behind at most): a few ns where a precise read
/// costs tens, for ages measured in tens of milliseconds.
inline std::uint64_t coarse_monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC_COARSE); }

/**
 * Sleep until notified, without lost wake-ups (an "event count"). A waiter announces itself
 * (prepare_wait), re-checks its condition, then sleeps (commit_wait) or withdraws
 * (cancel_wait); a notifier changes the condition, then calls notify_*. Both sides order their
 * announcement before their check with seq_cst, so either the waiter sees the new state or the
 * notifier sees the waiter. Notifying when nobody waits costs one fence and one load.
 */
class event_count {
 public:
  std::uint32_t prepare_wait() noexcept {
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    return epoch_.load(std::memory_order_seq_cst);
  }
  void cancel_wait() noexcept { waiters_.fetch_sub(1, std::memory_order_seq_cst); }
  void commit_wait(std::uint32_t key, std::chrono::nanoseconds timeout = std::chrono::nanoseconds(-1)) noexcept {
    futex_wait(epoch_, key, timeout);
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
  /// Wakes one waiter; false if there was none.
  bool notify_one() noexcept { return notify(1); }
  bool notify_all() noexcept { return notify(INT_MAX); }
  /// Threads between prepare_wait and the end of their wait (a woken one counts until it runs).
  std::uint32_t waiting() const noexcept { return waiters_.load(std::memory_order_seq_cst); }

 private:
  bool notify(int count) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) == 0) return false;
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(epoch_, count);
    return true;
  }

  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::uint32_t> waiters_{0};
};

/// A pause for spin loops (lets the sibling hyperthread run; a no-op elsewhere).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/**
 * A lock for critical sections of a few instructions (a queue push or pop), where a mutex's
 * futex hand-off costs more than the section. Yields after a short spin so that a preempted
 * holder can finish on an oversubscribed machine. Meets BasicLockable (std::lock_guard).
 */
class spin_lock {
 public:
  void lock() noexcept {
    for (unsigned spins = 0; flag_.exchange(true, std::memory_order_acquire);) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins % 64 == 0) sched_yield();
        else cpu_relax();
      }
    }
  }
  /// Takes the lock if it is free, without waiting.
  bool try_lock() noexcept {
    return !flag_.load(std::memory_order_relaxed) && !flag_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

/**
 * A mutex on one futex word (0 free, 1 held, 2 held with sleepers), as glibc's: for the heap's
 * many central lists, which the fork handler holds all at once. Such a lock is only atomics to
 * ThreadSanitizer, whose deadlock detector cannot follow a thread holding more than 64
 * mutexes; its happens-before edges stay. Meets BasicLockable (std::lock_guard).
 */
class futex_lock {
 public:
  void lock() noexcept {
    std::uint32_t seen = 0;
    if (word_.compare_exchange_strong(seen, 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
    if (seen != 2) seen = word_.exchange(2, std::memory_order_acquire);
    while (seen != 0) {
      futex_wait(word_, 2);
      seen = word_.exchange(2, std::memory_order_acquire);
    }
  }
  void unlock() noexcept {
    if (word_.exchange(0, std::memory_order_release) == 2) futex_wake(word_, 1);
  }

 private:
  std::atomic<std::uint32_t> word_{0};
};

}  // namespace numaaff::detail
