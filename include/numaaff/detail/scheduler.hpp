// The scheduler behind thread_pool: workers, their deques, the node queues, wake-ups and
// sleeping, the run loop, helping waiters and cancel. It decides nothing itself: which nodes,
// which CPUs, whom to steal from and when, whom to wake and which node a policy picks all come
// from the steal plan (steal_plan.hpp); counting tasks in and out of groups and waiting for
// them is completion's (completion.hpp). thread_pool (thread_pool.hpp) builds the
// configuration from a topology and the options and is the public face.
//
// Queues. Each worker owns a work-stealing deque (it pushes and pops at the bottom, others
// steal from the top). Each node has a queue for work sent to it from elsewhere and one for
// work bound to it; a worker of the node takes a batch from the former into its deque. A
// thread outside the pool submits into a deque of its own (an external slot, like oneTBB's
// slot for an application thread), claimed on its first submission.
//
// Look order of an idle worker: its deque, its node's queues, its siblings' deques and the
// node's external slots, then the remote nodes the plan lists, as the steal rule allows.
// Waking: a submission wakes a sleeper of the task's node unless one is spinning, else the
// nearest node (plan.wake_after) that has a sleeper, which then waits out its delay.
#pragma once

#include "../errors.hpp"
#include "block_cache.hpp"
#include "completion.hpp"
#include "counter_segment.hpp"
#include "counters.hpp"
#include "futex.hpp"
#include "homenode.hpp"
#include "pinning.hpp"
#include "steal_plan.hpp"
#include "text.hpp"
#include "throw.hpp"
#include "work_deque.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace numaaff::detail {

struct pool_task {
  virtual ~pool_task() = default;
  virtual void execute() = 0;
  /// The task has ended (ran, threw, or was dropped): what owns it lets it go. A dataflow task
  /// stays until its tracker no longer refers to it (dataflow.hpp).
  virtual void dispose() noexcept { delete this; }
  int home = -1;
  bool bound = false;  // runs on its homenode's workers only
  bool bypasses = false;  // its dispose() releases successors that may run next (bypass_frame)
  bool timed = false;  // placed by its data: its run time sets its node's steal delay (task_ns)
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
  pool_worker(std::size_t i, std::size_t ni, int n, int c) : index(i), node_index(ni), node(n), cpu(c) {}
  std::size_t index;
  std::size_t node_index;
  int node;
  int cpu;  // -1: not bound
  work_deque<pool_task*> deque;
  std::thread thread;
  std::atomic<bool> busy{false};  // running a task: steers remote thieves (has_idle_workers)
  std::atomic<std::uint64_t> executed{0}, stolen_local{0}, stolen_remote{0}, sleeps{0};
  // For the live counters (counters.hpp): idle time, added once per idle period (one clock
  // read when work is found after the idle clock started), and the start of the current one.
  // idle_seq is odd while the worker updates the two (a reader retries: no period counted twice).
  std::atomic<std::uint64_t> idle_ns{0}, idle_from{0}, idle_seq{0};
  std::uint64_t started_ns = monotonic_ns();
  /// Its idle time up to `now`, read consistently from another thread.
  std::uint64_t idle_until(std::uint64_t now) const noexcept {
    for (;;) {
      const std::uint64_t s = idle_seq.load(std::memory_order_acquire);
      const std::uint64_t ns = idle_ns.load(std::memory_order_relaxed), from = idle_from.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s % 2 == 0 && idle_seq.load(std::memory_order_relaxed) == s) return ns + (from != 0 && now > from ? now - from : 0);
    }
  }
  /// The worker's own update of the idle fields (one writer).
  template <class F>
  void update_idle(F&& f) noexcept {
    const std::uint64_t s = idle_seq.load(std::memory_order_relaxed);
    idle_seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    f();
    idle_seq.store(s + 2, std::memory_order_release);
  }
};

