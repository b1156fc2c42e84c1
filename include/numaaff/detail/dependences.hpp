// Dependence tracking for dataflow tasks: which earlier tasks a new task must wait for, by the
// bytes they declare, and which waiting tasks a finished one releases.
//
// The tracker keeps the address space its live tasks touch as disjoint segments (a map from
// start address), cut wherever a declared range begins or ends, so partial overlaps are exact.
// Each segment remembers the unfinished tasks that matter to a newcomer:
//   writers   the last writer, or the open set of commutative updaters since the last writer;
//   readers   the readers since then;
//   before    for a commutative set, what its members wait for (the accesses before the set).
// A reader waits for the writers; a writer waits for writers and readers and becomes the only
// writer; a commutative updater joins an open set (waiting for `before`) or opens one.
// A finished task leaves every segment (empty segments are erased), so the tracker holds only
// what live tasks touch: no per-task growth over a long run.
//
// Registration first cuts segments and reserves every vector it will grow (this may throw
// std::bad_alloc: cutting a segment in two does not change what it means), then links the task
// without allocating, so a failed registration leaves the order of the other tasks intact.
//
// Commutative updaters that are ready also need the bytes to themselves: acquire() admits one
// when no running commutative updater overlaps it, else parks it until one finishes.
#pragma once

#include "futex.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace numaaff::detail {

/// How a task uses a range, as the tracker sees it (numaaff::access_mode: out and inout order alike).
enum class dep_mode : unsigned char { read, write, commute };

/// One declared range: [begin, end).
struct dep_range {
  std::uintptr_t begin = 0, end = 0;
  dep_mode mode = dep_mode::read;
  bool empty() const noexcept { return begin == end; }
};

/// A task's place in the dependence graph (embedded in the task; see dataflow.hpp).
struct dep_node {
  /// Predecessors not yet finished, plus one while the task is being registered.
  std::atomic<std::size_t> waiting{1};
  /// A predecessor was discarded: this task is discarded too when it becomes ready.
  std::atomic<bool> cancelled{false};
  const dep_range* accesses = nullptr;  // none empty
  std::size_t count = 0;
  bool commutative = false;           // holds a commutative access
  bool holding = false;               // a commutative updater admitted to run (under the lock)
  std::vector<dep_node*> successors;  // under the tracker's lock
  dep_node* comm_link = nullptr;      // in the tracker's running or parked commutative list
  dep_node* work_link = nullptr;      // in a thread's list of ready nodes (dataflow.hpp)
};

/// True if the byte ranges [a) and [b) share a byte.
inline bool overlaps(const dep_range& a, const dep_range& b) noexcept {
  return a.begin < b.end && b.begin < a.end;
}

class dependence_tracker {
 public:
  dependence_tracker() = default;
  dependence_tracker(const dependence_tracker&) = delete;
  dependence_tracker& operator=(const dependence_tracker&) = delete;

