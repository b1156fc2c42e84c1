/**
 * @file thread_pool.hpp
 * @brief A node-affine thread pool: homenodes, node policies, distance-weighted stealing.
 *
 * The user-space form of the 2002 node-affine NUMA scheduler. Every worker and every task has
 * a *homenode*. A worker is pinned to one CPU of its node. A task runs on its homenode's
 * workers and the memory it allocates through numaaff's local allocators lands there
 * (this_homenode() is the task's homenode while it runs). A *node policy* picks the homenode
 * of work submitted without one:
 * - `fork`: the submitter's homenode (a child task inherits its parent's; a thread outside the
 *   pool uses its own: set_homenode(), `NUMAAFF_HOMENODE`, else the node it runs on). With an
 *   explicit homenode on the submitting thread this is also the "explicit node" policy.
 * - `exec`: the least-loaded node at submit time (queued + running tasks per worker).
 * - `round_robin`: the pool's nodes in turn.
 * `submit(node, f)` names the node itself; such a task is *bound*: it runs on that node only.
 *
 * Scheduling. Each worker owns a work-stealing deque; each node has a queue for work sent to it
 * from elsewhere. An idle worker looks, in order, at its own deque, its node's queues, the deques
 * of its siblings on the node, then at each remote node in order of distance, but only once it
 * has been idle for that node's steal delay:
 *
 *     delay(from, to) = steal_delay * (distance(from, to) - 10) / 10
 *
 * (with the default 50 us and a 10/20 matrix, 50 us; with 10/100, 450 us), and only while that
 * node has no worker of its own outside a task (one that is searching, asleep or between two
 * tasks would take the work itself: remote nodes take only what the home node cannot start
 * now, so a parallel_for's blocks stay on their nodes when no node is short of workers). A
 * stolen task keeps its homenode, so its memory and, under `fork`, its children go home. A
 * worker that finds nothing spins for `spin` and then sleeps on a futex: an idle pool uses no
 * CPU. Submitting wakes a sleeping worker of the task's node, or, if that node has none, the
 * nearest node's, which then waits out its delay before stealing.
 *
 * Lifetime. A task's exception reaches its future (submit), its task_group (wait() rethrows the
 * first) or, for post(), the pool (wait() rethrows the first); a worker never dies. The
 * destructor finishes every submitted task, including the tasks they submit, then joins the
 * workers. cancel() discards what has not started, and never silently: their futures hold
 * std::future_errc::broken_promise, and the task_group, parallel_for or for_each_node they
 * belong to throws std::system_error with std::errc::operation_canceled from its wait.
 *
 * fork(). A child process has none of the workers of a pool its parent made, and may find the
 * pool's queues locked by one of them: every member that would submit or wait there (submit,
 * post, wait, cancel, parallel_for, for_each_node, task_group::run and wait) throws
 * std::system_error with numaaff::errc::used_after_fork instead, and the destructor returns at
 * once (its queued tasks stay with the parent). Make a new pool in the child.
 *
 * One node (or a container without NUMA): one node's workers, no remote stealing, the same
 * semantics. Under `taskset`, `numactl -N`, cgroup cpusets or `mpirun --bind-to numa` the pool
 * uses only the CPUs the process may run on and the nodes that have such CPUs.
 *
 * @code{.cpp}
 * numaaff::thread_pool pool;                       // one worker per allowed CPU
 * auto f = pool.submit(2, [] { return numaaff::current_node(); });   // runs on node 2
 * pool.parallel_for(0, n, [&](std::size_t i) { a[i] = 0; });  // node-contiguous blocks
 * @endcode
 */
#pragma once

#include "allocator.hpp"
#include "detail/block_cache.hpp"
#include "detail/futex.hpp"
#include "detail/homenode.hpp"
#include "detail/pinning.hpp"
#include "detail/steal_plan.hpp"
#include "detail/text.hpp"
#include "detail/throw.hpp"
#include "detail/work_deque.hpp"
#include "partition.hpp"
#include "topology.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {

/// How the homenode of work submitted without one is chosen (see the file comment).
enum class node_policy { fork, exec, round_robin };

/// How idle workers take work from other nodes.
enum class steal_mode {
  distance,    ///< remote nodes after the distance-proportional delay (the default)
  local_only,  ///< never across nodes: a node's work waits for that node's workers
  free         ///< remote nodes at once, nearest first (plain work stealing)
};

/**
 * What a thread_pool is built from. `from_environment()` gives the defaults with the
 * `NUMAAFF_*` variables applied; a default-constructed value ignores the environment.
 */
struct thread_pool_options {
  std::vector<node_id> nodes;            ///< nodes to use; empty: every node with allowed CPUs
  int threads_per_node = 0;              ///< 0: one worker per allowed CPU of each node
  node_policy policy = node_policy::fork;
  steal_mode steal = steal_mode::distance;
  /// Delay per 10 units of distance beyond local. Delays and spins beyond
  /// std::chrono::nanoseconds::max() (292 years) count as that: never, not a wrapped-around value.
  std::chrono::microseconds steal_delay{50};
  std::vector<std::vector<int>> distances;    ///< override of the topology's matrix (pool nodes' rows)
  std::chrono::microseconds spin{50};         ///< how long an idle worker spins before sleeping
  bool bind_workers = true;                   ///< pin each worker to one CPU (system topology only)
  /// The topology to schedule on; null: topology::system(). A synthetic or XML topology gives
  /// logical nodes and unbound workers: for tests of the scheduling logic.
  std::shared_ptr<const topology> topo;

  /**
   * Defaults, then `NUMAAFF_NODE_POLICY` (fork|exec|round_robin), `NUMAAFF_THREADS_PER_NODE`
   * (a positive integer), `NUMAAFF_STEAL` (distance[:MICROSECONDS]|local|free, MICROSECONDS at
   * most 2147483647);
   * `NUMAAFF_DISTANCES` and `NUMAAFF_TOPOLOGY` act through topology::system().
   * @throws std::invalid_argument naming the variable and its valid forms.
   */
  static thread_pool_options from_environment();
  /// The same, reading variables through `lookup` (e.g. another process's environment).
  static thread_pool_options from_environment(const std::function<const char*(const char*)>& lookup);
};

std::string to_string(node_policy p);
std::string to_string(steal_mode s);

/**
 * The delay before a worker of `from` may take work of `to` under options `o` on topology `t`
 * (the formula in the file comment; zero for the same node and for steal_mode::free). Exact
 * up to std::chrono::nanoseconds::max(), which it saturates at (a huge delay or distance means
 * never, not a short or negative delay after an overflow).
 * @throws std::invalid_argument if a node is not in `t`.
 */
std::chrono::nanoseconds remote_steal_delay(const thread_pool_options& o, const topology& t, node_id from, node_id to);

