/**
 * @file openmp.hpp
 * @brief OpenMP bridge: teams whose thread i sits on the node that owns block i of the thread
 * pool's partition, and first-touch initialisation that matches that partition.
 *
 * The partition is thread_pool's: one CPU per thread, CPUs in node order, the index range cut
 * as `schedule(static)` cuts it. A team_plan says, for each OpenMP thread number, the CPU and
 * node it belongs on; bind_team() pins a team accordingly (OpenMP runtimes reuse the same
 * threads for later parallel regions of the same size, so the binding holds for them), and
 * `#pragma omp for schedule(static)` then gives thread i the block whose pages first_touch()
 * (or the pool's parallel_for) placed on its node.
 *
 * This header needs OpenMP (`-fopenmp`, CMake `OpenMP::OpenMP_CXX`); the core never includes it.
 * One node: every thread on that node; binding still pins one CPU per thread.
 *
 * @code{.cpp}
 * auto plan = numaaff::openmp::plan_team();          // omp_get_max_threads() threads
 * numaaff::openmp::first_touch(plan, a.data(), a.size(), [](std::size_t i) { return 0.0; });
 * numaaff::openmp::bind_team(plan);
 * #pragma omp parallel for schedule(static) num_threads(plan.size())
 * for (std::size_t i = 0; i < n; ++i) a[i] += 1;      // each thread on its block's node
 * @endcode
 */
#pragma once

#if !defined(_OPENMP)
#error "numaaff/openmp.hpp needs OpenMP: compile with -fopenmp (CMake: link OpenMP::OpenMP_CXX)"
#endif

#include "detail/pinning.hpp"
#include "detail/throw.hpp"
#include "memory.hpp"  // the umbrella, not one part: programs that include this header use all of it
#include "partition.hpp"
#include "topology.hpp"

#include <omp.h>
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {
class thread_pool;
}

namespace numaaff::openmp {

/// Where each thread of a team belongs: thread i on `cpu[i]` of `node[i]` (node order).
struct team_plan {
  std::vector<node_id> node;
  std::vector<int> cpu;
  int size() const noexcept { return static_cast<int>(node.size()); }
  /// Block of thread `i` in [first, last), as schedule(static) and thread_pool cut it.
  std::pair<std::size_t, std::size_t> block(std::size_t first, std::size_t last, int i) const {
    if (i < 0 || i >= size()) detail::throw_invalid_argument("team_plan::block: thread " + std::to_string(i) + " out of range");
    if (last <= first) return {first, first};
    const auto [lo, hi] = static_block(last - first, node.size(), static_cast<std::size_t>(i));
    return {first + lo, first + hi};
  }
};

/**
 * A plan for `threads` threads (0: omp_get_max_threads()) over the allowed CPUs in node order,
 * spread evenly when there are fewer threads than CPUs (thread i takes CPU i * cpus / threads),
 * wrapping when there are more. A topology that is not this machine's (synthetic, XML) gives a
 * plan with no CPUs: its threads are never pinned. Allocates.
 * @throws std::invalid_argument if threads < 0.
 */
inline team_plan plan_team(int threads = 0, const topology& t = topology::system()) {
  if (threads < 0) detail::throw_invalid_argument("plan_team: threads must be >= 0 (0: omp_get_max_threads())");
  if (threads == 0) threads = omp_get_max_threads();
  std::vector<std::pair<node_id, int>> slots;
  for (node_id n : t.nodes())
    for (int c : t.cpus_of(n)) slots.emplace_back(n, c);
  team_plan p;
  const auto count = static_cast<std::size_t>(threads);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t s = detail::team_slot(i, count, slots.size());
    p.node.push_back(slots[s].first);
    p.cpu.push_back(t.is_this_system() ? slots[s].second : -1);
  }
  return p;
}

/// The plan matching `pool` (a numaaff::thread_pool; this header does not include the pool's):
/// thread i where the pool's worker i is (same count, same blocks).
template <class Pool, class = std::enable_if_t<std::is_same_v<Pool, thread_pool>>>
team_plan plan_team(const Pool& pool) {
  team_plan p;
  for (std::size_t i = 0; i < pool.worker_count(); ++i) {
    p.node.push_back(pool.worker_node(i));
    p.cpu.push_back(pool.worker_cpu(i));
  }
  return p;
}

