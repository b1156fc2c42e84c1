// Dataflow tasks on the scheduler: a task with declared ranges is counted into its group when
// it is run, waits in the dependence tracker (dependences.hpp) until its predecessors have
// finished, is then placed by its data (the data directory) and queued like any other task.
//
// Release happens in the task's dispose(), which every end of a task passes through: after it
// ran (or threw), and when it is discarded without running (thread_pool::cancel,
// task_group::cancel, a cancelled predecessor). So nothing that waits on a task is ever left
// waiting, and a discarded task's dependents are discarded in turn. dispose() destroys the
// callable at once; the task's memory goes when the tracker forgets it (its node stays in the
// tracker's segments until the next drain). Releasing can make many tasks ready and
// discarding one releases more: each thread drains them from an intrusive list (no
// recursion, no allocation).
#pragma once

#include "data_directory.hpp"
#include "dependences.hpp"
#include "scheduler.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>

namespace numaaff::detail {

/// A task's declared ranges (none empty); up to `inline_count` without an allocation.
class flow_ranges {
 public:
  static constexpr std::size_t inline_count = 3;
  explicit flow_ranges(std::size_t capacity) {
    if (capacity > inline_count) {
      heap_.reset(new dep_range[capacity]);
      data_ = heap_.get();
    }
  }
  void push(std::uintptr_t begin, std::uintptr_t end, dep_mode mode) noexcept {
    if (begin != end) data_[size_++] = dep_range{begin, end, mode};
  }
  dep_range* data() noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  flow_ranges(flow_ranges&& o) noexcept : heap_(std::move(o.heap_)), size_(o.size_) {
    std::copy(o.inline_, o.inline_ + inline_count, inline_);
    data_ = heap_ ? heap_.get() : inline_;
  }
  flow_ranges& operator=(flow_ranges&&) = delete;

 private:
  dep_range inline_[inline_count];
  std::unique_ptr<dep_range[]> heap_;
  dep_range* data_ = inline_;
  std::size_t size_ = 0;
};

class flow_state;

/// The part of a dataflow task that does not depend on its callable.
struct flow_base : pool_task, dep_node {
  flow_base(flow_ranges r, flow_state& o) noexcept : ranges(std::move(r)), owner(&o) {
    bypasses = true;
    accesses = ranges.data();
    count = ranges.size();
    for (std::size_t i = 0; i < count; ++i) commutative = commutative || accesses[i].mode == dep_mode::commute;
  }
  /// The tracker's hook: the task's memory goes.
  static void forget(dep_node& n) noexcept { delete static_cast<flow_base*>(&n); }
  /// Destroys the callable, then releases the task's dependents; the tracker deletes the task
  /// when it forgets it (maybe before this returns).
  void dispose() noexcept override;
  /// Destroys the callable: called once, before the task's memory goes (the destructor leaves
  /// it alone).
  virtual void drop_callable() noexcept = 0;
  /// After the task's callable returned: what the task taught the directory.
  void learned() noexcept;

  flow_ranges ranges;
  flow_state* owner;
  bool ran = false;               // execute() was entered (a throw counts as ran)
  std::int16_t submitter_node = -1;  // held under the fork policy: the registering thread's node index
  std::uint32_t untouched = 0;    // ranges (the first 32) the directory knew no node for
  std::uint64_t placed_epoch = 0;  // migration_epoch when it was placed
  std::uint64_t cancel_mark = 0;   // the scheduler's cancel generation when it was run
};

template <class F>
struct flow_task final : flow_base {
  template <class G>
  flow_task(G&& fn, flow_ranges r, flow_state& o) : flow_base(std::move(r), o), f(std::forward<G>(fn)) {}
  ~flow_task() override {}
  void execute() override {
    ran = true;
    f();
    learned();
  }
  void drop_callable() noexcept override { f.~F(); }
  // Its own lifetime: the callable ends when the task does, its memory later (see dispose()).
  union {
    F f;
  };
};

/// Tasks capture a few pointers or references: such a task must come from the block cache.
struct four_pointers {
  void* p[4];
  void operator()() const noexcept {}
};
static_assert(sizeof(flow_task<four_pointers>) <= block_cache::block_size,
              "a dataflow task capturing four pointers no longer fits a block of the cache");

/**
 * The dataflow side of one group (a task_group) or of a pool's submits with accesses: its
 * tracker, and how its ready tasks are placed and queued. Destroyed only once every task it
 * made has ended (the owner waits first).
 */
class flow_state final : held_work {
 public:
  /// `hold`: ready tasks that a thread outside the pool registers may be held back (a
  /// task_group, which wait() ends; not a pool's submits, whose futures may be waited for alone).
  flow_state(scheduler& s, group_state* g, bool hold = false) noexcept : sched_(s), group_(g), hold_(hold) {}
  /// The group its tasks count into, for an owner that makes its group after this state.
  void set_group(group_state* g) noexcept { group_ = g; }
  flow_state(const flow_state&) = delete;
  flow_state& operator=(const flow_state&) = delete;

