/**
 * @file tbb.hpp
 * @brief oneTBB bridge: one `tbb::task_arena` per NUMA node, addressed by kernel node number.
 *
 * oneTBB numbers NUMA nodes by hwloc *logical index* (what `tbb::info::numa_nodes()` returns and
 * `task_arena::constraints::numa_id` takes); numaaff, numactl and the kernel use the kernel's
 * node number. The two differ on machines whose firmware numbers nodes out of topology order.
 * tbb_numa_id() and node_of_tbb_numa_id() are the one place numaaff converts between them.
 *
 * node_arenas holds one arena per node, constrained to that node's NUMA id and sized to its
 * allowed CPUs. oneTBB enforces the constraint through its optional tbbbind library; so that
 * the placement never depends on whether that library is installed, each arena also has an
 * observer that pins every thread entering it to the node's CPUs (and restores the thread's
 * previous mask when it leaves). tbb_binds() says whether oneTBB itself enforces it.
 *
 * This header needs oneTBB (link `TBB::tbb`); numaaff's core headers never include it.
 * One node: one arena, the same semantics.
 *
 * @code{.cpp}
 * numaaff::node_arenas arenas;
 * auto f = arenas.run_on(2, [] { return numaaff::current_node(); });   // 2
 * arenas.execute(1, [&] { tbb::parallel_for(0, n, body); });          // node 1's threads
 * @endcode
 */
#pragma once

#include "detail/pinning.hpp"
#include "detail/throw.hpp"
#include "topology.hpp"

#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_scheduler_observer.h>
#include <sched.h>

#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {

/**
 * oneTBB's NUMA id (hwloc logical index) of kernel node `n`.
 * @throws std::invalid_argument if `n` is not a node of `t`.
 */
inline int tbb_numa_id(node_id n, const topology& t = topology::system()) { return t.hwloc_logical_index(n); }

/**
 * The kernel node of oneTBB's NUMA id `id`.
 * @throws std::invalid_argument if no node of `t` has that id.
 */
inline node_id node_of_tbb_numa_id(int id, const topology& t = topology::system()) {
  for (node_id n : t.nodes())
    if (t.hwloc_logical_index(n) == id) return n;
  detail::throw_invalid_argument("node_of_tbb_numa_id: no node has oneTBB NUMA id " + std::to_string(id));
}

/// True if oneTBB found its tbbbind library and so enforces NUMA constraints itself.
inline bool tbb_binds() {
  const std::vector<tbb::numa_node_id> ids = tbb::info::numa_nodes();
  return !(ids.size() == 1 && ids.front() == -1);
}

namespace detail {

/// Pins threads entering an arena to a node's CPUs; puts their previous mask back on exit.
class node_pinning_observer final : public tbb::task_scheduler_observer {
 public:
  node_pinning_observer(tbb::task_arena& arena, const std::vector<int>& cpus)
      : tbb::task_scheduler_observer(arena), mask_(detail::cpu_mask(cpus)) {
    observe(true);
  }
  ~node_pinning_observer() override { observe(false); }

  void on_scheduler_entry(bool) override {
    detail::cpu_mask_bits previous;
    const bool saved = detail::current_mask(previous);
    saved_masks().push_back({saved, previous});
    (void)detail::pin_to_mask(mask_);  // failure leaves the thread as it was
  }
  void on_scheduler_exit(bool) override {
    std::vector<std::pair<bool, detail::cpu_mask_bits>>& stack = saved_masks();
    if (stack.empty()) return;
    if (stack.back().first) (void)detail::pin_to_mask(stack.back().second);
    stack.pop_back();
  }

 private:
  // A thread can be inside several arenas at once (execute() nested in another arena).
  static std::vector<std::pair<bool, detail::cpu_mask_bits>>& saved_masks() {
    static thread_local std::vector<std::pair<bool, detail::cpu_mask_bits>> stack;
    return stack;
  }
  detail::cpu_mask_bits mask_;
};

}  // namespace detail