/**
 * Pins the calling OpenMP thread to its CPU in `plan` (call inside a parallel region whose
 * size is plan.size()). No allocation. @return false if the thread number is outside the plan,
 * the plan has no CPU for it (an unbound pool), or the kernel refused.
 */
inline bool bind_this_thread(const team_plan& plan) noexcept {
  const int i = omp_get_thread_num();
  if (i >= plan.size()) return false;
  return detail::pin_to_cpu(plan.cpu[static_cast<std::size_t>(i)]);
}

/**
 * Pins a team of plan.size() threads, thread i to plan.cpu[i]. Later parallel regions of the
 * same size reuse these threads in libgomp and LLVM's libomp. Blocks for one parallel region.
 * @return how many threads were pinned (plan.size() on success).
 */
inline int bind_team(const team_plan& plan) {
  if (plan.size() == 0) return 0;  // num_threads(0) is not a team
  std::atomic<int> bound{0};
#pragma omp parallel num_threads(plan.size())
  {
    if (bind_this_thread(plan)) bound.fetch_add(1, std::memory_order_relaxed);
  }
  return bound.load();
}

/**
 * Initialises every element of `data[0, n)` in parallel with the plan's partition: thread i,
 * pinned to its CPU, writes its schedule(static) block, so each block's pages are first
 * touched, and placed, on thread i's node. `init(i)` gives the value of element i; `data` may
 * be raw storage (from allocate_on_node or mmap). Blocks.
 *
 * The team OpenMP gives may be smaller than the plan (OMP_THREAD_LIMIT, OMP_DYNAMIC, a call
 * inside a parallel region when nesting is off): then thread t also writes blocks t + team,
 * t + 2 team, ..., each from the CPU of that block, so every element is still written and
 * placed as planned; each thread ends on its own CPU.
 * @throws std::invalid_argument for null `data` with n > 0, or a plan without threads or with
 * `node` and `cpu` of different sizes (before the region). An exception from `init` is
 * rethrown after the region (it cannot cross it: std::terminate); the array is then partly
 * written.
 */