  /// Registers `n` after every task registered before. @return true if it is ready now
  /// (nothing to wait for); otherwise a later release() reports it.
  /// @throws std::bad_alloc with the tracker's order unchanged and `n` not registered.
  bool add(dep_node& n) {
    std::lock_guard<spin_lock> lock(lock_);
    prepare(n);  // may throw: nothing linked yet
    for (std::size_t i = 0; i < n.count; ++i) link(n, n.accesses[i]);
    return n.waiting.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

  /**
   * `n` has finished (ran, threw, or was discarded: `discarded`). It leaves the segments; each
   * successor it was the last to wait for, and each parked commutative updater it frees, is
   * passed to `ready` after the lock is released. A discarded task's successors are marked
   * cancelled first. Allocates nothing.
   */
  template <class Ready>
  void release(dep_node& n, bool discarded, Ready&& ready) noexcept {
    std::vector<dep_node*> successors;
    dep_node* freed = nullptr;
    {
      std::lock_guard<spin_lock> lock(lock_);
      for (std::size_t i = 0; i < n.count; ++i) leave(n, n.accesses[i]);
      successors.swap(n.successors);
      if (n.commutative) freed = finish_commutative(n);
    }
    for (dep_node* s : successors) {
      if (discarded) s->cancelled.store(true, std::memory_order_relaxed);
      if (s->waiting.fetch_sub(1, std::memory_order_acq_rel) == 1) ready(s);
    }
    while (freed != nullptr) {
      dep_node* next = freed->work_link;
      freed->work_link = nullptr;
      ready(freed);
      freed = next;
    }
  }

  /// For a ready commutative updater: true if it may run now (it then holds its bytes until
  /// release()); false if another running updater overlaps it (release() of that one passes
  /// it to `ready` later).
  bool acquire(dep_node& n) noexcept {
    std::lock_guard<spin_lock> lock(lock_);
    if (n.holding) return true;  // admitted by the release that passed it on
    if (conflicts_with_running(n)) {
      append(parked_, n);
      return false;
    }
    append(running_, n);
    n.holding = true;
    return true;
  }

  /// Segments held (for tests of the plateau).
  std::size_t segments() const noexcept {
    std::lock_guard<spin_lock> lock(lock_);
    return map_.size();
  }

 private:
  struct segment {
    std::uintptr_t end = 0;
    std::vector<dep_node*> writers, readers, before;
    bool commutative_set = false;  // writers are an open commutative set
    bool empty() const noexcept { return writers.empty() && readers.empty() && before.empty(); }
  };
  using map_type = std::map<std::uintptr_t, segment>;

  template <class V>
  static void make_room(V& v, std::size_t extra) {
    if (v.capacity() - v.size() < extra) v.reserve(std::max(v.size() + extra, 2 * v.capacity()));
  }

  /// The segment holding `at` cut in two at `at` (no-op when a segment starts there).
  void cut_at(std::uintptr_t at) {
    auto it = map_.upper_bound(at);
    if (it == map_.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      segment tail = it->second;  // the same tasks: the cut changes nothing it means
      it->second.end = at;
      map_.emplace_hint(std::next(it), at, std::move(tail));
    }
  }

  /// Phase one: segments exactly covering every access, and room in every vector link() grows.
  void prepare(dep_node& n) {
    const std::size_t k = n.count;
    for (std::size_t i = 0; i < k; ++i) {
      const dep_range& a = n.accesses[i];
      cut_at(a.begin);
      cut_at(a.end);
      std::uintptr_t at = a.begin;
      auto it = map_.lower_bound(at);
      while (at < a.end) {
        if (it == map_.end() || it->first > at) {  // a gap: a new, empty segment
          segment s;
          s.end = it == map_.end() ? a.end : std::min(a.end, it->first);
          it = map_.emplace_hint(it, at, std::move(s));
        }
        segment& s = it->second;
        make_room(s.writers, k);
        make_room(s.readers, k);
        make_room(s.before, s.writers.size() + s.readers.size() + k);
        for (auto* list : {&s.writers, &s.readers, &s.before})
          for (dep_node* p : *list) make_room(p->successors, k);
        at = s.end;
        ++it;
      }
    }
  }

  static void edge(dep_node& from, dep_node& to) noexcept {
    if (&from == &to) return;
    if (!from.successors.empty() && from.successors.back() == &to) return;  // already linked
    from.successors.push_back(&to);  // room reserved by prepare()
    to.waiting.fetch_add(1, std::memory_order_relaxed);
  }

  /// Phase two: no allocation (prepare() reserved it all).
  void link(dep_node& n, const dep_range& a) noexcept {
    for (auto it = map_.find(a.begin); it != map_.end() && it->first < a.end; ++it) {
      segment& s = it->second;
      switch (a.mode) {
        case dep_mode::read:
          for (dep_node* w : s.writers) edge(*w, n);
          s.readers.push_back(&n);
          break;
        case dep_mode::write:
          for (dep_node* w : s.writers) edge(*w, n);
          for (dep_node* r : s.readers) edge(*r, n);
          s.writers.clear();
          s.readers.clear();
          s.before.clear();
          s.writers.push_back(&n);
          s.commutative_set = false;
          break;
        case dep_mode::commute:
          if (!(s.commutative_set && s.readers.empty())) {  // open a new set after what is there
            s.before.clear();
            s.before.insert(s.before.end(), s.writers.begin(), s.writers.end());
            s.before.insert(s.before.end(), s.readers.begin(), s.readers.end());
            s.writers.clear();
            s.readers.clear();
            s.commutative_set = true;
          }
          for (dep_node* b : s.before) edge(*b, n);
          s.writers.push_back(&n);
          break;
      }
    }
  }

  void leave(dep_node& n, const dep_range& a) noexcept {
    auto it = map_.upper_bound(a.begin);
    if (it != map_.begin()) --it;
    while (it != map_.end() && it->first < a.end) {
      segment& s = it->second;
      if (s.end <= a.begin) {
        ++it;
        continue;
      }
      for (auto* list : {&s.writers, &s.readers, &s.before}) list->erase(std::remove(list->begin(), list->end(), &n), list->end());
      it = s.empty() ? map_.erase(it) : std::next(it);
    }
  }

  static bool commutative_overlap(const dep_node& x, const dep_node& y) noexcept {
    for (std::size_t i = 0; i < x.count; ++i) {
      if (x.accesses[i].mode != dep_mode::commute) continue;
      for (std::size_t j = 0; j < y.count; ++j)
        if (y.accesses[j].mode == dep_mode::commute && overlaps(x.accesses[i], y.accesses[j])) return true;
    }
    return false;
  }
  bool conflicts_with_running(const dep_node& n) const noexcept {
    for (const dep_node* r = running_; r != nullptr; r = r->comm_link)
      if (r != &n && commutative_overlap(n, *r)) return true;
    return false;
  }
  static void append(dep_node*& head, dep_node& n) noexcept {
    n.comm_link = nullptr;
    dep_node** p = &head;
    while (*p != nullptr) p = &(*p)->comm_link;
    *p = &n;
  }
  static void unlink(dep_node*& head, dep_node& n) noexcept {
    for (dep_node** p = &head; *p != nullptr; p = &(*p)->comm_link)
      if (*p == &n) {
        *p = n.comm_link;
        n.comm_link = nullptr;
        return;
      }
  }
  /// `n` leaves the running updaters; parked ones it no longer blocks start, in arrival order.
  /// @return them, linked through work_link.
  dep_node* finish_commutative(dep_node& n) noexcept {
    unlink(running_, n);
    dep_node* freed = nullptr;
    dep_node** tail = &freed;
    for (dep_node** p = &parked_; *p != nullptr;) {
      dep_node& w = **p;
      if (conflicts_with_running(w)) {
        p = &w.comm_link;
        continue;
      }
      *p = w.comm_link;
      append(running_, w);
      w.holding = true;
      *tail = &w;
      tail = &w.work_link;
    }
    return freed;
  }

  mutable spin_lock lock_;
  map_type map_;
  dep_node* running_ = nullptr;  // commutative updaters holding their bytes
  dep_node* parked_ = nullptr;   // ready ones waiting for them
};

}  // namespace numaaff::detail