  /// Makes the task, counts it into the group, registers it; queues it if nothing is before
  /// it. If copying f or allocating throws, the exception propagates and nothing changed.
  template <class F>
  void run(flow_ranges ranges, F&& f) {
    auto* t = new flow_task<std::decay_t<F>>(std::forward<F>(f), std::move(ranges), *this);
    t->group = group_;
    t->home = sched_.plan().node(0);  // until it is placed
    t->cancel_mark = sched_.cancel_generation();
    // Counted before it is registered: a predecessor finishing on another thread may queue
    // and run it at once.
    sched_.count_started(group_);
    if (hold_) note_activity();
    bool ready = false;
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    try {
#endif
      ready = tracker_.add(*t);
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    } catch (...) {
      t->drop_callable();
      delete t;  // never registered: nothing to release
      sched_.count_finished(group_);  // wait() does not wait for a task that was not made
      throw;
    }
#endif
    if (!ready) return;
    if (!hold_ || sched_.in_own_task()) return on_ready(t);
    // Held back (see hold_). Placed when started, as any task, but the fork policy's node is
    // the registering thread's homenode, read now.
    if (sched_.fork_policy()) {
      // Unread (the homenode could not be read): the policy is asked again when it starts.
      const std::size_t node = policy_node_or(steal_plan::no_node);
      if (node != steal_plan::no_node) t->submitter_node = static_cast<std::int16_t>(node);
    }
    pool_task* out[held_work::capacity];
    start_held(out, sched_.hold(*this, t, out));
  }

  /// Queues every task held back (see hold_): before a wait, and before the state goes.
  void flush() noexcept {
    if (!holds_any()) return;
    pool_task* out[held_work::capacity];
    start_held(out, sched_.take_held(*this, out));
  }

  dependence_tracker& tracker() noexcept { return tracker_; }

  /// A node of this state has nothing left to wait for: start it, or discard it if a
  /// predecessor was discarded. Each thread drains what this makes ready (see the file comment).
  static void on_ready(dep_node* n) noexcept {
    n->work_link = ready_list;
    ready_list = n;
    if (draining) return;
    draining = true;
    while (ready_list != nullptr) {
      dep_node* x = ready_list;
      ready_list = x->work_link;
      x->work_link = nullptr;
      auto* t = static_cast<flow_base*>(x);
      t->owner->start(*t);
    }
    draining = false;
  }

 private:
  friend struct flow_base;

  void start_held(pool_task** tasks, std::size_t n) noexcept override {
    // Only this state's tasks are held here.
    for (std::size_t i = 0; i < n; ++i) on_ready(static_cast<flow_base*>(tasks[i]));
  }

  void start(flow_base& t) noexcept {
    if (t.cancelled.load(std::memory_order_relaxed) || t.cancel_mark != sched_.cancel_generation()) return discard(t);
    if (t.commutative && !tracker_.acquire(t)) return;  // an overlapping update runs: it passes t on
    place(t);
    if (sched_.try_bypass(&t)) return;
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    try {
#endif
      sched_.queue(&t);
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    } catch (...) {
      discard(t);  // a queue that could not grow: reported as discarded, never lost
    }
#endif
  }

  void discard(flow_base& t) noexcept {
    group_state* g = t.group;
    if (g != nullptr) g->cancelled.store(true, std::memory_order_relaxed);  // before finish: the group may go
    t.dispose();  // releases its dependents, discarded too
    sched_.count_finished(g);
  }

