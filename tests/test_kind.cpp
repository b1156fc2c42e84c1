// The heap by kind (kind.hpp) on this host: every kind allocates, frees without its size and
// resizes; misuse aborts; strict kinds refuse what their node has no room for; blocks of a
// strict and a preferred kind never share a page; the allocator and resource forms; fork;
// cross-thread frees with a bounded resident size. Placement on several nodes is in
// tests/numa/test_kind_numa.cpp.
#include <numaaff/kind.hpp>
#include <numaaff/policy.hpp>
#include <numaaff/system_report.hpp>

#include "common/exceptions.hpp"
#include "common/placement_check.hpp"
#include "common/process.hpp"
#include "common/sanitizers.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <new>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory_resource>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using numaaff::kind;

namespace {

const std::vector<kind>& every_kind() {
  static const std::vector<kind> kinds = {
      kind::local(),          kind::on_node(numaaff_test::sysfs_nodes().front()), kind::interleave(),
      kind::fastest(),        kind::capacity(),
      kind::local().preferred(), kind::interleave().preferred(), kind::fastest().preferred(),
      kind::capacity().preferred(), kind::on_node(numaaff_test::sysfs_nodes().front()).preferred(),
      kind::local().with_pages(numaaff::huge_page_mode::never),
      kind::local().with_pages(numaaff::huge_page_mode::always)};
  return kinds;
}

const std::size_t sizes[] = {1, 16, 17, 64, 1000, 4096, 32 * 1024, 32 * 1024 + 1, 1 << 20, (4 << 20) + 3};

/// Two CPUs the calling thread may run on; false when it has one (`a` is then that CPU).
bool two_cpus(int& a, int& b) {
  const std::vector<int> cpus = numaaff_test::thread_cpus();
  a = cpus.empty() ? 0 : cpus.front();
  b = cpus.size() > 1 ? cpus[1] : -1;
  return b >= 0;
}

/// The first CPU the calling thread may run on.
int first_cpu() {
  const std::vector<int> cpus = numaaff_test::thread_cpus();
  return cpus.empty() ? 0 : cpus.front();
}

/// Pins the calling thread to `cpu`; a failure is reported and the caller goes on, so that no
/// barrier it takes part in hangs.
void pin_here(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(static_cast<std::size_t>(cpu), &one);
  EXPECT_EQ(sched_setaffinity(0, sizeof one, &one), 0) << "pinning to CPU " << cpu;
}

/// Runs `f` on a thread of its own pinned to `cpu`, and waits for it.
template <class F>
void on_cpu(int cpu, F f) {
  std::thread([&] {
    pin_here(cpu);
    f();
  }).join();
}

std::uintptr_t slab_start(const void* p) { return reinterpret_cast<std::uintptr_t>(numaaff::detail::slab_of(p)); }

}  // namespace

TEST(Kind, EveryKindAllocatesWritesAndFreesWithoutItsSize) {
  for (const kind& k : every_kind())
    for (std::size_t bytes : sizes) {
      auto* p = static_cast<unsigned char*>(numaaff::allocate(k, bytes));
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t), 0u);
      EXPECT_GE(numaaff::usable_size(p), bytes);
      std::memset(p, 0x5a, bytes);
      const numaaff_test::raw_placement raw = numaaff_test::query_pages(p, bytes);
      EXPECT_EQ(raw.unpopulated + raw.other_errors, 0u) << bytes << " bytes: every written page is resident";
      numaaff::deallocate(p);
    }
}

TEST(Kind, AlignmentsArePowersOfTwoAndHonoured) {
  for (std::size_t align : {std::size_t{16}, std::size_t{64}, std::size_t{4096}, std::size_t{65536}, std::size_t{2} << 20}) {
    void* p = numaaff::allocate(kind::local(), 100, align);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % align, 0u) << align;
    numaaff::deallocate(p);
  }
  const std::string what = numaaff_test::what_of<std::invalid_argument>([] { numaaff::allocate(kind::local(), 64, 48); });
  EXPECT_NE(what.find("align"), std::string::npos) << what;
  std::error_code ec;
  EXPECT_EQ(numaaff::allocate(kind::local(), 64, 0, ec), nullptr);
  EXPECT_EQ(ec, std::errc::invalid_argument);
}

TEST(Kind, AnUnknownNodeIsAnInvalidArgumentNamingIt) {
  const std::string what = numaaff_test::what_of<std::invalid_argument>([] { (void)kind::on_node(4096); });
  EXPECT_NE(what.find("node"), std::string::npos) << what;
  EXPECT_THROW((void)kind::on_node(-1), std::invalid_argument);
}

TEST(Kind, ReallocateKeepsTheContentsAndTheBlockWhenItFits) {
  for (const kind& k : every_kind()) {
    auto* p = static_cast<unsigned char*>(numaaff::allocate(k, 64));
    for (int i = 0; i < 64; ++i) p[i] = static_cast<unsigned char>(i);
    if (numaaff::detail::slabs.holds(p)) {
      EXPECT_EQ(numaaff::reallocate(k, p, 60), p) << "the same size class";
    } else {  // huge pages everywhere: a 2 MiB-aligned mapping of one page
      EXPECT_EQ(numaaff::reallocate(k, p, 4000), p) << "the same pages";
    }
    std::size_t have = 64;
    for (std::size_t bytes = 128; bytes <= (1u << 20); bytes *= 2) {  // 64 B -> 1 MiB
      p = static_cast<unsigned char*>(numaaff::reallocate(k, p, bytes));
      ASSERT_NE(p, nullptr);
      for (std::size_t i = 0; i < 64; ++i) ASSERT_EQ(p[i], i) << "grown to " << bytes;
      std::memset(p + have, 0x11, bytes - have);
      for (std::size_t i = 64; i < bytes; ++i) ASSERT_EQ(p[i], 0x11) << "grown to " << bytes;
      have = bytes;
    }
    void* same = numaaff::reallocate(k, p, (1u << 20) - 100);
    EXPECT_EQ(same, p) << "the same pages";
    p = static_cast<unsigned char*>(numaaff::reallocate(k, p, 10));  // shrink to small
    for (std::size_t i = 0; i < 10; ++i) ASSERT_EQ(p[i], i);
    EXPECT_EQ(numaaff::reallocate(k, p, 0), nullptr) << "size 0 frees";
  }
  void* fresh = numaaff::reallocate(kind::local(), nullptr, 100);
  EXPECT_GE(numaaff::usable_size(fresh), 100u);
  numaaff::deallocate(fresh);
  numaaff::deallocate(nullptr);
}

