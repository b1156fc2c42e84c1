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
#include <functional>
#include <map>
#include <new>
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

struct dep_node;

/// A list of tasks, the first `inline_count` without an allocation (most lists of a segment
/// hold one or two tasks, most tasks have one or two successors). make_room() may throw;
/// push_back() within the room made cannot. Removal is O(1) for the oldest and the newest entry
/// (readers finish in about the order they came, or the reverse where a worker runs its own
/// deque's newest first), else it scans and moves the last entry into the gap.
class task_list {
 public:
  static constexpr std::size_t inline_count = 2;
  task_list() noexcept = default;
  task_list(const task_list& o) : task_list() {
    reserve(o.capacity_);  // the room made for a registration, kept by a segment's cut
    std::copy(o.begin(), o.end(), data_);
    end_ = o.size();
  }
  task_list& operator=(const task_list&) = delete;
  ~task_list() {
    if (data_ != inline_) delete[] data_;
  }
  /// Room for `extra` more push_back() calls.
  void make_room(std::size_t extra) {
    if (capacity_ - end_ >= extra) return;
    if (head_ != 0 && capacity_ - size() >= extra) {  // compacting is enough
      std::copy(begin(), end(), data_);
      end_ = size();
      head_ = 0;
      return;
    }
    reserve(size() + extra);
  }
  void push_back(dep_node* n) noexcept { data_[end_++] = n; }
  /// Adds `n` unless it is the last one added (a task naming the same bytes twice).
  void push_once(dep_node* n) noexcept {
    if (empty() || data_[end_ - 1] != n) data_[end_++] = n;
  }
  void clear() noexcept { head_ = end_ = 0; }
  /// Removes `n` (present at most once: see push_once); the order is not kept.
  void remove(const dep_node* n) noexcept {
    if (empty()) return;
    if (data_[head_] == n) {
      if (++head_ == end_) head_ = end_ = 0;
      return;
    }
    if (data_[end_ - 1] == n) {
      --end_;
      return;
    }
    for (std::size_t i = head_ + 1; i < end_; ++i)
      if (data_[i] == n) {
        data_[i] = data_[--end_];
        return;
      }
  }
  /// Removes every `n` (a commutative set's `before` may name a task that both wrote and read).
  void remove_all(const dep_node* n) noexcept {
    dep_node** last = std::remove(begin(), end(), n);
    end_ = static_cast<std::size_t>(last - data_);
    if (head_ == end_) head_ = end_ = 0;
  }
  /// Moves the contents into `to` (an empty list that never grew), leaving this list empty.
  void take(task_list& to) noexcept {
    if (data_ == inline_) {
      std::copy(begin(), end(), to.inline_);
      to.end_ = size();
    } else {
      to.data_ = data_;
      to.capacity_ = capacity_;
      to.head_ = head_;
      to.end_ = end_;
      data_ = inline_;
      capacity_ = inline_count;
    }
    head_ = end_ = 0;
  }
  bool empty() const noexcept { return head_ == end_; }
  std::size_t size() const noexcept { return end_ - head_; }
  dep_node* back() const noexcept { return data_[end_ - 1]; }
  dep_node** begin() const noexcept { return data_ + head_; }
  dep_node** end() const noexcept { return data_ + end_; }

 private:
  void reserve(std::size_t n) {
    if (n <= capacity_ && head_ == 0) return;
    const std::size_t cap = std::max(n, 2 * capacity_);
    auto* d = new dep_node*[cap];
    std::copy(begin(), end(), d);
    if (data_ != inline_) delete[] data_;
    end_ = size();
    head_ = 0;
    data_ = d;
    capacity_ = cap;
  }

  dep_node* inline_[inline_count] = {};
  dep_node** data_ = inline_;
  std::size_t head_ = 0, end_ = 0;  // entries are data_[head_, end_)
  std::size_t capacity_ = inline_count;
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
  task_list successors;               // under the tracker's lock
  dep_node* comm_link = nullptr;      // in the tracker's running or parked commutative list
  dep_node* work_link = nullptr;      // in a thread's list of ready nodes (dataflow.hpp)
};

