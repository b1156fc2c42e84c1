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
// A finished task leaves every segment (unused segments are erased), so the tracker holds only
// what live tasks touch: no per-task growth over a long run.
//
// Finishing and leaving are two steps, so that a finishing task does not wait for the thread
// registering others (the map has one lock, and registration holds it for a whole task): a
// finishing task marks itself finished under its own small lock, takes its successors, and
// goes on a lock-free stack of finished tasks, on a cache line of its own. A registration
// takes the stack every `drain_every` registrations, a finishing thread every `drain_pushes`
// pushes if the lock is free (so do segments() and the destructor): it takes the tasks out of
// the segments and hands them back through the tracker's `forget` hook. Until then a finished
// task stays in its segments' lists, where a registration sees it finished and waits for
// nothing. The registering thread is the critical path of a chain or a wavefront, and each
// line that it and the finishing threads both write crosses CPUs at every task: finishing
// threads that tried the lock at every push, and a registration that took the stack each
// time, held a chain at OpenMP's speed and at half of oneTBB's. A segment that a range
// of a registered task begins in (`heads`) stays until that task has left, even emptied by a
// later writer, so the range finds it. Commutative updaters are the exception: their running
// set is under the map lock, so they leave at once, waiting for it.
//
// What a task pays is what its own ranges touch, not the size of the map: each range keeps the
// segment it begins in and its slot in that segment's list, so leaving goes straight to it
// and takes the task out in O(1) (a tile's many readers finish in any order); registration
// walks the map once per range. Tiles that match earlier tiles exactly, the common case, cut
// nothing.
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
#include <memory>
#include <new>
#include <mutex>
#include <utility>
#include <vector>

namespace numaaff::detail {

/// How a task uses a range, as the tracker sees it (numaaff::access_mode: out and inout order alike).
enum class dep_mode : unsigned char { read, write, commute };

struct dep_node;
struct dep_range;

/// A list of tasks, the first `inline_count` without an allocation (most lists of a segment
/// hold one or two tasks, most tasks have one or two successors). make_room() may throw;
/// push_back() within the room made cannot.
///
/// Each entry has a slot number that stays its own while it is in the list (moving the entries
/// to the front or to a larger array shifts `base_`, not the slots), so a task that kept its
/// slot leaves in O(1) wherever it is: many readers of one tile finish in any order. A removed
/// entry in the middle becomes a hole (null), skipped by each(); the first and the last entry
/// are never holes. A task without a valid slot is found by a scan.
class task_list {
 public:
  static constexpr std::size_t inline_count = 2;
  static constexpr std::uint32_t no_slot = ~std::uint32_t{0};
  task_list() noexcept = default;
  task_list(const task_list& o) : task_list() {
    reserve(o.capacity_);  // the room made for a registration, kept by a segment's cut
    o.each([this](dep_node* n) { data_[end_++] = n; });  // a new list: slots start again
  }
  task_list& operator=(const task_list&) = delete;
  ~task_list() {
    if (data_ != inline_) delete[] data_;
  }
  /// Room for `extra` more push_back() calls.
  void make_room(std::size_t extra) {
    if (capacity_ - end_ >= extra) return;
    // Holes stay while an older entry lives (a long reader among many short ones): when they
    // are at least half the entries, they go, so a list is never more than twice its tasks.
    // The moved entries' slots no longer match (remove() then scans for them).
    const std::size_t live = static_cast<std::size_t>(
        std::count_if(begin(), end(), [](const dep_node* n) { return n != nullptr; }));
    if (2 * live <= size()) {
      std::copy_if(begin(), end(), data_, [](const dep_node* n) { return n != nullptr; });
      base_ += end_;
      end_ = live;
      head_ = 0;
      if (capacity_ - end_ >= extra) return;
    }
    if (head_ != 0 && capacity_ - size() >= extra) {  // moving to the front is enough
      std::copy(begin(), end(), data_);
      base_ += head_;
      end_ = size();
      head_ = 0;
      return;
    }
    reserve(size() + extra);
  }
  /// @return the entry's slot.
  std::uint32_t push_back(dep_node* n) noexcept {
    data_[end_] = n;
    return slot_of(end_++);
  }
  /// Adds `n` unless it is the last one added (a task naming the same bytes twice).
  /// @return n's slot, or no_slot if it was there already.
  std::uint32_t push_once(dep_node* n) noexcept {
    if (!empty() && data_[end_ - 1] == n) return no_slot;
    return push_back(n);
  }
  void clear() noexcept {
    base_ += end_;
    head_ = end_ = 0;
  }
  /// Removes `n` (present at most once: see push_once), in O(1) when `slot` is its slot.
  void remove(const dep_node* n, std::uint32_t slot = no_slot) noexcept {
    if (empty()) return;
    const std::size_t at = static_cast<std::uint32_t>(slot - static_cast<std::uint32_t>(base_));
    if (slot != no_slot && at >= head_ && at < end_ && data_[at] == n) return erase_at(at);
    if (data_[head_] == n) return erase_at(head_);
    if (data_[end_ - 1] == n) return erase_at(end_ - 1);
    for (std::size_t i = head_ + 1; i < end_; ++i)
      if (data_[i] == n) return erase_at(i);
  }
  /// Removes every `n` (a commutative set's `before` may name a task that both wrote and read).
  void remove_all(const dep_node* n) noexcept {
    for (std::size_t i = head_; i < end_; ++i)
      if (data_[i] == n) data_[i] = nullptr;
    trim();
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
    base_ += end_;
    head_ = end_ = 0;
  }
  bool empty() const noexcept { return head_ == end_; }
  /// Entries, holes included (a bound on the tasks in the list).
  std::size_t size() const noexcept { return end_ - head_; }
  dep_node* back() const noexcept { return data_[end_ - 1]; }
  /// Calls f(task) for each task in the list, oldest first.
  template <class F>
  void each(F&& f) const {
    for (std::size_t i = head_; i < end_; ++i)
      if (data_[i] != nullptr) f(data_[i]);
  }