TEST(Kind, AStrictKindRefusesABlockItsNodeHasNoRoomFor) {
  const int node = numaaff_test::sysfs_nodes().front();
  const std::uint64_t room = numaaff::detail::node_room(node);
  if (room == numaaff::detail::room_unknown) GTEST_SKIP() << "the node's free memory cannot be read here";
  const std::size_t too_much = static_cast<std::size_t>(room) + (std::size_t{1} << 30);
  EXPECT_THROW(numaaff::allocate(kind::on_node(node), too_much), std::bad_alloc);
  std::error_code ec;
  EXPECT_EQ(numaaff::allocate(kind::on_node(node), too_much, alignof(std::max_align_t), ec), nullptr);
  EXPECT_EQ(ec, std::errc::not_enough_memory);
  // A preferred kind may spill: it maps the block (never touched here), where the system
  // lets a process map that much (no strict overcommit, no address-space limit).
  try {
    void* p = numaaff::allocate(kind::on_node(node).preferred(), too_much);
    EXPECT_NE(p, nullptr);
    numaaff::deallocate(p);
  } catch (const std::bad_alloc&) {
    std::printf("the preferred mapping of %zu bytes was refused here (overcommit or RLIMIT_AS)\n", too_much);
  }
}

// A strict block's page keeps only blocks that must stay on the node, so moving or spilling a
// preferred one never drags it along (before the slab families, a preferred small block was a
// page-sized mapping of its own; now the families keep them apart).
TEST(Kind, StrictAndPreferredBlocksNeverShareAPage) {
  const std::uintptr_t ps = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  std::set<std::uintptr_t> strict_pages, preferred_pages;
  std::vector<void*> blocks;
  for (int i = 0; i < 2000; ++i) {
    void* s = numaaff::allocate(kind::local(), 48);
    static const kind preferred[] = {kind::local().preferred(), kind::fastest().preferred(),
                                     kind::capacity().preferred(), kind::interleave().preferred()};
    void* q = numaaff::allocate(preferred[i % 4], 48);
    strict_pages.insert(reinterpret_cast<std::uintptr_t>(s) / ps);
    preferred_pages.insert(reinterpret_cast<std::uintptr_t>(q) / ps);
    blocks.push_back(s);
    blocks.push_back(q);
  }
  for (std::uintptr_t page : strict_pages) ASSERT_EQ(preferred_pages.count(page), 0u) << "page " << page;
  EXPECT_LT(preferred_pages.size(), 100u) << "preferred small blocks share slabs, not a page each";
  for (void* b : blocks) numaaff::deallocate(b);
}

TEST(Kind, AKindMadeFromAnotherTakesTheBlocksOfWhatItIsNow) {
  // The bin of what each kind was made from holds a freed block first: a kind that still took
  // that bin would get the block back.
  using numaaff::huge_page_mode;
  namespace d = numaaff::detail;
  const int strict_local = d::family_of(d::heap_kind::local, true);
  const int preferred_local = d::family_of(d::heap_kind::local, false);

  numaaff::deallocate(numaaff::allocate(kind::local().preferred(), 48));
  void* made_strict = numaaff::allocate(kind::local().preferred().strict(), 48);
  ASSERT_TRUE(d::slabs.holds(made_strict));
  EXPECT_EQ(d::slab_of(made_strict)->family, strict_local) << "preferred().strict() is strict";

  numaaff::deallocate(numaaff::allocate(kind::local(), 48));
  void* made_preferred = numaaff::allocate(kind::local().strict().preferred(), 48);
  ASSERT_TRUE(d::slabs.holds(made_preferred));
  EXPECT_EQ(d::slab_of(made_preferred)->family, preferred_local) << "strict().preferred() is preferred";

  // Small blocks with transparent huge pages always, or reserved ones, are pages of their own.
  for (huge_page_mode mode : {huge_page_mode::always, huge_page_mode::reserved_2mib}) {
    numaaff::deallocate(numaaff::allocate(kind::local(), 48));
    std::error_code ec;
    void* paged = numaaff::allocate(kind::local().with_pages(mode), 48, 16, ec);
    EXPECT_FALSE(paged != nullptr && d::slabs.holds(paged)) << "with_pages(" << static_cast<int>(mode) << ")";
    numaaff::deallocate(paged);
  }
  // And given the default back, they come from the local bin again.
  numaaff::deallocate(numaaff::allocate(kind::local(), 48));
  void* back = numaaff::allocate(kind::local().with_pages(huge_page_mode::always).with_pages(huge_page_mode::per_block), 48);
  ASSERT_TRUE(d::slabs.holds(back));
  EXPECT_EQ(d::slab_of(back)->family, strict_local);

  for (void* p : {made_strict, made_preferred, back}) numaaff::deallocate(p);
}

TEST(KindDeath, ADoubleFreeAForeignPointerAndAnInnerPointerAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        // A refill carves a batch of blocks and hands out the last one first: the block just
        // before it is carved but not handed out, and a free of it is of a block the heap did
        // not give (accepted, it would then be handed out twice).
        auto* p = static_cast<char*>(numaaff::allocate(kind::on_node(numaaff_test::sysfs_nodes().front()), 3000));
        numaaff::deallocate(p - 4096);
      },
      "double free");
  EXPECT_DEATH(
      {
        void* p = numaaff::allocate(kind::local(), 64);
        numaaff::deallocate(p);
        numaaff::deallocate(p);
      },
      "double free");
  EXPECT_DEATH(
      {
        // Freed by a thread that keeps it in its cache, then freed again here: the slab's state
        // map, which a free reads instead of the block, says the block is free.
        void* p = numaaff::allocate(kind::local(), 64);
        std::atomic<int> step{0};
        std::thread other([&] {
          numaaff::deallocate(p);
          step.store(1);
          while (step.load() != 2) std::this_thread::yield();
        });
        while (step.load() != 1) std::this_thread::yield();
        numaaff::deallocate(p);
        step.store(2);
        other.join();
      },
      "double free");
  EXPECT_DEATH(
      {
        void* p = numaaff::allocate(kind::local(), 1 << 20);
        numaaff::deallocate(p);
        numaaff::deallocate(p);
      },
      "did not allocate, or a double free");
  EXPECT_DEATH(
      {
        static int on_stack_like = 0;
        numaaff::deallocate(&on_stack_like);
      },
      "did not allocate");
  EXPECT_DEATH(
      {
        auto* p = static_cast<char*>(numaaff::allocate(kind::local(), 256));
        numaaff::deallocate(p + 16);
      },
      "inside a block");
  EXPECT_DEATH(
      {
        void* p = numaaff::allocate(kind::local(), 64);
        numaaff::deallocate(p);
        (void)numaaff::usable_size(p);
      },
      "freed block");
}

// A slab's state map says which of its blocks are handed out, so a free that reads it checks
// only that the pointer is at a multiple of the block size: the slab's own start (its header)
// and a block not carved yet are both, and both are refused, by a free that reads the state
// and by one that defers it (which checks them itself).
TEST(KindDeath, APointerInALiveSlabThatIsNotABlockAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto next_uncarved = [](void* p) {
    const numaaff::detail::slab_header* h = numaaff::detail::slab_of(p);
    return reinterpret_cast<char*>(const_cast<numaaff::detail::slab_header*>(h)) + h->carved.load();
  };
  EXPECT_DEATH(numaaff::deallocate(numaaff::detail::slab_of(numaaff::allocate(kind::local(), 64))), "did not allocate");
  EXPECT_DEATH(numaaff::deallocate(next_uncarved(numaaff::allocate(kind::local(), 64))), "did not allocate");
  EXPECT_DEATH(
      {
        const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
        std::vector<void*> blocks(4 * numaaff::detail::bin_limit.of[2]);
        std::thread([&] {
          for (void*& p : blocks) p = numaaff::allocate(k, 64);
        }).join();
        for (std::size_t i = 0; i + 2 < blocks.size(); ++i) numaaff::deallocate(blocks[i]);  // the bin defers
        numaaff::deallocate(next_uncarved(blocks.back()));
      },
      "did not allocate");
}

