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
 * (with the default 50 us and a 10/20 matrix, 50 us; with 10/100, 450 us), only while that
 * node has no worker of its own outside a task (one that is searching, asleep or between two
 * tasks would take the work itself: remote nodes take only what the home node cannot start
 * now, so a parallel_for's blocks stay on their nodes when no node is short of workers), and
 * only when its queue is longer than running remote is worth: a distance is a relative memory
 * latency, so a task run at distance d costs about (d - 10) / 10 of a task time more, and the
 * last of q tasks queued for w busy workers waits about q / w task times; a thief takes when
 * q * 10 > w * (d - 10) (at 10/20: more than one task per worker queued). The rest, at most
 * one task per worker at distance 20, waits for its own node, unless the thief has been idle
 * for 20 delays: then the home node counts as held (a long task, or one blocked on a future
 * of its queued child) and its queue is served. For a node whose tasks placed by their data
 * (task_group's accesses) run longer than the delay, the delay of all its work is
 * (d - 10) / 10 of their recent run time instead (a running average), the remote cost that
 * rule assumes: a thief waits out what stealing would cost, and its 20 delays are
 * 20 * (d - 10) / 10 such task times. Once the node has finished none of them for that long,
 * the distance delay holds again. A thief that finds, when it takes a task, that the home
 * node has a worker free after all (it was held up between its look and its take) puts the
 * task back. A stolen task keeps its homenode, so its memory and, under `fork`, its children
 * go home. A worker that finds nothing spins for `spin` (one per two workers of a node; the
 * others do not spin) and then sleeps on a futex: an idle pool uses no CPU. Submitting wakes a
 * sleeping worker of the task's node, or, if that node has none, the nearest node's, which
 * then waits out its delay before stealing.
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
 * Where the parts live: this header is the facade (options, policies, the public calls); the
 * scheduling rules are a value in detail/steal_plan.hpp (table-tested without threads), the
 * mechanics in detail/scheduler.hpp, completion in detail/completion.hpp, task_group in
 * task_group.hpp and the index partition in partition.hpp.
 *
 * @code{.cpp}
 * numaaff::thread_pool pool;                       // one worker per allowed CPU
 * auto f = pool.submit(2, [] { return numaaff::current_node(); });   // runs on node 2
 * pool.parallel_for(0, n, [&](std::size_t i) { a[i] = 0; });  // node-contiguous blocks
 * @endcode
 */
#pragma once

#include "detail/dynamic_loop.hpp"
#include "detail/scheduler.hpp"
#include "detail/steal_plan.hpp"
#include "detail/text.hpp"
#include "detail/throw.hpp"
#include "homenode.hpp"
#include "memory.hpp"  // the umbrella, not one part: programs that include this header use all of it
#include "partition.hpp"
#include "task_group.hpp"
#include "topology.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {

/// How the homenode of work submitted without one is chosen (see the file comment).
enum class node_policy { fork, exec, round_robin };

/// How idle workers take work from other nodes.
enum class steal_mode {
  distance,    ///< remote nodes after the distance-proportional delay (the default)
  local,       ///< never across nodes: a node's work waits for that node's workers
  free,        ///< remote nodes at once, nearest first (plain work stealing)
  local_only [[deprecated("renamed steal_mode::local, as NUMAAFF_STEAL spells it")]] = local
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
                                              ///< (one per two workers of a node spins at all)
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

/// Counters of a pool since construction (each a sum of per-worker relaxed counters). Named
/// like next_touch_statistics and refusal_statistics: the struct is `*_statistics`, the call
/// that returns it `*stats()`.
struct thread_pool_statistics {
  std::uint64_t executed = 0;       ///< tasks run by workers, and by outside threads while they waited
  std::uint64_t stolen_local = 0;   ///< taken from a sibling's deque on the same node
  std::uint64_t stolen_remote = 0;  ///< taken from another node
  std::uint64_t sleeps = 0;         ///< times a worker went to sleep
};
using thread_pool_stats [[deprecated("renamed thread_pool_statistics")]] = thread_pool_statistics;

/**
 * A dynamic NUMA schedule for thread_pool::parallel_for: each node owns a part of the
 * iterations, its workers take chunks of it (guided: a share of what is left, never below
 * `grain`), and a worker whose node has nothing left helps the others, nearest first, from
 * the far end of their parts. Irregular iterations (an AMR block that costs 4x) are balanced
 * while each node keeps the front of its part, the data it started on.
 *
 * The part of a node is its static block (as the static parallel_for and a schedule(static)
 * first touch cut them), or, with following(array, bytes_per_index), the indices whose data
 * is on it: `pool.parallel_for(0, n, f, dynamic_schedule{64}.following(a, sizeof *a))` sends
 * index i to the node holding `a[i]`'s page, so after a next-touch phase or a move_to the loop
 * follows the data (data on no pool node goes to the nearest; unpopulated pages keep the
 * static owner).
 */
struct dynamic_schedule {
  std::size_t grain = 1;       ///< the smallest chunk, in iterations (> 0)
  const void* data = nullptr;  ///< see following()
  std::size_t stride = 0;      ///< bytes of `data` per index

  /// The part of a node: the indices i whose `array + i * bytes_per_index` is on it.
  dynamic_schedule& following(const void* array, std::size_t bytes_per_index) noexcept {
    data = array;
    stride = bytes_per_index;
    return *this;
  }
};

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
    sched_.check_process("thread_pool::submit");
    return submit_to(sched_.policy_node(), false, std::forward<F>(f));
  }
  /// Runs `f()` on a CPU of `homenode` (bound: never stolen by another node).
  /// @throws std::invalid_argument if `homenode` is not one of the pool's nodes.
  template <class F>
  auto submit(node_id homenode, F&& f) {
    sched_.check_process("thread_pool::submit");
    return submit_to(checked_node(homenode, "submit"), true, std::forward<F>(f));
  }

  /**
   * Runs `f()` near its data: its homenode is the node holding most of the range's pages
   * (data_node(), placement.hpp: one sampled page query, cached per thread while numaaff migrates
   * nothing, so repeated hints on the same data cost almost nothing), or the nearest pool node
   * to it (data on a memory-only node); the node policy's choice when the range is not
   * populated yet. Like OpenMP's `affinity` clause, a hint: the task is stealable after the
   * delay like any other, and it follows data that move_to, place_blocks or next touch moved.
   * The range need not be page-aligned. @return std::future of f's result (or exception).
   * @throws std::invalid_argument for a null addr with non-zero bytes, or a wrapping range.
   */
  template <class F>
  auto submit_near(const void* addr, std::size_t bytes, F&& f) {
    sched_.check_process("thread_pool::submit_near");
    return submit_to(detail::near_index(sched_, "thread_pool::submit_near", addr, bytes), false, std::forward<F>(f));
  }
  /// submit_near over a contiguous container or span (`std::data`, `std::size`).
  template <class Range, class F, class = decltype(std::data(std::declval<const Range&>()))>
  auto submit_near(const Range& data, F&& f) {
    return submit_near(std::data(data), std::size(data) * sizeof(*std::data(data)), std::forward<F>(f));
  }
  /**
   * Runs `f()` once every task submitted earlier to this pool with accesses that conflict with
   * `accesses` has finished, in the order the submit calls return, on the node of most of
   * their bytes (the rules of task_group's dataflow tasks, task_group.hpp). Allocates; never
   * blocks. @return std::future of f's result (or exception); broken_promise if the task was
   * discarded (cancel(), or a discarded predecessor).
   */
  template <class F>
  auto submit(std::initializer_list<data_access> accesses, F&& f) {
    return submit_flow(accesses.begin(), accesses.size(), std::forward<F>(f));
  }
  /// The same with accesses built at run time.
  template <class F>
  auto submit(const std::vector<data_access>& accesses, F&& f) {
    return submit_flow(accesses.data(), accesses.size(), std::forward<F>(f));
  }

  /// post() near the range's data (see submit_near).
  template <class F>
  void post_near(const void* addr, std::size_t bytes, F&& f) {
    sched_.check_process("thread_pool::post_near");
    sched_.enqueue(sched_.make_task(std::forward<F>(f), detail::near_index(sched_, "thread_pool::post_near", addr, bytes),
                                    false, nullptr));
  }

  /// Fire-and-forget submit: no future (cheaper); an exception is kept for wait() to rethrow.
  template <class F>
  void post(F&& f) {
    sched_.check_process("thread_pool::post");
    sched_.enqueue(sched_.make_task(std::forward<F>(f), sched_.policy_node(), false, nullptr));
  }
  template <class F>
  void post(node_id homenode, F&& f) {
    sched_.check_process("thread_pool::post");
    sched_.enqueue(sched_.make_task(std::forward<F>(f), checked_node(homenode, "post"), true, nullptr));
  }

  /**
   * Blocks until every task submitted so far, and every task those submit, has finished; then
   * rethrows the first exception a post()ed task threw since the last wait(). Tasks cancel()
   * discarded are not reported here (the caller of cancel() learnt their number): submit()'s
   * futures and task_groups report their own. Meanwhile the caller runs the tasks it posted
   * itself where a task_group's wait would (a thread outside a one-node pool on that node);
   * elsewhere it sleeps. Dataflow tasks that a thread holds back (task_group.hpp) start first.
   * @throws std::invalid_argument from a task of this pool, also one its caller runs while it
   * waits (it would wait for itself).
   */
  void wait();

  /**
   * Discards the tasks that have not started; running ones finish. Every discarded task is
   * reported where its result was expected: a submit() future holds
   * std::future_errc::broken_promise; the wait() of its task_group, and parallel_for and
   * for_each_node, throw std::system_error with std::errc::operation_canceled (unless a task
   * of theirs threw first: that exception is rethrown instead). Dataflow tasks still waiting
   * for predecessors, and dependents of discarded tasks, are discarded when they become ready.
   * @return how many queued tasks were discarded (the waiting ones are not counted).
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

  /**
   * Calls `f(i)` for each i in [first, last) (or `f(lo, hi)` per chunk) with a dynamic NUMA
   * schedule (dynamic_schedule): one loop task per worker, homed on its node; the workers of a
   * node take chunks of its part, then help the other nodes from the back of theirs, nearest
   * first (under steal_mode::local they do not help). Blocks until done (a worker caller helps);
   * a chunk that throws ends at the throw, every other chunk still runs, and the first
   * exception is rethrown. Allocates the parts (O(nodes), or one page query over the data's
   * blocks with following()).
   * @throws std::invalid_argument naming `grain` when it is 0, `stride` when following() got 0
   *         bytes per index, or `last` when the data of [first, last) would wrap the address
   *         space; std::system_error (operation_canceled) if cancel() discarded loop tasks and
   *         part of the loop was left undone (a chunk's exception is rethrown first), named
   *         "move_pages" if following()'s page query fails (a sandbox's refusal is no error: the
   *         parts are then the static ones).
   */
  template <class F>
  void parallel_for(std::size_t first, std::size_t last, F&& f, dynamic_schedule schedule);

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
  std::size_t worker_count() const noexcept { return sched_.workers().size(); }
  std::size_t workers_on(node_id n) const { return sched_.node_state(checked_node(n, "workers_on")).workers.size(); }
  /// The node of worker `i` and the CPU it is pinned to (-1: unbound).
  node_id worker_node(std::size_t i) const { return worker_at(i).node; }
  int worker_cpu(std::size_t i) const { return worker_at(i).cpu; }
  /// True if every worker is pinned to its CPU (false on synthetic topologies, with
  /// bind_workers = false, or where the kernel refused the binding).
  bool workers_bound() const noexcept { return sched_.all_workers_bound(); }
  node_policy policy() const noexcept { return options_.policy; }
  steal_mode steal() const noexcept { return options_.steal; }
  const topology& topo() const noexcept { return *topo_; }
  /// The remote-steal distance delay from a worker of `from` to work of `to` (zero for the
  /// same node); a node running long dataflow tasks is waited for longer (see the file comment).
  std::chrono::nanoseconds steal_delay(node_id from, node_id to) const;
  /// Remote nodes in the order a worker of `from` visits them.
  std::vector<node_id> steal_order(node_id from) const;
  thread_pool_statistics stats() const noexcept;
  /// A description of the pool (nodes, workers, CPUs, policy, stealing, delays).
  std::string to_string() const;

  /// The pool the calling thread works for, or nullptr.
  static const thread_pool* current() noexcept {
    return detail::this_worker.sched != nullptr ? static_cast<const thread_pool*>(detail::this_worker.sched->owner())
                                                : nullptr;
  }
  /// The calling worker's index in its pool, or -1 outside any pool's workers.
  static int current_worker_index() noexcept {
    return detail::this_worker.self != nullptr ? static_cast<int>(detail::this_worker.self->index) : -1;
  }


 private:
  friend detail::scheduler& detail::scheduler_of(thread_pool& pool) noexcept;

  template <class F>
  auto submit_to(std::size_t node_index, bool bound, F&& f) {
    using result = std::invoke_result_t<std::decay_t<F>>;
    std::packaged_task<result()> job(std::forward<F>(f));
    std::future<result> fut = job.get_future();
    sched_.enqueue(sched_.make_task(std::move(job), node_index, bound, nullptr));
    return fut;
  }

  template <class F>
  auto submit_flow(const data_access* a, std::size_t n, F&& f) {
    sched_.check_process("thread_pool::submit");
    using result = std::invoke_result_t<std::decay_t<F>>;
    std::packaged_task<result()> job(std::forward<F>(f));
    std::future<result> fut = job.get_future();
    flow_.run(detail::to_ranges(a, n), std::move(job));
    return fut;
  }

  static std::shared_ptr<const topology> topology_of(const thread_pool_options& o);
  static std::vector<node_id> pool_nodes(const thread_pool_options& o, const topology& t);
  detail::scheduler_config config_for(const std::vector<node_id>& nodes) const;
  std::size_t checked_node(node_id n, const char* fn) const;
  const detail::pool_worker& worker_at(std::size_t i) const;

  thread_pool_options options_;
  std::shared_ptr<const topology> topo_;
  std::vector<node_id> node_ids_;
  index_partition partition_;
  detail::flow_state flow_{sched_, nullptr};  // submits with accesses; outlives sched_'s final wait
  detail::scheduler sched_;  // last: its workers start at its construction
};

// ---- implementation ---------------------------------------------------------------------

namespace detail {
inline scheduler& scheduler_of(thread_pool& pool) noexcept { return pool.sched_; }
}  // namespace detail

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
    case steal_mode::local: return "local";
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
    if (s == "local") o.steal = steal_mode::local;
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
    out = t.cpu_nodes();
  } else {
    for (node_id n : o.nodes) {
      if (!t.has_node(n))
        detail::throw_invalid_argument("thread_pool: node " + std::to_string(n) + " is not in the topology (" +
                                       detail::format_list(t.nodes()) + ")");
      if (!t.has_cpus(n))
        detail::throw_invalid_argument("thread_pool: node " + std::to_string(n) + " has no CPU this process may use");
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    std::sort(out.begin(), out.end());
  }
  if (out.empty()) detail::throw_invalid_argument("thread_pool: no node with a usable CPU");
  return out;
}