/**
 * One oneTBB arena per NUMA node (see the file comment).
 * Thread safety: all members may be called from any thread. Construction allocates and may
 * start oneTBB's worker threads; nothing else allocates beyond what oneTBB does per task.
 */
class node_arenas {
 public:
  /// An arena for every node that has CPUs this process may use.
  node_arenas() : node_arenas(nodes_with_cpus()) {}

  /// Arenas for `nodes` (kernel numbers).
  /// @throws std::invalid_argument for a node that is unknown or has no usable CPU.
  explicit node_arenas(const std::vector<node_id>& nodes) {
    const topology& t = topology::system();
    const bool tbb_numa = tbb_binds();
    const std::vector<tbb::numa_node_id> ids = tbb::info::numa_nodes();
    for (node_id n : nodes) {
      if (!t.has_node(n) || !t.has_cpus(n))
        detail::throw_invalid_argument("node_arenas: node " + std::to_string(n) + " is not a node with usable CPUs (" +
                                       detail::format_list(t.nodes()) + ")");
      auto e = std::make_unique<entry>();
      e->node = n;
      const std::vector<int> cpus = t.cpus_of(n);
      tbb::task_arena::constraints c;
      c.max_concurrency = static_cast<int>(cpus.size());
      // A topology that is not this machine's (NUMAAFF_TOPOLOGY) plans arenas but binds nothing:
      // its CPUs and logical indexes name nothing real.
      const int id = tbb_numa_id(n, t);
      if (t.is_this_system() && tbb_numa && std::find(ids.begin(), ids.end(), id) != ids.end()) c.numa_id = id;
      // No slot reserved for callers: enqueued work runs on the arena's own (pinned) workers.
      e->arena.initialize(c, 0);
      if (t.is_this_system()) e->observer = std::make_unique<detail::node_pinning_observer>(e->arena, cpus);
      entries_.push_back(std::move(e));
    }
  }

  node_arenas(const node_arenas&) = delete;
  node_arenas& operator=(const node_arenas&) = delete;

  const std::vector<node_id> nodes() const {
    std::vector<node_id> out;
    for (const auto& e : entries_) out.push_back(e->node);
    return out;
  }

  /// The arena of node `n`. @throws std::invalid_argument if there is none.
  tbb::task_arena& arena(node_id n) { return find(n).arena; }

  /**
   * Runs `f()` inside node `n`'s arena on the calling thread, which is pinned to the node for
   * the duration (oneTBB's task_arena::execute: the caller joins the arena, so parallel
   * algorithms inside run on the node's threads). Blocks; returns f's result; rethrows.
   */
  template <class F>
  auto execute(node_id n, F&& f) -> decltype(f()) {
    return find(n).arena.execute(std::forward<F>(f));
  }

  /**
   * Runs `f()` asynchronously on one of node `n`'s arena threads (never on the caller).
   * @return std::future of f's result or exception.
   */
  template <class F>
  auto run_on(node_id n, F&& f) {
    using result = std::invoke_result_t<std::decay_t<F>>;
    auto job = std::make_shared<std::packaged_task<result()>>(std::forward<F>(f));
    std::future<result> fut = job->get_future();
    find(n).arena.enqueue([job] { (*job)(); });
    return fut;
  }

 private:
  struct entry {
    node_id node = -1;
    tbb::task_arena arena;
    std::unique_ptr<detail::node_pinning_observer> observer;
  };

  static std::vector<node_id> nodes_with_cpus() { return topology::system().cpu_nodes(); }

  entry& find(node_id n) {
    for (auto& e : entries_)
      if (e->node == n) return *e;
    detail::throw_invalid_argument("node_arenas: no arena for node " + std::to_string(n) + " (arenas: " +
                                   detail::format_list(nodes()) + ")");
  }

  std::vector<std::unique_ptr<entry>> entries_;
};

}  // namespace numaaff