// A slab whose blocks are all free goes to its node's pool with its first page kept, and on that
// page lie blocks of the class it served (2 KiB: the one at 2,048), with their contents. Taken
// again for 16 B blocks, its map covers that page: what the old blocks held must not read as
// blocks handed out, or a free of a block not carved yet is taken in (and it would be handed
// out twice).
TEST(KindDeath, ASlabTakenFromThePoolForAnotherClassHoldsNoStaleStates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
        std::set<const void*> served;
        std::thread([&] {  // its exit puts every block back in its slab: three slabs all free
          std::vector<void*> blocks(4 * numaaff::detail::blocks_per_slab(7));
          for (void*& p : blocks) {
            p = numaaff::allocate(k, 2048);
            std::memset(p, 1, 2048);
            served.insert(numaaff::detail::slab_of(p));
          }
          for (void* p : blocks) numaaff::deallocate(p);
        }).join();
        auto* p = static_cast<char*>(numaaff::allocate(k, 16));
        char* slab = reinterpret_cast<char*>(numaaff::detail::slab_of(p));
        const std::size_t past = 40000;  // its state byte at 64 + 2,500, on the old block at 2,048
        if (served.count(slab) == 0 || numaaff::detail::slab_of(p)->carved.load() > past) {
          std::fprintf(stderr, "the 16 B block is not in a slab taken back from the pool\n");
          std::exit(0);
        }
        numaaff::deallocate(slab + past);
        std::fprintf(stderr, "freed a block not carved yet\n");
        std::exit(0);
      },
      "did not allocate");
}

// A thread that frees blocks another thread allocated (its bin hands batches back) writes their
// states unread and reads them a batch at a time (settle_bin): a double free is found at the
// free when the block is the newest in the bin, else when the block's state is next read: the
// settle, another thread's free of it, or a hand-out of its other copy. Never is a block handed
// to two owners at once.
TEST(KindDeath, ADoubleFreeOfABlockAnotherThreadAllocatedAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  // 64 B: the bin holds 512 and hands back batches of 128, so freeing these makes it defer.
  const std::size_t count = 4 * numaaff::detail::bin_limit.of[2];
  auto theirs = [&](std::size_t n) {
    std::vector<void*> blocks(n);
    std::thread([&] {
      for (void*& p : blocks) p = numaaff::allocate(k, 64);
    }).join();
    return blocks;
  };
  EXPECT_DEATH(
      {
        const std::vector<void*> blocks = theirs(count);
        for (void* p : blocks) numaaff::deallocate(p);
        numaaff::deallocate(blocks.back());
      },
      "double free");
  EXPECT_DEATH(
      {
        // Both frees unsettled (a batch of frees is settled at the 2048th free, so this stops
        // two short): the settle finds the second one's state already settled.
        const std::vector<void*> blocks = theirs(count);
        for (std::size_t i = 0; i + 2 < blocks.size(); ++i) numaaff::deallocate(blocks[i]);
        numaaff::deallocate(blocks[blocks.size() - 5]);
        std::fprintf(stderr, "not at the free\n");
        void* q = numaaff::allocate(k, 64);  // settles first
        std::fprintf(stderr, "allocated %p\n", q);
      },
      "not at the free\n(.|\n)*double free");
  EXPECT_DEATH(
      {
        // The second free comes after the block was settled and handed back in a batch (the
        // free that fills the bin hands the newest batch back): the thread that takes the
        // batch finds the block's state not free when it hands it out.
        const std::vector<void*> blocks = theirs(count);
        for (void* p : blocks) numaaff::deallocate(p);
        numaaff::deallocate(blocks[blocks.size() - 5]);
        std::fprintf(stderr, "not at the free\n");
        (void)theirs(numaaff::detail::transfer_batch_of(2));
      },
      "not at the free\n(.|\n)*about to be handed out again");
  EXPECT_DEATH(
      {
        // The second free, by this thread, comes while the block is free elsewhere (another
        // thread allocated and freed it, and exited): its settle finds the block was free
        // when the mark went in, before anything hands either copy out.
        const std::vector<void*> blocks = theirs(count);
        for (void* p : blocks) numaaff::deallocate(p);
        void* x = nullptr;
        std::thread([&] {
          x = numaaff::allocate(k, 64);
          numaaff::deallocate(x);
        }).join();
        numaaff::deallocate(x);
        std::fprintf(stderr, "not at the free\n");
        (void)numaaff::allocate(k, 64);  // settles first
      },
      "not at the free\n(.|\n)*double free");
  EXPECT_DEATH(
      {
        // Freed by this thread (unsettled: the 2048th free would settle, so this stops one
        // short), then by another, whose free reads the state and finds the mark.
        const std::vector<void*> blocks = theirs(count);
        for (std::size_t i = 0; i + 1 < blocks.size(); ++i) numaaff::deallocate(blocks[i]);
        std::thread([&] { numaaff::deallocate(blocks[blocks.size() - 5]); }).join();
      },
      "double free");
  EXPECT_DEATH(
      {
        const std::vector<void*> blocks = theirs(count);
        for (std::size_t i = 0; i + 1 < blocks.size(); ++i) numaaff::deallocate(blocks[i]);
        (void)numaaff::usable_size(blocks[blocks.size() - 5]);
      },
      "freed block");
}

// Blocks freed through a bin that defers their states are handed out again, once each.
TEST(Kind, BlocksFreedByAnotherThreadAreHandedOutAgainOnceEach) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  for (const std::size_t bytes : {std::size_t{16}, std::size_t{64}, std::size_t{1024}}) {
    std::vector<void*> blocks(20000);
    std::thread([&] {
      for (void*& p : blocks) p = numaaff::allocate(k, bytes);
    }).join();
    for (void* p : blocks) numaaff::deallocate(p);
    const std::set<void*> theirs(blocks.begin(), blocks.end());
    std::set<void*> again;
    std::size_t reused = 0;
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      void* p = numaaff::allocate(k, bytes);
      std::memset(p, 1, bytes);
      EXPECT_TRUE(again.insert(p).second) << p << " handed out twice, " << bytes << " B";
      reused += theirs.count(p);
    }
    EXPECT_GE(reused, std::size_t{64}) << bytes << " B: blocks the other thread allocated, taken again";
    for (void* p : again) numaaff::deallocate(p);
  }
}

