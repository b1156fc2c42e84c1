// The dependence tracker under allocation failure: a registration that fails at any of its
// allocations leaves the order of the other tasks intact. Its own binary: it replaces the
// global operator new, which a ThreadSanitizer runtime defines itself.
#include <numaaff/task_group.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <thread>
#include <vector>

// Allocation failure injection for this binary: the calling thread's next `fail_after`
// allocations succeed, the one after throws std::bad_alloc (-1: never).
thread_local long fail_after = -1;
#if defined(__GNUC__) && !defined(__clang__)
// g++ takes the replacements' malloc/free for a mismatch with the operator new it inlines.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  if (fail_after >= 0 && fail_after-- == 0) throw std::bad_alloc();
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too (the tracker's table of segment starts): a sanitizer's own would pair
// its allocation with the free() above.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new[](n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

// A registration that fails to allocate (at any of its allocations) leaves the order of the
// other tasks as it was: a later writer of bytes a running writer holds still waits for it,
// even where the failed registration had begun to cut that writer's segment. Map nodes come
// in chunks: writers of other bytes first fill all but one node of the chunk, so the cuts run
// out of it halfway, and each attempt runs on a thread of its own (no chunks kept from the
// last attempt's tracker).
TEST(DataflowErrors, AFailedRegistrationLosesNoOrder) {
  using namespace numaaff::detail;
  std::vector<unsigned char> buf(4096);
  const auto at = reinterpret_cast<std::uintptr_t>(buf.data());
  int failures = 0;
  for (long k = 0;; ++k) {
    bool added = false;
    std::thread([&] {
      dependence_tracker tracker;
      dep_range w_range{at, at + 4096, dep_mode::write};
      dep_node w;
      w.accesses = &w_range;
      w.count = 1;
      EXPECT_TRUE(tracker.add(w));  // the running writer of [0, 4096)
      const std::size_t filling = node_pool::chunk_nodes - 2;
      std::vector<dep_range> filler_ranges;
      std::unique_ptr<dep_node[]> fillers(new dep_node[filling]);
      for (std::size_t i = 0; i < filling; ++i) {
        const std::uintptr_t b = at + 8192 + 64 * i;  // never dereferenced
        filler_ranges.push_back(dep_range{b, b + 64, dep_mode::write});
      }
      for (std::size_t i = 0; i < filling; ++i) {
        fillers[i].accesses = &filler_ranges[i];
        fillers[i].count = 1;
        EXPECT_TRUE(tracker.add(fillers[i]));
      }
      dep_range b_ranges[2] = {{at + 2048, at + 3072, dep_mode::write}, {at + 1000, at + 1100, dep_mode::read}};
      dep_node b;
      b.accesses = b_ranges;
      b.count = 2;
      fail_after = k;
      try {
        tracker.add(b);
        added = true;
      } catch (const std::bad_alloc&) {
        ++failures;
      }
      fail_after = -1;
      dep_range c_range{at + 2500, at + 2600, dep_mode::write};
      dep_node c;
      c.accesses = &c_range;
      c.count = 1;
      EXPECT_FALSE(tracker.add(c)) << "after a registration that failed at allocation " << k
                                   << ", a writer of bytes the running writer holds did not wait for it";
      std::vector<dep_node*> ready;
      auto collect = [&](dep_node* n) { ready.push_back(n); };
      tracker.release(w, false, collect);
      if (added) tracker.release(b, false, collect);
      tracker.release(c, false, collect);
      for (std::size_t i = 0; i < filling; ++i) tracker.release(fillers[i], false, collect);
      EXPECT_EQ(tracker.segments(), 0u);  // forgets every node before the nodes go
    }).join();
    if (added) break;  // every allocation of the registration has failed once
  }
  EXPECT_GT(failures, 0) << "the registration never allocated: nothing was tested";
}

}  // namespace