 private:
  dep_node** begin() const noexcept { return data_ + head_; }
  dep_node** end() const noexcept { return data_ + end_; }
  std::uint32_t slot_of(std::size_t at) const noexcept { return static_cast<std::uint32_t>(base_ + at); }
  void erase_at(std::size_t at) noexcept {
    data_[at] = nullptr;
    trim();
  }
  /// Holes at either end are dropped (the ends are never holes).
  void trim() noexcept {
    while (head_ < end_ && data_[head_] == nullptr) ++head_;
    while (end_ > head_ && data_[end_ - 1] == nullptr) --end_;
    if (head_ == end_) clear();
  }
  void reserve(std::size_t n) {
    if (n <= capacity_ && head_ == 0) return;
    const std::size_t cap = std::max(n, 2 * capacity_);
    auto* d = new dep_node*[cap];
    std::copy(begin(), end(), d);
    if (data_ != inline_) delete[] data_;
    base_ += head_;
    end_ = size();
    head_ = 0;
    data_ = d;
    capacity_ = cap;
  }

  dep_node* inline_[inline_count] = {};
  dep_node** data_ = inline_;
  std::size_t head_ = 0, end_ = 0;  // entries are data_[head_, end_)
  std::size_t capacity_ = inline_count;
  std::size_t base_ = 0;  // slot of data_[0]
};

/// A task's place in the dependence graph (embedded in the task; see dataflow.hpp). It must
/// stay alive, and not be added again, from add() until the tracker forgets it: its hook is
/// called then. A released node may wait on the stack of finished nodes for the next take
/// (dependence_tracker::release): without a hook, it must outlive the tracker, or a call of
/// segments() after its release.
struct dep_node {
  /// Predecessors not yet finished, plus one while the task is being registered.
  std::atomic<std::size_t> waiting{1};
  /// A predecessor was discarded: this task is discarded too when it becomes ready.
  std::atomic<bool> cancelled{false};
  dep_range* accesses = nullptr;  // none empty
  std::size_t count = 0;
  bool commutative = false;           // holds a commutative access
  bool self_overlap = false;          // two of its ranges share a byte (set by add())
  bool holding = false;               // a commutative updater admitted to run (under the lock)
  bool finished = false;              // under `lock`: released; edges to it are not made
  spin_lock lock;                     // successors and finished: registration against release
  task_list successors;               // under `lock`
  union {
    dep_node* comm_link = nullptr;  // a commutative updater: in the running or parked list
    dep_node* finished_link;        // any other task, released: in the stack of finished nodes
  };
  dep_node* work_link = nullptr;      // in a thread's list of ready nodes (dataflow.hpp)
};

/// Map nodes for one tracker, under its lock: a segment is made and erased for most tasks,
/// and the allocator's own locks and bookkeeping cost more than the segment. Nodes come from
/// chunks of `chunk_nodes`, cut in order (a freed node is reused first); the tracker gives
/// every node back before the pool ends (its map goes first), so the chunks end whole. A group
/// makes and ends its tracker on its owner's thread, and programs run many groups one after
/// another there: an ending pool leaves up to `kept_chunks` chunks (1 MiB) to its thread until
/// the thread ends, and the next pool made on that thread starts with them.
class node_pool {
 public:
  /// Every node has room for `node_bytes` (pool_allocator checks the map's node fits).
  static constexpr std::size_t node_bytes = 256;
  static constexpr std::size_t chunk_nodes = 256;  // 64 KiB of nodes
  static constexpr std::size_t kept_chunks = 16;
  // A group that declares no accesses never takes a node: its pool touches nothing of the
  // thread's until its first chunk.
  node_pool() noexcept = default;
  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;
  ~node_pool() {
    if (used_ == nullptr) return;  // no chunk taken (nor the thread's spares)
    // Kept only by a thread whose keeper will free them: one made now, while a static
    // tracker ends at exit, might never run.
    spare_list& t = list();
    const bool keep = t.registered && !t.gone;
    for (chunk* c : {used_, spare_}) {
      while (c != nullptr) {
        chunk* next = c->next;
        if (keep && t.count < kept_chunks) {
          c->next = t.first;
          t.first = c;
          ++t.count;
        } else {
          ::operator delete(c);
        }
        c = next;
      }
    }
  }
  void* take() {
    if (free_ != nullptr) {
      void* p = free_;
      free_ = *static_cast<void**>(p);
      return p;
    }
    if (next_ == limit_) {
      if (used_ == nullptr) {  // the first chunk: the thread's spares come with it
        spare_list& t = spare();
        spare_ = t.first;
        t.first = nullptr;
        t.count = 0;
      }
      chunk* c = spare_;
      if (c != nullptr) spare_ = c->next;
      else c = static_cast<chunk*>(::operator new(sizeof(chunk) + chunk_nodes * node_bytes));
      c->next = used_;
      used_ = c;
      next_ = reinterpret_cast<unsigned char*>(c + 1);
      limit_ = next_ + chunk_nodes * node_bytes;
    }
    void* p = next_;
    next_ += node_bytes;
    return p;
  }
  void give(void* p) noexcept {
    *static_cast<void**>(p) = free_;
    free_ = p;
  }