// A free looks the slab table up only when its block is not in the slab the thread's last
// free found there: a free right after another in the same slab still gets every check.
TEST(Kind, AFreeRightAfterAnotherOfTheSameSlabIsCheckedAsFully) {
  // Two live 64 B blocks of one slab.
  const auto two_of_one_slab = [] {
    void* a = numaaff::allocate(kind::local(), 64);
    for (;;) {
      void* b = numaaff::allocate(kind::local(), 64);
      if ((reinterpret_cast<std::uintptr_t>(a) ^ reinterpret_cast<std::uintptr_t>(b)) < 256 * 1024)
        return std::pair<void*, void*>{a, b};
    }
  };
  static int elsewhere = 0;
  EXPECT_DEATH(
      {
        const auto blocks = two_of_one_slab();
        numaaff::deallocate(blocks.first);
        numaaff::deallocate(static_cast<char*>(blocks.second) + 16);
      },
      "inside a block");
  EXPECT_DEATH(
      {
        const auto blocks = two_of_one_slab();
        numaaff::deallocate(blocks.second);
        numaaff::deallocate(blocks.first);
        numaaff::deallocate(blocks.second);
      },
      "double free");
  EXPECT_DEATH(
      {
        numaaff::deallocate(two_of_one_slab().first);
        numaaff::deallocate(&elsewhere);
      },
      "did not allocate");
}

TEST(Kind, TheAllocatorAndTheResourceFormsUseTheHeap) {
  std::vector<int, numaaff::kind_allocator<int>> v{numaaff::kind_allocator<int>(kind::interleave())};
  for (int i = 0; i < 100000; ++i) v.push_back(i);
  EXPECT_GE(numaaff::usable_size(v.data()), v.capacity() * sizeof(int));
  EXPECT_EQ(numaaff::kind_allocator<int>(kind::local()), numaaff::kind_allocator<double>(kind::local()));
  EXPECT_NE(numaaff::kind_allocator<int>(kind::local()), numaaff::kind_allocator<int>(kind::local().preferred()));
  numaaff::kind_resource fast(kind::fastest()), fast2(kind::fastest()), cap(kind::capacity());
  EXPECT_TRUE(fast.is_equal(fast2));
  EXPECT_FALSE(fast.is_equal(cap));
  std::pmr::vector<double> w(&fast);
  w.assign(5000, 2.5);
  EXPECT_GE(numaaff::usable_size(w.data()), 5000 * sizeof(double));
}

TEST(Kind, AForkedChildsHeapWorks) {
  // clang 14's ASan takes no allocator lock around fork (later LLVM releases do): a child
  // forked while another thread holds one of its locks waits forever in its first malloc. Seen
  // at -O0: the child hung in ASan's SizeClassAllocator64::GetFromAllocator under the
  // std::stringstream of cgroup_memory_now. glibc's malloc is fork-safe; TSan and the plain
  // configurations run this test.
  if (numaaff_test::address_sanitizer) GTEST_SKIP() << "the ASan runtime's allocator is not fork-safe";
  std::vector<void*> held;
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // another thread inside the heap while the parent forks
    while (!stop.load()) numaaff::deallocate(numaaff::allocate(kind::local(), 80));
  });
  for (int round = 0; round < 20; ++round) {
    const std::string how = numaaff_test::run_in_child(20, [] {
      try {
        for (int i = 0; i < 10000; ++i) {
          void* p = numaaff::allocate(kind::local(), static_cast<std::size_t>(16 + i % 3000));
          void* q = numaaff::reallocate(kind::local(), p, 40000);
          numaaff::deallocate(q);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        return 1;
      }
      return 0;
    });
    EXPECT_EQ(how, "") << "round " << round;
  }
  stop = true;
  churn.join();
}

// A child runs only the thread that forked: the slots the parent's other threads hold are
// free in the child, or its threads would share slots from the start.
TEST(Kind, AForkedChildHoldsOnlyItsOwnThreadsCarveSlot) {
  if (numaaff_test::address_sanitizer) GTEST_SKIP() << "the ASan runtime's allocator is not fork-safe";
  const kind k = kind::interleave();  // no thread cache: each small block is a central take
  std::atomic<int> holding{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      numaaff::deallocate(numaaff::allocate(k, 64));  // takes a slot
      holding.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
    });
  while (holding.load() < 3) std::this_thread::yield();
  numaaff::deallocate(numaaff::allocate(k, 64));
  const std::uint32_t parent = numaaff::detail::carve_slots_held.load();
  const std::string how = numaaff_test::run_in_child(20, [] {
    return __builtin_popcount(numaaff::detail::carve_slots_held.load()) <= 1 ? 0 : 1;
  });
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_GE(__builtin_popcount(parent), 3) << "slots the parent's threads held";
  EXPECT_EQ(how, "") << "the child held the parent's other threads' slots";
}

TEST(Kind, AThreadsCachedBlocksGoBackWhenItExits) {
  // A thread's cache is plain thread-local data handed back by a pthread key's destructor: a
  // thread that frees blocks and exits must not strand them. The central list is LIFO for the
  // threads of a CPU, so the next blocks of that class another thread of the same CPU takes
  // past its own cache are the exited thread's.
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = 2000, count = 300;
  const int cpu = first_cpu();
  std::set<void*> theirs;
  on_cpu(cpu, [&] {
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(numaaff::allocate(k, bytes));
    theirs.insert(blocks.begin(), blocks.end());
    for (void* b : blocks) numaaff::deallocate(b);
  });
  std::size_t reused = 0;
  on_cpu(cpu, [&] {
    std::vector<void*> mine;
    for (std::size_t i = 0; i < 3 * count; ++i) mine.push_back(numaaff::allocate(k, bytes));
    for (void* b : mine) reused += theirs.count(b);
    for (void* b : mine) numaaff::deallocate(b);
  });
  EXPECT_EQ(reused, count) << "blocks of the exited thread taken again";
}

// A thread's cache keeps its blocks' addresses in a mapping of its own, which the next thread
// to start takes over once it has exited: threads that come and go one after another map one.
TEST(Kind, ThreadsThatComeAndGoReuseOneCacheMapping) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  std::set<const void*> mappings;
  for (int i = 0; i < 100; ++i)
    std::thread([&] {
      numaaff::deallocate(numaaff::allocate(k, 64));
      mappings.insert(numaaff::detail::tcache.slots);
    }).join();
  EXPECT_EQ(mappings.size(), 1u) << "mappings of 100 threads, one after another";
  EXPECT_EQ(mappings.count(nullptr), 0u);
}