/// Counters of a pool since construction (each a sum of per-worker relaxed counters).
struct thread_pool_stats {
  std::uint64_t executed = 0;       ///< tasks run by workers
  std::uint64_t stolen_local = 0;   ///< taken from a sibling's deque on the same node
  std::uint64_t stolen_remote = 0;  ///< taken from another node
  std::uint64_t sleeps = 0;         ///< times a worker went to sleep
};

class thread_pool;
class task_group;

namespace detail {

/// Completion and first error of a set of tasks (a task_group, or the whole pool). Waiters
/// sleep on the pool's event, not on one in here: the moment `pending` reaches zero the waiter
/// may return and destroy the group, so the finishing thread must not touch it afterwards.
struct group_state {
  std::atomic<std::size_t> pending{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // written by the one task that set `failed`, read once pending is 0
  std::atomic<bool> cancelled{false};  // cancel() discarded some of its tasks

  void capture(std::exception_ptr e) noexcept {
    bool expected = false;
    if (failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) error = std::move(e);
  }
  /// True for the task that finished the group (the caller then wakes the waiters).
  bool finish_one() noexcept { return pending.fetch_sub(1, std::memory_order_acq_rel) == 1; }
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
    if (std::exception_ptr e = take_error()) std::rethrow_exception(e);
    if (discarded) throw_system_error(std::make_error_code(std::errc::operation_canceled), what);
  }
};

struct pool_task {
  virtual ~pool_task() = default;
  virtual void execute() = 0;
  node_id home = -1;
  bool bound = false;  // runs on its homenode's workers only
  group_state* group = nullptr;

  // Small tasks (nearly all) come from the recycling block cache: a task is usually freed by
  // another thread than the one that made it, the pattern malloc handles worst.
  static void* operator new(std::size_t n) {
    return n <= block_cache::block_size ? block_cache::allocate() : ::operator new(n);
  }
  static void operator delete(void* p, std::size_t n) noexcept {
    if (n <= block_cache::block_size) block_cache::deallocate(p);
    else ::operator delete(p);
  }
  static void* operator new(std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
  static void operator delete(void* p, std::size_t, std::align_val_t a) noexcept { ::operator delete(p, a); }
};

template <class F>
struct fn_task final : pool_task {
  template <class G>
  explicit fn_task(G&& fn) : f(std::forward<G>(fn)) {}
  void execute() override { f(); }
  F f;
};

struct pool_worker {
  pool_worker(std::size_t i, std::size_t ni, node_id n, int c) : index(i), node_index(ni), node(n), cpu(c) {}
  std::size_t index;
  std::size_t node_index;
  node_id node;
  int cpu;  // -1: not bound
  work_deque<pool_task*> deque;
  std::thread thread;
  std::atomic<bool> busy{false};  // running a task (the exec policy's load)
  std::atomic<std::uint64_t> executed{0}, stolen_local{0}, stolen_remote{0}, sleeps{0};
};

struct pool_node {
  node_id node = -1;
  std::vector<pool_worker*> workers;
  spin_lock lock;
  std::deque<pool_task*> queue;        // stealable work sent to this node
  std::deque<pool_task*> bound_queue;  // work that must run here
  // Sizes of the two queues, stored under the lock, read without it (plain stores: no
  // contended read-modify-write per task).
  std::atomic<std::int64_t> in_queue{0};
  std::atomic<std::int64_t> in_bound_queue{0};
  std::atomic<int> spinning{0};  // workers searching before they sleep: no wake-up needed
  // Under node_policy::exec only: tasks homed here, queued or running, counted from before
  // they are queued until after they finish, so that exec never reads a task as gone while a
  // worker moves it between queues or has taken it but not yet started it.
  std::atomic<std::int64_t> unfinished{0};
  event_count sleep;
};

/// A deque a thread outside the pool submits into, like oneTBB's slot for an application
/// thread: its submissions cost no lock and no shared cache line. Claimed by one thread at a
/// time (it owns the bottom); workers steal from it. Shared with the thread's binding, so a
/// thread that outlives the pool (or the reverse) never touches freed memory.
struct external_slot {
  std::atomic<bool> claimed{false};
  std::atomic<std::size_t> node_index{0};  // the node whose work it holds
  work_deque<pool_task*> deque;
};

/// The slot the calling outside thread holds in one pool (the last one it submitted to).
struct external_binding {
  std::uint64_t pool_id = 0;
  std::shared_ptr<external_slot> slot;
  void release() noexcept {
    if (slot) slot->claimed.store(false, std::memory_order_release);
    slot.reset();
    pool_id = 0;
  }
  external_binding() = default;
  external_binding(const external_binding&) = delete;
  external_binding& operator=(const external_binding&) = delete;
  ~external_binding() { release(); }
};
inline thread_local external_binding this_external{};
inline std::atomic<std::uint64_t> next_pool_id{1};

/// How many fork()s lie between this process and the first: a child counts one more than its
/// parent (a pthread_atfork handler). A pool compares it with the count at its construction, a
/// load per call where getpid() would be a system call. (A raw clone() or vfork() is not seen:
/// their child may only exec or exit anyway.)
inline std::atomic<unsigned> forks_seen{0};
inline unsigned fork_count() noexcept {
  static const bool registered =
      ::pthread_atfork(nullptr, nullptr, [] { forks_seen.fetch_add(1, std::memory_order_relaxed); }) == 0;
  (void)registered;  // without the handler (no memory) a child is not detected, as before
  return forks_seen.load(std::memory_order_relaxed);
}
// First initialised during static initialisation, before any thread can fork: a child forked
// while another thread runs a C++ static's first initialisation waits on its guard forever.
inline const unsigned fork_counter_ready = fork_count();

/// The pool a thread works for, if any, and which worker it is.
struct worker_context {
  const thread_pool* pool = nullptr;
  pool_worker* self = nullptr;
};
inline thread_local worker_context this_worker{};

}  // namespace detail

/**
 * The node-affine pool (see the file comment). Thread safety: every member may be called
 * from any thread, including from tasks, except the destructor, cancel() during destruction and
 * wait() from a task of the same pool (std::invalid_argument: it would wait for itself; use a
 * task_group). In a child process forked after the pool was made, the members that submit or
 * wait throw std::system_error with numaaff::errc::used_after_fork (see the file comment).
 */
class thread_pool {
 public:
  /// All allowed CPUs, one worker each, options from the environment.
  /// @throws std::invalid_argument on a bad `NUMAAFF_*` value; std::system_error if a thread
  /// cannot be created.
  thread_pool() : thread_pool(thread_pool_options::from_environment()) {}

  /**
   * @throws std::invalid_argument for an unknown or CPU-less node in `nodes`, a non-positive
   * thread count, a distance matrix that does not fit, a negative delay.
   * Binding a worker to its CPU can fail (a CPU outside the cpuset of a container): the worker
   * then runs unbound and workers_bound() says false.
   */
  explicit thread_pool(const thread_pool_options& options);

