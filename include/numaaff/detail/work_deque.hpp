// The thread pool's per-worker deque: Chase and Lev's work-stealing deque in the C11 form of
// Le, Pop, Cohen and Zappa Nardelli (PPoPP 2013). The owner pushes and pops at the bottom
// (LIFO: the task it just spawned is hot in its cache), thieves take from the top (FIFO: the
// oldest, usually largest, piece of work). The orderings are written as seq_cst operations
// instead of standalone fences so that ThreadSanitizer, which ignores fences, sees them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace numaaff::detail {

template <class T>
class work_deque {
  static_assert(std::is_pointer<T>::value, "work_deque holds pointers (nullptr means empty)");

 public:
  explicit work_deque(std::size_t capacity = 256) {
    std::size_t c = 1;
    while (c < capacity) c <<= 1;
    rings_.push_back(std::make_unique<ring>(c));
    ring_.store(rings_.back().get(), std::memory_order_relaxed);
  }
  work_deque(const work_deque&) = delete;
  work_deque& operator=(const work_deque&) = delete;

  /// Owner only. Allocates when the ring is full (it doubles; old rings stay until destruction
  /// because a thief may still be reading one).
  void push(T item) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    ring* r = ring_.load(std::memory_order_relaxed);
    // The top only grows: room by an older top is room. Reading the thieves' line at every
    // push would cost a transfer per steal.
    if (b - top_seen_ >= static_cast<std::int64_t>(r->size())) {
      top_seen_ = top_.load(std::memory_order_acquire);
      if (b - top_seen_ >= static_cast<std::int64_t>(r->size())) r = grow(r, top_seen_, b);
    }
    r->put(b, item);
    bottom_.store(b + 1, std::memory_order_release);
  }

  /// Owner only: the newest item, or nullptr.
  T pop() noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    ring* r = ring_.load(std::memory_order_relaxed);
    bottom_.store(b, std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    top_seen_ = t;
    if (t > b) {
      bottom_.store(b + 1, std::memory_order_relaxed);
      return nullptr;
    }
    T item = r->get(b);
    if (t == b) {  // the last item: race the thieves for it
      if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) item = nullptr;
      bottom_.store(b + 1, std::memory_order_relaxed);
    }
    return item;
  }

  /// Any thread: the oldest item, or nullptr when empty or when another thief won it.
  T steal() noexcept {
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (t >= b) return nullptr;
    T item = ring_.load(std::memory_order_acquire)->get(t);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst, std::memory_order_relaxed)) return nullptr;
    return item;
  }

  /// How many items there are, as a snapshot that may be stale by the time it is read. The
  /// loads are seq_cst so that a sleeper's last look before sleeping cannot miss a push.
  std::int64_t size_hint() const noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    const std::int64_t t = top_.load(std::memory_order_seq_cst);
    return b > t ? b - t : 0;
  }

 private:
  class ring {
   public:
    explicit ring(std::size_t n) : mask_(n - 1), slots_(new std::atomic<T>[n]) {}
    std::size_t size() const noexcept { return mask_ + 1; }
    T get(std::int64_t i) const noexcept { return slots_[static_cast<std::size_t>(i) & mask_].load(std::memory_order_relaxed); }
    void put(std::int64_t i, T v) noexcept { slots_[static_cast<std::size_t>(i) & mask_].store(v, std::memory_order_relaxed); }

   private:
    std::size_t mask_;
    std::unique_ptr<std::atomic<T>[]> slots_;
  };

  ring* grow(ring* old, std::int64_t t, std::int64_t b) {
    rings_.push_back(std::make_unique<ring>(old->size() * 2));
    ring* r = rings_.back().get();
    for (std::int64_t i = t; i < b; ++i) r->put(i, old->get(i));
    ring_.store(r, std::memory_order_release);
    return r;
  }

  alignas(64) std::atomic<std::int64_t> top_{0};
  alignas(64) std::atomic<std::int64_t> bottom_{0};
  std::int64_t top_seen_ = 0;  // owner only: a top read earlier, never above the real one
  alignas(64) std::atomic<ring*> ring_{nullptr};
  std::vector<std::unique_ptr<ring>> rings_;  // owner only
};

}  // namespace numaaff::detail