// A bin has no count: the null slot below its first slot says that it is empty. A mapping that
// an exited thread left links the mappings parked after it through one of its slots, and the
// thread that takes it over finds every bin empty all the same: the first bin's first block is
// a block of the heap, not the link (an address of another parked mapping), at every size.
TEST(Kind, AThreadThatTakesOverAnExitedThreadsCacheMappingFindsItsBinsEmpty) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  std::set<const void*> parked;
  std::thread([&] {  // two mappings parked at once: the one parked last links to the other
    numaaff::deallocate(numaaff::allocate(k, 16));
    parked.insert(numaaff::detail::tcache.slots);
    std::thread([&] {
      numaaff::deallocate(numaaff::allocate(k, 16));
      parked.insert(numaaff::detail::tcache.slots);
    }).join();
  }).join();
  ASSERT_EQ(parked.size(), 2u);
  std::thread([&] {
    std::vector<void*> blocks;
    // The first allocation of a class fills its bin with a batch; the one after the batch is
    // used up reads the slot below the bin's first.
    for (std::size_t bytes = 16; bytes <= numaaff::detail::small_limit; bytes *= 2)
      for (std::uint32_t i = 0; i <= numaaff::detail::max_transfer_batch; ++i) {
        void* p = numaaff::allocate(k, bytes);
        ASSERT_EQ(parked.count(p), 0u) << bytes << " B, block " << i << ": a mapping's address handed out as a block";
        ASSERT_EQ(numaaff::usable_size(p), bytes);  // aborts for what is not a block of the heap
        blocks.push_back(p);
      }
    EXPECT_EQ(parked.count(numaaff::detail::tcache.slots), 1u) << "a parked mapping taken over";
    for (void* p : blocks) numaaff::deallocate(p);
  }).join();
}

// Blocks of one class handed to two CPUs in turns sit side by side, and the prefetcher of each
// CPU then pulls in lines the other writes: two threads allocating and freeing 1 KiB blocks ran
// 2.4 times slower per block than either alone. Threads on two CPUs each take their blocks from
// slabs of their own, also when a thread that just exited left its free blocks in one slab.
TEST(Kind, ThreadsOnTwoCPUsTakeTheirBlocksFromSlabsOfTheirOwn) {
  int a = -1, b = -1;
  if (!two_cpus(a, b)) GTEST_SKIP() << "needs two CPUs";
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = 1024, count = 64;
  on_cpu(a, [&] {  // leaves 64 free blocks in one slab, on a's side
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < count; ++i) blocks.push_back(numaaff::allocate(k, bytes));
    for (void* p : blocks) numaaff::deallocate(p);
  });
  std::set<std::uintptr_t> slabs[2];
  std::atomic<int> arrived{0};
  std::thread threads[2];
  const int cpus[2] = {a, b};
  for (int t = 0; t < 2; ++t)
    threads[t] = std::thread([&, t] {
      on_cpu(cpus[t], [&] {
        arrived.fetch_add(1);
        while (arrived.load() < 2) std::this_thread::yield();  // both take their blocks at once
        std::vector<void*> blocks;
        for (std::size_t i = 0; i < count; ++i) blocks.push_back(numaaff::allocate(k, bytes));
        for (void* p : blocks) slabs[t].insert(slab_start(p));
        arrived.fetch_add(1);
        while (arrived.load() < 4) std::this_thread::yield();  // neither frees before both hold theirs
        for (void* p : blocks) numaaff::deallocate(p);
      });
    });
  for (std::thread& t : threads) t.join();
  for (std::uintptr_t s : slabs[0]) EXPECT_EQ(slabs[1].count(s), 0u) << "a slab gave blocks to CPUs " << a << " and " << b;
}

// The same for two threads that took their first blocks on one CPU and then run on two: a
// slot chosen by the CPU stayed theirs together (a thread that recycles the blocks it caches
// never asks again), and both then ran at the speed of blocks side by side, to the end.
TEST(Kind, ThreadsThatStartedOnOneCPUTakeSlabsOfTheirOwnOnTwo) {
  int a = -1, b = -1;
  if (!two_cpus(a, b)) GTEST_SKIP() << "needs two CPUs";
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = 1024, count = 64;
  std::set<std::uintptr_t> slabs[2];
  std::atomic<int> arrived{0};
  auto wait_for = [&](int n) {
    arrived.fetch_add(1);
    while (arrived.load() < n) std::this_thread::yield();
  };
  std::thread threads[2];
  for (int t = 0; t < 2; ++t)
    threads[t] = std::thread([&, t] {
      pin_here(a);
      numaaff::deallocate(numaaff::allocate(k, 48));  // a first block, on CPU a
      wait_for(2);
      pin_here(t == 0 ? a : b);  // the same thread, now on a CPU of its own
      wait_for(4);               // both take their 1 KiB blocks at once
      std::vector<void*> blocks;
      for (std::size_t i = 0; i < count; ++i) blocks.push_back(numaaff::allocate(k, bytes));
      for (void* p : blocks) slabs[t].insert(slab_start(p));
      wait_for(6);  // neither frees before both hold theirs
      for (void* p : blocks) numaaff::deallocate(p);
    });
  for (std::thread& t : threads) t.join();
  for (std::uintptr_t s : slabs[0]) EXPECT_EQ(slabs[1].count(s), 0u) << "a slab gave blocks to CPUs " << a << " and " << b;
}

// A thread holds its carve slot until its exit hook gives it back: a thread whose small blocks
// all come from the central lists (an interleaved kind has no thread cache) must get that
// hook too, or each such thread would keep a slot for good and later threads share slots.
TEST(Kind, AThreadThatOnlyAllocatesUncachedBlocksGivesItsSlotBack) {
  const std::uint32_t before = numaaff::detail::carve_slots_held.load();
  std::vector<void*> blocks;
  for (unsigned i = 0; i < 2 * numaaff::detail::carve_slots; ++i)
    std::thread([&] { blocks.push_back(numaaff::allocate(kind::interleave(), 64)); }).join();
  EXPECT_EQ(numaaff::detail::carve_slots_held.load(), before) << "slots the exited threads still hold";
  for (void* p : blocks) numaaff::deallocate(p);
}

// The other side of it: free blocks one CPU left are reused by another, all but the slab the
// first CPU takes its blocks from next.
TEST(Kind, FreeBlocksAnotherCPULeftAreReused) {
  int a = -1, b = -1;
  if (!two_cpus(a, b)) GTEST_SKIP() << "needs two CPUs";
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = 8192, slabs = 4;  // a class only a reallocation elsewhere passes through
  const std::size_t per_slab = numaaff::detail::blocks_per_slab(numaaff::detail::size_class(bytes, 16));
  std::set<std::uintptr_t> left;  // slabs whose carved blocks are all free but one
  std::vector<void*> kept;
  on_cpu(a, [&] {
    std::vector<void*> blocks;
    while (left.size() < slabs + 1) {
      blocks.push_back(numaaff::allocate(k, bytes));
      left.insert(slab_start(blocks.back()));
    }
    std::set<std::uintptr_t> seen;
    for (void* p : blocks) {
      if (seen.insert(slab_start(p)).second) kept.push_back(p);
      else numaaff::deallocate(p);
    }
  });
  std::size_t reused = 0;
  on_cpu(b, [&] {
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < slabs * per_slab; ++i) {
      blocks.push_back(numaaff::allocate(k, bytes));
      reused += left.count(slab_start(blocks.back()));
    }
    for (void* p : blocks) numaaff::deallocate(p);
  });
  for (void* p : kept) numaaff::deallocate(p);
  EXPECT_GE(reused, (slabs - 1) * (per_slab - 1)) << "blocks taken from slabs CPU " << a << " left, of " << slabs * per_slab;
}