  /// Finishes all submitted work (including what it submits), then joins the workers. In a
  /// forked child it returns at once: the workers are the parent's, the work stays there.
  ~thread_pool();

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Runs `f()` on a homenode chosen by the pool's node policy. Allocates the task and its
  /// shared state; never blocks. @return std::future of f's result (or exception).
  template <class F>
  auto submit(F&& f) {
    check_process("thread_pool::submit");
    return submit_to(policy_node(), false, std::forward<F>(f));
  }
  /// Runs `f()` on a CPU of `homenode` (bound: never stolen by another node).
  /// @throws std::invalid_argument if `homenode` is not one of the pool's nodes.
  template <class F>
  auto submit(node_id homenode, F&& f) {
    check_process("thread_pool::submit");
    return submit_to(checked_node(homenode, "submit"), true, std::forward<F>(f));
  }

  /// Fire-and-forget submit: no future (cheaper); an exception is kept for wait() to rethrow.
  template <class F>
  void post(F&& f) {
    check_process("thread_pool::post");
    enqueue(make_task(std::forward<F>(f), policy_node(), false, nullptr));
  }
  template <class F>
  void post(node_id homenode, F&& f) {
    check_process("thread_pool::post");
    enqueue(make_task(std::forward<F>(f), checked_node(homenode, "post"), true, nullptr));
  }

  /**
   * Blocks until every task submitted so far, and every task those submit, has finished; then
   * rethrows the first exception a post()ed task threw since the last wait(). Tasks cancel()
   * discarded are not reported here (the caller of cancel() learnt their number): submit()'s
   * futures and task_groups report their own.
   * @throws std::invalid_argument from a task of this pool (it would wait for itself).
   */
  void wait();

  /**
   * Discards the tasks that have not started; running ones finish. Every discarded task is
   * reported where its result was expected: a submit() future holds
   * std::future_errc::broken_promise; the wait() of its task_group, and parallel_for and
   * for_each_node, throw std::system_error with std::errc::operation_canceled (unless a task
   * of theirs threw first: that exception is rethrown instead). @return how many were discarded.
   */
  std::size_t cancel();

  /**
   * Calls `f(i)` for each i in [first, last), or `f(lo, hi)` once per block if f takes two
   * indices. The range is cut into one contiguous block per node, in node order, in proportion
   * to the node's workers, and each node block into one block per worker (OpenMP
   * schedule(static) order, so data first touched by the same partition stays local); `grain`
   * > 0 cuts blocks further to at most `grain` indices. Blocks are tasks with their node as
   * homenode (stealable after the delay, and only while every worker of their node is running a
   * task). The caller blocks until all are done (a worker helps run them meanwhile; an outside
   * thread only on a one-node machine, see task_group); the first exception is rethrown.
   * @throws std::system_error with std::errc::operation_canceled if cancel() discarded blocks
   * (the indices of those blocks were not visited).
   */
  template <class F>
  void parallel_for(std::size_t first, std::size_t last, F&& f, std::size_t grain = 0);

  /// Runs `f(node)` once on a worker of each of the pool's nodes; waits; rethrows. Throws
  /// std::system_error (std::errc::operation_canceled) if cancel() discarded some of the calls.
  template <class F>
  void for_each_node(F&& f);

  /// Per-node blocks of [first, last) as parallel_for cuts them.
  std::vector<index_block> node_blocks(std::size_t first, std::size_t last) const {
    return partition_.node_blocks(first, last);
  }
  /// Per-worker blocks of [first, last) as parallel_for cuts them (worker order).
  std::vector<index_block> worker_blocks(std::size_t first, std::size_t last) const {
    return partition_.worker_blocks(first, last);
  }
  /// The partition parallel_for uses: the workers' nodes in worker order (partition.hpp).
  const index_partition& partition() const noexcept { return partition_; }

  const std::vector<node_id>& nodes() const noexcept { return node_ids_; }
  std::size_t worker_count() const noexcept { return workers_.size(); }
  std::size_t workers_on(node_id n) const { return node_state(checked_node(n, "workers_on")).workers.size(); }
  /// The node of worker `i` and the CPU it is pinned to (-1: unbound).
  node_id worker_node(std::size_t i) const { return worker_at(i).node; }
  int worker_cpu(std::size_t i) const { return worker_at(i).cpu; }
  /// True if every worker is pinned to its CPU (false on synthetic topologies, with
  /// bind_workers = false, or where the kernel refused the binding).
  bool workers_bound() const noexcept { return bound_; }
  node_policy policy() const noexcept { return options_.policy; }
  steal_mode steal() const noexcept { return options_.steal; }
  const topology& topo() const noexcept { return *topo_; }
  /// The remote-steal delay from a worker of `from` to work of `to` (zero for the same node).
  std::chrono::nanoseconds steal_delay(node_id from, node_id to) const;
  /// Remote nodes in the order a worker of `from` visits them.
  std::vector<node_id> steal_order(node_id from) const;
  thread_pool_stats stats() const noexcept;
  /// A description of the pool (nodes, workers, CPUs, policy, stealing, delays).
  std::string to_string() const;

  /// The pool the calling thread works for, or nullptr.
  static const thread_pool* current() noexcept { return detail::this_worker.pool; }
  /// The calling worker's index in its pool, or -1 outside any pool's workers.
  static int current_worker_index() noexcept {
    return detail::this_worker.self != nullptr ? static_cast<int>(detail::this_worker.self->index) : -1;
  }

 private:
  friend class task_group;

  template <class F>
  detail::pool_task* make_task(F&& f, std::size_t node_index, bool bound, detail::group_state* group) {
    auto* t = new detail::fn_task<std::decay_t<F>>(std::forward<F>(f));
    t->home = nodes_[node_index]->node;
    t->bound = bound;
    t->group = group;
    return t;
  }

  template <class F>
  auto submit_to(std::size_t node_index, bool bound, F&& f) {
    using result = std::invoke_result_t<std::decay_t<F>>;
    std::packaged_task<result()> job(std::forward<F>(f));
    std::future<result> fut = job.get_future();
    enqueue(make_task(std::move(job), node_index, bound, nullptr));
    return fut;
  }

  void enqueue(detail::pool_task* t);
  void push_to_queue(detail::pool_node& n, detail::pool_task* t);
  void wake_for(std::size_t node_index, bool bound) noexcept;
  /// The next task for worker `self`. Sets `deadline` to when a remote node's delay expires.
  detail::pool_task* find_task(detail::pool_worker& self, std::uint64_t idle_since, std::uint64_t& deadline);
  /// The calling outside thread's slot, claimed on first use, if it holds node `ni`'s work.
  detail::external_slot* own_slot(std::size_t ni) noexcept;
  /// A task stolen from node `ni`'s workers (other than `self`) or outside slots.
  detail::pool_task* steal_from(std::size_t ni, const detail::pool_worker* self);
  bool has_stealable(std::size_t ni) const noexcept;
  /// Some worker of node `ni` is not running a task, i.e. free to take that node's work.
  bool has_idle_workers(std::size_t ni) const noexcept;
  /// One task from node `n`'s queues; a worker of the node (`into`) takes a batch into its deque.
  detail::pool_task* take_from_queues(detail::pool_node& n, bool include_bound, detail::pool_worker* into);
  void run_task(detail::pool_task* t, detail::pool_worker* self) noexcept;
  /// Counts a task out of its group and the pool; wakes waiters when one of them completes.
  void finish(detail::group_state* g) noexcept;
  /// Tasks still to finish for `g`; for all_ (wait(), the destructor) groups' work counts too.
  std::size_t outstanding(const detail::group_state& g) const noexcept;
  void worker_main(detail::pool_worker& w);
  /// The helping wait of task_group and parallel_for: run tasks until `g` has none pending.
  void help_until_done(detail::group_state& g);