 private:
  struct alignas(std::max_align_t) chunk {  // nodes follow it
    chunk* next;
  };
  // Trivially destructible, so still readable by a pool that ends after the thread's
  // thread_local destructors ran (a static pool's, at exit): `gone` then sends its chunks back
  // to the allocator. The list is freed by `keeper`'s destructor.
  struct spare_list {
    chunk* first;
    std::size_t count;
    bool registered;  // the keeper is made
    bool gone;        // and has run
  };
  struct spare_keeper {
    spare_keeper() noexcept = default;
    spare_keeper(const spare_keeper&) = delete;
    spare_keeper& operator=(const spare_keeper&) = delete;
    ~spare_keeper() {
      spare_list& t = list();
      t.gone = true;
      while (t.first != nullptr) {
        chunk* next = t.first->next;
        ::operator delete(t.first);
        t.first = next;
      }
      t.count = 0;
    }
  };
  static spare_list& list() noexcept {
    static thread_local spare_list t{nullptr, 0, false, false};
    return t;
  }
  static spare_list& spare() noexcept {
    spare_list& t = list();
    if (!t.gone) {
      static thread_local spare_keeper keeper;  // registers the cleanup on first use
      (void)keeper;
      t.registered = true;
    }
    return t;
  }
  chunk* used_ = nullptr;   // chunks nodes were cut from, the current one first
  chunk* spare_ = nullptr;  // chunks not used yet
  unsigned char* next_ = nullptr;
  unsigned char* limit_ = nullptr;
  void* free_ = nullptr;  // nodes given back
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
    // Instantiated for the map's node type only (the one type it allocates).
    static_assert(sizeof(T) <= node_pool::node_bytes && alignof(T) <= alignof(std::max_align_t),
                  "a tracker's map node no longer fits node_pool::node_bytes");
    return n == 1 ? static_cast<T*>(pool->take()) : static_cast<T*>(::operator new(n * sizeof(T)));
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

/// A run of bytes every live task that touches it covers whole (see the file comment).
struct dep_segment {
  dep_segment() noexcept = default;
  /// A cut's tail: the same tasks; no range begins in it.
  dep_segment(const dep_segment& o)
      : end(o.end), writers(o.writers), readers(o.readers), before(o.before), commutative_set(o.commutative_set) {}
  dep_segment& operator=(const dep_segment&) = delete;
  std::uintptr_t end = 0;
  task_list writers, readers, before;
  std::size_t heads = 0;         // ranges of registered tasks not yet gone that begin here
  bool commutative_set = false;  // writers are an open commutative set
  bool empty() const noexcept { return writers.empty() && readers.empty() && before.empty(); }
  /// Nothing needs it any more.
  bool unused() const noexcept { return heads == 0 && empty(); }
};
using dep_segment_map = std::map<std::uintptr_t, dep_segment, std::less<std::uintptr_t>,
                                 pool_allocator<std::pair<const std::uintptr_t, dep_segment>>>;

/// One declared range: [begin, end).
struct dep_range {
  dep_range() noexcept = default;
  dep_range(std::uintptr_t b, std::uintptr_t e, dep_mode m) noexcept : begin(b), end(e), mode(m) {}
  std::uintptr_t begin = 0, end = 0;
  /// While the task is registered: the segment starting at `begin`. Its `heads` count keeps
  /// it until the task leaves; cuts keep its node.
  dep_segment_map::iterator head{};
  /// While registered: its slot in the head's list of its mode (task_list::no_slot: none).
  std::uint32_t slot = task_list::no_slot;
  dep_mode mode = dep_mode::read;
  bool empty() const noexcept { return begin == end; }
};

/// True if the byte ranges [a) and [b) share a byte.
inline bool overlaps(const dep_range& a, const dep_range& b) noexcept {
  return a.begin < b.end && b.begin < a.end;
}

class dependence_tracker {
 public:
  /// A hook that the tracker calls when it no longer refers to a node: under its lock, so it
  /// must not call into the tracker.
  using forget_hook = void (*)(dep_node&) noexcept;
  explicit dependence_tracker(forget_hook forget = nullptr) noexcept : forget_(forget) {}
  dependence_tracker(const dependence_tracker&) = delete;
  dependence_tracker& operator=(const dependence_tracker&) = delete;
  /// Every task released: forgets the finished ones the stack still holds. A forked child may find the
  /// lock held by a thread it does not have: it leaves the nodes, as it leaves queued tasks.
  ~dependence_tracker() {
    // The owner waited for every task: their pushes are visible. A group that declared no
    // accesses has nothing to forget.
    if (finished_.top.load(std::memory_order_acquire) == nullptr) return;
    if (!lock_.try_lock()) return;
    drain();
    lock_.unlock();
  }