TEST(Kind, AThreadLocalsDestructorMayFreeAndAllocate) {
  // C++ thread_local destructors run before the cache's exit hook, later key destructors after
  // it: both must find a working heap, and what they free must not be lost.
  struct holder {
    void* p = nullptr;
    ~holder() {
      numaaff::deallocate(p);
      numaaff::deallocate(numaaff::allocate(kind::local(), 100));
    }
  };
  static pthread_key_t late;
  ASSERT_EQ(pthread_key_create(&late, [](void*) { numaaff::deallocate(numaaff::allocate(kind::local(), 48)); }), 0);
  for (int i = 0; i < 50; ++i)
    std::thread([] {
      static thread_local holder h;
      h.p = numaaff::allocate(kind::local(), 100);
      pthread_setspecific(late, &h);
    }).join();
  pthread_key_delete(late);
  void* p = numaaff::allocate(kind::local(), 100);
  EXPECT_NE(p, nullptr);
  numaaff::deallocate(p);
}

TEST(Kind, ExplicitHugePagesFromAnEmptyPoolStrictFailsPreferredFallsBack) {
  const int node = numaaff_test::sysfs_nodes().front();
  const numaaff::detail::hugetlb_pool pool = numaaff::detail::hugetlb_pool_of(node, std::size_t{2} << 20);
  if (pool.free != 0) GTEST_SKIP() << "node " << node << " has free reserved 2 MiB pages (or no pool file): " << pool.free;
  const kind huge = kind::on_node(node).with_pages(numaaff::huge_page_mode::reserved_2mib);
  EXPECT_THROW((void)numaaff::allocate(huge, 3 << 20), std::bad_alloc);
  std::error_code ec;
  EXPECT_EQ(numaaff::allocate(huge, 100, 64, ec), nullptr);
  EXPECT_EQ(ec, std::errc::not_enough_memory);
  const std::uint64_t before = numaaff::refusal_stats().huge_page_fallbacks;
  auto* p = static_cast<char*>(numaaff::allocate(huge.preferred(), 3 << 20));
  std::memset(p, 1, 3 << 20);
  EXPECT_EQ(numaaff::usable_size(p), std::size_t{4} << 20) << "whole huge pages, even as ordinary ones";
  EXPECT_EQ(numaaff::refusal_stats().huge_page_fallbacks, before + 1);
  numaaff::deallocate(p);
  // A sized free of such a block (the allocator form) rounds up to its huge pages.
  numaaff::alloc_options o;
  o.strict = false;
  o.huge_pages = numaaff::huge_page_mode::reserved_2mib;
  numaaff::node_allocator<char> a(node, o);
  char* q = a.allocate(5000);
  a.deallocate(q, 5000);
  EXPECT_THROW((void)numaaff::allocate(kind::interleave().with_pages(numaaff::huge_page_mode::reserved_2mib), 64),
               std::invalid_argument);
  bool listed = false;
  for (const auto& item : numaaff::system_report().items) listed = listed || item.name == "explicit huge pages";
  EXPECT_TRUE(listed);
}

// Blocks allocated on one thread and freed on another go back to their node's lists, and the
// heap reuses them: the resident size stays bounded over many rounds.
TEST(Kind, CrossThreadFreesKeepTheResidentSizeBounded) {
  if (numaaff_test::address_sanitizer) GTEST_SKIP() << "ASan keeps freed memory in quarantine: no bound to see";
  constexpr int rounds = 40, per_round = 20000;
  // One node for every block: local() would follow each unpinned producer to its node, and a
  // node first used in a later round would start slabs of its own.
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  // Each on a CPU of its own, the same in every round: each CPU the producer ran on would keep
  // the slab it was carving for each class, a bound of its own (one per CPU) that a round on a
  // new CPU would add to.
  int producer_cpu = -1, consumer_cpu = -1;
  if (!two_cpus(producer_cpu, consumer_cpu)) consumer_cpu = producer_cpu = first_cpu();
  std::size_t after_first = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<void*> blocks(per_round);
    on_cpu(producer_cpu, [&] {
      for (int i = 0; i < per_round; ++i) {
        blocks[static_cast<std::size_t>(i)] = numaaff::allocate(k, static_cast<std::size_t>(16 << (i % 7)));
        std::memset(blocks[static_cast<std::size_t>(i)], 1, 16);
      }
    });
    on_cpu(consumer_cpu, [&] {
      for (void* b : blocks) numaaff::deallocate(b);
    });
    if (r == 1) after_first = numaaff_test::status_kib("VmRSS:");
  }
  EXPECT_LE(numaaff_test::status_kib("VmRSS:"), after_first + 8 * 1024) << "resident KiB after round 2: " << after_first;
}

// A program that frees everything gets its memory back: a slab whose blocks are all free gives
// its pages to the kernel (one per list is kept), and the slab serves any class again.
TEST(Kind, FreeingEveryBlockGivesTheMemoryBack) {
  if (numaaff_test::address_sanitizer || numaaff_test::thread_sanitizer)
    GTEST_SKIP() << "the sanitizer's shadow memory moves the resident size";
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t count = std::size_t{1} << 18, bytes = 64;  // 16 MiB
  std::vector<void*> blocks(count, nullptr);
  const std::size_t base = numaaff_test::status_kib("VmRSS:");
  std::size_t live = 0;
  // On one CPU: each CPU the thread ran on would keep the slab it was carving.
  on_cpu(first_cpu(), [&] {
    for (void*& p : blocks) {
      p = numaaff::allocate(k, bytes);
      std::memset(p, 1, bytes);
    }
    live = numaaff_test::status_kib("VmRSS:");
    for (void* p : blocks) numaaff::deallocate(p);
  });
  EXPECT_GE(live, base + 15 * 1024) << "16 MiB of blocks are resident";
  // Left: one spare slab, the slab being carved, and the header page of each slab given back
  // (the thread's cache went back with it).
  EXPECT_LE(numaaff_test::status_kib("VmRSS:"), base + 2 * 1024) << "resident KiB with the blocks live: " << live - base;
}

TEST(Kind, ASlabGivenBackServesAnotherClass) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  std::vector<void*> small(6 * numaaff::detail::blocks_per_slab(2));  // 64 B: six slabs
  for (void*& p : small) p = numaaff::allocate(k, 64);
  for (void* p : small) numaaff::deallocate(p);
  std::set<const void*> given_back;
  for (void* p : small)
    if (numaaff::detail::slab_of(p)->carved.load() == 0) given_back.insert(numaaff::detail::slab_of(p));
  ASSERT_GE(given_back.size(), 2u) << "slabs whose blocks are all free (the first and last may not be; one is kept)";
  // The 1 KiB list first uses up whatever free blocks earlier tests left it, then takes slabs
  // from the pool: within 64 MiB of blocks, one of those.
  std::vector<void*> large;
  bool reused = false;
  while (!reused && large.size() < 65536) {
    large.push_back(numaaff::allocate(k, 1024));
    std::memset(large.back(), 2, 1024);
    reused = given_back.count(numaaff::detail::slab_of(large.back())) != 0;
  }
  EXPECT_TRUE(reused) << "1 KiB blocks from a slab that held 64 B blocks";
  for (void* p : large) numaaff::deallocate(p);
}