struct pool_node {
  int node = -1;
  std::vector<pool_worker*> workers;
  spin_lock lock;
  std::deque<pool_task*> queue;        // stealable work sent to this node
  std::deque<pool_task*> bound_queue;  // work that must run here
  // Sizes of the two queues, stored under the lock, read without it (plain stores: no
  // contended read-modify-write per task).
  std::atomic<std::int64_t> in_queue{0};
  std::atomic<std::int64_t> in_bound_queue{0};
  std::atomic<int> spinning{0};  // workers searching before they sleep: no wake-up needed
  // Tasks its workers took from each pool node (by index), for the live counters' matrix.
  std::unique_ptr<std::atomic<std::uint64_t>[]> stolen_from;
  int max_spinners = 1;           // see max_spinners_of
  // Under node_policy::exec only: tasks homed here, queued or running, counted from before
  // they are queued until after they finish, so that exec never reads a task as gone while a
  // worker moves it between queues or has taken it but not yet started it.
  std::atomic<std::int64_t> unfinished{0};
  // Tasks outside threads ran here while they waited (help_until_done): counted as its
  // workers' are, in tasks_run and stats().executed.
  std::atomic<std::uint64_t> helped{0};
  // The recent run time of its data-placed (timed) tasks, a running average; 0 when none ran.
  // What a task waiting here costs, for thieves' delays (steal_plan::task_scaled_delay).
  std::atomic<std::uint64_t> task_ns{0};
  std::atomic<std::uint64_t> task_end_ns{0};  // when the last of them finished (monotonic_ns)
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

class scheduler;

/**
 * Ready tasks that a thread outside the pool holds back while it goes on submitting (a
 * task_group's dataflow tasks: dataflow.hpp says why), listed with the scheduler while it
 * holds any. The holder's wait queues them. So that a held task starts even if its holder
 * never waits, an idle worker watches the list (one at a time, in timed sleeps: the first
 * hold wakes a sleeper, and a watcher that takes work wakes another; a worker that spun or
 * helped a waiter for a whole period looks too) and starts the tasks of a holder whose group
 * saw no run() for a hold period, or that has held them for ten.
 */
class held_work {
 public:
  /// Tasks held at most: a full holder queues them all.
  static constexpr std::size_t capacity = 32;
  /// Queues tasks that the scheduler's hold(), take_held() or release_held() took out (they
  /// are counted in their group, which therefore keeps this object alive until they end).
  virtual void start_held(pool_task** tasks, std::size_t n) noexcept = 0;
  /// Some task is held (a hint for the holder's own thread: others may take them meanwhile).
  bool holds_any() const noexcept { return count_.load(std::memory_order_relaxed) != 0; }
  /// The holder submitted something (the idle workers' sign that it is still busy).
  void note_activity() noexcept { activity_.store(activity_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

 protected:
  held_work() = default;
  ~held_work() = default;

 private:
  friend class scheduler;
  // Under the scheduler's held_lock_; listed there exactly while count_ != 0.
  pool_task* tasks_[capacity];
  std::atomic<std::size_t> count_{0};
  held_work* next_ = nullptr;
  held_work* prev_ = nullptr;
  std::atomic<std::uint64_t> activity_{0};  // a racing lost update still changes it
  std::uint64_t activity_seen_ = 0;  // under held_lock_: activity_ when a worker last looked,
  std::uint64_t seen_at_ = 0;        // and when (0: not yet)
  std::uint64_t held_at_ = 0;        // under held_lock_: when it was listed
};

/// Where the thread that runs a dataflow task keeps the task its release makes ready to run
/// next (scheduler::try_bypass), while the task's tracker releases its successors and only
/// then: `only` (null: any) is the group a helping waiter waits for.
struct bypass_frame {
  const scheduler* sched;
  const group_state* only;
  pool_task* next = nullptr;
};
inline thread_local bypass_frame* bypass_at = nullptr;

/// A scheduler whose task an outside thread runs while it waits (help_until_done), on the
/// thread's stack; `outer` the one it was helping when it started (nested pools).
struct help_frame {
  const scheduler* sched;
  const help_frame* outer;
};

/// The scheduler a thread works for, if any, and which worker it is; and the innermost
/// scheduler whose task an outside thread runs while it waits, if any.
struct worker_context {
  const scheduler* sched = nullptr;
  pool_worker* self = nullptr;
  const help_frame* helping = nullptr;
};
inline thread_local worker_context this_worker{};

/// Idle workers of a node that may spin at once: one per two workers, at least one. One
/// spinner catches new work without a wake-up and wakes a sleeper when it finds more; more
/// spinners would only take CPUs from the threads running tasks (on a machine with as many
/// workers as CPUs, from the waiting caller above all: a fork-join of 20 us blocks on 2 CPUs
/// took 1.5x OpenMP's time while both idle workers spun).
constexpr int max_spinners_of(std::size_t workers) noexcept {
  return workers / 2 > 1 ? static_cast<int>(workers / 2) : 1;  // woken sleepers chain: see worker_main
}

/// How the homenode of work submitted without one is chosen (numaaff::node_policy).
enum class home_choice { fork, exec, round_robin };

/// Everything the scheduler is built from; thread_pool derives it from a topology and options.
struct scheduler_config {
  explicit scheduler_config(steal_plan p) : plan(std::move(p)) {}
  steal_plan plan;
  /// Per pool node index: one entry per worker, the CPU to pin it to or -1 (unbound).
  std::vector<std::vector<int>> worker_cpus;
  home_choice policy = home_choice::fork;
  std::chrono::microseconds spin{50};
  /// The plan's nodes are this machine's (a task's homenode may place memory), not logical
  /// nodes of a synthetic or XML topology.
  bool kernel_nodes = true;
  /// A one-node pool on a one-node machine: an outside thread that waits may run its own
  /// submissions (it cannot be moved off their node: there is no other).
  bool outside_threads_help = false;
  /// The calling thread's homenode (fork policy); may throw.
  int (*homenode)() = nullptr;
  /// The node the caller runs on, -1 if unknown.
  int (*current_node)() noexcept = nullptr;
  /// The object thread_pool::current() returns for this scheduler's workers.
  const void* owner = nullptr;
};

class scheduler final : public counter_source {
 public:
  /// Starts the workers. @throws std::system_error if a thread cannot be created (the ones
  /// started are stopped and joined first).
  explicit scheduler(scheduler_config config);
  /// Finishes every task (including what they submit), then joins the workers; in a forked
  /// child returns at once (see the destructor's comment).
  ~scheduler();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  template <class F>
  pool_task* make_task(F&& f, std::size_t node_index, bool bound, group_state* group) {
    auto* t = new fn_task<std::decay_t<F>>(std::forward<F>(f));
    t->home = config_.plan.node(node_index);
    t->bound = bound;
    t->group = group;
    return t;
  }
  /// Counts `t` into its group and queues it where it should run; wakes whom the plan says.
  /// If a queue cannot grow, disposes of `t`, counts it out again and throws.
  void enqueue(pool_task* t);
  /// Queues `t`, already counted into its group (a dataflow task that became ready). If a
  /// queue cannot grow it throws, leaving `t` and its count to the caller.
  void queue(pool_task* t);
  /// The node index for work submitted without a homenode (the policy).
  std::size_t policy_node();
  /// The node index for work near data on kernel node `data_node`: that node, else the
  /// nearest pool node (a memory-only node's data goes to its nearest CPU node); the policy's
  /// choice when the node is unknown (-1, or outside the process's topology) or the pool's
  /// nodes are logical.
  std::size_t near_node(int data_node) {
    const std::size_t i = nearest_index(data_node);
    return i != steal_plan::no_node ? i : policy_node();
  }
  /// Of node indices `candidates[0 .. count)` (count > 0), the one with the least work per
  /// worker: its tasks queued plus its workers running one. The worker finishing the task that
  /// made this one ready counts as busy: a tied task then goes to another tied node and runs
  /// beside it, rather than piling onto the releasing node while a lighter node's thieves wait
  /// to take tiles away from their data. A snapshot: the answer may be stale at once, which
  /// costs only balance. Ties: the earliest candidate.
  std::size_t least_busy(const std::size_t* candidates, std::size_t count) const noexcept {
    return steal_plan::least_loaded_of(
        count, [&](std::size_t k) { return candidates[k]; },
        [&](std::size_t i) {
          std::size_t busy = 0;
          for (const pool_worker* w : nodes_[i]->workers) busy += w->busy.load(std::memory_order_relaxed) ? 1u : 0u;
          return queued_on(i) + busy;
        },
        [&](std::size_t i) { return nodes_[i]->workers.size(); });
  }
  /// The pool node index nearest to kernel node `data_node`; steal_plan::no_node when the node
  /// is unknown (-1, outside the topology) or the pool's nodes are logical.
  std::size_t nearest_index(int data_node) const noexcept {
    return data_node >= 0 && config_.kernel_nodes ? config_.plan.nearest(data_node) : steal_plan::no_node;
  }
  /// The node index of the pool worker running the calling thread; `otherwise` for any other thread.
  std::size_t worker_node_index(std::size_t otherwise) const noexcept {
    return is_own_worker() ? this_worker.self->node_index : otherwise;
  }
  /// Runs tasks (a worker: of its node; an outside thread: its own submissions, where
  /// config.outside_threads_help) until `g` has nothing outstanding.
  void help_until_done(group_state& g);
  /// Sleeps until every task, and every group's, has finished (the pool-wide wait). Tasks
  /// held back by any thread are queued first.
  void wait_all() {
    release_all_held();
    help_until_done(done_.all());
  }
  /// Holds ready task `t` (counted in its group) in `w`, listing `w` for idle workers (see
  /// held_work). A full `w` gives them all back instead, in `out`, for the caller to start.
  /// @return how many.
  std::size_t hold(held_work& w, pool_task* t, pool_task** out) noexcept;
  /// Takes every task `w` holds into `out` (held_work::capacity of room). @return how many.
  std::size_t take_held(held_work& w, pool_task** out) noexcept;
  /// Starts the tasks of one listed held_work; `due_only`: only of one whose group saw no
  /// run() for a hold period, or that has held them for ten. @return false if none was started.
  bool release_held(bool due_only = false) noexcept;
  /// Wakes a sleeper to watch held tasks, unless a worker watches.
  void wake_watcher() noexcept;
  /// Starts the tasks of every held_work listed now (not of those listed meanwhile: a thread
  /// that keeps holding cannot keep the caller here).
  void release_all_held() noexcept {
    for (int k = holders_.load(std::memory_order_seq_cst); k > 0 && release_held(); --k) {
    }
  }
  /// The node policy is fork: a task's node is its submitter's homenode.
  bool fork_policy() const noexcept { return config_.policy == home_choice::fork; }
  /// How often the watching worker looks at held tasks while some are held: four spin times,
  /// within 50 us and 1 ms.
  std::uint64_t hold_period_ns() const noexcept {
    const std::uint64_t spin = spin_ns();
    return spin >= 250000 ? 1000000 : std::max<std::uint64_t>(4 * spin, 50000);
  }
  /// While this thread's tracker releases the successors of a dataflow task it ran: true if
  /// `t` (ready, counted) is to run next on this thread, unqueued, once that task has ended
  /// (oneTBB's task bypass: a chain then runs on one thread, without a cache line crossing
  /// CPUs per task). One per task, of this scheduler, of this thread's node, never a bound
  /// task; a helping waiter takes only tasks of the group it waits for.
  bool try_bypass(pool_task* t) noexcept;
  /// Discards every task that has not started. @return how many.
  std::size_t cancel();
  /// How many cancel() calls have begun: a dataflow task registered before one is discarded
  /// when it becomes ready (it had not started).
  std::uint64_t cancel_generation() const noexcept { return cancels_.load(std::memory_order_acquire); }

  const steal_plan& plan() const noexcept { return config_.plan; }
  std::size_t index_of(int node) const noexcept { return config_.plan.index_of(node); }
  /// The index of pool node `n`. @throws std::invalid_argument naming `fn` otherwise.
  std::size_t checked_node(int n, const char* fn) const {
    const std::size_t i = index_of(n);
    if (i == steal_plan::no_node)
      throw_invalid_argument(std::string("thread_pool::") + fn + ": node " + std::to_string(n) +
                             " is not one of the pool's nodes (" + format_list(config_.plan.nodes()) + ")");
    return i;
  }
  completion& done() noexcept { return done_; }
  /// Counts a new task into `g` (null: the pool-wide group) before it is queued, and one out
  /// of it after it ran or was discarded (completion's rules), on the calling thread's counts.
  void count_started(group_state* g) noexcept { done_.started(g, counts_index(own_worker())); }
  void count_finished(group_state* g) noexcept { done_.finish(g, counts_index(own_worker())); }
  const std::vector<std::unique_ptr<pool_worker>>& workers() const noexcept { return workers_; }
  const pool_node& node_state(std::size_t i) const noexcept { return *nodes_[i]; }
  bool all_workers_bound() const noexcept { return bound_; }
  /// The pool's nodes are this machine's (not logical nodes of another topology).
  bool kernel_nodes() const noexcept { return config_.kernel_nodes; }
  const void* owner() const noexcept { return config_.owner; }
  bool is_own_worker() const noexcept { return this_worker.sched == this; }
  /// The pool worker running the calling thread; nullptr for any other thread.
  pool_worker* own_worker() const noexcept { return is_own_worker() ? this_worker.self : nullptr; }
  /// The counts in done_ of worker `w` (nullptr: those of every thread but the workers).
  static std::size_t counts_index(const pool_worker* w) noexcept { return w != nullptr ? w->index : completion::any_thread; }
  /// The calling thread runs one of this scheduler's tasks: as a worker, or an outside thread
  /// helping while it waits.
  bool in_own_task() const noexcept {
    if (is_own_worker()) return true;
    for (const help_frame* f = this_worker.helping; f != nullptr; f = f->outer)
      if (f->sched == this) return true;
    return false;
  }
  /// True in a child forked after the scheduler was made: its workers are the parent's.
  bool forked() const noexcept { return forks_seen.load(std::memory_order_relaxed) != forks_; }
  /// Throws in such a child, before the call allocates a task or touches a queue (a worker of
  /// the parent may have held a queue's lock at the fork, and none would run the task).
  void check_process(const char* fn) const {
    if (forked()) throw_system_error(errc::used_after_fork, fn);
  }

 private:
  /// External slots per scheduler: outside threads beyond these use the node queues.
  static constexpr std::size_t external_slots = 8;
  /// Tasks at most that a worker takes from its node's queue into its deque at once.
  static constexpr std::size_t queue_batch = 32;

  std::uint64_t spin_ns() const noexcept { return static_cast<std::uint64_t>(saturated_ns(config_.spin)); }
  void push_to_queue(pool_node& n, pool_task* t);
  void wake_for(std::size_t node_index, bool bound) noexcept;
  /// Puts `t`, taken off node `ni`'s work by a thread that must not run it, back in that
  /// node's queue and wakes a worker there. False when the queue cannot grow: the caller keeps
  /// the task (run elsewhere rather than lost).
  bool send_back(std::size_t ni, pool_task* t) noexcept;
  /// The next task for worker `self`. Sets `deadline` to when a remote node's delay expires.
  pool_task* find_task(pool_worker& self, std::uint64_t idle_since, std::uint64_t& deadline);
  /// The calling outside thread's slot, claimed on first use, if it holds node `ni`'s work.
  external_slot* own_slot(std::size_t ni) noexcept;
  /// A task stolen from node `ni`'s workers (other than `self`) or outside slots.
  pool_task* steal_from(std::size_t ni, const pool_worker* self);
  /// Tasks queued on node `ni` (its queue, its workers' deques, the outside slots homed
  /// there), counted until there are `enough`.
  std::size_t queued_on(std::size_t ni, std::size_t enough = SIZE_MAX) const noexcept;
  bool has_stealable(std::size_t ni) const noexcept { return queued_on(ni, 1) != 0; }
  /// A node's workers and tasks queued, for the steal rule.
  home_backlog backlog_of(std::size_t ni) const noexcept { return {nodes_[ni]->workers.size(), queued_on(ni)}; }
  /// Some worker of node `ni` is not running a task, i.e. free to take that node's work.
  bool has_idle_workers(std::size_t ni) const noexcept;
  /// One task from node `n`'s queues; a worker of the node (`into`) takes a batch into its deque.
  pool_task* take_from_queues(pool_node& n, bool include_bound, pool_worker* into);
  /// Runs `t`, then the tasks bypass hands it (of group `only` when not null: see bypass_frame).
  void run_task(pool_task* t, pool_worker* self, const group_state* only = nullptr,
                held_finishes* held = nullptr) noexcept;
  /// Under held_lock_: take_held's work.
  std::size_t take_locked(held_work& w, pool_task** out) noexcept;
  void worker_main(pool_worker& w);
  void add_counters(std::uint64_t* rows, std::uint64_t* steals, std::size_t slots, const std::vector<int>& slot_of,
                    std::uint64_t now) const noexcept override;
  /// Adds the pool's totals to node_events when it ends (under the registry's lock).
  void retire_counters() const noexcept;

  static std::size_t worker_count(const scheduler_config& c) noexcept {
    std::size_t n = 0;
    for (std::size_t ni = 0; ni < c.plan.node_count(); ++ni) n += c.worker_cpus[ni].size();
    return n;
  }

  scheduler_config config_;
  std::vector<std::unique_ptr<pool_node>> nodes_;
  std::vector<std::unique_ptr<pool_worker>> workers_;
  // Read on every submit (check_process), never written: kept off the lines of done_, which
  // every task start and finish writes (sharing one cost fib(30) 40% here).
  const std::uint64_t id_ = next_pool_id.fetch_add(1, std::memory_order_relaxed);
  const unsigned forks_ = fork_count();  // registers the fork counter, then reads it
  alignas(64) completion done_{worker_count(config_)};
  alignas(64) std::vector<std::shared_ptr<external_slot>> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> round_robin_{0};
  std::atomic<std::uint64_t> cancels_{0};
  bool bound_ = false;
  // Threads holding ready tasks (hold()): read by idle workers, written once per batch held.
  alignas(64) spin_lock held_lock_;
  held_work* held_ = nullptr;
  std::atomic<int> holders_{0};
  std::atomic<bool> watching_{false};  // an idle worker sleeps timed to look at held tasks
};

/**
 * A set of tasks whose end one thread waits for (a task_group, a parallel_for): its tasks are
 * counted in its group, and its destructor waits for those still running, so tasks that refer
 * to the caller's frame never outlive it, even when the caller leaves by an exception.
 */
class group_scope {
 public:
  explicit group_scope(scheduler& s) noexcept : sched_(s) {}
  ~group_scope() {
    if (!sched_.forked()) sched_.help_until_done(state_);  // in a forked child nothing would finish
    state_.take_error();
  }
  group_scope(const group_scope&) = delete;
  group_scope& operator=(const group_scope&) = delete;

  /// Queues f() with homenode `node_index` (bound: never runs elsewhere). If copying f or
  /// allocating throws, the group is as before.
  template <class F>
  void run(F&& f, std::size_t node_index, bool bound) {
    sched_.enqueue(sched_.make_task(std::forward<F>(f), node_index, bound, &state_));
  }
  /// Helps until every task has finished; rethrows the first exception, else reports tasks
  /// cancel() discarded (std::errc::operation_canceled, `what` naming the wait).
  void wait(const char* what) {
    sched_.help_until_done(state_);
    state_.rethrow(what);
  }
  scheduler& sched() const noexcept { return sched_; }
  group_state& state() noexcept { return state_; }

 private:
  scheduler& sched_;
  group_state state_;
};

// ---- implementation ---------------------------------------------------------------------

inline scheduler::scheduler(scheduler_config config) : config_(std::move(config)) {
  for (std::size_t ni = 0; ni < config_.plan.node_count(); ++ni) {
    auto n = std::make_unique<pool_node>();
    n->node = config_.plan.node(ni);
    n->max_spinners = max_spinners_of(config_.worker_cpus[ni].size());
    for (int cpu : config_.worker_cpus[ni]) {
      workers_.push_back(std::make_unique<pool_worker>(workers_.size(), ni, n->node, cpu));
      n->workers.push_back(workers_.back().get());
    }
    nodes_.push_back(std::move(n));
  }
  for (auto& n : nodes_) {
    n->stolen_from.reset(new std::atomic<std::uint64_t>[nodes_.size()]);
    for (std::size_t k = 0; k < nodes_.size(); ++k) n->stolen_from[k].store(0, std::memory_order_relaxed);
  }
  for (std::size_t k = 0; k < external_slots; ++k) slots_.push_back(std::make_shared<external_slot>());

  // Start the workers; each reports whether its binding took.
  std::atomic<std::size_t> unbound{0};
  std::atomic<std::size_t> started{0};
  for (auto& w : workers_) {
    pool_worker* wp = w.get();
    try {
      w->thread = std::thread([this, wp, &unbound, &started] {
        if (wp->cpu >= 0) {
          if (!pin_to_cpu(wp->cpu)) {
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
  if (config_.kernel_nodes) {  // a pool of logical nodes (a synthetic topology) counts for no node
    register_counters(this);
    publish_counters();
  }
}

inline scheduler::~scheduler() {
  if (forked()) {
    // The workers do not exist here and nothing would finish the queued tasks (they leak).
    // Joining would wait forever; detaching would write to descriptors that glibc recycled,
    // at the fork, for the child's next threads. So the handles are dropped without a call:
    // new empty threads take their storage (no destructor runs on the old ones).
    for (auto& w : workers_) ::new (static_cast<void*>(&w->thread)) std::thread();
    return;
  }
  // The destructor waits for every task, the caller's own included, and joins its thread:
  // from a task of this pool that can never end (std::thread::join on itself fails likewise).
  // (A child forked from a task took the return above: its copy of this_worker says it is one.)
  if (in_own_task())
    abort_with_message("a thread_pool was destroyed from one of its own tasks, which would wait for itself "
                       "forever (resource deadlock): destroy it from a thread outside the pool");
  wait_all();
  stop_.store(true, std::memory_order_seq_cst);
  for (auto& n : nodes_) n->sleep.notify_all();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  if (config_.kernel_nodes) unregister_counters(this, [this] { retire_counters(); });
}

inline void scheduler::add_counters(std::uint64_t* rows, std::uint64_t* steals, std::size_t slots,
                                    const std::vector<int>& slot_of, std::uint64_t now) const noexcept {
  using namespace image;
  auto slot = [&](int node) {
    return node >= 0 && static_cast<std::size_t>(node) < slot_of.size() ? slot_of[static_cast<std::size_t>(node)] : -1;
  };
  for (const auto& w : workers_) {
    const int s = slot(w->node);
    if (s < 0) continue;
    std::uint64_t* row = rows + static_cast<std::size_t>(s) * node_words;
    row[n_workers] += 1;
    row[n_tasks_run] += w->executed.load(std::memory_order_relaxed);
    row[n_stolen_local] += w->stolen_local.load(std::memory_order_relaxed);
    row[n_stolen_in] += w->stolen_remote.load(std::memory_order_relaxed);
    row[n_sleeps] += w->sleeps.load(std::memory_order_relaxed);
    row[n_worker_ns] += now > w->started_ns ? now - w->started_ns : 0;
    row[n_idle_ns] += w->idle_until(now);
    row[n_queued] += static_cast<std::uint64_t>(w->deque.size_hint());
  }
  for (std::size_t a = 0; a < nodes_.size(); ++a) {
    const pool_node& n = *nodes_[a];
    const int sa = slot(n.node);
    if (sa < 0) continue;
    const std::int64_t q = n.in_queue.load(std::memory_order_relaxed) + n.in_bound_queue.load(std::memory_order_relaxed);
    rows[static_cast<std::size_t>(sa) * node_words + n_queued] += q > 0 ? static_cast<std::uint64_t>(q) : 0;
    rows[static_cast<std::size_t>(sa) * node_words + n_tasks_run] += n.helped.load(std::memory_order_relaxed);
    for (std::size_t b = 0; b < nodes_.size(); ++b) {
      const int sb = slot(nodes_[b]->node);
      const std::uint64_t k = n.stolen_from[b].load(std::memory_order_relaxed);
      if (sb < 0 || k == 0) continue;
      rows[static_cast<std::size_t>(sb) * node_words + n_stolen_out] += k;
      if (slots <= image::max_matrix_nodes) steals[static_cast<std::size_t>(sa) * slots + static_cast<std::size_t>(sb)] += k;
    }
  }
}

inline void scheduler::retire_counters() const noexcept {
  const std::uint64_t now = monotonic_ns();
  for (const auto& w : workers_) {
    node_event_counters* e = events_of(w->node);
    if (e == nullptr) continue;
    e->tasks_run.fetch_add(w->executed.load(std::memory_order_relaxed), std::memory_order_relaxed);
    e->stolen_local.fetch_add(w->stolen_local.load(std::memory_order_relaxed), std::memory_order_relaxed);
    e->stolen_in.fetch_add(w->stolen_remote.load(std::memory_order_relaxed), std::memory_order_relaxed);
    e->sleeps.fetch_add(w->sleeps.load(std::memory_order_relaxed), std::memory_order_relaxed);
    e->worker_ns.fetch_add(now > w->started_ns ? now - w->started_ns : 0, std::memory_order_relaxed);
    e->idle_ns.fetch_add(w->idle_until(now), std::memory_order_relaxed);
  }
  const std::vector<int>& slot_of = counter_slots();
  auto slot = [&](int node) {
    return node >= 0 && static_cast<std::size_t>(node) < slot_of.size() ? slot_of[static_cast<std::size_t>(node)] : -1;
  };
  for (const auto& n : nodes_) count_event(&node_event_counters::tasks_run, n->node, n->helped.load(std::memory_order_relaxed));
  for (std::size_t a = 0; a < nodes_.size(); ++a)
    for (std::size_t b = 0; b < nodes_.size(); ++b) {
      const std::uint64_t k = nodes_[a]->stolen_from[b].load(std::memory_order_relaxed);
      count_event(&node_event_counters::stolen_out, nodes_[b]->node, k);
      const int t = slot(nodes_[a]->node), v = slot(nodes_[b]->node);
      if (k != 0 && t >= 0 && v >= 0 && t < 64 && v < 64)
        retired_steals[static_cast<std::size_t>(t) * 64 + static_cast<std::size_t>(v)].fetch_add(k, std::memory_order_relaxed);
    }
}

inline std::size_t scheduler::policy_node() {
  switch (config_.policy) {
    case home_choice::fork: {
      const std::size_t i = config_.plan.nearest(config_.homenode());
      return i != steal_plan::no_node ? i : 0;  // a homenode outside the topology: the first node
    }
    case home_choice::round_robin:
      return round_robin_.fetch_add(1, std::memory_order_relaxed) % nodes_.size();
    case home_choice::exec:
      return config_.plan.least_loaded(
          round_robin_.fetch_add(1, std::memory_order_relaxed),
          [&](std::size_t i) { return nodes_[i]->unfinished.load(std::memory_order_acquire); },
          [&](std::size_t i) { return nodes_[i]->workers.size(); });
  }
  return 0;
}

inline void scheduler::help_until_done(group_state& g) {
  if (done_.outstanding(g) == 0) return;
  pool_worker* self = own_worker();
  external_slot* own = nullptr;
  if (self == nullptr && config_.outside_threads_help) {
    // An outside thread is not pinned: a task it ran could move off its homenode with it, in
    // the middle of a first touch. So it helps only where no other node exists to move to (a
    // one-node pool on the node it runs on), with its own submissions (LIFO, as a worker
    // would); otherwise it only waits.
    const external_binding& b = this_external;
    if (config_.current_node() == config_.plan.node(0) && b.pool_id == id_ && b.slot &&
        b.slot->node_index.load(std::memory_order_relaxed) == 0)
      own = b.slot.get();
  }
  // A worker never waits for the whole pool (it would wait for itself: thread_pool::wait
  // refuses); an outside thread runs its own submissions there too.
  const bool can_help = (self != nullptr && &g != &done_.all()) || own != nullptr;
  // A helping waiter takes bypassed tasks of its own group only: it returns once that is done.
  const group_state* only = &g == &done_.all() ? nullptr : &g;
  done_.wait_for(g, can_help, spin_ns(), [&](std::uint64_t idle_since) {
    std::uint64_t deadline = UINT64_MAX;
    if (self != nullptr) {
      pool_task* t = find_task(*self, idle_since, deadline);
      if (t == nullptr) {
        // A waiter is idle too: if every worker waits, held tasks start here.
        return holders_.load(std::memory_order_relaxed) > 0 && idle_since != 0 &&
               monotonic_ns() - idle_since >= hold_period_ns() && release_held(true);
      }
      run_task(t, self, only);
      return true;
    }
    // A task run here may have posted to another pool, which took this thread's binding and
    // gave the slot up to other threads: its deque is then theirs to pop.
    if (this_external.slot.get() != own) return false;
    pool_task* t = own->deque.pop();
    if (t == nullptr) return false;
    const help_frame frame{this, this_worker.helping};
    this_worker.helping = &frame;  // its task may not wait for the pool it runs in
    run_task(t, nullptr, only);
    this_worker.helping = frame.outer;
    return true;
  });
}

inline void scheduler::enqueue(pool_task* t) {
  // Counted here, once the task exists (a callable whose copy threw, or a node that was
  // refused, never counts: wait() must not wait for a task that was never made) and before it
  // is queued (a worker may finish it at once). A group's task is counted by its group (one
  // shared counter per task, not two).
  group_state* const g = t->group;
  count_started(g);
#if !defined(NUMAAFF_NO_EXCEPTIONS)
  try {
#endif
    queue(t);
#if !defined(NUMAAFF_NO_EXCEPTIONS)
  } catch (...) {
    t->dispose();
    count_finished(g);
    throw;
  }
#endif
}

inline bool scheduler::try_bypass(pool_task* t) noexcept {
  bypass_frame* f = bypass_at;
  if (f == nullptr || f->sched != this || f->next != nullptr || t->bound) return false;
  if (f->only != nullptr && t->group != f->only) return false;  // a waiter returns when its group is done
  const pool_worker* self = own_worker();
  // An outside thread runs tasks only of a one-node pool (help_until_done): node index 0.
  if (index_of(t->home) != (self != nullptr ? self->node_index : 0)) return false;
  if (config_.policy == home_choice::exec) nodes_[index_of(t->home)]->unfinished.fetch_add(1, std::memory_order_acq_rel);
  f->next = t;
  return true;
}

inline std::size_t scheduler::hold(held_work& w, pool_task* t, pool_task** out) noexcept {
  bool first = false;
  std::size_t n = 0;
  {
    std::lock_guard<spin_lock> g(held_lock_);
    std::size_t count = w.count_.load(std::memory_order_relaxed);
    if (count == 0) {  // listed from here
      first = true;
      w.prev_ = nullptr;
      w.next_ = held_;
      if (held_ != nullptr) held_->prev_ = &w;
      held_ = &w;
      w.seen_at_ = 0;
      w.held_at_ = monotonic_ns();
      holders_.fetch_add(1, std::memory_order_seq_cst);
    }
    w.tasks_[count++] = t;
    w.count_.store(count, std::memory_order_relaxed);
    if (count == held_work::capacity) {
      n = take_locked(w, out);
      first = false;
    }
  }
  // A sleeper, even beside a spinner (which may take other work): it becomes the watcher.
  if (first) wake_watcher();
  return n;
}

inline void scheduler::wake_watcher() noexcept {
  if (watching_.load(std::memory_order_seq_cst)) return;
  for (auto& node : nodes_)
    if (node->sleep.notify_one()) return;
}

inline std::size_t scheduler::take_locked(held_work& w, pool_task** out) noexcept {
  const std::size_t n = w.count_.load(std::memory_order_relaxed);
  if (n == 0) return 0;
  std::copy(w.tasks_, w.tasks_ + n, out);
  w.count_.store(0, std::memory_order_relaxed);
  (w.prev_ != nullptr ? w.prev_->next_ : held_) = w.next_;
  if (w.next_ != nullptr) w.next_->prev_ = w.prev_;
  w.next_ = w.prev_ = nullptr;
  holders_.fetch_sub(1, std::memory_order_relaxed);
  return n;
}

inline std::size_t scheduler::take_held(held_work& w, pool_task** out) noexcept {
  std::lock_guard<spin_lock> g(held_lock_);
  return take_locked(w, out);
}

inline bool scheduler::release_held(bool due_only) noexcept {
  if (holders_.load(std::memory_order_seq_cst) == 0) return false;
  pool_task* tasks[held_work::capacity];
  held_work* w = nullptr;
  std::size_t n = 0;
  {
    std::lock_guard<spin_lock> g(held_lock_);
    const std::uint64_t now = due_only ? monotonic_ns() : 0;  // under the lock: seen_at_ never ahead of it
    const std::uint64_t period = hold_period_ns();
    for (w = held_; w != nullptr; w = w->next_) {
      const std::uint64_t a = w->activity_.load(std::memory_order_relaxed);
      if (!due_only || now - w->held_at_ >= 10 * period ||
          (w->seen_at_ != 0 && a == w->activity_seen_ && now - w->seen_at_ >= period))
        break;
      if (w->seen_at_ == 0 || a != w->activity_seen_) {
        w->activity_seen_ = a;
        w->seen_at_ = now;
      }
    }
    if (w == nullptr) return false;
    n = take_locked(*w, tasks);
  }
  // Taken out, `w` may go once these tasks end, not before (its group waits for them).
  w->start_held(tasks, n);
  return true;
}

inline void scheduler::queue(pool_task* t) {
  const std::size_t ni = index_of(t->home);
  const bool bound = t->bound;  // read before queueing: a worker may run and free `t` at once
  pool_node& n = *nodes_[ni];
  const bool counted = config_.policy == home_choice::exec;
  if (counted) n.unfinished.fetch_add(1, std::memory_order_acq_rel);
  pool_worker* self = own_worker();
  external_slot* slot = nullptr;
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
    // A deque or queue that could not grow: the task is not queued.
    if (counted) n.unfinished.fetch_sub(1, std::memory_order_acq_rel);
    throw;
  }
#endif
  wake_for(ni, bound);
}

inline void scheduler::push_to_queue(pool_node& n, pool_task* t) {
  std::lock_guard<spin_lock> g(n.lock);
  if (t->bound) {
    n.bound_queue.push_back(t);
    n.in_bound_queue.store(static_cast<std::int64_t>(n.bound_queue.size()), std::memory_order_relaxed);
  } else {
    n.queue.push_back(t);
    n.in_queue.store(static_cast<std::int64_t>(n.queue.size()), std::memory_order_relaxed);
  }
}

inline void scheduler::wake_for(std::size_t ni, bool bound) noexcept {
  pool_node& n = *nodes_[ni];
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (n.spinning.load(std::memory_order_seq_cst) > 0 || n.sleep.notify_one()) return;
  // Nobody on the task's node is free: the nearest sleeping node starts its steal delay (a
  // remote spinner is not relied on: it may be about to take work of its own).
  for (std::size_t r : config_.plan.wake_after(ni, bound))
    if (nodes_[r]->sleep.notify_one()) return;
}

inline pool_task* scheduler::take_from_queues(pool_node& n, bool include_bound,
                                                        pool_worker* into) {
  const bool bound = include_bound && n.in_bound_queue.load(std::memory_order_seq_cst) > 0;
  if (!bound && n.in_queue.load(std::memory_order_seq_cst) <= 0) return nullptr;
  pool_task* t = nullptr;
  std::lock_guard<spin_lock> g(n.lock);
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
      const std::size_t batch = std::min<std::size_t>(n.queue.size() / 2, queue_batch);
      for (std::size_t k = 0; k < batch; ++k) {
        into->deque.push(n.queue.front());
        n.queue.pop_front();
      }
    }
    n.in_queue.store(static_cast<std::int64_t>(n.queue.size()), std::memory_order_relaxed);
  }
  return t;
}

inline external_slot* scheduler::own_slot(std::size_t ni) noexcept {
  external_binding& b = this_external;
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
  external_slot* s = b.slot.get();
  if (s == nullptr) return nullptr;
  if (s->node_index.load(std::memory_order_relaxed) != ni) {
    // The thread's homenode changed: follow it once its old work is gone, else use the queue.
    if (s->deque.size_hint() != 0) return nullptr;
    s->node_index.store(ni, std::memory_order_relaxed);
  }
  return s;
}

inline bool scheduler::has_idle_workers(std::size_t ni) const noexcept {
  // Not only spinners and sleepers: a worker that has just finished a task and not yet looked
  // for the next one is neither, and a thief that counted it busy took its node's next block
  // (seen in the VM: back-to-back parallel_fors lost ~3% of their blocks to other nodes).
  for (const pool_worker* w : nodes_[ni]->workers)
    if (!w->busy.load(std::memory_order_seq_cst)) return true;
  return false;
}

inline std::size_t scheduler::queued_on(std::size_t ni, std::size_t enough) const noexcept {
  const pool_node& n = *nodes_[ni];
  const std::int64_t in_queue = n.in_queue.load(std::memory_order_seq_cst);
  std::size_t queued = in_queue > 0 ? static_cast<std::size_t>(in_queue) : 0;
  for (const pool_worker* w : n.workers) {
    if (queued >= enough) return queued;
    queued += static_cast<std::size_t>(w->deque.size_hint());
  }
  for (const auto& s : slots_) {
    if (queued >= enough) return queued;
    if (s->node_index.load(std::memory_order_relaxed) == ni) queued += static_cast<std::size_t>(s->deque.size_hint());
  }
  return queued;
}

inline pool_task* scheduler::steal_from(std::size_t ni, const pool_worker* self) {
  const pool_node& n = *nodes_[ni];
  const std::size_t count = n.workers.size();
  const std::size_t start = self != nullptr ? self->index : 0;
  for (std::size_t k = 0; k < count; ++k) {
    pool_worker* s = n.workers[(start + k) % count];
    if (s == self) continue;
    if (pool_task* t = s->deque.steal()) return t;
  }
  for (const auto& s : slots_) {
    if (s->node_index.load(std::memory_order_relaxed) != ni) continue;
    if (pool_task* t = s->deque.steal()) {
      if (t->home == n.node) return t;
      // The slot changed nodes between the check and the steal: the task goes home instead
      // (its node found before it is queued: a worker there may run and free it at once).
      if (!send_back(index_of(t->home), t)) return t;
    }
  }
  return nullptr;
}

inline bool scheduler::send_back(std::size_t ni, pool_task* t) noexcept {
#if !defined(NUMAAFF_NO_EXCEPTIONS)
  try {
#endif
    push_to_queue(*nodes_[ni], t);
#if !defined(NUMAAFF_NO_EXCEPTIONS)
  } catch (...) {
    return false;
  }
#endif
  wake_for(ni, false);
  return true;
}

inline pool_task* scheduler::find_task(pool_worker& self, std::uint64_t idle_since, std::uint64_t& deadline) {
  pool_node& n = *nodes_[self.node_index];
  pool_task* t = nullptr;
  if ((t = self.deque.pop()) != nullptr) return t;
  if ((t = take_from_queues(n, true, &self)) != nullptr) return t;
  if ((t = steal_from(self.node_index, &self)) != nullptr) {
    self.stolen_local.store(self.stolen_local.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return t;
  }
  std::uint64_t now = 0;
  for (const steal_source& r : config_.plan.remotes(self.node_index)) {
    const std::size_t ri = r.node_index;
    if (!has_stealable(ri)) continue;
    steal_source s = r;
    if (r.delay_ns != 0 && idle_since != 0) {  // otherwise the rule's answer needs no delay
      if (now == 0) now = monotonic_ns();
      const pool_node& home = *nodes_[ri];
      if (const std::uint64_t task_ns = home.task_ns.load(std::memory_order_relaxed); task_ns != 0) {
        const std::uint64_t end = home.task_end_ns.load(std::memory_order_relaxed);
        s.delay_ns = steal_plan::task_scaled_delay(r, task_ns, now > end ? now - end : 0);
      }
    }
    const steal_decision d =
        steal_plan::steal_rule(s, idle_since, now, [&] { return has_idle_workers(ri); }, [&] { return backlog_of(ri); });
    if (!d.take) {
      deadline = std::min(deadline, d.look_again_at);
      continue;
    }
    t = take_from_queues(*nodes_[ri], false, nullptr);
    if (t == nullptr) t = steal_from(ri, &self);
    if (t == nullptr) continue;
    // The rule's inputs and the take are not one atomic step: a thief held up between them
    // (preempted) may take work queued since, while the home node has a worker free for it.
    // That worker takes it: the task goes back, unstolen. Held workers stay busy, so this
    // never undoes a steal the starvation bound grants.
    if (s.delay_ns != 0 && has_idle_workers(ri) && send_back(ri, t)) continue;
    self.stolen_remote.store(self.stolen_remote.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    n.stolen_from[ri].fetch_add(1, std::memory_order_relaxed);  // remote steals wait for delays: rare
    return t;
  }
  return nullptr;
}

inline void scheduler::run_task(pool_task* t, pool_worker* self, const group_state* only,
                                held_finishes* held) noexcept {
  // A loop, not a call per task: a chain run by bypass may be millions of tasks long.
  for (;;) {
  // Finishes held for another group are counted out first: `t` may wait for that group.
  if (held != nullptr && held->count != 0 && held->group != t->group) done_.finish(*held, counts_index(self));
  // Nested runs (a waiting task helping) must leave the outer task's worker busy. `busy` only
  // steers thieves (has_idle_workers), it orders nothing: release stores, not the full fence
  // a seq_cst store costs on every task. The clearing store is before the group's count
  // (acq_rel), so a waiter that saw its group finish, and queues the next blocks, sees it too.
  const bool was_busy = self != nullptr && self->busy.load(std::memory_order_relaxed);
  if (self != nullptr) self->busy.store(true, std::memory_order_release);
  const homenode_state saved = thread_home;
  thread_home = {t->home, config_.kernel_nodes};
  group_state* g = t->group;
  // Timed on its own node's workers only: an outside helper's clock reads would be the
  // caller's cost, and a thief's remote run is not what the task costs at home (nor a sign
  // that its home node still runs such tasks). A task that waits for its children inside
  // counts their time too; averaged() bounds what one such sample adds.
  const std::size_t timed_node =
      t->timed && self != nullptr && index_of(t->home) == self->node_index ? self->node_index : steal_plan::no_node;
  const std::uint64_t began = timed_node != steal_plan::no_node ? monotonic_ns() : 0;
  if (g != nullptr && g->cancel_requested.load(std::memory_order_relaxed)) {
    g->cancelled.store(true, std::memory_order_relaxed);  // task_group::cancel(): not run, and said so
  } else {
#if defined(NUMAAFF_NO_EXCEPTIONS)
    t->execute();
#else
    try {
      t->execute();
    } catch (...) {
      (g != nullptr ? *g : done_.all()).capture(std::current_exception());
    }
#endif
  }
  thread_home = saved;
  if (timed_node != steal_plan::no_node) {
    pool_node& home = *nodes_[timed_node];
    const std::uint64_t end = monotonic_ns();
    // Racing updates of one node lose a sample: harmless.
    home.task_ns.store(steal_plan::averaged(home.task_ns.load(std::memory_order_relaxed), end - began),
                       std::memory_order_relaxed);
    home.task_end_ns.store(end, std::memory_order_relaxed);
  }
  if (config_.policy == home_choice::exec) nodes_[index_of(t->home)]->unfinished.fetch_sub(1, std::memory_order_acq_rel);
  // An outside helper's run counts before the finish (a waiter may read the counts then).
  if (self == nullptr) nodes_[index_of(t->home)]->helped.fetch_add(1, std::memory_order_relaxed);
  bypass_frame frame{this, only};
  bypass_frame* const outer = bypass_at;
  bypass_at = t->bypasses ? &frame : nullptr;
  t->dispose();
  bypass_at = outer;
  pool_task* const next = frame.next;
  if (self != nullptr) {
    self->busy.store(was_busy, std::memory_order_release);
    self->executed.store(self->executed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // `next` is counted in its group: that group stays. Only a worker's own loop holds
  // finishes back (`held`, see held_finishes), and only a group's: a post's count is the
  // pool's, which no spawning thread keeps writing.
  if (held != nullptr && g != nullptr) {
    held->group = g;
    ++held->count;
  } else {
    done_.finish(g, counts_index(self));
  }
  if (next == nullptr) return;
  t = next;
  }
}

inline void scheduler::worker_main(pool_worker& w) {
  this_worker = {this, &w};
  thread_home = {w.node, config_.kernel_nodes};
  pool_node& n = *nodes_[w.node_index];
  const auto spin_ns = static_cast<std::uint64_t>(saturated_ns(config_.spin));
  held_finishes held;
  for (;;) {
    std::uint64_t deadline = UINT64_MAX;
    // The idle clock (0: not started) starts at the first look at the clock once looks for
    // work fail, as in completion::wait_for: a worker between two bursts reads it rarely.
    pool_task* t = find_task(w, 0, deadline);
    if (t == nullptr) done_.finish(held, counts_index(&w));  // before it spins or sleeps
    std::uint64_t idle_since = 0, idle_start = 0;  // idle_start: for the idle time, never reset
    bool watching = false;  // this worker holds watching_
    if (t == nullptr) {
      // Idle: spin (announced, so submitters skip the wake-up) unless enough others do, then
      // sleep. (Two that pass the check together both spin: harmless.)
      if (n.spinning.load(std::memory_order_relaxed) < n.max_spinners) {
        n.spinning.fetch_add(1, std::memory_order_seq_cst);
        for (unsigned round = 1;; ++round) {
          deadline = UINT64_MAX;
          if ((t = find_task(w, idle_since, deadline)) != nullptr) break;
          if (round % completion::spins_per_check == 0) {
            const std::uint64_t now = monotonic_ns();
            if (idle_since == 0) {
              idle_since = idle_start = now;
              w.update_idle([&] { w.idle_from.store(now, std::memory_order_relaxed); });
            }
            // A spinner that never sleeps (a long spin) looks at held tasks once a period.
            if (holders_.load(std::memory_order_relaxed) > 0 && now - idle_since >= hold_period_ns() && release_held(true)) continue;
            if (stop_.load(std::memory_order_acquire) || now - idle_since >= spin_ns) break;
            std::this_thread::yield();
          }
          cpu_relax();
        }
        n.spinning.fetch_sub(1, std::memory_order_seq_cst);
      }
      // A sleep must know when remote steals open (find_task's deadline): the clock runs.
      if (t == nullptr && idle_since == 0) {
        idle_since = monotonic_ns();
        if (idle_start == 0) {
          idle_start = idle_since;
          w.update_idle([&] { w.idle_from.store(idle_start, std::memory_order_relaxed); });
        }
      }
      while (t == nullptr) {
        // Tasks an outside thread holds back while it submits more (held_work): started here
        // once due.
        if (watching && holders_.load(std::memory_order_seq_cst) > 0 && release_held(true)) {
          deadline = UINT64_MAX;
          if ((t = find_task(w, idle_since, deadline)) != nullptr) break;
        }
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
        const std::uint64_t now = monotonic_ns();
        const bool timed = deadline != UINT64_MAX;
        std::uint64_t wake_at = deadline;
        // One idle worker watches held tasks, in timed sleeps. A watcher with nothing to watch
        // lets go first, then looks again: a hold in between either sees it let go (and wakes
        // a sleeper) or is seen here.
        if (watching && holders_.load(std::memory_order_seq_cst) == 0) {
          watching = false;
          watching_.store(false, std::memory_order_seq_cst);
        }
        bool none = false;
        if (!watching && holders_.load(std::memory_order_seq_cst) > 0 &&
            watching_.compare_exchange_strong(none, true, std::memory_order_seq_cst))
          watching = true;
        if (watching) wake_at = std::min(wake_at, now + hold_period_ns());
        n.sleep.commit_wait(key, wake_at != UINT64_MAX ? std::chrono::nanoseconds(wake_at > now ? wake_at - now : 0)
                                                      : std::chrono::nanoseconds(-1));
        // After sleeping with nothing in sight, the remote-steal clock starts again: work that
        // appeared meanwhile is offered to its own node's workers first.
        if (!timed) idle_since = monotonic_ns();
      }
      // A submitter that saw a spinner woke nobody, and a woken worker is one of several that
      // a burst needs: if this idle worker took a task and more is waiting, pass the wake-up
      // on (a chain reaches every sleeper the burst can use).
      if (n.in_bound_queue.load(std::memory_order_seq_cst) > 0 || has_stealable(w.node_index)) n.sleep.notify_one();
      // So is the watch over held tasks: this worker stops looking at them.
      if (watching) {
        watching_.store(false, std::memory_order_seq_cst);
        if (holders_.load(std::memory_order_seq_cst) > 0) wake_watcher();
      }
      if (idle_start != 0) {  // one clock read per idle period that lasted past the first look at the clock
        const std::uint64_t end = monotonic_ns();
        w.update_idle([&] {
          w.idle_ns.store(w.idle_ns.load(std::memory_order_relaxed) + (end > idle_start ? end - idle_start : 0), std::memory_order_relaxed);
          w.idle_from.store(0, std::memory_order_relaxed);
        });
      }
    }
    run_task(t, &w, nullptr, &held);
  }
}

inline std::size_t scheduler::cancel() {
  cancels_.fetch_add(1, std::memory_order_acq_rel);
  release_all_held();  // they had not started either: started now, each is discarded (not counted)
  std::size_t dropped = 0;
  for (auto& np : nodes_) {
    pool_node& n = *np;
    for (;;) {
      pool_task* t = take_from_queues(n, true, nullptr);
      if (t == nullptr) t = steal_from(static_cast<std::size_t>(&np - nodes_.data()), nullptr);
      if (t == nullptr) break;
      group_state* g = t->group;
      if (config_.policy == home_choice::exec) nodes_[index_of(t->home)]->unfinished.fetch_sub(1, std::memory_order_acq_rel);
      t->dispose();
      // Its group's wait must not return as if it had run (set before finish(): after it, the
      // group may be gone).
      if (g != nullptr) g->cancelled.store(true, std::memory_order_relaxed);
      count_finished(g);
      ++dropped;
    }
  }
  return dropped;
}

}  // namespace numaaff::detail