inline std::size_t thread_pool::checked_node(node_id n, const char* fn) const { return sched_.checked_node(n, fn); }

inline const detail::pool_worker& thread_pool::worker_at(std::size_t i) const {
  if (i >= sched_.workers().size())
    detail::throw_invalid_argument("thread_pool: worker " + std::to_string(i) + " out of range (" +
                                   std::to_string(sched_.workers().size()) + " workers)");
  return *sched_.workers()[i];
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
  for (const detail::steal_source& r : sched_.plan().remotes(checked_node(from, "steal_order"))) out.push_back(node_ids_[r.node_index]);
  return out;
}

inline std::string thread_pool::to_string() const {
  const std::size_t workers = sched_.workers().size();
  std::string s = "thread_pool: " + std::to_string(workers) + " workers on " + std::to_string(node_ids_.size()) +
                  " node" + (node_ids_.size() == 1 ? "" : "s") + ", policy " + numaaff::to_string(options_.policy) +
                  ", steal " + numaaff::to_string(options_.steal) +
                  (options_.steal == steal_mode::distance ? " (" + std::to_string(options_.steal_delay.count()) + " us per 10 distance units)" : "") +
                  ", workers " + (workers_bound() ? "bound" : "not bound") + "\n";
  for (std::size_t ni = 0; ni < node_ids_.size(); ++ni) {
    const detail::pool_node& np = sched_.node_state(ni);
    std::vector<int> cpus;
    for (const detail::pool_worker* w : np.workers)
      if (w->cpu >= 0) cpus.push_back(w->cpu);
    s += "node " + std::to_string(np.node) + ": " + std::to_string(np.workers.size()) +
         (np.workers.size() == 1 ? " worker" : " workers") +
         (cpus.empty() ? std::string() : " on cpus " + detail::format_list(cpus)) + "; steals from";
    const std::vector<detail::steal_source>& remotes = sched_.plan().remotes(ni);
    if (remotes.empty()) s += " none";
    for (const detail::steal_source& r : remotes)
      s += " " + std::to_string(node_ids_[r.node_index]) + " after " + std::to_string(r.delay_ns / 1000) + " us,";
    if (s.back() == ',') s.pop_back();
    s += "\n";
  }
  return s;
}