/// True if the byte ranges [a) and [b) share a byte.
inline bool overlaps(const dep_range& a, const dep_range& b) noexcept {
  return a.begin < b.end && b.begin < a.end;
}

/// Map nodes recycled by one tracker, under its lock: a segment is made and erased for most
/// tasks, and the allocator's own locks and bookkeeping cost more than the segment.
class node_pool {
 public:
  node_pool() = default;
  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;
  ~node_pool() {
    while (free_ != nullptr) {
      void* next = *static_cast<void**>(free_);
      ::operator delete(free_);
      free_ = next;
    }
  }
  void* take(std::size_t bytes) {
    if (free_ == nullptr) return ::operator new(std::max(bytes, sizeof(void*)));
    void* p = free_;
    free_ = *static_cast<void**>(p);
    return p;
  }
  void give(void* p) noexcept {
    *static_cast<void**>(p) = free_;
    free_ = p;
  }

 private:
  void* free_ = nullptr;
};

/// A std::map allocator over a node_pool (the map allocates only its nodes, one at a time).
template <class T>
struct pool_allocator {
  using value_type = T;
  node_pool* pool;
  explicit pool_allocator(node_pool* p) noexcept : pool(p) {}
  template <class U>
  pool_allocator(const pool_allocator<U>& o) noexcept : pool(o.pool) {}
  T* allocate(std::size_t n) {
    return n == 1 ? static_cast<T*>(pool->take(sizeof(T))) : static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1) pool->give(p);
    else ::operator delete(p);
  }
  template <class U>
  bool operator==(const pool_allocator<U>& o) const noexcept { return pool == o.pool; }
  template <class U>
  bool operator!=(const pool_allocator<U>& o) const noexcept { return pool != o.pool; }
};

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
    task_list successors;
    dep_node* freed = nullptr;
    {
      std::lock_guard<spin_lock> lock(lock_);
      for (std::size_t i = 0; i < n.count; ++i) leave(n, n.accesses[i]);
      n.successors.take(successors);
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
    task_list writers, readers, before;
    bool commutative_set = false;  // writers are an open commutative set
    bool empty() const noexcept { return writers.empty() && readers.empty() && before.empty(); }
  };
  using map_type = std::map<std::uintptr_t, segment, std::less<std::uintptr_t>,
                           pool_allocator<std::pair<const std::uintptr_t, segment>>>;

  /// The segment holding `at` cut in two at `at` (no-op when a segment starts there).
  void cut_at(std::uintptr_t at) {
    auto it = map_.upper_bound(at);
    if (it == map_.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      // The tail, with the same tasks, is inserted before the head is shortened: if inserting
      // throws, no byte has left its segment (the cut changes nothing the segment means).
      map_.emplace_hint(std::next(it), at, it->second);
      it->second.end = at;
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
        // Room for what link() adds: this task in the list its mode grows (k: the task may
        // name the bytes k times), and one successor in each task it may wait for.
        segment& s = it->second;
        if (a.mode == dep_mode::read) s.readers.make_room(k);
        else s.writers.make_room(k);
        if (a.mode == dep_mode::commute) s.before.make_room(s.writers.size() + s.readers.size() + k);
        for (dep_node* p : s.writers) p->successors.make_room(1);
        if (a.mode != dep_mode::read)
          for (task_list* list : {&s.readers, &s.before})
            for (dep_node* p : *list) p->successors.make_room(1);
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
          s.readers.push_once(&n);
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
            for (dep_node* w : s.writers) s.before.push_back(w);
            for (dep_node* r : s.readers) s.before.push_back(r);
            s.writers.clear();
            s.readers.clear();
            s.commutative_set = true;
          }
          for (dep_node* b : s.before) edge(*b, n);
          s.writers.push_once(&n);
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
      s.writers.remove(&n);
      s.readers.remove(&n);
      s.before.remove_all(&n);
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
  node_pool pool_;  // before map_: it outlives the map's nodes
  map_type map_{map_type::key_compare(), map_type::allocator_type(&pool_)};
  dep_node* running_ = nullptr;  // commutative updaters holding their bytes
  dep_node* parked_ = nullptr;   // ready ones waiting for them
};

}  // namespace numaaff::detail