  std::size_t policy_node();
  std::size_t checked_node(node_id n, const char* fn) const;
  std::size_t index_of(node_id n) const noexcept { return plan_.index_of(n); }
  detail::pool_node& node_state(std::size_t i) const noexcept { return *nodes_[i]; }
  const detail::pool_worker& worker_at(std::size_t i) const;
  bool is_own_worker() const noexcept { return detail::this_worker.pool == this; }
  /// True in a child forked after the pool was made: its workers are the parent's.
  bool forked() const noexcept { return detail::forks_seen.load(std::memory_order_relaxed) != forks_; }
  /// Throws in such a child, before the call allocates a task or touches a queue (a worker of
  /// the parent may have held a queue's lock at the fork, and none would run the task).
  void check_process(const char* fn) const {
    if (forked()) detail::throw_system_error(errc::used_after_fork, fn);
  }

  static constexpr std::size_t no_node = detail::steal_plan::no_node;
  static constexpr std::size_t external_slots = 8;

  static std::shared_ptr<const topology> topology_of(const thread_pool_options& o);
  static std::vector<node_id> pool_nodes(const thread_pool_options& o, const topology& t);

  thread_pool_options options_;
  std::shared_ptr<const topology> topo_;
  std::vector<node_id> node_ids_;
  detail::steal_plan plan_;
  std::vector<std::unique_ptr<detail::pool_node>> nodes_;
  std::vector<std::unique_ptr<detail::pool_worker>> workers_;
  index_partition partition_{{}};
  detail::group_state all_;  // every task; the errors of post()ed ones
  detail::event_count groups_done_;  // a group (or all_) completed
  std::atomic<long> active_groups_{0};  // task_groups with work pending
  std::vector<std::shared_ptr<detail::external_slot>> slots_;
  const std::uint64_t id_ = detail::next_pool_id.fetch_add(1, std::memory_order_relaxed);
  const unsigned forks_ = detail::fork_count();  // registers the fork counter, then reads it
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> round_robin_{0};
  bool bound_ = false;
};

/**
 * Fork-join on a thread_pool: run() tasks, then wait() for all of them. The waiting thread
 * helps: a worker runs tasks of its node (its own deque first) until the group is done, so
 * nested groups inside tasks do not deadlock and do not need spare threads. An outside thread
 * is not pinned, so on a machine with several nodes it only sleeps (a task it ran could move
 * off its homenode with it); on one node it runs the tasks it submitted itself.
 * Thread safety: run() from any thread; one thread waits. The destructor waits (and drops the
 * exception, if any): call wait() to see it.
 */
class task_group {
 public:
  explicit task_group(thread_pool& pool) noexcept : pool_(pool) {}
  ~task_group() {
    if (!pool_.forked()) pool_.help_until_done(state_);  // in a forked child nothing would finish
    state_.take_error();
  }
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  /// Runs `f()` on a homenode chosen by the pool's policy (stealable after the delay).
  /// If copying `f` or allocating the task throws, the exception propagates and the group is
  /// as before the call (wait() does not wait for the task that was not created).
  template <class F>
  void run(F&& f) {
    pool_.check_process("task_group::run");
    pool_.enqueue(pool_.make_task(std::forward<F>(f), pool_.policy_node(), false, &state_));
  }
  /// Runs `f()` with `homenode` as its homenode (stealable after the delay, like parallel_for
  /// blocks; use thread_pool::submit(node, f) for work that must not leave the node).
  /// @throws std::invalid_argument if `homenode` is not one of the pool's nodes (the group is
  /// unchanged, as when copying `f` throws).
  template <class F>
  void run(node_id homenode, F&& f) {
    pool_.check_process("task_group::run");
    pool_.enqueue(pool_.make_task(std::forward<F>(f), pool_.checked_node(homenode, "task_group::run"), false, &state_));
  }
  /// Helps until every task of the group has finished; rethrows the first exception.
  /// @throws std::system_error with std::errc::operation_canceled if, with no task throwing,
  /// thread_pool::cancel() discarded some of the group's tasks. Either way the group is then
  /// empty and may be reused.
  void wait() {
    pool_.check_process("task_group::wait");
    wait_and_report("task_group::wait: tasks discarded by thread_pool::cancel()");
  }

