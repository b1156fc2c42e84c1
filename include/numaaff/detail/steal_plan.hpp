// The scheduling decisions of a thread_pool as a value: which nodes the pool has, whom a
// worker of each node may take work from and after how long, whom to wake for new work, and
// which node a node policy picks. Built from a topology and the options, with no threads and
// no clock: the pool asks it, and table tests check every rule on synthetic topologies.
//
// Rules (the model of thread_pool.hpp's file comment):
// - remote(a): the pool's other nodes in order of distance from a (the thief's row), each with
//   its delay  unit * (distance(a, b) - 10) / 10  (zero under steal_mode::free; no remotes at
//   all under local_only), exact and saturated at nanoseconds::max() ("never").
// - task_scaled_delay: a node whose data-placed tasks take longer than its distance delay is
//   waited for (distance - 10) / 10 of one of its tasks instead, the remote cost the backlog
//   rule below assumes; its starvation bound scales with it. A node that has finished none of
//   them for that bound is waited for its distance delay again.
// - A worker may take a remote node's work (steal_rule) when the delay is zero; otherwise only
//   once it has been idle for the delay, only while that node has no worker free to take the
//   work itself (then it looks again one delay later), and only when that node's queued work
//   would wait there longer than running it remote costs: with w workers all busy and q tasks
//   queued, the last waits about q / w task times; remote, a task costs (distance - 10) / 10 of
//   a task time more (a distance is a relative memory latency), so take when
//   q * 10 > w * (distance - 10). Otherwise the queue stays home until the thief has been idle
//   for starve_delays delays: a node whose workers are held (a long task, one blocked on a
//   future) still has its queue served, after a bounded wait.
// - wake_after(a, bound): whom to wake when a's own workers are all busy: the nodes nearest to a
//   (their rows towards a); nobody for bound work or under local_only.
// - exec: the node with the least unfinished work per worker, ties from a rotating start.
// - least_loaded_of: the same choice among given candidates (a dataflow task whose declared
//   bytes are shared equally by several nodes goes to the least busy of them).
// - fork fallback: a homenode outside the pool maps to the nearest pool node.
#pragma once

#include "../errors.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace numaaff::detail {

/// `d` in nanoseconds, saturated at nanoseconds::max() where duration_cast would overflow (a
/// spin or a delay that long is "never"); 0 for a negative `d`.
inline std::int64_t saturated_ns(std::chrono::microseconds d) noexcept {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const auto us = static_cast<std::int64_t>(d.count());
  if (us <= 0) return 0;
  return us > max / 1000 ? max : us * 1000;
}

/// unit * (distance - local) / local in nanoseconds (local: 10), exact and saturated: computed
/// as (unit / local) * beyond + (unit % local) * beyond / local, since the largest NUMAAFF_STEAL and
/// NUMAAFF_DISTANCES values overflow 64 bits, and a wrapped delay let thieves steal at once.
inline std::int64_t distance_delay_ns(std::int64_t unit_ns, int distance, int local) noexcept {
  if (local <= 0) return 0;  // not a distance matrix; never divide by it
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t beyond = std::max(distance - local, 0);
  const std::int64_t whole = unit_ns / local, part = unit_ns % local * beyond / local;
  if (beyond != 0 && whole > (max - part) / beyond) return max;
  return whole * beyond + part;
}

/// A remote node as a thief sees it.
struct steal_source {
  std::size_t node_index;
  std::uint64_t delay_ns;
  /// distance(thief, node) - local and local: the remote cost of a task, in task times, is
  /// beyond / local.
  int beyond = 0, local = 10;
};

/// What a remote node's work looks like to a thief: its workers, and its tasks queued.
struct home_backlog {
  std::size_t workers = 0, queued = 0;
};

/// What an idle worker does about a remote node that has stealable work.
struct steal_decision {
  bool take = false;
  /// When to look again if not now (UINT64_MAX: no reason to, e.g. not idle yet).
  std::uint64_t look_again_at = UINT64_MAX;
};

/// Pool nodes are addressed by index (0 .. node_count()-1, ascending kernel node numbers);
/// nodes are the kernel's numbers (numaaff::node_id).
class steal_plan {
 public:
  static constexpr std::size_t no_node = static_cast<std::size_t>(-1);