TEST(KindDeath, AFreeIntoASlabGivenBackAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A slab given back holds no live block, whatever its pages read: a second free of one of its
  // blocks must abort, never put the block in a list to be handed out twice.
  EXPECT_DEATH(
      {
        const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
        std::vector<void*> blocks(4 * numaaff::detail::blocks_per_slab(2));
        for (void*& p : blocks) {
          p = numaaff::allocate(k, 64);
          *static_cast<volatile char*>(p) = 1;  // its page is resident until its slab is given back
        }
        for (void* p : blocks) numaaff::deallocate(p);
        // A block whose page the kernel took back (mincore) is in a slab given back.
        for (void* p : blocks) {
          auto* page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{4095});
          unsigned char resident = 1;
          if (page != numaaff::detail::slab_of(p) && ::mincore(page, 4096, &resident) == 0 && (resident & 1) == 0)
            numaaff::deallocate(p);
        }
        std::fprintf(stderr, "no slab was given back\n");
      },
      "did not allocate");
}

// A large block that grows moves its mapping (mremap): pages it never touched stay untouched,
// where a copy would write every one of them.
TEST(Kind, ALargeBlockGrowsWithoutCopyingItsPages) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t mib = std::size_t{1} << 20;
  auto* p = static_cast<char*>(numaaff::allocate(k, 64 * mib));
  p[0] = 7;
  p[64 * mib - 1] = 9;
  const std::size_t before = numaaff_test::status_kib("VmRSS:");
  auto* q = static_cast<char*>(numaaff::reallocate(k, p, 128 * mib));
  const std::size_t after = numaaff_test::status_kib("VmRSS:");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q[0], 7);
  EXPECT_EQ(q[64 * mib - 1], 9);
  EXPECT_LE(after, before + 8 * 1024) << "resident KiB grew by " << after - before;
  EXPECT_EQ(numaaff::usable_size(q), 128 * mib);
  q[128 * mib - 1] = 3;
  q = static_cast<char*>(numaaff::reallocate(k, q, 40 * mib));  // shrinks the same way
  EXPECT_EQ(q[0], 7);
  EXPECT_EQ(numaaff::usable_size(q), 40 * mib);
  numaaff::deallocate(q);
  // Where the kernel will not move it, the block is copied: the same contents.
  numaaff::detail::scoped_failure refuse(numaaff::detail::sys::mremap, ENOMEM);
  auto* r = static_cast<char*>(numaaff::allocate(k, mib));
  std::memset(r, 5, mib);
  r = static_cast<char*>(numaaff::reallocate(k, r, 3 * mib));
  for (std::size_t i = 0; i < mib; i += 4096) ASSERT_EQ(r[i], 5);
  // At least what was asked: kept pages of huge blocks are taken up to a huge page boundary.
  EXPECT_GE(numaaff::usable_size(r), 3 * mib);
  numaaff::deallocate(r);
}

namespace {
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
bool resident(const void* p) {
  unsigned char v = 0;
  return ::mincore(const_cast<void*>(p), 4096, &v) == 0 && (v & 1) != 0;
}
}  // namespace

// A freed large block keeps its pages for the next one of its placement, as malloc keeps what
// free gives it: no system call, no page fault.
TEST(Kind, AFreedLargeBlockServesTheNextWithItsPagesResident) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = std::size_t{1} << 20;
  auto* p = static_cast<char*>(numaaff::allocate(k, bytes));
  std::memset(p, 1, bytes);
  numaaff::deallocate(p);
  auto* q = static_cast<char*>(numaaff::allocate(k, bytes));
  const long before = minor_faults();
  std::memset(q, 2, bytes);
  EXPECT_LE(minor_faults() - before, 4) << "page faults writing a block whose pages were kept";
  EXPECT_EQ(q, p);
  // Another placement does not take them: a preferred block is placed otherwise.
  auto* r = static_cast<char*>(numaaff::allocate(k.preferred(), bytes));
  EXPECT_NE(r, q);
  numaaff::deallocate(r);
  // A smaller block takes the front of the kept pages, and growing it takes the rest in place.
  numaaff::deallocate(q);
  auto* s = static_cast<char*>(numaaff::allocate(k, bytes / 4));
  EXPECT_EQ(s, p);
  s = static_cast<char*>(numaaff::reallocate(k, s, bytes));
  EXPECT_EQ(s, p) << "grown into the kept pages right after it";
  EXPECT_EQ(s[0], 2);
  numaaff::deallocate(s);
}

// A freed block of a huge page or more keeps its pages too: a 64 MiB block costs a fault per
// page otherwise. Such pages serve a block of a huge page or more from a huge page boundary
// only, as map_on_node aligns it, and the block takes them up to the next boundary: no huge
// page holds two blocks, and the rest serves the next huge block.
TEST(Kind, AFreedHugeBlockServesTheNextFromAHugePageBoundary) {
  const std::size_t hp = numaaff::detail::huge_page_size();
  if (3 * hp >= numaaff::detail::reusable_bytes()) GTEST_SKIP() << "blocks of 3 huge pages are not kept on this machine";
  for (int n : numaaff::detail::memory_nodes()) numaaff::detail::give_back_kept(n);  // what earlier tests kept
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  auto* p = static_cast<char*>(numaaff::allocate(k, 3 * hp));
  ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % hp, 0u);
  std::memset(p, 1, 3 * hp);
  numaaff::deallocate(p);
  auto* q = static_cast<char*>(numaaff::allocate(k, 3 * hp / 2));
  ASSERT_EQ(q, p) << "the front of the kept pages";
  const long before = minor_faults();
  std::memset(q, 2, 3 * hp / 2);
  EXPECT_LE(minor_faults() - before, 4) << "page faults writing a block whose pages were kept";
  EXPECT_EQ(numaaff::usable_size(q), 2 * hp) << "up to the next huge page boundary";
  auto* r = static_cast<char*>(numaaff::allocate(k, hp));
  EXPECT_EQ(r, p + 2 * hp) << "the rest, from that boundary";
  auto* s = static_cast<char*>(numaaff::allocate(k, hp / 2));
  EXPECT_TRUE(s < p || s >= p + 3 * hp) << "a block without huge pages from pages that may hold them";
  numaaff::deallocate(s);
  numaaff::deallocate(r);
  numaaff::deallocate(q, 3 * hp / 2);  // the size it asked: a sized free of what it holds is right too
}

