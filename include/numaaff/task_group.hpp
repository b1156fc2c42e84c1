/**
 * @file task_group.hpp
 * @brief Fork-join on a thread_pool: run() tasks, then wait() for all of them; dataflow tasks
 * that say what they touch.
 *
 * The model: a group counts its unfinished tasks and keeps the first exception one of them
 * threw. The waiting thread helps instead of blocking: a worker of the pool runs tasks of its
 * node (its own deque first) until the group is done, so groups nested inside tasks neither
 * deadlock nor need spare threads. A thread outside the pool is not pinned, so on a machine
 * with several nodes it only sleeps (a task it ran could move off its homenode with it); on
 * one node it runs the tasks it submitted itself. A task's homenode is chosen as for
 * thread_pool::submit (the pool's node policy), named by run(node, f) or found from the data
 * it works on by run_near(addr, bytes, f); either way the task may be stolen by another node
 * after the steal delay (thread_pool.hpp).
 *
 * Dataflow. run({accesses...}, f) declares the bytes the task reads and writes
 * (data_access.hpp: in, out, inout, commutative). It starts only after every task run earlier
 * in the same group with accesses that overlap its bytes, with at least one of the two writing;
 * tasks without such a conflict run concurrently (two readers of a tile at once). Overlap is
 * by bytes, partial overlaps included. Tasks run without accesses are not ordered. Nesting is
 * as in OpenMP: a task's own group orders its children among themselves and nothing else.
 * The data places the task, with no hint: its homenode (where it runs, this_homenode() inside
 * it, where local allocators place its memory) is the pool node nearest to the node holding
 * the largest share of its declared bytes, as the data directory knows it (what numaaff placed
 * or saw placed, checked by sampled page queries once it may be stale); bytes nobody has
 * touched count for nobody, and if none are known the node policy decides; of nodes holding
 * equal shares, the least busy when the task becomes ready. A task that writes
 * untouched bytes places them where it runs (first touch), and the directory remembers it for
 * the readers after it. Like any task it may be stolen after the steal delay, keeping its
 * homenode. A task that throws still releases its dependents (they run); the first exception
 * is rethrown by wait(). A task that never runs (cancel()) discards its dependents too.
 * A task that another one made ready runs next on the thread that ran that one, unqueued,
 * when its homenode is that thread's (a chain runs on one thread, as in oneTBB). A task that
 * is ready when a thread outside the pool runs it may be held back while that thread runs
 * more (up to 32): it starts when the group's wait() (or destructor) or thread_pool::wait()
 * begins, or once an idle worker sees no run() on the group for a hold period (four spin
 * times of thread_pool_options::spin, within 50 us and 1 ms), or ten periods after it was
 * held; a worker that took each task the moment it was registered would chase the
 * registration, and cost more than the delay.
 *
 * @code{.cpp}
 * numaaff::task_group g(pool);
 * for (auto& part : parts) g.run([&part] { solve(part); });
 * g.wait();   // rethrows the first exception of a task
 *
 * using numaaff::in; using numaaff::inout;
 * for (std::size_t k = 0; k < t; ++k)                        // tiles: ordered by their bytes
 *   g.run({in(tile(k), bytes), inout(tile(k + 1), bytes)}, [=] { step(k); });
 * g.wait();
 * @endcode
 *
 * Thread safety: run() from any thread; one thread waits. run() allocates the task (a dataflow
 * task also takes the group's tracker lock briefly); wait() blocks. The destructor waits (and
 * drops the exception, if any): call wait() to see it. In a child process forked after the
 * pool was made, run() and wait() throw std::system_error with numaaff::errc::used_after_fork,
 * and the destructor returns at once. On one node, dataflow tasks are ordered the same way and
 * all run on that node.
 *
 * This header and thread_pool.hpp come together: including either gives both.
 */
#pragma once

#include "data_access.hpp"
#include "detail/dataflow.hpp"
#include "detail/scheduler.hpp"
#include "memory.hpp"  // the umbrella, not one part: programs that include this header use all of it
#include "topology.hpp"