  /**
   * `pool_nodes` ascending, all of them in `all_nodes` (every node of the topology);
   * `distance(a, b)` the matrix (rows: from), `local` the distance of a node to itself (10);
   * distance stealing with `unit` per `local` distance units, or `local_only` (never across
   * nodes), or `free_stealing` (no delays).
   */
  template <class Distance>
  steal_plan(std::vector<int> pool_nodes, const std::vector<int>& all_nodes, Distance&& distance, int local,
             bool local_only, bool free_stealing, std::chrono::microseconds unit)
      : nodes_(std::move(pool_nodes)), local_only_(local_only) {
    const std::size_t count = nodes_.size();
    const std::int64_t unit_ns = saturated_ns(unit);
    delays_.assign(count * count, 0);
    for (std::size_t a = 0; a < count; ++a)
      for (std::size_t b = 0; b < count; ++b)
        if (a != b && !free_stealing)
          delays_[a * count + b] =
              static_cast<std::uint64_t>(distance_delay_ns(unit_ns, distance(nodes_[a], nodes_[b]), local));
    delayed_ = !local_only && std::any_of(delays_.begin(), delays_.end(), [](std::uint64_t d) { return d != 0; });
    remotes_.resize(count);
    thieves_.resize(count);
    for (std::size_t a = 0; a < count; ++a) {
      std::vector<std::size_t> by_distance;  // from a's row; ties by node number
      for (std::size_t b = 0; b < count; ++b)
        if (b != a) by_distance.push_back(b);
      std::stable_sort(by_distance.begin(), by_distance.end(), [&](std::size_t x, std::size_t y) {
        return distance(nodes_[a], nodes_[x]) < distance(nodes_[a], nodes_[y]);
      });
      if (!local_only)
        for (std::size_t b : by_distance)
          remotes_[a].push_back({b, delay_ns(a, b), std::max(distance(nodes_[a], nodes_[b]) - local, 0), local});
      for (std::size_t b = 0; b < count; ++b)
        if (b != a) thieves_[a].push_back(b);
      // Whom to wake: by their rows towards a; ties by node number.
      std::stable_sort(thieves_[a].begin(), thieves_[a].end(), [&](std::size_t x, std::size_t y) {
        return distance(nodes_[x], nodes_[a]) < distance(nodes_[y], nodes_[a]);
      });
    }
    for (int n : all_nodes) {
      if (n < 0) continue;
      std::size_t best = index_of(n);
      if (best == no_node) {
        best = 0;
        for (std::size_t k = 1; k < count; ++k)
          if (distance(n, nodes_[k]) < distance(n, nodes_[best])) best = k;
      }
      if (static_cast<std::size_t>(n) >= nearest_.size()) nearest_.resize(static_cast<std::size_t>(n) + 1, no_node);
      nearest_[static_cast<std::size_t>(n)] = best;
    }
  }

