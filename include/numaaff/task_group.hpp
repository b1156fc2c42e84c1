/**
 * @file task_group.hpp
 * @brief Fork-join on a thread_pool: run() tasks, then wait() for all of them.
 *
 * The model: a group counts its unfinished tasks and keeps the first exception one of them
 * threw. The waiting thread helps instead of blocking: a worker of the pool runs tasks of its
 * node (its own deque first) until the group is done, so groups nested inside tasks neither
 * deadlock nor need spare threads. A thread outside the pool is not pinned, so on a machine
 * with several nodes it only sleeps (a task it ran could move off its homenode with it); on
 * one node it runs the tasks it submitted itself. A task's homenode is chosen as for
 * thread_pool::submit (the pool's node policy), named by run(node, f) or found from the data
 * it works on by run_near(addr, bytes, f); either way the task may be stolen by another node
 * after the distance delay (thread_pool.hpp).
 *
 * @code{.cpp}
 * numaaff::task_group g(pool);
 * for (auto& part : parts) g.run([&part] { solve(part); });
 * g.wait();   // rethrows the first exception of a task
 * @endcode
 *
 * Thread safety: run() from any thread; one thread waits. run() allocates the task; wait()
 * blocks. The destructor waits (and drops the exception, if any): call wait() to see it. In a
 * child process forked after the pool was made, run() and wait() throw std::system_error with
 * numaaff::errc::used_after_fork, and the destructor returns at once.
 *
 * This header and thread_pool.hpp come together: including either gives both.
 */
#pragma once

#include "detail/scheduler.hpp"
#include "memory.hpp"  // the umbrella, not one part: programs that include this header use all of it
#include "topology.hpp"

#include <utility>

namespace numaaff {

class thread_pool;

namespace detail {
/// The scheduler behind a pool (defined in thread_pool.hpp).
inline scheduler& scheduler_of(thread_pool& pool) noexcept;

/// The node index for a task near the data of [addr, addr + bytes), for submit_near, post_near
/// and run_near: the data's node through the per-thread hint cache, placed by the scheduler.
/// @throws std::invalid_argument (naming `fn`) for a null addr with non-zero bytes.
inline std::size_t near_index(scheduler& s, const char* fn, const void* addr, std::size_t bytes) {
  require_range(fn, addr, bytes);
  return s.near_node(cached_data_node(addr, bytes));
}
}  // namespace detail

/// A fork-join group of tasks on a thread_pool (see the file comment).
class task_group {
 public:
  explicit task_group(thread_pool& pool) noexcept : scope_(detail::scheduler_of(pool)) {}
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  /// Runs `f()` on a homenode chosen by the pool's policy (stealable after the delay).
  /// If copying `f` or allocating the task throws, the exception propagates and the group is
  /// as before the call (wait() does not wait for the task that was not created).
  template <class F>
  void run(F&& f) {
    detail::scheduler& s = scope_.sched();
    s.check_process("task_group::run");
    scope_.run(std::forward<F>(f), s.policy_node(), false);
  }
  /// Runs `f()` with `homenode` as its homenode (stealable after the delay, like parallel_for
  /// blocks; use thread_pool::submit(node, f) for work that must not leave the node).
  /// @throws std::invalid_argument if `homenode` is not one of the pool's nodes (the group is
  /// unchanged, as when copying `f` throws).
  template <class F>
  void run(node_id homenode, F&& f) {
    detail::scheduler& s = scope_.sched();
    s.check_process("task_group::run");
    scope_.run(std::forward<F>(f), s.checked_node(homenode, "task_group::run"), false);
  }
  /// Runs `f()` near the range's data (see thread_pool::submit_near): a hint, stealable
  /// after the delay. @throws std::invalid_argument for a null addr with non-zero bytes.
  template <class F>
  void run_near(const void* addr, std::size_t bytes, F&& f) {
    detail::scheduler& s = scope_.sched();
    s.check_process("task_group::run_near");
    scope_.run(std::forward<F>(f), detail::near_index(s, "task_group::run_near", addr, bytes), false);
  }
  /// Helps until every task of the group has finished; rethrows the first exception.
  /// @throws std::system_error with std::errc::operation_canceled if, with no task throwing,
  /// thread_pool::cancel() discarded some of the group's tasks. Either way the group is then
  /// empty and may be reused.
  void wait() {
    scope_.sched().check_process("task_group::wait");
    scope_.wait("task_group::wait: tasks discarded by thread_pool::cancel()");
  }

 private:
  detail::group_scope scope_;
};

}  // namespace numaaff

#include "thread_pool.hpp"  // defines thread_pool and scheduler_of