#include <initializer_list>
#include <utility>
#include <vector>

namespace numaaff {

class thread_pool;

namespace detail {
/// The scheduler behind a pool (defined in thread_pool.hpp).
inline scheduler& scheduler_of(thread_pool& pool) noexcept;

/// The node index for a task near the data of [addr, addr + bytes), for submit_near, post_near
/// and run_near: the data's node through the data directory, placed by the scheduler.
/// @throws std::invalid_argument (naming `fn`) for a null addr with non-zero bytes.
inline std::size_t near_index(scheduler& s, const char* fn, const void* addr, std::size_t bytes) {
  require_range(fn, addr, bytes);
  return s.near_node(directory.node_of(addr, bytes));
}

/// The tracker's form of declared accesses (empty ones dropped).
inline flow_ranges to_ranges(const data_access* a, std::size_t n) {
  flow_ranges r(n);
  for (std::size_t i = 0; i < n; ++i) {
    const dep_mode m = a[i].mode() == access_mode::in            ? dep_mode::read
                       : a[i].mode() == access_mode::commutative ? dep_mode::commute
                                                                 : dep_mode::write;
    r.push(a[i].begin(), a[i].end(), m);
  }
  return r;
}
}  // namespace detail

/// A fork-join group of tasks on a thread_pool (see the file comment).
class task_group {
 public:
  explicit task_group(thread_pool& pool) noexcept
      : flow_(detail::scheduler_of(pool), nullptr, true), scope_(detail::scheduler_of(pool)) {
    flow_.set_group(&scope_.state());
  }
  ~task_group() {
    if (!scope_.sched().forked()) flow_.flush();  // then scope_ waits
  }
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
  /**
   * Runs `f()` once every task run earlier in this group whose accesses conflict with
   * `accesses` has finished (see the file comment), on the node of most of their bytes.
   * If copying `f` or allocating throws, the exception propagates and the group and its order
   * are as before the call. A task whose queue cannot grow when it becomes ready is discarded
   * with its dependents (wait() reports operation_canceled), never lost.
   */
  template <class F>
  void run(std::initializer_list<data_access> accesses, F&& f) {
    run_flow(accesses.begin(), accesses.size(), std::forward<F>(f));
  }
  /// The same with accesses built at run time.
  template <class F>
  void run(const std::vector<data_access>& accesses, F&& f) {
    run_flow(accesses.data(), accesses.size(), std::forward<F>(f));
  }
  /// Discards the group's tasks that have not started, including dataflow tasks still waiting
  /// for their predecessors and tasks run before the next wait(); running ones finish. If any
  /// was discarded, wait() then throws std::system_error with std::errc::operation_canceled
  /// (unless a task threw: that exception instead). Thread-safe; never blocks.
  void cancel() noexcept { scope_.state().cancel_requested.store(true, std::memory_order_relaxed); }

  /// Helps until every task of the group has finished; rethrows the first exception.
  /// @throws std::system_error with std::errc::operation_canceled if, with no task throwing,
  /// cancel() or thread_pool::cancel() discarded some of the group's tasks (or a discarded
  /// predecessor discarded its dependents). Either way the group is then
  /// empty and may be reused.
  void wait() {
    scope_.sched().check_process("task_group::wait");
    flow_.flush();
    scope_.wait("task_group::wait: tasks discarded by cancel()");
  }

 private:
  template <class F>
  void run_flow(const data_access* a, std::size_t n, F&& f) {
    scope_.sched().check_process("task_group::run");
    flow_.run(detail::to_ranges(a, n), std::forward<F>(f));
  }

  // Made with the group (run() may come from several threads at once; an empty tracker
  // allocates nothing); before scope_: it outlives the wait in scope_'s destructor.
  detail::flow_state flow_;
  detail::group_scope scope_;
};

}  // namespace numaaff

#include "thread_pool.hpp"  // defines thread_pool and scheduler_of