  std::size_t node_count() const noexcept { return nodes_.size(); }
  /// Whether some remote steal waits for a delay (not under local_only or free stealing, nor
  /// on one node): only then do task times change anything (task_scaled_delay).
  bool delayed_stealing() const noexcept { return delayed_; }
  const std::vector<int>& nodes() const noexcept { return nodes_; }
  int node(std::size_t i) const noexcept { return nodes_[i]; }
  /// The index of pool node `n`, or no_node.
  std::size_t index_of(int n) const noexcept {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i] == n) return i;
    return no_node;
  }
  /// The pool node for node `n` of the topology: itself, else the nearest one; no_node for a
  /// node the topology does not have.
  std::size_t nearest(int n) const noexcept {
    return n >= 0 && static_cast<std::size_t>(n) < nearest_.size() ? nearest_[static_cast<std::size_t>(n)] : no_node;
  }

  /// The delay before a worker of node index `from` may take work of `to` (0 for the same).
  std::uint64_t delay_ns(std::size_t from, std::size_t to) const noexcept { return delays_[from * nodes_.size() + to]; }
  /// The remote nodes a worker of `from` looks at, nearest first (none under local_only).
  const std::vector<steal_source>& remotes(std::size_t from) const noexcept { return remotes_[from]; }
  /// Whom to wake, in order, when node `home`'s own workers cannot take new work now.
  const std::vector<std::size_t>& wake_after(std::size_t home, bool bound) const noexcept {
    return bound || local_only_ ? nobody_ : thieves_[home];
  }

  /**
   * The delay before a thief may take remote node r's work when r's data-placed tasks take
   * `task_ns` each: the remote cost of one of them (beyond / local of a task time), if that is
   * longer than r's distance delay. A thief that has waited that long has lost what running
   * the task remote would cost; before, the home node may yet start it, or new work of the
   * thief's own node arrive. `since_ns`: how long ago r last finished such a task; once that
   * is over starve_delays of the scaled delay, r no longer runs them (or its workers are held)
   * and the distance delay holds again. Zero stays zero (free stealing); task_ns 0 (none
   * measured) keeps the distance delay.
   */
  static std::uint64_t task_scaled_delay(const steal_source& r, std::uint64_t task_ns, std::uint64_t since_ns) noexcept {
    if (r.delay_ns == 0 || task_ns == 0) return r.delay_ns;
    constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const auto scaled = static_cast<std::uint64_t>(
        distance_delay_ns(static_cast<std::int64_t>(std::min(task_ns, max)), r.local + r.beyond, r.local));
    if (scaled <= r.delay_ns || since_ns > times(scaled, starve_delays)) return r.delay_ns;
    return scaled;
  }

  /// A running average of task times: each sample weighs 1/8, and counts for at most twice
  /// the average (a task that blocked, or ran a nested group while it waited, is not what the
  /// node's tasks cost: one such sample moves the average by 1/8 at most); the first is taken
  /// whole.
  static std::uint64_t averaged(std::uint64_t average, std::uint64_t sample) noexcept {
    if (average == 0) return sample;
    const std::uint64_t bounded = sample / 2 > average ? 2 * average : sample;
    return average - average / 8 + bounded / 8;
  }

  /// Idle for this many delays, a thief takes a node's queued work however short its queue.
  /// A fixed number of delays, not one that grows with the node's queue: a task blocked on a
  /// future of its own child must see the child stolen in the end (for a node of long
  /// dataflow tasks, after 20 of its scaled delays: task_scaled_delay).
  static constexpr std::uint64_t starve_delays = 20;

  /**
   * May a worker idle since `idle_since` (0: its idle clock has not started; callers start it
   * at their first periodic look at the clock after looks for work failed) take the stealable
   * work of a remote node `r` at time `now`? `home_has_free_worker()` says whether a worker of
   * r's own node is free to take the work now, `backlog()` gives r's workers and queued tasks;
   * both are asked only once the delay has passed. Pure: the same answer for the same inputs.
   */
  template <class HomeHasFreeWorker, class Backlog>
  static steal_decision steal_rule(const steal_source& r, std::uint64_t idle_since, std::uint64_t now,
                                   HomeHasFreeWorker&& home_has_free_worker, Backlog&& backlog) {
    steal_decision d;
    if (r.delay_ns == 0) {
      d.take = true;
      return d;
    }
    if (idle_since == 0) return d;  // not idle yet: remote work must wait
    const std::uint64_t ready = add_saturated(idle_since, r.delay_ns);
    if (now < ready) {
      d.look_again_at = ready;
      return d;
    }
    // Work its own node can start now is left to it: thieves take only what the home node
    // cannot, so a burst of submissions is not scattered while the home node's workers wake.
    if (home_has_free_worker()) {
      d.look_again_at = add_saturated(now, r.delay_ns);
      return d;
    }
    // Work the home node will start sooner than it would run remote stays home, until the
    // thief has idled long enough to think the home node's workers held.
    const home_backlog b = backlog();
    const std::uint64_t starved = add_saturated(idle_since, times(r.delay_ns, starve_delays));
    __extension__ using wide = unsigned __int128;  // a NUMAAFF_DISTANCES value may be near INT_MAX
    const bool worth_it = wide(b.queued) * static_cast<unsigned>(r.local) > wide(b.workers) * static_cast<unsigned>(r.beyond);
    if (!worth_it && now < starved) {
      d.look_again_at = std::min(starved, add_saturated(now, r.delay_ns));
      return d;
    }
    d.take = true;
    return d;
  }

  /**
   * node_policy::exec: the node with the least unfinished work per worker, `unfinished(i)` and
   * `workers(i)` for node index i; ties go to the first from `start` on (a rotating start lets
   * equal nodes share new work).
   */
  template <class Unfinished, class Workers>
  std::size_t least_loaded(std::size_t start, Unfinished&& unfinished, Workers&& workers) const {
    const std::size_t count = nodes_.size();
    return least_loaded_of(
        count, [&](std::size_t k) { return (start + k) % count; }, unfinished, workers);
  }

  /**
   * Of the `count` candidates `candidate(0) .. candidate(count - 1)` (node indices), the one
   * with the least `load(i)` per worker (`workers(i)`); ties go to the earliest candidate.
   * A node with no workers counts as one worker. No candidates: no_node.
   */
  template <class Candidate, class Load, class Workers>
  static std::size_t least_loaded_of(std::size_t count, Candidate&& candidate, Load&& load, Workers&& workers) {
    if (count == 0) return no_node;
    std::size_t best = candidate(0);
    std::int64_t best_load = 0, best_workers = 1;
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t i = candidate(k);
      const std::int64_t l = static_cast<std::int64_t>(load(i));
      const auto w = std::max<std::int64_t>(static_cast<std::int64_t>(workers(i)), 1);
      if (k == 0 || l * best_workers < best_load * w) {
        best = i;
        best_load = l;
        best_workers = w;
      }
    }
    return best;
  }

 private:
  static std::uint64_t add_saturated(std::uint64_t a, std::uint64_t b) noexcept { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
  static std::uint64_t times(std::uint64_t a, std::uint64_t k) noexcept { return a > UINT64_MAX / k ? UINT64_MAX : a * k; }

  std::vector<int> nodes_;
  bool local_only_;
  bool delayed_ = false;  // delayed_stealing()
  std::vector<std::uint64_t> delays_;                 // [from * count + to]
  std::vector<std::vector<steal_source>> remotes_;   // by distance from the thief
  std::vector<std::vector<std::size_t>> thieves_;    // by their distance towards the node
  std::vector<std::size_t> nearest_;  // by node number: every node of the topology, direct lookup on each fork submit
  std::vector<std::size_t> nobody_;  // wake_after for bound work and local_only
};

}  // namespace numaaff::detail