 private:
  friend class thread_pool;
  void wait_and_report(const char* what) {
    pool_.help_until_done(state_);
    state_.rethrow(what);
  }
  thread_pool& pool_;
  detail::group_state state_;
};

// ---- implementation ---------------------------------------------------------------------

inline std::string to_string(node_policy p) {
  switch (p) {
    case node_policy::fork: return "fork";
    case node_policy::exec: return "exec";
    case node_policy::round_robin: return "round_robin";
  }
  return "?";
}

inline std::string to_string(steal_mode s) {
  switch (s) {
    case steal_mode::distance: return "distance";
    case steal_mode::local_only: return "local";
    case steal_mode::free: return "free";
  }
  return "?";
}

inline thread_pool_options thread_pool_options::from_environment() {
  return from_environment([](const char* name) -> const char* { return std::getenv(name); });
}

inline thread_pool_options thread_pool_options::from_environment(const std::function<const char*(const char*)>& lookup) {
  thread_pool_options o;
  auto bad = [](const char* var, const char* value, const char* valid) {
    detail::throw_invalid_argument(std::string(var) + "='" + value + "': expected " + valid);
  };
  if (const char* v = lookup("NUMAAFF_NODE_POLICY")) {
    const std::string_view s = detail::trim(v);
    if (s == "fork") o.policy = node_policy::fork;
    else if (s == "exec") o.policy = node_policy::exec;
    else if (s == "round_robin" || s == "round-robin" || s == "rr") o.policy = node_policy::round_robin;
    else bad("NUMAAFF_NODE_POLICY", v, "fork, exec or round_robin");
  }
  if (const char* v = lookup("NUMAAFF_THREADS_PER_NODE")) {
    int n = 0;
    if (!detail::parse_int(v, n) || n < 1) bad("NUMAAFF_THREADS_PER_NODE", v, "a positive integer");
    o.threads_per_node = n;
  }
  if (const char* v = lookup("NUMAAFF_STEAL")) {
    const std::string_view s = detail::trim(v);
    const char* valid = "distance, distance:MICROSECONDS (delay per 10 distance units), local or free";
    if (s == "local") o.steal = steal_mode::local_only;
    else if (s == "free") o.steal = steal_mode::free;
    else if (s == "distance") o.steal = steal_mode::distance;
    else if (s.substr(0, 9) == "distance:") {
      int us = -1;
      const std::errc e = detail::parse_int_status(s.substr(9), us);
      if (e == std::errc::result_out_of_range)
        bad("NUMAAFF_STEAL", v, "distance:MICROSECONDS with MICROSECONDS at most 2147483647 (out of range)");
      if (e != std::errc() || us < 0) bad("NUMAAFF_STEAL", v, valid);
      o.steal = steal_mode::distance;
      o.steal_delay = std::chrono::microseconds(us);
    } else {
      bad("NUMAAFF_STEAL", v, valid);
    }
  }
  return o;
}

inline std::shared_ptr<const topology> thread_pool::topology_of(const thread_pool_options& o) {
  if (o.threads_per_node < 0) detail::throw_invalid_argument("thread_pool: threads_per_node must be >= 0 (0: one per CPU)");
  if (o.steal_delay.count() < 0 || o.spin.count() < 0)
    detail::throw_invalid_argument("thread_pool: steal_delay and spin must not be negative");
  std::shared_ptr<const topology> t = o.topo ? o.topo : std::shared_ptr<const topology>(std::shared_ptr<void>(), &topology::system());
  if (!o.distances.empty()) t = std::make_shared<const topology>(t->with_distances(o.distances));
  return t;
}

/// The requested nodes, else every node with CPUs this process may use; ascending.
inline std::vector<node_id> thread_pool::pool_nodes(const thread_pool_options& o, const topology& t) {
  std::vector<node_id> out;
  if (o.nodes.empty()) {
    for (node_id n : t.nodes())
      if (!t.cpus_of(n).empty()) out.push_back(n);
  } else {
    for (node_id n : o.nodes) {
      if (!t.has_node(n))
        detail::throw_invalid_argument("thread_pool: node " + std::to_string(n) + " is not in the topology (" +
                                       detail::format_list(t.nodes()) + ")");
      if (t.cpus_of(n).empty())
        detail::throw_invalid_argument("thread_pool: node " + std::to_string(n) + " has no CPU this process may use");
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    std::sort(out.begin(), out.end());
  }
  if (out.empty()) detail::throw_invalid_argument("thread_pool: no node with a usable CPU");
  return out;
}

inline thread_pool::thread_pool(const thread_pool_options& options)
    : options_(options),
      topo_(topology_of(options)),
      node_ids_(pool_nodes(options, *topo_)),
      plan_(node_ids_, topo_->nodes(), [t = topo_.get()](node_id a, node_id b) { return t->distance(a, b); },
            options.steal == steal_mode::local_only, options.steal == steal_mode::free, options.steal_delay) {
  const topology& t = *topo_;
  const bool bind = options_.bind_workers && t.is_this_system();
  for (std::size_t ni = 0; ni < node_ids_.size(); ++ni) {
    auto n = std::make_unique<detail::pool_node>();
    n->node = node_ids_[ni];
    const std::vector<int> cpus = t.cpus_of(n->node);
    const std::size_t count = options_.threads_per_node > 0 ? static_cast<std::size_t>(options_.threads_per_node) : cpus.size();
    for (std::size_t k = 0; k < count; ++k) {
      workers_.push_back(std::make_unique<detail::pool_worker>(workers_.size(), ni, n->node, bind ? cpus[k % cpus.size()] : -1));
      n->workers.push_back(workers_.back().get());
    }
    nodes_.push_back(std::move(n));
  }
  std::vector<node_id> worker_nodes;
  for (const auto& w : workers_) worker_nodes.push_back(w->node);
  partition_ = index_partition(std::move(worker_nodes));

  for (std::size_t k = 0; k < external_slots; ++k) slots_.push_back(std::make_shared<detail::external_slot>());

  // Start the workers; each reports whether its binding took.
  std::atomic<std::size_t> unbound{0};
  std::atomic<std::size_t> started{0};
  for (auto& w : workers_) {
    detail::pool_worker* wp = w.get();
    try {
      w->thread = std::thread([this, wp, &unbound, &started] {
        if (wp->cpu >= 0) {
          if (!detail::pin_to_cpu(wp->cpu)) {
            wp->cpu = -1;
            unbound.fetch_add(1);
          }
        } else {
          unbound.fetch_add(1);
        }
        started.fetch_add(1);
        worker_main(*wp);
      });
    } catch (const std::system_error&) {
      stop_.store(true);
      for (auto& n : nodes_) n->sleep.notify_all();
      for (auto& x : workers_)
        if (x->thread.joinable()) x->thread.join();
      throw;
    }
  }
  while (started.load() < workers_.size()) std::this_thread::yield();
  bound_ = unbound.load() == 0;
}

inline thread_pool::~thread_pool() {
  if (forked()) {
    // The workers do not exist here and nothing would finish the queued tasks (they leak).
    // Joining would wait forever; detaching would write to descriptors that glibc recycled,
    // at the fork, for the child's next threads. So the handles are dropped without a call:
    // new empty threads take their storage (no destructor runs on the old ones).
    for (auto& w : workers_) ::new (static_cast<void*>(&w->thread)) std::thread();
    return;
  }
  help_until_done(all_);
  stop_.store(true, std::memory_order_seq_cst);
  for (auto& n : nodes_) n->sleep.notify_all();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

inline std::size_t thread_pool::checked_node(node_id n, const char* fn) const {
  const std::size_t i = index_of(n);
  if (i == no_node)
    detail::throw_invalid_argument(std::string("thread_pool::") + fn + ": node " + std::to_string(n) +
                                   " is not one of the pool's nodes (" + detail::format_list(node_ids_) + ")");
  return i;
}

inline const detail::pool_worker& thread_pool::worker_at(std::size_t i) const {
  if (i >= workers_.size())
    detail::throw_invalid_argument("thread_pool: worker " + std::to_string(i) + " out of range (" +
                                   std::to_string(workers_.size()) + " workers)");
  return *workers_[i];
}

inline std::chrono::nanoseconds remote_steal_delay(const thread_pool_options& o, const topology& t, node_id from, node_id to) {
  const int d = t.distance(from, to);  // validates both nodes
  if (from == to || o.steal == steal_mode::free) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(detail::distance_delay_ns(detail::saturated_ns(o.steal_delay), d, local_distance));
}

inline std::chrono::nanoseconds thread_pool::steal_delay(node_id from, node_id to) const {
  checked_node(from, "steal_delay");
  checked_node(to, "steal_delay");
  return remote_steal_delay(options_, *topo_, from, to);
}

inline std::vector<node_id> thread_pool::steal_order(node_id from) const {
  std::vector<node_id> out;
  for (const detail::steal_source& r : plan_.remotes(checked_node(from, "steal_order"))) out.push_back(node_ids_[r.node_index]);
  return out;
}

inline std::size_t thread_pool::policy_node() {
  switch (options_.policy) {
    case node_policy::fork:
      return plan_.nearest(this_homenode());
    case node_policy::round_robin:
      return round_robin_.fetch_add(1, std::memory_order_relaxed) % nodes_.size();
    case node_policy::exec: {
      // Least unfinished work homed there per worker; ties rotate so equal nodes share new
      // work. Exact for one submitter: its own earlier submissions are always counted.
      return plan_.least_loaded(
          round_robin_.fetch_add(1, std::memory_order_relaxed),
          [&](std::size_t i) { return nodes_[i]->unfinished.load(std::memory_order_acquire); },
          [&](std::size_t i) { return nodes_[i]->workers.size(); });
    }
  }
  return 0;
}

inline void thread_pool::enqueue(detail::pool_task* t) {
  // Counted here, once the task exists (a callable whose copy threw, or a node that was
  // refused, never counts: wait() must not wait for a task that was never made) and before it
  // is queued (a worker may finish it at once). A group's task is counted by its group (one
  // shared counter per task, not two).
  detail::group_state* const g = t->group;
  if (g == nullptr) all_.pending.fetch_add(1, std::memory_order_relaxed);
  else if (g->pending.fetch_add(1, std::memory_order_seq_cst) == 0) active_groups_.fetch_add(1, std::memory_order_seq_cst);
  const std::size_t ni = index_of(t->home);
  const bool bound = t->bound;  // read before queueing: a worker may run and free `t` at once
  detail::pool_node& n = *nodes_[ni];
  const bool counted = options_.policy == node_policy::exec;
  if (counted) n.unfinished.fetch_add(1, std::memory_order_acq_rel);
  detail::pool_worker* self = is_own_worker() ? detail::this_worker.self : nullptr;
  detail::external_slot* slot = nullptr;
#if !defined(NUMAAFF_NO_EXCEPTIONS)
  try {
#endif
    if (!bound && self != nullptr && self->node_index == ni) {
      self->deque.push(t);
    } else if (!bound && self == nullptr && (slot = own_slot(ni)) != nullptr) {
      slot->deque.push(t);
    } else {
      push_to_queue(n, t);
    }
#if !defined(NUMAAFF_NO_EXCEPTIONS)
  } catch (...) {
    // A deque or queue that could not grow: the task is not queued, so it is not counted.
    delete t;
    if (counted) n.unfinished.fetch_sub(1, std::memory_order_acq_rel);
    finish(g);
    throw;
  }
#endif
  wake_for(ni, bound);
}

inline void thread_pool::push_to_queue(detail::pool_node& n, detail::pool_task* t) {
  std::lock_guard<detail::spin_lock> g(n.lock);
  if (t->bound) {
    n.bound_queue.push_back(t);
    n.in_bound_queue.store(static_cast<std::int64_t>(n.bound_queue.size()), std::memory_order_relaxed);
  } else {
    n.queue.push_back(t);
    n.in_queue.store(static_cast<std::int64_t>(n.queue.size()), std::memory_order_relaxed);
  }
}

inline void thread_pool::wake_for(std::size_t ni, bool bound) noexcept {
  detail::pool_node& n = *nodes_[ni];
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (n.spinning.load(std::memory_order_seq_cst) > 0 || n.sleep.notify_one()) return;
  // Nobody on the task's node is free: the nearest sleeping node starts its steal delay (a
  // remote spinner is not relied on: it may be about to take work of its own).
  for (std::size_t r : plan_.wake_after(ni, bound))
    if (nodes_[r]->sleep.notify_one()) return;
}

inline detail::pool_task* thread_pool::take_from_queues(detail::pool_node& n, bool include_bound,
                                                        detail::pool_worker* into) {
  const bool bound = include_bound && n.in_bound_queue.load(std::memory_order_seq_cst) > 0;
  if (!bound && n.in_queue.load(std::memory_order_seq_cst) <= 0) return nullptr;
  detail::pool_task* t = nullptr;
  std::lock_guard<detail::spin_lock> g(n.lock);
  if (bound && !n.bound_queue.empty()) {
    t = n.bound_queue.front();
    n.bound_queue.pop_front();
    n.in_bound_queue.store(static_cast<std::int64_t>(n.bound_queue.size()), std::memory_order_relaxed);
  } else if (!n.queue.empty()) {
    t = n.queue.front();
    n.queue.pop_front();
    // A worker of the node takes a batch into its deque (one lock for many tasks, and its
    // siblings can still steal them); a thief or an outsider takes one.
    if (into != nullptr) {
      const std::size_t batch = std::min<std::size_t>(n.queue.size() / 2, 32);
      for (std::size_t k = 0; k < batch; ++k) {
        into->deque.push(n.queue.front());
        n.queue.pop_front();
      }
    }
    n.in_queue.store(static_cast<std::int64_t>(n.queue.size()), std::memory_order_relaxed);
  }
  return t;
}

inline detail::external_slot* thread_pool::own_slot(std::size_t ni) noexcept {
  detail::external_binding& b = detail::this_external;
  if (b.pool_id != id_) {
    b.release();
    b.pool_id = id_;  // even when every slot is taken: do not scan again on each submission
    for (const auto& s : slots_) {
      bool expected = false;
      if (!s->claimed.load(std::memory_order_relaxed) &&
          s->claimed.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
        b.slot = s;
        s->node_index.store(ni, std::memory_order_relaxed);
        break;
      }
    }
  }
  detail::external_slot* s = b.slot.get();
  if (s == nullptr) return nullptr;
  if (s->node_index.load(std::memory_order_relaxed) != ni) {
    // The thread's homenode changed: follow it once its old work is gone, else use the queue.
    if (s->deque.size_hint() != 0) return nullptr;
    s->node_index.store(ni, std::memory_order_relaxed);
  }
  return s;
}

inline bool thread_pool::has_idle_workers(std::size_t ni) const noexcept {
  // Not only spinners and sleepers: a worker that has just finished a task and not yet looked
  // for the next one is neither, and a thief that counted it busy took its node's next block
  // (seen in the VM: back-to-back parallel_fors lost ~3% of their blocks to other nodes).
  for (const detail::pool_worker* w : nodes_[ni]->workers)
    if (!w->busy.load(std::memory_order_seq_cst)) return true;
  return false;
}

inline bool thread_pool::has_stealable(std::size_t ni) const noexcept {
  const detail::pool_node& n = *nodes_[ni];
  if (n.in_queue.load(std::memory_order_seq_cst) > 0) return true;
  for (const detail::pool_worker* w : n.workers)
    if (w->deque.size_hint() > 0) return true;
  for (const auto& s : slots_)
    if (s->node_index.load(std::memory_order_relaxed) == ni && s->deque.size_hint() > 0) return true;
  return false;
}

inline detail::pool_task* thread_pool::steal_from(std::size_t ni, const detail::pool_worker* self) {
  const detail::pool_node& n = *nodes_[ni];
  const std::size_t count = n.workers.size();
  const std::size_t start = self != nullptr ? self->index : 0;
  for (std::size_t k = 0; k < count; ++k) {
    detail::pool_worker* s = n.workers[(start + k) % count];
    if (s == self) continue;
    if (detail::pool_task* t = s->deque.steal()) return t;
  }
  for (const auto& s : slots_) {
    if (s->node_index.load(std::memory_order_relaxed) != ni) continue;
    if (detail::pool_task* t = s->deque.steal()) {
      if (t->home == n.node) return t;
      // The slot changed nodes between the check and the steal: the task goes home instead
      // (its node found before it is queued: a worker there may run and free it at once).
      const std::size_t home = index_of(t->home);
      push_to_queue(*nodes_[home], t);
      wake_for(home, false);
    }
  }
  return nullptr;
}


inline detail::pool_task* thread_pool::find_task(detail::pool_worker& self, std::uint64_t idle_since, std::uint64_t& deadline) {
  detail::pool_node& n = *nodes_[self.node_index];
  detail::pool_task* t = nullptr;
  if ((t = self.deque.pop()) != nullptr) return t;
  if ((t = take_from_queues(n, true, &self)) != nullptr) return t;
  if ((t = steal_from(self.node_index, &self)) != nullptr) {
    self.stolen_local.store(self.stolen_local.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return t;
  }
  std::uint64_t now = 0;
  for (const detail::steal_source& r : plan_.remotes(self.node_index)) {
    const std::size_t ri = r.node_index;
    if (!has_stealable(ri)) continue;
    if (r.delay_ns != 0 && idle_since != 0 && now == 0) now = detail::monotonic_ns();
    const detail::steal_decision d =
        detail::steal_plan::steal_rule(r, idle_since, now, [&] { return has_idle_workers(ri); });
    if (!d.take) {
      deadline = std::min(deadline, d.look_again_at);
      continue;
    }
    t = take_from_queues(*nodes_[ri], false, nullptr);
    if (t == nullptr) t = steal_from(ri, &self);
    if (t != nullptr) {
      self.stolen_remote.store(self.stolen_remote.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return t;
    }
  }
  return nullptr;
}

inline void thread_pool::run_task(detail::pool_task* t, detail::pool_worker* self) noexcept {
  // Nested runs (a waiting task helping) must leave the outer task's worker busy.
  const bool was_busy = self != nullptr && self->busy.load(std::memory_order_relaxed);
  if (self != nullptr) self->busy.store(true, std::memory_order_seq_cst);
  const detail::homenode_state saved = detail::thread_home;
  detail::thread_home = {t->home, topo_->is_this_system()};
  detail::group_state* g = t->group;
#if defined(NUMAAFF_NO_EXCEPTIONS)
  t->execute();
#else
  try {
    t->execute();
  } catch (...) {
    (g != nullptr ? *g : all_).capture(std::current_exception());
  }
#endif
  detail::thread_home = saved;
  if (options_.policy == node_policy::exec) nodes_[index_of(t->home)]->unfinished.fetch_sub(1, std::memory_order_acq_rel);
  delete t;
  if (self != nullptr) {
    self->busy.store(was_busy, std::memory_order_seq_cst);
    self->executed.store(self->executed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  finish(g);
}

inline void thread_pool::finish(detail::group_state* g) noexcept {
  if (g != nullptr) {
    if (g->finish_one()) {  // `g` may be gone from here on
      active_groups_.fetch_sub(1, std::memory_order_seq_cst);
      groups_done_.notify_all();
    }
  } else if (all_.finish_one()) {
    groups_done_.notify_all();
  }
}

inline std::size_t thread_pool::outstanding(const detail::group_state& g) const noexcept {
  const std::size_t own = g.pending.load(std::memory_order_seq_cst);
  if (&g != &all_) return own;
  // Work of groups counts for the pool too; a transiently negative count means none.
  const long groups = active_groups_.load(std::memory_order_seq_cst);
  return own + (groups > 0 ? static_cast<std::size_t>(groups) : 0);
}

inline void thread_pool::worker_main(detail::pool_worker& w) {
  detail::this_worker = {this, &w};
  detail::thread_home = {w.node, topo_->is_this_system()};
  detail::pool_node& n = *nodes_[w.node_index];
  const auto spin_ns = static_cast<std::uint64_t>(detail::saturated_ns(options_.spin));
  for (;;) {
    std::uint64_t deadline = UINT64_MAX;
    // The idle clock starts when the first look finds nothing (0: not idle yet).
    detail::pool_task* t = find_task(w, 0, deadline);
    std::uint64_t idle_since = t == nullptr ? detail::monotonic_ns() : 0;
    if (t == nullptr) {
      // Idle: spin (announced, so submitters skip the wake-up), then sleep.
      n.spinning.fetch_add(1, std::memory_order_seq_cst);
      for (unsigned round = 1;; ++round) {
        deadline = UINT64_MAX;
        if ((t = find_task(w, idle_since, deadline)) != nullptr) break;
        if (round % 32 == 0) {
          if (stop_.load(std::memory_order_acquire) || detail::monotonic_ns() - idle_since >= spin_ns) break;
          std::this_thread::yield();
        }
        detail::cpu_relax();
      }
      n.spinning.fetch_sub(1, std::memory_order_seq_cst);
      // A submitter that saw this worker spinning did not wake anyone; if this worker took a
      // task and more is waiting, that more may be the submitter's: pass the wake-up on.
      if (t != nullptr && (n.in_bound_queue.load(std::memory_order_seq_cst) > 0 || has_stealable(w.node_index)))
        n.sleep.notify_one();
      while (t == nullptr) {
        const std::uint32_t key = n.sleep.prepare_wait();
        deadline = UINT64_MAX;
        if ((t = find_task(w, idle_since, deadline)) != nullptr) {
          n.sleep.cancel_wait();
          break;
        }
        if (stop_.load(std::memory_order_seq_cst)) {
          n.sleep.cancel_wait();
          return;
        }
        w.sleeps.fetch_add(1, std::memory_order_relaxed);
        const std::uint64_t now = detail::monotonic_ns();
        const bool timed = deadline != UINT64_MAX;
        n.sleep.commit_wait(key, timed ? std::chrono::nanoseconds(deadline > now ? deadline - now : 0)
                                       : std::chrono::nanoseconds(-1));
        // After sleeping with nothing in sight, the remote-steal clock starts again: work that
        // appeared meanwhile is offered to its own node's workers first.
        if (!timed) idle_since = detail::monotonic_ns();
      }
    }
    run_task(t, &w);
  }
}

inline void thread_pool::help_until_done(detail::group_state& g) {
  if (outstanding(g) == 0) return;
  detail::pool_worker* self = is_own_worker() ? detail::this_worker.self : nullptr;
  detail::external_slot* own = nullptr;
  if (self == nullptr && nodes_.size() == 1 && detail::kernel_nodes().size() == 1) {
    // An outside thread is not pinned: a task it ran could move off its homenode with it, in
    // the middle of a first touch. So it helps only where no other node exists to move to (a
    // one-node pool on the node it runs on), with its own submissions (LIFO, as a worker
    // would); otherwise it only waits.
    std::error_code ec;
    const node_id here = current_node(ec);
    const detail::external_binding& b = detail::this_external;
    if (!ec && node_ids_.front() == here && b.pool_id == id_ && b.slot && b.slot->node_index.load(std::memory_order_relaxed) == 0)
      own = b.slot.get();
  }
  // thread_pool::wait() and the destructor only sleep: the caller is usually an unbound thread,
  // and running a task there would put it off its node.
  const bool can_help = &g != &all_ && (self != nullptr || own != nullptr);
  std::uint64_t idle_since = detail::monotonic_ns();  // spin and remote-steal clocks (0: just ran a task)
  const auto spin_ns = static_cast<std::uint64_t>(detail::saturated_ns(options_.spin));
  std::uint64_t sleep_ns = 50000;
  for (unsigned round = 0; outstanding(g) != 0; ++round) {
    std::uint64_t deadline = UINT64_MAX;
    if (can_help) {
      if (detail::pool_task* t = self != nullptr ? find_task(*self, idle_since, deadline) : own->deque.pop()) {
        run_task(t, self);
        idle_since = 0;
        sleep_ns = 50000;
        continue;
      }
    }
    if (idle_since == 0) idle_since = detail::monotonic_ns();
    if (round % 32 != 31) {
      detail::cpu_relax();
      continue;
    }
    if (detail::monotonic_ns() - idle_since < spin_ns) {
      std::this_thread::yield();
      continue;
    }
    // Sleep until the group completes. The wait is bounded because work this thread could help
    // with does not wake it (it is not one of its node's sleepers); the bound grows to 1 ms.
    const std::uint32_t key = groups_done_.prepare_wait();
    if (outstanding(g) == 0) {
      groups_done_.cancel_wait();
      break;
    }
    groups_done_.commit_wait(key, can_help ? std::chrono::nanoseconds(sleep_ns) : std::chrono::nanoseconds(-1));
    sleep_ns = std::min<std::uint64_t>(sleep_ns * 2, 1000000);
  }
}

inline void thread_pool::wait() {
  check_process("thread_pool::wait");
  if (is_own_worker())
    detail::throw_invalid_argument("thread_pool::wait: called from one of the pool's tasks, it would wait for itself "
                                   "(use a task_group)");
  help_until_done(all_);
  if (std::exception_ptr e = all_.take_error()) std::rethrow_exception(e);
}

inline std::size_t thread_pool::cancel() {
  check_process("thread_pool::cancel");
  std::size_t dropped = 0;
  for (auto& np : nodes_) {
    detail::pool_node& n = *np;
    for (;;) {
      detail::pool_task* t = take_from_queues(n, true, nullptr);
      if (t == nullptr) t = steal_from(static_cast<std::size_t>(&np - nodes_.data()), nullptr);
      if (t == nullptr) break;
      detail::group_state* g = t->group;
      if (options_.policy == node_policy::exec) nodes_[index_of(t->home)]->unfinished.fetch_sub(1, std::memory_order_acq_rel);
      delete t;
      // Its group's wait must not return as if it had run (set before finish(): after it, the
      // group may be gone).
      if (g != nullptr) g->cancelled.store(true, std::memory_order_relaxed);
      finish(g);
      ++dropped;
    }
  }
  return dropped;
}

template <class F>
void thread_pool::parallel_for(std::size_t first, std::size_t last, F&& f, std::size_t grain) {
  constexpr bool ranged = std::is_invocable_v<F&, std::size_t, std::size_t>;
  static_assert(ranged || std::is_invocable_v<F&, std::size_t>, "parallel_for: f must take (index) or (first, last)");
  check_process("thread_pool::parallel_for");
  task_group g(*this);
  for (const index_block& b : partition_.task_blocks(first, last, grain)) {
    g.run(b.node, [&f, lo = b.first, hi = b.last] {
      if constexpr (ranged) {
        f(lo, hi);
      } else {
        for (std::size_t i = lo; i < hi; ++i) f(i);
      }
    });
  }
  g.wait_and_report("thread_pool::parallel_for: blocks discarded by thread_pool::cancel()");
}

template <class F>
void thread_pool::for_each_node(F&& f) {
  check_process("thread_pool::for_each_node");
  task_group g(*this);
  for (std::size_t ni = 0; ni < nodes_.size(); ++ni) {
    const node_id n = node_ids_[ni];
    g.pool_.enqueue(make_task([&f, n] { f(n); }, ni, true, &g.state_));
  }
  g.wait_and_report("thread_pool::for_each_node: calls discarded by thread_pool::cancel()");
}

inline thread_pool_stats thread_pool::stats() const noexcept {
  thread_pool_stats s;
  for (const auto& w : workers_) {
    s.executed += w->executed.load(std::memory_order_relaxed);
    s.stolen_local += w->stolen_local.load(std::memory_order_relaxed);
    s.stolen_remote += w->stolen_remote.load(std::memory_order_relaxed);
    s.sleeps += w->sleeps.load(std::memory_order_relaxed);
  }
  return s;
}

inline std::string thread_pool::to_string() const {
  std::string s = "thread_pool: " + std::to_string(workers_.size()) + " workers on " + std::to_string(nodes_.size()) +
                  " node" + (nodes_.size() == 1 ? "" : "s") + ", policy " + numaaff::to_string(options_.policy) +
                  ", steal " + numaaff::to_string(options_.steal) +
                  (options_.steal == steal_mode::distance ? " (" + std::to_string(options_.steal_delay.count()) + " us per 10 distance units)" : "") +
                  ", workers " + (bound_ ? "bound" : "not bound") + "\n";
  for (const auto& np : nodes_) {
    std::vector<int> cpus;
    for (const detail::pool_worker* w : np->workers)
      if (w->cpu >= 0) cpus.push_back(w->cpu);
    s += "node " + std::to_string(np->node) + ": " + std::to_string(np->workers.size()) +
         (np->workers.size() == 1 ? " worker" : " workers") +
         (cpus.empty() ? std::string() : " on cpus " + detail::format_list(cpus)) + "; steals from";
    const std::vector<detail::steal_source>& remotes = plan_.remotes(static_cast<std::size_t>(&np - nodes_.data()));
    if (remotes.empty()) s += " none";
    for (const detail::steal_source& r : remotes)
      s += " " + std::to_string(node_ids_[r.node_index]) + " after " + std::to_string(r.delay_ns / 1000) + " us,";
    if (s.back() == ',') s.pop_back();
    s += "\n";
  }
  return s;
}

}  // namespace numaaff