inline detail::scheduler_config thread_pool::config_for(const std::vector<node_id>& nodes) const {
  const topology& t = *topo_;
  detail::scheduler_config c(detail::steal_plan(nodes, t.nodes(), [&t](node_id a, node_id b) { return t.distance(a, b); },
                                               local_distance, options_.steal == steal_mode::local,
                                               options_.steal == steal_mode::free, options_.steal_delay));
  const bool bind = options_.bind_workers && t.is_this_system();
  for (node_id n : nodes) {
    const std::vector<int> cpus = t.cpus_of(n);
    const std::size_t count = options_.threads_per_node > 0 ? static_cast<std::size_t>(options_.threads_per_node) : cpus.size();
    std::vector<int> workers;
    for (std::size_t k = 0; k < count; ++k) workers.push_back(bind ? cpus[k % cpus.size()] : -1);
    c.worker_cpus.push_back(std::move(workers));
  }
  switch (options_.policy) {
    case node_policy::fork: c.policy = detail::home_choice::fork; break;
    case node_policy::exec: c.policy = detail::home_choice::exec; break;
    case node_policy::round_robin: c.policy = detail::home_choice::round_robin; break;
  }
  c.spin = options_.spin;
  c.kernel_nodes = t.is_this_system();
  c.outside_threads_help = nodes.size() == 1 && detail::kernel_nodes().size() == 1;
  c.homenode = [] { return this_homenode(); };
  c.current_node = []() noexcept {
    std::error_code ec;
    const node_id n = numaaff::current_node(ec);
    return ec ? -1 : n;
  };
  c.owner = this;
  return c;
}