TEST(Kind, ALargeBlockWhosePlacementChangedIsNotReused) {
  const int node = numaaff_test::sysfs_nodes().front();
  const kind k = kind::on_node(node);
  constexpr std::size_t bytes = std::size_t{1} << 20;
  auto* p = static_cast<char*>(numaaff::allocate(k, bytes));
  std::memset(p, 1, bytes);
  numaaff::bind(p, bytes, node);  // a policy set on the block: a placement change
  numaaff::deallocate(p);
  auto* q = static_cast<char*>(numaaff::allocate(k, bytes));
  EXPECT_FALSE(resident(q)) << "a fresh mapping, not the moved block's pages";
  numaaff::deallocate(q);
}

TEST(Kind, CallocClearsAKeptLargeBlock) {
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = 200 * 1024;
  auto* p = static_cast<unsigned char*>(numaaff::allocate(k, bytes));
  std::memset(p, 0xff, bytes);
  numaaff::deallocate(p);
  auto* q = static_cast<unsigned char*>(numaaff::allocate(k, bytes));
  ASSERT_EQ(q, p) << "the kept pages";
  numaaff::detail::clear_fresh_block(q, bytes);
  for (std::size_t i = 0; i < bytes; i += 512) ASSERT_EQ(q[i], 0) << i;
  numaaff::deallocate(q);
}

TEST(Kind, KeptLargeBlocksAreBoundedAndAgeOut) {
  if (numaaff_test::address_sanitizer || numaaff_test::thread_sanitizer)
    GTEST_SKIP() << "the sanitizer's shadow memory moves the resident size";
  const kind k = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t bytes = std::size_t{1} << 20;
  const std::size_t limit = numaaff::detail::kept_bytes_limit();
  ASSERT_GE(limit, std::size_t{32} << 20);
  ASSERT_LE(limit, std::size_t{1} << 30);
  std::vector<void*> blocks(limit / bytes + 64);  // 64 MiB beyond what is kept
  // What earlier tests kept ages out first, so that it is not counted in the base.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  numaaff::deallocate(numaaff::allocate(k, 64 * 1024));
  const std::size_t base = numaaff_test::status_kib("VmRSS:");
  for (void*& p : blocks) {
    p = numaaff::allocate(k, bytes);
    std::memset(p, 1, bytes);
  }
  for (void* p : blocks) numaaff::deallocate(p);
  const std::size_t kept = numaaff_test::status_kib("VmRSS:");
  EXPECT_LE(kept, base + limit / 1024 + 2 * 1024) << "at most " << (limit >> 20) << " MiB kept";
  EXPECT_GE(kept, base + limit / 2048) << "freed pages are kept for reuse";
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  numaaff::deallocate(numaaff::allocate(k, 64 * 1024));  // the next large call ages them out
  EXPECT_LE(numaaff_test::status_kib("VmRSS:"), base + 2 * 1024) << "after a second unused";
}

// Pages kept from freed blocks are the heap's, not the node's free memory: a strict block that
// finds its node short of room gives them back before it is refused.
TEST(Kind, AStrictBlockRefusedForRoomGivesTheKeptPagesBackFirst) {
  const int node = numaaff_test::sysfs_nodes().front();
  if (numaaff::detail::node_room(node) == numaaff::detail::room_unknown) GTEST_SKIP() << "no node room to read here";
  const kind k = kind::on_node(node);
  for (int n : numaaff::detail::memory_nodes()) numaaff::detail::give_back_kept(n);  // what earlier tests kept
  numaaff::deallocate(numaaff::allocate(k, std::size_t{1} << 20));
  const auto kept = [] {
    numaaff::detail::arena_table& t = numaaff::detail::arena_table::instance();
    std::lock_guard<std::mutex> guard(t.large_lock);
    return t.spare.bytes();
  };
  ASSERT_GE(kept(), std::size_t{1} << 20) << "the freed block's pages are kept";
  EXPECT_THROW((void)numaaff::allocate(k, std::size_t{1} << 46), std::bad_alloc);  // 64 TiB
  EXPECT_EQ(kept(), 0u);
}

// A size whose pages overflow is refused before any kept pages are looked at: it must not be
// handed the start of a kept extent (which the next block would be given too).
TEST(Kind, AnOverflowingSizeIsRefusedWithKeptPagesAround) {
  const int node = numaaff_test::sysfs_nodes().front();
  numaaff::deallocate(numaaff::allocate(kind::on_node(node), 64 * 1024));  // pages kept
  EXPECT_THROW((void)numaaff::allocate_on_node(static_cast<std::size_t>(-1) - 100, node), std::bad_alloc);
  std::error_code ec;
  EXPECT_EQ(numaaff::allocate(kind::on_node(node).preferred(), static_cast<std::size_t>(-1) - 100, 16, ec), nullptr);
  void* a = numaaff::allocate(kind::on_node(node), 64 * 1024);
  void* b = numaaff::allocate(kind::on_node(node), 64 * 1024);
  EXPECT_NE(a, b);
  numaaff::deallocate(a);
  numaaff::deallocate(b);
}

// reallocate gives a block of the kind it is asked for: a block of another placement is not
// resized where it is, but copied to a block of that kind.
TEST(Kind, ReallocateToAnotherKindMovesTheBlockToThatKind) {
  const kind strict = kind::on_node(numaaff_test::sysfs_nodes().front());
  constexpr std::size_t mib = std::size_t{1} << 20;
  auto* p = static_cast<char*>(numaaff::allocate(strict, mib));
  p[0] = 5;
  EXPECT_TRUE(numaaff::detail::large_placement(p).placed.strict);
  p = static_cast<char*>(numaaff::reallocate(strict.preferred(), p, 3 * mib / 2));
  EXPECT_FALSE(numaaff::detail::large_placement(p).placed.strict) << "a preferred block now";
  EXPECT_EQ(p[0], 5);
  numaaff::deallocate(p);
}

// A block reallocated as another kind counts for that kind from then on, even where both
// kinds put it on the same node with the same strictness (a local block of the caller's node,
// an on_node block of that node): it is not resized in place under the old kind.
TEST(Kind, ReallocateToAnotherKindOfTheSameNodeCountsForTheNewKind) {
  std::thread([] {
    const numaaff::node_id n = numaaff::current_node();
    numaaff::pin_this_thread(n);  // local resolves to n
    constexpr std::size_t mib = std::size_t{1} << 20;
    auto* p = static_cast<char*>(numaaff::allocate(kind::on_node(n), 2 * mib));
    p[0] = 7;
    EXPECT_EQ(numaaff::detail::large_placement(p).kind, numaaff::detail::heap_kind::node);
    p = static_cast<char*>(numaaff::reallocate(kind::local(), p, 3 * mib));
    EXPECT_EQ(numaaff::detail::large_placement(p).kind, numaaff::detail::heap_kind::local) << "a local block now";
    EXPECT_EQ(numaaff::detail::large_placement(p).placed.node, n);
    EXPECT_EQ(p[0], 7);
    numaaff::deallocate(p);
  }).join();
}
