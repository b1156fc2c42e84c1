// Completion of a thread_pool's work: a *group* (a task_group, a parallel_for, or the whole
// pool) counts its unfinished tasks and keeps the first exception one of them threw; the pool
// counts the groups that got work and the groups that completed, per worker, and waiters
// sleep on one event that fires whenever a group completes.
//
// The rules:
// - A task is counted into its group before it is queued and out after it ran (or was
//   discarded): a waiter never sees a group done while one of its tasks exists.
// - The moment a group's count reaches zero its waiter may return and destroy it, so the
//   finishing thread touches nothing of the group afterwards: it wakes the waiters through the
//   pool's event, which outlives every group.
// - The pool-wide group (wait(), the destructor) also waits for the work of task groups: it
//   reads every count of completed groups, then its own count of tasks, then every count of
//   groups that got work, and waits while the tasks or the difference of the sums are not
//   zero. A group's beginning happens before its end (the queues' and its pending count's
//   release and acquire), so each end the first pass sees has its beginning seen by the
//   last: the difference never goes below zero, and any group whose beginning the wait can
//   see and whose end it did not is counted. Work handed from a group to the pool (a group's
//   task that posts) is in the pool's count before the group's end, and work handed the
//   other way is in the group's beginning before the pool's task ends: reading the pool's
//   count between the passes sees either side. One pool-wide count of groups instead,
//   written at every group's first task and last finish from every CPU, took over a third
//   of a recursive fib's time.
// - The first exception wins; a wait rethrows it once and the group starts afresh. A group
//   whose tasks cancel() discarded reports that at its wait (operation_canceled), unless one
//   of its tasks threw.
#pragma once

#include "futex.hpp"
#include "throw.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <system_error>
#include <thread>

namespace numaaff::detail {

/// Completion and first error of a set of tasks.
struct alignas(64) group_state {
  std::atomic<std::size_t> pending{0};
  // The rest on a line of its own: every task's run reads cancel_requested, and the thread
  // that spawns a group's tasks writes pending at each spawn.
  alignas(64) std::atomic<bool> failed{false};
  std::exception_ptr error;  // written by the one task that set `failed`, read once pending is 0
  std::atomic<bool> cancelled{false};  // cancel() discarded some of its tasks
  std::atomic<bool> cancel_requested{false};  // its tasks that have not started are not to run

  void capture(std::exception_ptr e) noexcept {
    bool expected = false;
    if (failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) error = std::move(e);
  }
  /// Counts `n` tasks out; true for the call that finished the group (the caller then wakes
  /// the waiters).
  bool finish(std::size_t n) noexcept { return pending.fetch_sub(n, std::memory_order_acq_rel) == n; }
  std::exception_ptr take_error() noexcept {
    if (!failed.load(std::memory_order_acquire)) return nullptr;
    std::exception_ptr e = std::move(error);
    error = nullptr;
    failed.store(false, std::memory_order_release);
    return e;
  }
  /// Once pending is 0: rethrows the first task's exception, else reports the tasks cancel()
  /// discarded (so a wait never returns as if they had run); the group then starts afresh.
  /// `what` names the wait and what was discarded.
  void rethrow(const char* what) {
    const bool discarded = cancelled.exchange(false, std::memory_order_relaxed);
    cancel_requested.store(false, std::memory_order_relaxed);
    if (std::exception_ptr e = take_error()) std::rethrow_exception(e);
    if (discarded) throw_system_error(std::make_error_code(std::errc::operation_canceled), what);
  }
};

/// The finishes a worker holds back: tasks of one group that it ran one after the other,
/// counted out together (scheduler::run_task) when it is about to run a task of another group
/// or finds no task at once. While it holds some, the group's next task is being looked for
/// or run by this worker, so the group completes no earlier than it would have, and no later
/// than one look for work after its last task: a waiter sees nothing change but that. A
/// thief that takes a spawning thread's tasks one by one then writes the group's count once
/// per run of them, not once per task on the line the spawner writes at each spawn.
struct held_finishes {
  group_state* group = nullptr;  // valid while count != 0
  std::size_t count = 0;
};

/// Groups that got work and groups that completed, as one thread counts them, on lines of its
/// own (two: prefetchers fetch lines in pairs).
struct alignas(128) group_counts {
  std::atomic<std::uint64_t> begun{0};
  std::atomic<std::uint64_t> ended{0};
};

/// The pool's side of completion: the pool-wide group, the counts of groups with work, and the
/// event their completion fires.
class completion {
 public:
  /// `who` for every thread but the workers.
  static constexpr std::size_t any_thread = static_cast<std::size_t>(-1);
  /// Counts for `workers` threads that count apart (a pool's workers, `who` 0 to workers - 1),
  /// and one shared by every other thread (any_thread). Allocates; std::bad_alloc.
  explicit completion(std::size_t workers) : workers_(workers), counts_(new group_counts[workers + 1]) {}

