// Helpers for thread-pool tests: gates tasks can block on, occupying a node's workers, running
// stealable work without the caller helping, the pool's view of the running worker's node, and
// a guard that turns a hang into a failure.
#pragma once

#include <numaaff/thread_pool.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>

namespace numaaff_test {

/// A one-shot gate tasks can block on. Its destructor waits for the tasks still inside pass():
/// a test's gate usually goes before its pool, whose destructor is what waits for those tasks.
class gate {
 public:
  gate() = default;
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;
  ~gate() {
    std::unique_lock<std::mutex> g(m_);
    cv_.wait(g, [&] { return inside_ == 0; });
  }
  void open() {
    std::lock_guard<std::mutex> g(m_);
    open_ = true;
    cv_.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> g(m_);
    ++inside_;
    cv_.wait(g, [&] { return open_; });
    if (--inside_ == 0) cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
  int inside_ = 0;
};

/// Counts arrivals so a test can wait until n tasks are running.
class arrivals {
 public:
  void arrive() { n_.fetch_add(1); }
  void await(int n) const {
    while (n_.load() < n) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }

 private:
  std::atomic<int> n_{0};
};

/// Ends the test program if it is still alive after `limit`: a test of "this returns" then
/// fails in seconds instead of hanging until ctest's timeout. Disarmed by its destructor.
class hang_guard {
 public:
  hang_guard(std::chrono::seconds limit, std::string what) : what_(std::move(what)) {
    watcher_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> g(m_);
      if (!cv_.wait_for(g, limit, [&] { return done_; })) {
        std::fprintf(stderr, "hang_guard: %s did not return within %lld s\n", what_.c_str(),
                     static_cast<long long>(limit.count()));
        std::_Exit(1);  // no destructor may wait for the hung threads
      }
    });
  }
  hang_guard(const hang_guard&) = delete;
  hang_guard& operator=(const hang_guard&) = delete;
  ~hang_guard() {
    {
      std::lock_guard<std::mutex> g(m_);
      done_ = true;
    }
    cv_.notify_all();
    watcher_.join();
  }

 private:
  std::string what_;
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watcher_;
};

/// The node of the worker running the caller (the pool's own view: synthetic nodes are logical).
inline numaaff::node_id worker_node() {
  const numaaff::thread_pool* p = numaaff::thread_pool::current();
  return p != nullptr ? p->worker_node(static_cast<std::size_t>(numaaff::thread_pool::current_worker_index())) : -1;
}

/// Runs `f` as stealable work with homenode `node` and waits without helping (a helping wait
/// from this thread would run it here).
template <class F>
void run_stealable_and_wait(numaaff::thread_pool& pool, numaaff::node_id node, F f) {
  std::promise<void> done;
  numaaff::task_group tg(pool);
  tg.run(node, [&] {
    f();
    done.set_value();
  });
  done.get_future().get();
}

/// Occupies every worker of `node` until `g` opens.
inline void block_node(numaaff::thread_pool& pool, numaaff::node_id node, gate& g, arrivals& in) {
  for (std::size_t k = 0; k < pool.workers_on(node); ++k) pool.post(node, [&] { in.arrive(); g.pass(); });
}

}  // namespace numaaff_test