  /// The homenode: the pool node nearest to the node holding the largest share of the declared
  /// bytes (ranges the directory knows no node for count for nobody); the policy's choice when
  /// none is known. A one-node pool has nothing to choose and logical nodes hold no memory:
  /// neither asks the directory.
  void place(flow_base& t) noexcept {
    t.placed_epoch = migration_epoch.load(std::memory_order_acquire);
    std::size_t best = steal_plan::no_node;
    if (sched_.plan().node_count() == 1) best = 0;
    else if (sched_.kernel_nodes()) best = data_majority(t);
    t.timed = best != steal_plan::no_node && sched_.plan().delayed_stealing();
    if (best == steal_plan::no_node && t.submitter_node >= 0) best = static_cast<std::size_t>(t.submitter_node);
    // The caller's homenode could not be read: the first node, as a hint.
    if (best == steal_plan::no_node) best = policy_node_or(0);
    t.home = sched_.plan().node(best);
  }

  /// The node policy's node index; `otherwise` when it throws (the calling thread's homenode
  /// could not be read).
  std::size_t policy_node_or(std::size_t otherwise) noexcept {
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    try {
      return sched_.policy_node();
    } catch (...) {
      return otherwise;
    }
#else
    static_cast<void>(otherwise);
    return sched_.policy_node();
#endif
  }

  /// The pool node index with the most of t's declared bytes per the directory (of several
  /// with equal shares, the least busy); no_node when it knows none. Marks the ranges nobody
  /// has touched (for learned()).
  std::size_t data_majority(flow_base& t) noexcept {
    constexpr std::size_t most = 32;
    std::size_t index[most];
    std::uint64_t weight[most];
    std::size_t distinct = 0;
    for (std::size_t i = 0; i < t.count; ++i) {
      const dep_range& r = t.accesses[i];
      const int node = directory.node_of(reinterpret_cast<const void*>(r.begin), r.end - r.begin);
      const std::size_t ni = sched_.nearest_index(node);
      if (ni == steal_plan::no_node) {
        if (i < most && node < 0) t.untouched |= std::uint32_t{1} << i;
        continue;
      }
      std::size_t k = 0;
      while (k < distinct && index[k] != ni) ++k;
      if (k == distinct) {
        if (distinct == most) continue;  // more than 32 nodes among one task's ranges: the first 32 decide
        index[distinct] = ni;
        weight[distinct++] = 0;
      }
      weight[k] += r.end - r.begin;
    }
    std::uint64_t best_weight = 0;
    for (std::size_t k = 0; k < distinct; ++k) best_weight = std::max(best_weight, weight[k]);
    if (best_weight == 0) return steal_plan::no_node;
    // Nodes holding equal shares are equally near the task's data: the least busy of them
    // takes it, which balances nodes that hold unequal numbers of tiles at no cost in placement.
    std::size_t tied = 0;
    for (std::size_t k = 0; k < distinct; ++k)
      if (weight[k] == best_weight) index[tied++] = index[k];
    return tied == 1 ? index[0] : sched_.least_busy(index, tied);
  }

  static inline thread_local dep_node* ready_list = nullptr;
  static inline thread_local bool draining = false;

  scheduler& sched_;
  group_state* group_;
  dependence_tracker tracker_{&flow_base::forget};
  /// A task ready at registration on a thread outside the pool (not running one of its tasks)
  /// is held (scheduler::hold) until a wait, until idle workers find it due (held_work), or
  /// until held_work::capacity are held. Queued at once, the first task of a chain had a worker
  /// run it and then chase the registration, each next task ready the moment it was
  /// registered: lines crossed CPUs at every task, and 10,000 registrations took 5.6 ms
  /// instead of 0.9 ms. (oneTBB builds its flow graph before it runs it.)
  const bool hold_;
};

inline void flow_base::dispose() noexcept {
  {
    // The callable's destructor is the program's code: what it makes ready is not kept here
    // to run next (it may wait for it).
    bypass_frame* const frame = bypass_at;
    bypass_at = nullptr;
    drop_callable();
    bypass_at = frame;
  }
  owner->tracker_.release(*this, !ran, [](dep_node* n) { flow_state::on_ready(n); });
}

inline void flow_base::learned() noexcept {
  // Bytes nobody had touched were placed where this task wrote them: the node it ran on.
  const worker_context& w = this_worker;
  // Only where workers are pinned: an unbound worker's node is not where its writes went.
  if (untouched == 0 || w.self == nullptr || !owner->sched_.kernel_nodes() || !owner->sched_.all_workers_bound()) return;
  for (std::size_t i = 0; i < count && i < 32; ++i)
    if ((untouched >> i & 1) != 0 && accesses[i].mode != dep_mode::read)
      directory.learn(reinterpret_cast<const void*>(accesses[i].begin), accesses[i].end - accesses[i].begin,
                      w.self->node, placed_epoch);
}

}  // namespace numaaff::detail