  /// The pool-wide group: tasks submitted without a group, and the errors of post()ed ones.
  group_state& all() noexcept { return all_; }

  /// Counts a new task into `g` (null: the pool-wide group), before it is queued, on the
  /// calling thread's counts `who`.
  void started(group_state* g, std::size_t who) noexcept {
    if (g == nullptr) all_.pending.fetch_add(1, std::memory_order_relaxed);
    else if (g->pending.fetch_add(1, std::memory_order_seq_cst) == 0) add_one(counts_of(who).begun, who);
  }

  /// Counts `n` tasks out of `g` (null: the pool-wide group) on the calling thread's counts
  /// `who`; wakes waiters when `g` completes.
  void finish(group_state* g, std::size_t who, std::size_t n = 1) noexcept {
    if (g != nullptr) {
      if (g->finish(n)) {  // `g` may be gone from here on
        add_one(counts_of(who).ended, who);
        done_.notify_all();
      }
    } else if (all_.finish(n)) {
      done_.notify_all();
    }
  }

  /// Counts out what `h` holds, if anything.
  void finish(held_finishes& h, std::size_t who) noexcept {
    if (h.count == 0) return;
    finish(h.group, who, h.count);
    h.count = 0;
  }

  /// Tasks still to finish for `g`; for the pool-wide group, groups with work count too.
  std::size_t outstanding(const group_state& g) const noexcept {
    if (&g != &all_) return g.pending.load(std::memory_order_seq_cst);
    std::uint64_t ended = 0, begun = 0;
    for (std::size_t i = 0; i <= workers_; ++i) ended += counts_[i].ended.load(std::memory_order_seq_cst);
    const std::size_t own = g.pending.load(std::memory_order_seq_cst);  // between the passes
    for (std::size_t i = 0; i <= workers_; ++i) begun += counts_[i].begun.load(std::memory_order_seq_cst);
    return own + static_cast<std::size_t>(begun - ended);
  }

  /**
   * Returns once `g` has nothing outstanding. Meanwhile, if `can_help`, calls
   * `try_help(idle_since)` (true if it ran a task; idle_since is 0 until the idle clock has
   * started, see below), spins for `spin_ns`, then sleeps until a group
   * completes. A helper sleeps at most 50 us, doubling to 1 ms: work it could help with does
   * not wake it (it is not one of its node's sleepers).
   */
  template <class TryHelp>
  void wait_for(const group_state& g, bool can_help, std::uint64_t spin_ns, TryHelp&& try_help) {
    if (outstanding(g) == 0) return;
    // The idle clock starts at the first look at the clock after a look for work failed, not
    // at once: most waits end within a few looks (a recursive join helps with its own child),
    // and a clock read costs more than a look where the clock is not the TSC (VMs). The steal
    // delays it feeds are minimums: starting them a few looks late keeps them.
    std::uint64_t idle_since = 0;
    std::uint64_t sleep_ns = first_sleep_ns;
    for (unsigned round = 0; outstanding(g) != 0; ++round) {
      if (can_help && try_help(idle_since)) {
        idle_since = 0;
        sleep_ns = first_sleep_ns;
        continue;
      }
      if (round % spins_per_check != spins_per_check - 1) {
        cpu_relax();
        continue;
      }
      const std::uint64_t now = monotonic_ns();
      if (idle_since == 0) idle_since = now;
      if (now - idle_since < spin_ns) {
        std::this_thread::yield();
        continue;
      }
      const std::uint32_t key = done_.prepare_wait();
      if (outstanding(g) == 0) {
        done_.cancel_wait();
        break;
      }
      done_.commit_wait(key, can_help ? std::chrono::nanoseconds(sleep_ns) : std::chrono::nanoseconds(-1));
      sleep_ns = sleep_ns * 2 < last_sleep_ns ? sleep_ns * 2 : last_sleep_ns;
    }
  }

  /// Spins between two looks at the clock (and between two yields), for workers and waiters.
  static constexpr unsigned spins_per_check = 32;

 private:
  static constexpr std::uint64_t first_sleep_ns = 50000;
  static constexpr std::uint64_t last_sleep_ns = 1000000;

  group_counts& counts_of(std::size_t who) const noexcept { return counts_[who < workers_ ? who : workers_]; }
  /// A worker's counts have one writer, itself: a load and a store, no locked instruction.
  void add_one(std::atomic<std::uint64_t>& count, std::size_t who) noexcept {
    if (who < workers_) count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    else count.fetch_add(1, std::memory_order_release);
  }

  // Read at every group's beginning and end: off the lines every post() and wake-up writes.
  std::size_t workers_;
  std::unique_ptr<group_counts[]> counts_;
  alignas(64) group_state all_;
  alignas(64) event_count done_;
};

}  // namespace numaaff::detail