template <class T, class F>
void first_touch(const team_plan& plan, T* data, std::size_t n, F&& init) {
  static_assert(std::is_trivially_copyable_v<T>, "first_touch writes raw storage: T must be trivially copyable");
  if (n > 0 && data == nullptr) detail::throw_invalid_argument("first_touch: null data with n > 0");
  if (plan.cpu.size() != plan.node.size())
    detail::throw_invalid_argument("first_touch: the plan has " + std::to_string(plan.node.size()) + " nodes but " +
                                   std::to_string(plan.cpu.size()) + " cpus (one each per thread)");
  if (plan.size() == 0) {
    if (n == 0) return;
    detail::throw_invalid_argument("first_touch: the plan has no threads (plan_team gives at least one)");
  }
  const auto blocks = static_cast<std::size_t>(plan.size());
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(plan.size())
  {
    // Nothing may throw out of here: the team's size comes from OpenMP, not from the plan, and
    // init's exception waits for the end of the region (the other threads stop at a block's end).
    const auto team = static_cast<std::size_t>(omp_get_num_threads());
    const auto me = static_cast<std::size_t>(omp_get_thread_num());
    for (std::size_t b = me; b < blocks && !failed.load(std::memory_order_relaxed); b += team) {
      detail::pin_to_cpu(plan.cpu[b]);
      const auto [lo, hi] = static_block(n, blocks, b);
#if defined(NUMAAFF_NO_EXCEPTIONS)
      for (std::size_t i = lo; i < hi; ++i) new (&data[i]) T(init(i));
#else
      try {
        for (std::size_t i = lo; i < hi; ++i) new (&data[i]) T(init(i));
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
#endif
    }
    if (team < blocks) detail::pin_to_cpu(plan.cpu[me]);
  }
  if (error) std::rethrow_exception(error);
}

/**
 * The work of each thread of a bound team when iterations follow their data: thread i of
 * `plan` gets the index blocks of [first, last) whose data (`array + index * bytes_per_index`)
 * is on plan.node[i], its node's share split among the node's threads in thread order (equal
 * contiguous runs); data on a node without team threads goes to the nearest team node, and
 * unpopulated pages to their schedule(static) owner. For after a next-touch phase, a move_to or
 * place_blocks, when the data is no longer where schedule(static) put it:
 * @code{.cpp}
 * const auto work = numaaff::openmp::blocks_by_data(plan, a, sizeof *a, 0, n);
 * #pragma omp parallel num_threads(plan.size())
 * for (const numaaff::index_block& b : work[omp_get_thread_num()])
 *   for (std::size_t i = b.first; i < b.last; ++i) update(a, i);
 * @endcode
 * What OpenMP cannot express by itself: its schedules cut the index space by thread number
 * (static) or by arrival (dynamic, guided), never by where the data is, and OpenMP 5's
 * `affinity` clause on tasks is a hint that libgomp and LLVM's libomp ignore. There is no
 * balancing here: for irregular work use thread_pool::parallel_for with a dynamic_schedule
 * that follows the data.
 *
 * One batched page query over blocks of at least a page and `grain` indices; allocates.
 * @throws std::invalid_argument for a null array with a non-empty range, bytes_per_index or
 *         grain 0, a range whose data wraps the address space, or a plan without threads;
 *         std::system_error named "move_pages" if the query fails (a sandbox's refusal is no
 *         error: every block then goes to its schedule(static) owner, or on one node to it).
 */
inline std::vector<std::vector<index_block>> blocks_by_data(const team_plan& plan, const void* array, std::size_t bytes_per_index,
                                                            std::size_t first, std::size_t last, std::size_t grain = 1) {
  if (plan.size() == 0) detail::throw_invalid_argument("blocks_by_data: the plan has no threads");
  if (bytes_per_index == 0) detail::throw_invalid_argument("blocks_by_data: bytes_per_index is 0");
  if (grain == 0) detail::throw_invalid_argument("blocks_by_data: grain is 0");
  if (array == nullptr && last > first) detail::throw_invalid_argument("blocks_by_data: array is null");
  const auto threads = static_cast<std::size_t>(plan.size());
  std::vector<node_id> team_nodes;  // distinct, in thread order
  for (node_id n : plan.node)
    if (std::find(team_nodes.begin(), team_nodes.end(), n) == team_nodes.end()) team_nodes.push_back(n);
  const auto slot_of = [&](node_id n) {
    return static_cast<std::size_t>(std::find(team_nodes.begin(), team_nodes.end(), n) - team_nodes.begin());
  };
  const topology& topo = topology::system();
  const auto team_node_for = [&](int data_node, std::size_t index) -> std::size_t {
    if (data_node >= 0) {
      const std::size_t s = slot_of(data_node);
      if (s < team_nodes.size()) return s;
      if (topo.has_node(data_node)) {
        std::size_t best = team_nodes.size();
        for (std::size_t k = 0; k < team_nodes.size(); ++k)
          if (topo.has_node(team_nodes[k]) &&
              (best == team_nodes.size() || topo.distance(data_node, team_nodes[k]) < topo.distance(data_node, team_nodes[best])))
            best = k;
        if (best < team_nodes.size()) return best;
      }
    }
    return slot_of(plan.node[static_part_of(last - first, threads, index - first)]);  // the schedule(static) owner
  };
  std::vector<std::vector<index_block>> per_node(team_nodes.size());
  detail::for_each_data_block("blocks_by_data", array, bytes_per_index, first, last, grain, [&](std::size_t lo, std::size_t hi, int node) {
    const std::size_t s = team_node_for(node, lo);
    std::vector<index_block>& part = per_node[s];
    if (!part.empty() && part.back().last == lo) part.back().last = hi;
    else part.push_back({team_nodes[s], lo, hi});
  });
  std::vector<std::vector<index_block>> work(threads);
  for (std::size_t s = 0; s < team_nodes.size(); ++s) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < threads; ++i)
      if (plan.node[i] == team_nodes[s]) members.push_back(i);
    std::size_t total = 0;
    for (const index_block& b : per_node[s]) total += b.last - b.first;
    std::size_t at = 0, block = 0, offset = 0;  // position in the node's concatenated indices
    for (std::size_t m = 0; m < members.size(); ++m) {
      const std::size_t want = static_block(total, members.size(), m).second;
      while (at < want) {
        const index_block& b = per_node[s][block];
        const std::size_t take = std::min(want - at, b.last - b.first - offset);
        work[members[m]].push_back({b.node, b.first + offset, b.first + offset + take});
        at += take;
        offset += take;
        if (offset == b.last - b.first) ++block, offset = 0;
      }
    }
  }
  return work;
}

}  // namespace numaaff::openmp