inline thread_pool::thread_pool(const thread_pool_options& options)
    : options_(options),
      topo_(topology_of(options)),
      node_ids_(pool_nodes(options, *topo_)),
      partition_({}),
      sched_(config_for(node_ids_)) {
  std::vector<node_id> worker_nodes;
  for (const auto& w : sched_.workers()) worker_nodes.push_back(w->node);
  partition_ = index_partition(std::move(worker_nodes));
}

inline thread_pool::~thread_pool() = default;  // the scheduler finishes the work and joins

inline void thread_pool::wait() {
  sched_.check_process("thread_pool::wait");
  if (sched_.in_own_task())
    detail::throw_invalid_argument("thread_pool::wait: called from one of the pool's tasks, it would wait for itself "
                                   "(use a task_group)");
  sched_.wait_all();
  if (std::exception_ptr e = sched_.done().all().take_error()) std::rethrow_exception(e);
}

inline std::size_t thread_pool::cancel() {
  sched_.check_process("thread_pool::cancel");
  return sched_.cancel();
}

template <class F>
void thread_pool::parallel_for(std::size_t first, std::size_t last, F&& f, std::size_t grain) {
  constexpr bool ranged = std::is_invocable_v<F&, std::size_t, std::size_t>;
  static_assert(ranged || std::is_invocable_v<F&, std::size_t>, "parallel_for: f must take (index) or (first, last)");
  sched_.check_process("thread_pool::parallel_for");
  detail::group_scope g(sched_);
  for (const index_block& b : partition_.task_blocks(first, last, grain)) {
    g.run([&f, lo = b.first, hi = b.last] {
      if constexpr (ranged) {
        f(lo, hi);
      } else {
        for (std::size_t i = lo; i < hi; ++i) f(i);
      }
    }, sched_.index_of(b.node), false);
  }
  g.wait("thread_pool::parallel_for: blocks discarded by thread_pool::cancel()");
}