  /// Registers `n` after every task registered before. @return true if it is ready now
  /// (nothing to wait for); otherwise a later release() reports it.
  /// @throws std::bad_alloc with the tracker's order unchanged and `n` not registered.
  bool add(dep_node& n) {
    n.self_overlap = self_overlapping(n);
    lock_.lock();
    if (++adds_ % drain_every == 0) drain();
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    try {
#endif
      prepare(n);  // may throw: nothing linked yet
#if !defined(NUMAAFF_NO_EXCEPTIONS)
    } catch (...) {
      lock_.unlock();
      throw;
    }
#endif
    for (std::size_t i = 0; i < n.count; ++i) link(n, n.accesses[i]);
    lock_.unlock();
    return n.waiting.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

  /**
   * `n` has finished (ran, threw, or was discarded: `discarded`). Each successor it was the
   * last to wait for, and each parked commutative updater it frees, is passed to `ready`. A
   * discarded task's successors are marked cancelled first. `n` may be forgotten (the hook
   * called) before this returns, on this thread or another: the caller must not touch it
   * after the call. It stays the tracker's until it is forgotten: at the next take of the
   * stack of finished nodes (see drain_every and drain_pushes), segments(), or the
   * destructor. Allocates nothing. Waits for the map lock only for a commutative updater.
   */
  template <class Ready>
  void release(dep_node& n, bool discarded, Ready&& ready) noexcept {
    task_list successors;
    {
      std::lock_guard<spin_lock> lock(n.lock);
      n.finished = true;
      n.successors.take(successors);
    }
    dep_node* freed = nullptr;
    const bool commutative = n.commutative;
    if (commutative) {  // the running set is the map lock's: take it, and leave at once
      lock_.lock();
      freed = finish_commutative(n);
      leave_all(n);
      lock_.unlock();
    }
    // Successors before the stack: leaving the segments can wait, they need not.
    successors.each([&](dep_node* s) {
      if (discarded) s->cancelled.store(true, std::memory_order_relaxed);
      if (s->waiting.fetch_sub(1, std::memory_order_acq_rel) == 1) ready(s);
    });
    while (freed != nullptr) {
      dep_node* next = freed->work_link;
      freed->work_link = nullptr;
      ready(freed);
      freed = next;
    }
    if (commutative) return;  // forgotten above: n is gone
    dep_node* top = finished_.top.load(std::memory_order_relaxed);
    do {
      n.finished_link = top;
    } while (!finished_.top.compare_exchange_weak(top, &n, std::memory_order_release, std::memory_order_relaxed));
    // n is the stack's from here. Every drain_pushes-th push takes the stack if the lock is
    // free, so that a tracker nobody registers with any more holds few finished nodes.
    if ((finished_.pushes.fetch_add(1, std::memory_order_relaxed) + 1) % drain_pushes != 0 || !lock_.try_lock()) return;
    drain();
    lock_.unlock();
  }

  /// For a ready commutative updater: true if it may run now (it then holds its bytes until
  /// release()); false if another running updater overlaps it (release() of that one passes
  /// it to `ready` later).
  bool acquire(dep_node& n) noexcept {
    // Nothing here may read the tracker after unlocking: once n is parked, another thread may
    // admit and finish it, and end the group and this tracker.
    lock_.lock();
    bool admitted = true;
    if (n.holding) {
      // admitted by the release that passed it on
    } else if (conflicts_with_running(n)) {
      append(parked_, n);
      admitted = false;
    } else {
      append(running_, n);
      n.holding = true;
    }
    lock_.unlock();
    return admitted;
  }

  /// Segments held once every released task has left (for tests of the plateau).
  std::size_t segments() noexcept {
    lock_.lock();
    drain();
    const std::size_t n = map_.size();
    lock_.unlock();
    return n;
  }

 private:
  using map_type = dep_segment_map;
  using segment = dep_segment;

  /// Under the lock: the finished nodes leave their segments and are forgotten.
  void drain() noexcept {
    dep_node* n = finished_.top.exchange(nullptr, std::memory_order_acquire);
    while (n != nullptr) {
      dep_node* next = n->finished_link;
      leave_all(*n);
      n = next;
    }
  }

  /// Under the lock: `n` leaves its segments and is forgotten.
  void leave_all(dep_node& n) noexcept {
    for (std::size_t i = 0; i < n.count; ++i) leave(n, n.accesses[i]);
    if (forget_ != nullptr) forget_(n);
  }

  /// Two of n's ranges share a byte: then one segment may hold n for two ranges (room for each
  /// in prepare(), the head's slot not to be trusted in leave()). Past 16 ranges, assumed.
  static bool self_overlapping(const dep_node& n) noexcept {
    if (n.count > 16) return true;
    for (std::size_t i = 0; i < n.count; ++i)
      for (std::size_t j = i + 1; j < n.count; ++j)
        if (overlaps(n.accesses[i], n.accesses[j])) return true;
    return false;
  }

  /// The segment starting at `at`, cutting the one that holds `at` if needed (remembered for
  /// the next lookup); else the first segment after `at` (or end()). At most one walk of the
  /// map.
  map_type::iterator segment_from(std::uintptr_t at) {
    if (starts_ != nullptr) {
      const start_entry& e = starts_[start_slot(at)];
      if (e.key == at && e.it != map_.end()) return e.it;
    }
    if (starts_ == nullptr && map_.size() >= starts_from) {
      starts_.reset(new (std::nothrow) start_entry[start_slots]);
      if (starts_ != nullptr)
        for (std::size_t i = 0; i < start_slots; ++i) starts_[i].it = map_.end();
    }
    map_type::iterator it;
    if (last_ != map_.end() && last_->first < at && (it = after(last_), it == map_.end() || it->first >= at)) {
      // the segment made last for a gap is just before `at` (new tiles registered in address
      // order, each after the last): no walk
      if (it != map_.end() && it->first == at) return remember(it);
    } else {
      it = map_.upper_bound(at);
    }
    if (it == map_.begin()) return it;
    auto prev = std::prev(it);
    if (prev->first == at) return remember(prev);
    if (at < prev->second.end) {
      // The tail, with the same tasks, is inserted before the head is shortened: if inserting
      // throws, no byte has left its segment (the cut changes nothing the segment means).
      it = remember(map_.emplace_hint(it, at, prev->second));
      prev->second.end = at;
    }
    return it;
  }

  /// The segment after `it`. New tiles are mostly the last segment, and stepping from the last
  /// climbs the whole tree to find end(): the map knows its last node.
  map_type::iterator after(map_type::iterator it) noexcept {
    return it == std::prev(map_.end()) ? map_.end() : std::next(it);
  }

  /// `it` (end(): none), kept in the table of starts for the next lookup of its start.
  map_type::iterator remember(map_type::iterator it) noexcept {
    if (starts_ != nullptr && it != map_.end()) starts_[start_slot(it->first)] = start_entry{it->first, it};
    return it;
  }
  /// `it` is about to be erased.
  void forget_start(map_type::iterator it) noexcept {
    if (last_ == it) last_ = map_.end();
    if (starts_ == nullptr) return;
    start_entry& e = starts_[start_slot(it->first)];
    if (e.it == it) e.it = map_.end();
  }
  static std::size_t start_slot(std::uintptr_t at) noexcept {
    // Tiles are aligned: the bits above their alignment spread them over the slots.
    return static_cast<std::size_t>((at * 0x9e3779b97f4a7c15ull) >> 52) % start_slots;
  }

  /// Phase one: segments exactly covering every access (each range's head recorded), and room
  /// in every vector link() grows.
  void prepare(dep_node& n) {
    // Without self-overlap each segment is reached by one of n's ranges, once.
    const std::size_t room = n.self_overlap ? n.count : 1;
    for (std::size_t i = 0; i < n.count; ++i) {
      dep_range& a = n.accesses[i];
      if (a.begin >= a.end) continue;  // no bytes: no access (and no cut)
      auto it = segment_from(a.begin);
      std::uintptr_t at = a.begin;
      while (at < a.end) {
        if (it == map_.end() || it->first > at) {  // a gap: a new, empty segment
          segment s;
          s.end = it == map_.end() ? a.end : std::min(a.end, it->first);
          it = last_ = remember(map_.emplace_hint(it, at, std::move(s)));
        } else if (a.end < it->second.end) {  // the last segment reaches past the range: cut it
          remember(map_.emplace_hint(after(it), a.end, it->second));
          it->second.end = a.end;
        }
        if (at == a.begin) a.head = it;
        // Room for what link() adds: this task in the list its mode grows, and one successor
        // in each task it may wait for.
        segment& s = it->second;
        switch (a.mode) {
          case dep_mode::read: s.readers.make_room(room); break;
          case dep_mode::write: s.writers.make_room(room); break;  // cleared first: room 1 is there
          case dep_mode::commute:
            s.writers.make_room(room);
            s.before.make_room(s.writers.size() + s.readers.size() + room);
            break;
        }
        auto room_in = [](dep_node* p) {
          std::lock_guard<spin_lock> lock(p->lock);
          if (!p->finished) p->successors.make_room(1);
        };
        s.writers.each(room_in);
        if (a.mode != dep_mode::read) {
          s.readers.each(room_in);
          s.before.each(room_in);
        }
        at = s.end;
        if (at < a.end) ++it;  // not past the last: a step costs a walk of the tree
      }
    }
  }

  static void edge(dep_node& from, dep_node& to) noexcept {
    if (&from == &to) return;
    std::lock_guard<spin_lock> lock(from.lock);
    if (from.finished) return;  // nothing to wait for (it leaves at the next drain)
    if (!from.successors.empty() && from.successors.back() == &to) return;  // already linked
    from.successors.push_back(&to);  // room reserved by prepare()
    to.waiting.fetch_add(1, std::memory_order_relaxed);
  }

  /// Phase two: no allocation (prepare() reserved it all).
  void link(dep_node& n, dep_range& a) noexcept {
    if (a.begin >= a.end) return;  // no bytes: no segment, no head (callers drop such ranges)
    ++a.head->second.heads;
    auto to_n = [&n](dep_node* p) { edge(*p, n); };
    for (auto it = a.head;; ++it) {  // prepare() made segments from a.begin to a.end
      segment& s = it->second;
      std::uint32_t slot = task_list::no_slot;
      switch (a.mode) {
        case dep_mode::read:
          s.writers.each(to_n);
          slot = s.readers.push_once(&n);
          break;
        case dep_mode::write:
          s.writers.each(to_n);
          s.readers.each(to_n);
          s.writers.clear();
          s.readers.clear();
          s.before.clear();
          slot = s.writers.push_back(&n);
          s.commutative_set = false;
          break;
        case dep_mode::commute:
          if (!(s.commutative_set && s.readers.empty())) {  // open a new set after what is there
            s.before.clear();
            auto to_before = [&s](dep_node* p) { s.before.push_back(p); };
            s.writers.each(to_before);
            s.readers.each(to_before);
            s.writers.clear();
            s.readers.clear();
            s.commutative_set = true;
          }
          s.before.each(to_n);
          slot = s.writers.push_once(&n);
          break;
      }
      if (it == a.head) a.slot = slot;
      if (s.end >= a.end) break;
    }
  }

  /// n leaves the segments of `a`: a reader is in the readers, an updater in the writers, or
  /// either in a later commutative set's `before` (or in none: a later writer took it out
  /// when it registered). The head is there: its `heads` counted this range.
  void leave(dep_node& n, const dep_range& a) noexcept {
    if (a.begin >= a.end) return;
    auto it = a.head;
    --it->second.heads;
    // With two ranges of n sharing bytes, a list may hold n once for both: the head's slot
    // may be the other range's, so look n up.
    std::uint32_t slot = n.self_overlap ? task_list::no_slot : a.slot;
    while (it != map_.end() && it->first < a.end) {
      segment& s = it->second;
      (a.mode == dep_mode::read ? s.readers : s.writers).remove(&n, slot);
      if (!s.before.empty()) s.before.remove_all(&n);
      slot = task_list::no_slot;  // slots are of the head only
      const bool last = s.end >= a.end;  // most ranges are one segment: no step past it
      if (s.unused()) {
        forget_start(it);
        if (last) {
          map_.extract(it);  // erase() would find the next segment, a walk of the tree
          break;
        }
        it = map_.erase(it);
      } else if (!last) {
        ++it;
      }
      if (last) break;
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

  forget_hook forget_;
  spin_lock lock_;  // the map, and the commutative lists
  /// Registrations between two takes of the stack of finished tasks: what a finished task's
  /// node may wait to be forgotten, and how often the stack's line comes to the registering CPU.
  static constexpr std::uint32_t drain_every = 16;
  /// Pushes between two tries of a finishing thread to take the stack: a tracker that nobody
  /// registers with any more holds fewer finished nodes than this once the last try found the
  /// lock free (a try that comes while a registration or a commutative updater holds it
  /// leaves the stack to the next try, or to the next take).
  static constexpr std::uint32_t drain_pushes = 64;
  std::uint32_t adds_ = 0;  // registrations, under the lock
  // Released nodes not yet forgotten: pushed by finishing threads, off the registration's lines.
  struct alignas(64) finished_stack {
    std::atomic<dep_node*> top{nullptr};
    std::atomic<std::uint32_t> pushes{0};
  };
  finished_stack finished_;
  node_pool pool_;  // before map_: it outlives the map's nodes
  map_type map_{map_type::key_compare(), map_type::allocator_type(&pool_)};
  // Where the segments that ranges begin at start, by address: most lookups name a tile
  // registered a moment ago, and a direct-mapped table finds it without walking the tree.
  // Made once the map is large enough for the walk to miss the cache (none if that fails).
  struct start_entry {
    std::uintptr_t key = 0;
    map_type::iterator it;  // map_.end(): empty
  };
  static constexpr std::size_t starts_from = 64, start_slots = 4096;
  std::unique_ptr<start_entry[]> starts_;
  map_type::iterator last_ = map_.end();  // the segment made last for a gap
  dep_node* running_ = nullptr;  // commutative updaters holding their bytes
  dep_node* parked_ = nullptr;   // ready ones waiting for them
};

}  // namespace numaaff::detail
