// The iteration space of a dynamic NUMA loop (thread_pool::parallel_for with a
// dynamic_schedule): each pool node owns a part (one contiguous block, or the blocks whose
// data is on it), which its workers take chunk by chunk from the front, guided (large chunks
// first, never below the grain); a worker whose node has nothing left helps the other nodes,
// nearest first, taking chunks from the back of their parts, so that the owners keep the front
// (the data they started on) and the helped indices are a suffix of each part. Values and
// locks only, no threads and no clock: the rules are tested by calling them.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

namespace numaaff::detail {

/// A chunk of iterations [first, last).
struct loop_chunk {
  std::size_t first = 0;
  std::size_t last = 0;
};

/// The iterations one node owns: segments taken from the front by the node's workers and from
/// the back by helpers, under a spin lock (a claim is a few instructions; chunks are much
/// longer). Thread-safe; never allocates after assign().
class node_work {
 public:
  node_work() = default;
  node_work(const node_work&) = delete;
  node_work& operator=(const node_work&) = delete;

  /// The part: segments in index order, each [first, last) non-empty. Not thread-safe.
  void assign(std::vector<loop_chunk> segments) {
    segments_ = std::move(segments);
    front_ = 0;
    back_ = segments_.size();
    left_ = 0;
    for (const loop_chunk& s : segments_) left_ += s.last - s.first;
  }

  /// Iterations not yet taken.
  std::size_t left() const {
    guard g(lock_);
    return left_;
  }

  /// A chunk from the front (an owner): `left / (2 * takers)` iterations, at least `grain`, at
  /// most what the front segment holds. False when nothing is left.
  bool take_front(std::size_t grain, std::size_t takers, loop_chunk& out) {
    guard g(lock_);
    while (front_ < back_ && segments_[front_].first == segments_[front_].last) ++front_;
    if (front_ == back_) return false;
    loop_chunk& s = segments_[front_];
    const std::size_t n = chunk(grain, takers, s.last - s.first);
    out = {s.first, s.first + n};
    s.first += n;
    left_ -= n;
    return true;
  }

  /// A chunk from the back (a helper), sized as take_front's.
  bool take_back(std::size_t grain, std::size_t takers, loop_chunk& out) {
    guard g(lock_);
    while (back_ > front_ && segments_[back_ - 1].first == segments_[back_ - 1].last) --back_;
    if (front_ == back_) return false;
    loop_chunk& s = segments_[back_ - 1];
    const std::size_t n = chunk(grain, takers, s.last - s.first);
    out = {s.last - n, s.last};
    s.last -= n;
    left_ -= n;
    return true;
  }

 private:
  struct guard {
    explicit guard(std::atomic_flag& f) noexcept : flag(f) {
      while (flag.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
    }
    ~guard() { flag.clear(std::memory_order_release); }
    std::atomic_flag& flag;
  };
  std::size_t chunk(std::size_t grain, std::size_t takers, std::size_t in_segment) const noexcept {
    std::size_t n = left_ / (2 * (takers == 0 ? 1 : takers));
    if (n < grain) n = grain;
    return n < in_segment ? n : in_segment;
  }

  alignas(64) mutable std::atomic_flag lock_ = ATOMIC_FLAG_INIT;
  std::vector<loop_chunk> segments_;
  std::size_t front_ = 0, back_ = 0, left_ = 0;
};

/// The parts of every pool node and whom each node helps.
class dynamic_loop {
 public:
  /// `parts[ni]`: node index ni's segments; `takers[ni]`: its workers; `helps[ni]`: the node
  /// indices its workers help when its part is done, nearest first (empty: they do not help).
  dynamic_loop(std::vector<std::vector<loop_chunk>> parts, std::vector<std::size_t> takers,
               std::vector<std::vector<std::size_t>> helps, std::size_t grain)
      : work_(parts.size()), takers_(std::move(takers)), helps_(std::move(helps)), grain_(grain) {
    for (std::size_t ni = 0; ni < parts.size(); ++ni) work_[ni].assign(std::move(parts[ni]));
  }

  /// What a worker of node index `ni` does: its node's chunks, then the others' from the back.
  /// `body(first, last, owner)` runs each chunk; `owner` is the node index whose part it is.
  template <class Body>
  void run(std::size_t ni, Body&& body) {
    loop_chunk c;
    while (work_[ni].take_front(grain_, takers_[ni], c)) body(c.first, c.last, ni);
    for (std::size_t other : helps_[ni])
      while (work_[other].take_back(grain_, takers_[other], c)) body(c.first, c.last, other);
  }

  std::size_t left(std::size_t ni) const { return work_[ni].left(); }

 private:
  std::vector<node_work> work_;
  std::vector<std::size_t> takers_;
  std::vector<std::vector<std::size_t>> helps_;
  std::size_t grain_;
};

}  // namespace numaaff::detail