namespace detail {

/// The parts of a dynamic loop over [first, last) that follows `s.data`: each data block
/// (for_each_data_block) to the pool node holding it (data elsewhere to the nearest pool
/// node), unknown pages and logical pools to `static_owner(index)`; consecutive blocks of a
/// node form one segment.
template <class StaticOwner>
std::vector<std::vector<loop_chunk>> data_parts(scheduler& sched, std::size_t first, std::size_t last, const dynamic_schedule& s,
                                                StaticOwner&& static_owner) {
  std::vector<std::vector<loop_chunk>> parts(sched.plan().node_count());
  for_each_data_block("thread_pool::parallel_for", s.data, s.stride, first, last, s.grain, [&](std::size_t lo, std::size_t hi, int node) {
    const std::size_t near = sched.nearest_index(node);
    const std::size_t ni = near != steal_plan::no_node ? near : static_owner(lo);
    std::vector<loop_chunk>& part = parts[ni];
    if (!part.empty() && part.back().last == lo) part.back().last = hi;
    else part.push_back({lo, hi});
  });
  return parts;
}

}  // namespace detail

template <class F>
void thread_pool::parallel_for(std::size_t first, std::size_t last, F&& f, dynamic_schedule s) {
  constexpr bool ranged = std::is_invocable_v<F&, std::size_t, std::size_t>;
  static_assert(ranged || std::is_invocable_v<F&, std::size_t>, "parallel_for: f must take (index) or (first, last)");
  if (s.grain == 0) detail::throw_invalid_argument("thread_pool::parallel_for: grain is 0 (a chunk needs at least one iteration)");
  if (s.data != nullptr && s.stride == 0)
    detail::throw_invalid_argument("thread_pool::parallel_for: stride is 0 (following() needs the bytes per index)");
  sched_.check_process("thread_pool::parallel_for");
  if (last <= first) return;
  const std::size_t count = node_ids_.size();
  const std::vector<index_block> statics = partition_.node_blocks(first, last);
  std::vector<std::vector<detail::loop_chunk>> parts(count);
  if (s.data == nullptr) {
    for (const index_block& b : statics)
      if (b.last > b.first) parts[sched_.index_of(b.node)].push_back({b.first, b.last});
  } else {
    parts = detail::data_parts(sched_, first, last, s, [&](std::size_t i) {
      return sched_.index_of(partition_.worker_nodes()[static_part_of(last - first, partition_.workers(), i - first)]);
    });
  }
  std::vector<std::size_t> takers(count);
  std::vector<std::vector<std::size_t>> helps(count);
  for (std::size_t ni = 0; ni < count; ++ni) {
    takers[ni] = sched_.node_state(ni).workers.size();
    for (const auto& r : sched_.plan().remotes(ni)) helps[ni].push_back(r.node_index);
  }
  detail::dynamic_loop loop(std::move(parts), std::move(takers), std::move(helps), s.grain);
  // A chunk that throws does not stop the loop: the first exception is kept and rethrown.
  std::exception_ptr error;
  std::atomic_flag failed = ATOMIC_FLAG_INIT;
  detail::group_scope g(sched_);
  // One loop task per worker, homed on its node but not bound to it: a worker of another node
  // that takes it (its own node's workers all busy) runs its own node's part first, like any
  // worker, so no node's busy workers hold the loop up.
  for (std::size_t ni = 0; ni < count; ++ni) {
    for (std::size_t w = 0; w < sched_.node_state(ni).workers.size(); ++w) {
      g.run([this, &loop, &f, &error, &failed, ni] {
        // The worker runs its own node's part first, so that is the homenode its iterations
        // see (this_homenode, local allocators), not the node the task was queued on.
        const std::size_t mine = sched_.worker_node_index(ni);
        const detail::homenode_state queued_as = detail::thread_home;
        detail::thread_home.node = node_ids_[mine];
        detail::forget_current_node();  // its local blocks follow the new homenode
        struct restore {
          detail::homenode_state saved;
          ~restore() { detail::thread_home = saved; }
        } const restore_home{queued_as};
        loop.run(mine, [&](std::size_t lo, std::size_t hi, std::size_t) {
          try {
            if constexpr (ranged) {
              f(lo, hi);
            } else {
              for (std::size_t i = lo; i < hi; ++i) f(i);
            }
          } catch (...) {
            if (!failed.test_and_set(std::memory_order_acq_rel)) error = std::current_exception();
          }
        });
      }, ni, false);
    }
  }
  try {
    g.wait("thread_pool::parallel_for: loop tasks discarded by thread_pool::cancel()");
  } catch (const std::system_error& e) {
    // cancel() discarded loop tasks: an error only if their part was left undone.
    if (error) std::rethrow_exception(error);
    bool undone = false;
    for (std::size_t ni = 0; ni < count; ++ni) undone = undone || loop.left(ni) != 0;
    if (undone || e.code() != std::errc::operation_canceled) throw;
  }
  if (error) std::rethrow_exception(error);
}

template <class F>
void thread_pool::for_each_node(F&& f) {
  sched_.check_process("thread_pool::for_each_node");
  detail::group_scope g(sched_);
  for (std::size_t ni = 0; ni < node_ids_.size(); ++ni) g.run([&f, n = node_ids_[ni]] { f(n); }, ni, true);
  g.wait("thread_pool::for_each_node: calls discarded by thread_pool::cancel()");
}

inline thread_pool_statistics thread_pool::stats() const noexcept {
  thread_pool_statistics s;
  for (const auto& w : sched_.workers()) {
    s.executed += w->executed.load(std::memory_order_relaxed);
    s.stolen_local += w->stolen_local.load(std::memory_order_relaxed);
    s.stolen_remote += w->stolen_remote.load(std::memory_order_relaxed);
    s.sleeps += w->sleeps.load(std::memory_order_relaxed);
  }
  for (std::size_t ni = 0; ni < node_ids_.size(); ++ni) s.executed += sched_.node_state(ni).helped.load(std::memory_order_relaxed);
  return s;
}

}  // namespace numaaff
