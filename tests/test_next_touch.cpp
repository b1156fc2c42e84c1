// Next-touch on this host (layer 2): the whole trap -> open -> migrate path, contents, threads,
// chaining to other handlers, real crashes, fork, THP, injected failures, running out of
// mappings, and the API's errors. Migration itself is to node 0 here; the VM layer checks it.
#include <numaaff/allocator.hpp>
#include <numaaff/next_touch.hpp>

#include <numaaff/detail/syscall.hpp>

#include "common/exceptions.hpp"
#include "common/placement_check.hpp"
#include "common/process.hpp"
#include "common/scratch.hpp"
#include "common/seccomp_filter.hpp"
#include "common/smaps.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using numaaff::detail::scoped_failure;
using numaaff::detail::sys;

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
/// Under tests/numa_sandbox every move_pages call of the handler is denied: the pages it
/// would have moved are counted as failed instead, and their chunks open all the same.
const bool sandboxed = numaaff_test::in_numa_sandbox();

struct region : numaaff_test::scratch {
  using scratch::scratch;
  void fill() const {
    for (std::size_t i = 0; i < bytes; i += sizeof(std::uint64_t)) {
      const std::uint64_t v = i * 0x9e3779b97f4a7c15ull;
      std::memcpy(p + i, &v, sizeof v);
    }
  }
  bool intact() const {
    for (std::size_t i = 0; i < bytes; i += sizeof(std::uint64_t)) {
      std::uint64_t v = 0;
      std::memcpy(&v, p + i, sizeof v);
      if (v != i * 0x9e3779b97f4a7c15ull) return false;
    }
    return true;
  }
};

TEST(NextTouch, FaultOpenMigrateKeepsContentsAcrossThreads) {
  region r(16 << 20);
  r.fill();
  numaaff::reset_next_touch_stats();
  numaaff::affinity_on_next_touch(r.p, r.bytes);
  EXPECT_TRUE(numaaff::is_armed(r.p, r.bytes));
  std::thread writer([&] {
    for (std::size_t i = 0; i < r.bytes / 2; i += ps) r.p[i] = static_cast<char>(r.p[i] ^ 0x55);
  });
  std::thread reader([&] {
    volatile char sink = 0;
    for (std::size_t i = r.bytes / 2; i < r.bytes; i += ps) sink = static_cast<char>(sink + r.p[i]);
  });
  writer.join();
  reader.join();
  for (std::size_t i = 0; i < r.bytes / 2; i += ps) r.p[i] = static_cast<char>(r.p[i] ^ 0x55);
  EXPECT_TRUE(r.intact());
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  const std::size_t chunks = r.bytes / (numaaff::default_next_touch_pages * ps);
  EXPECT_EQ(s.chunks_migrated, chunks);
  EXPECT_GE(s.faults, chunks);
  // One node: every page is on its toucher's node already; counted as such, never as moved.
  EXPECT_EQ(sandboxed ? s.pages_failed : s.pages_already_there, r.bytes / ps);
  EXPECT_EQ(s.pages_moved, 0u);
  EXPECT_EQ(sandboxed ? s.pages_already_there : s.pages_failed, 0u);
  EXPECT_GT(s.handler_time.count(), 0);
  const auto raw = numaaff_test::query_pages(r.p, r.bytes);
  EXPECT_EQ(raw.on(numaaff_test::sysfs_nodes().front()), r.bytes / ps);
}

TEST(NextTouch, ReadFirstTouchesAndUnpopulatedPages) {
  region r(4 << 20);
  numaaff::reset_next_touch_stats();
  numaaff::affinity_on_next_touch(r.p, r.bytes);  // never written: nothing to move
  long sum = 0;
  for (std::size_t i = 0; i < r.bytes; i += ps) sum += r.p[i];
  EXPECT_EQ(sum, 0);
  EXPECT_EQ(numaaff::next_touch_stats().pages_failed, sandboxed ? r.bytes / ps : 0u);
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  r.p[12345] = 9;  // and writes work after a read opened the chunk
  EXPECT_EQ(r.p[12345], 9);
}

TEST(NextTouch, UnalignedRangesAndTinyChunks) {
  region r(64 * ps);
  r.fill();
  numaaff::next_touch_options o;
  o.chunk_bytes = ps;
  numaaff::affinity_on_next_touch(r.p + 100, 10 * ps, o);  // pages 0..10
  EXPECT_TRUE(numaaff::is_armed(r.p, 1));
  EXPECT_TRUE(numaaff::is_armed(r.p + 10 * ps, 1));
  EXPECT_FALSE(numaaff::is_armed(r.p + 11 * ps, ps));
  EXPECT_TRUE(r.intact());
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
}

TEST(NextTouchDeathTest, WildPointersStillCrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        region armed(1 << 20);
        numaaff::affinity_on_next_touch(armed.p, armed.bytes);
        char* gone = static_cast<char*>(mmap(nullptr, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        munmap(gone, ps);
        *reinterpret_cast<volatile char*>(gone) = 1;  // SEGV_MAPERR: not ours
      },
      "");
  EXPECT_DEATH(
      {
        region armed(1 << 20);
        numaaff::affinity_on_next_touch(armed.p, armed.bytes);
        char* guard = static_cast<char*>(mmap(nullptr, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        *reinterpret_cast<volatile char*>(guard) = 1;  // SEGV_ACCERR outside our ranges
      },
      "");
}

std::atomic<void*> app_fault_address{nullptr};
void app_handler(int, siginfo_t* info, void*) {
  _exit(info->si_addr == app_fault_address.load() ? 42 : 43);
}

TEST(NextTouchDeathTest, AnApplicationHandlerInstalledBeforeKeepsItsFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction sa = {};
        sa.sa_sigaction = app_handler;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, nullptr);
        region armed(2 << 20);
        armed.fill();
        numaaff::affinity_on_next_touch(armed.p, armed.bytes);
        if (!armed.intact()) _exit(44);  // ours: handled by numaaff, never by the app
        char* guard = static_cast<char*>(mmap(nullptr, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        app_fault_address = guard;
        *reinterpret_cast<volatile char*>(guard) = 1;
        _exit(45);
      },
      ::testing::ExitedWithCode(42), "");
}

TEST(NextTouch, DisarmOpensWithoutMigration) {
  region r(4 << 20);
  r.fill();
  numaaff::affinity_on_next_touch(r.p, r.bytes);
  numaaff::reset_next_touch_stats();
  numaaff::disarm(r.p, r.bytes);
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  EXPECT_TRUE(r.intact());
  EXPECT_EQ(numaaff::next_touch_stats().faults, 0u);
  // Partial disarm opens whole chunks overlapping the range, and only those.
  numaaff::affinity_on_next_touch(r.p, r.bytes);
  numaaff::disarm(r.p + 10, 1);
  EXPECT_FALSE(numaaff::is_armed(r.p, numaaff::default_next_touch_pages * ps));
  EXPECT_TRUE(numaaff::is_armed(r.p + numaaff::default_next_touch_pages * ps, ps));
  numaaff::disarm(r.p, r.bytes);
  numaaff::disarm(r.p, r.bytes);  // again: a no-op
}

TEST(NextTouch, RearmingAPartlyArmedRange) {
  region r(12 << 20);
  r.fill();
  numaaff::affinity_on_next_touch(r.p, 8 << 20);
  numaaff::affinity_on_next_touch(r.p + (4 << 20), 8 << 20);
  EXPECT_TRUE(numaaff::is_armed(r.p, ps));
  EXPECT_TRUE(numaaff::is_armed(r.p + (11 << 20), ps));
  EXPECT_TRUE(r.intact());
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  {
    numaaff::next_touch_phase phase(r.p, r.bytes);
    EXPECT_TRUE(numaaff::is_armed(r.p, r.bytes));
    r.p[0] = r.p[0];
  }
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));  // the phase disarmed the rest
  EXPECT_TRUE(r.intact());
}

TEST(NextTouch, FreeingThroughNumaaffDisarms) {
  const std::size_t bytes = 8 << 20;
  void* p = numaaff::allocate_on_node(bytes, numaaff_test::sysfs_nodes().front());
  std::memset(p, 3, bytes);
  numaaff::affinity_on_next_touch(p, bytes);
  EXPECT_TRUE(numaaff::is_armed(p, bytes));
  numaaff::deallocate(p, bytes);
  EXPECT_FALSE(numaaff::is_armed(p, bytes));
  void* again = numaaff::allocate_on_node(bytes, numaaff_test::sysfs_nodes().front());
  std::memset(again, 4, bytes);  // whatever address it got, it is plain memory
  numaaff::deallocate(again, bytes);
}

TEST(NextTouch, ForkedChildTouchesArmedMemory) {
  region r(4 << 20);
  r.fill();
  numaaff::affinity_on_next_touch(r.p, r.bytes);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(r.intact() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(r.intact());  // the parent's own first touch
}

TEST(NextTouch, TransparentHugePageBackedRange) {
  region raw(10 << 20, MADV_HUGEPAGE);
  char* p = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw.p) + (2u << 20) - 1) & ~((std::uintptr_t{2} << 20) - 1));
  const std::size_t bytes = 8 << 20;
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(i % 251);
  numaaff::affinity_on_next_touch(p, bytes);
  for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], static_cast<char>(i % 251)) << i;
}

TEST(NextTouch, FaultStormLosesNoUpdates) {
  constexpr int threads = 4;
  const std::size_t pages = 2048;
  region r(pages * ps);
  std::memset(r.p, 0, r.bytes);
  numaaff::next_touch_options o;
  o.chunk_bytes = 4 * ps;
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<std::size_t> order(pages);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(t)));
      for (std::size_t k : order) {
        // A plain read first: under ThreadSanitizer an atomic operation runs inside its
        // runtime, and a protection fault there re-enters the runtime and deadlocks it. The VM
        // layer's storm touches with the atomic operation itself.
        (void)*reinterpret_cast<volatile char*>(r.p + k * ps + 64);
        reinterpret_cast<std::atomic<std::uint32_t>*>(r.p + k * ps)->fetch_add(1);
      }
    });
  }
  for (auto& th : pool) th.join();
  for (std::size_t k = 0; k < pages; ++k)
    ASSERT_EQ(reinterpret_cast<std::atomic<std::uint32_t>*>(r.p + k * ps)->load(), static_cast<std::uint32_t>(threads)) << k;
  EXPECT_EQ(numaaff::next_touch_stats().pages_failed, sandboxed ? pages : 0u);
}

TEST(NextTouch, FailedMigrationStillOpensTheChunk) {
  region r(4 << 20);
  r.fill();
  numaaff::affinity_on_next_touch(r.p, r.bytes);
  numaaff::reset_next_touch_stats();
  {
    scoped_failure deny(sys::move_pages, EPERM);
    EXPECT_TRUE(r.intact());
  }
  EXPECT_EQ(numaaff::next_touch_stats().pages_failed, r.bytes / ps);
  EXPECT_EQ(numaaff::next_touch_stats().pages_moved, 0u);
}

// Arms 64 pages in 1-page chunks, opens page 20 normally, then touches page 30 while the
// next `failures` mprotect calls fail with ENOMEM (as when vm.max_map_count is reached).
void touch_while_out_of_mappings(region& r, long failures) {
  r.fill();
  numaaff::next_touch_options o;
  o.chunk_bytes = ps;
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  numaaff::reset_next_touch_stats();
  const volatile char* page20 = r.p + 20 * ps;
  const volatile char* page30 = r.p + 30 * ps;
  const char opened = *page20;
  (void)opened;
  scoped_failure no_maps(sys::mprotect, ENOMEM, failures);
  const char seen = *page30;
  (void)seen;
}

TEST(NextTouch, RunningOutOfMappingsWidensChunks) {
  region r(64 * ps);
  touch_while_out_of_mappings(r, 1);
  EXPECT_EQ(numaaff::next_touch_stats().widenings, 1u);
  EXPECT_FALSE(numaaff::is_armed(r.p + 21 * ps, 43 * ps));  // widened from 21 up to the end
  EXPECT_TRUE(numaaff::is_armed(r.p, 20 * ps));             // not past the open chunk 20
  EXPECT_TRUE(r.intact());
}

TEST(NextTouch, WhenWideningIsNotEnoughTheWholeRangeOpens) {
  region r(64 * ps);
  touch_while_out_of_mappings(r, 2);  // the chunk, then its widened span
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));  // chunks 0-19 opened too, unmigrated
  EXPECT_EQ(numaaff::next_touch_stats().faults, 2u);
  EXPECT_TRUE(r.intact());
}

// Every other chunk of a large range: a checkerboard of open and protected chunks needs one
// kernel mapping per chunk, more than vm.max_map_count allows; numaaff must widen, not fail.
TEST(NextTouch, CheckerboardBeyondMaxMapCount) {
  const std::size_t pages = 160000;  // 625 MiB of address space, never populated
  region r(pages * ps, MADV_NOHUGEPAGE, MAP_NORESERVE);
  numaaff::next_touch_options o;
  o.chunk_bytes = ps;
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  numaaff::reset_next_touch_stats();
  long sum = 0;
  for (std::size_t k = 0; k < pages; k += 2) sum += r.p[k * ps];
  EXPECT_EQ(sum, 0);
  for (std::size_t k = 1; k < pages; k += 2) sum += r.p[k * ps];
  EXPECT_EQ(sum, 0);
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  EXPECT_EQ(s.chunks_migrated, pages);
  long limit = 0;
  FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r");
  if (f != nullptr) {
    if (std::fscanf(f, "%ld", &limit) != 1) limit = 0;
    std::fclose(f);
  }
  if (limit > 0 && static_cast<std::size_t>(limit) < pages / 2) {
    EXPECT_GT(s.widenings, 0u);
  }
}

TEST(NextTouch, FourGiBArmedEveryOtherChunkTouched) {
  const std::size_t bytes = std::size_t{4} << 30;
  region r(bytes, MADV_NOHUGEPAGE, MAP_NORESERVE);
  numaaff::affinity_on_next_touch(r.p, bytes);
  const std::size_t chunk = numaaff::default_next_touch_pages * ps;
  long sum = 0;
  for (std::size_t off = 0; off < bytes; off += 2 * chunk) sum += r.p[off];
  EXPECT_EQ(sum, 0);
  EXPECT_TRUE(numaaff::is_armed(r.p + chunk, 1));
  EXPECT_FALSE(numaaff::is_armed(r.p, 1));
}

TEST(NextTouch, AdaptiveGranularityClaimsRunsForSequentialTouches) {
  region r(32 << 20);
  r.fill();
  numaaff::next_touch_options o;
  o.chunk_bytes = 16 * ps;
  o.adaptive = true;
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  numaaff::reset_next_touch_stats();
  EXPECT_TRUE(r.intact());  // one thread, front to back
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  const std::size_t chunks = r.bytes / (16 * ps);
  EXPECT_EQ(s.chunks_migrated, chunks);
  EXPECT_LT(s.faults * 8, chunks) << "the claim did not grow";
}

TEST(NextTouch, TouchNowMakesAnArmedBufferReadyForADatagram) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, fds), 0);
  region r(64 * ps);
  char datagram[3000];
  for (std::size_t i = 0; i < sizeof datagram; ++i) datagram[i] = static_cast<char>(i * 7);
  numaaff::next_touch_options o;
  o.chunk_bytes = 4 * ps;

  // Why the call exists: the kernel does not trap on armed memory, so the datagram is
  // consumed by a receive that fails with EFAULT, and is gone.
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  ASSERT_EQ(send(fds[0], datagram, sizeof datagram, 0), static_cast<ssize_t>(sizeof datagram));
  errno = 0;
  EXPECT_EQ(recv(fds[1], r.p + ps, sizeof datagram, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(recv(fds[1], datagram, sizeof datagram, MSG_DONTWAIT), -1);  // lost
  numaaff::disarm(r.p, r.bytes);

  // With touch_now first, it arrives intact; only the chunks the buffer overlaps are opened,
  // and they were migrated (moved or, never written, placed by the receive itself).
  numaaff::affinity_on_next_touch(r.p, r.bytes, o);
  numaaff::reset_next_touch_stats();
  ASSERT_EQ(send(fds[0], datagram, sizeof datagram, 0), static_cast<ssize_t>(sizeof datagram));
  numaaff::touch_now(r.p + ps, sizeof datagram);
  EXPECT_FALSE(numaaff::is_armed(r.p + ps, sizeof datagram));
  EXPECT_TRUE(numaaff::is_armed(r.p + 4 * ps, ps));  // the next chunk is still armed
  ASSERT_EQ(recv(fds[1], r.p + ps, sizeof datagram, MSG_DONTWAIT), static_cast<ssize_t>(sizeof datagram));
  EXPECT_EQ(std::memcmp(r.p + ps, datagram, sizeof datagram), 0);
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  EXPECT_EQ(s.chunks_migrated, 1u);
  EXPECT_EQ(s.faults, 0u);
  EXPECT_EQ(sandboxed ? s.pages_failed : s.pages_already_there + s.pages_unpopulated, 4u);
  EXPECT_EQ(s.pages_moved, 0u);

  numaaff::touch_now(r.p, r.bytes);  // the rest; a range that is not armed is a no-op
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  numaaff::touch_now(r.p, r.bytes);
  EXPECT_THROW(numaaff::touch_now(nullptr, 1), std::invalid_argument);
  close(fds[0]);
  close(fds[1]);
}

TEST(NextTouch, CallerErrors) {
  region r(ps);
  EXPECT_THROW(numaaff::affinity_on_next_touch(nullptr, 10), std::invalid_argument);
  numaaff::next_touch_options o;
  o.chunk_bytes = ps + 1;
  EXPECT_THROW(numaaff::affinity_on_next_touch(r.p, ps, o), std::invalid_argument);
  std::error_code ec;
  numaaff::affinity_on_next_touch(r.p, ps, o, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  numaaff::affinity_on_next_touch(r.p, 0);  // no-op
  EXPECT_FALSE(numaaff::is_armed(r.p, ps));
  EXPECT_THROW(numaaff::disarm(nullptr, 1), std::invalid_argument);
  {
    scoped_failure refuse(sys::mprotect, ENOMEM, 1);
    numaaff::affinity_on_next_touch(r.p, ps, ec);
    EXPECT_EQ(ec, std::errc::not_enough_memory);
  }
  EXPECT_FALSE(numaaff::is_armed(r.p, ps));
  r.p[0] = 1;  // still plain memory
}

// A throwing form names the call that failed, not the one it expected: the arm maps its chunk
// words (mmap) before it protects the range (mprotect), and a full registry is numaaff's own
// error, named after the call that met it. (The arm used to name mprotect for any failure once
// the handler was installed.)
TEST(NextTouch, AFailedArmNamesTheCallThatFailed) {
  region r(2 * numaaff::detail::registry_capacity * ps);
  numaaff::affinity_on_next_touch(r.p, ps);  // the handler is installed from here on
  numaaff::disarm(r.p, ps);
  {
    scoped_failure fail(sys::mmap, ENODEV, 1);
    EXPECT_EQ(numaaff_test::what_of<std::system_error>([&] { numaaff::affinity_on_next_touch(r.p, ps); }).rfind("numaaff: mmap", 0), 0u);
  }
  {
    scoped_failure fail(sys::mprotect, EACCES, 1);
    EXPECT_EQ(numaaff_test::what_of<std::system_error>([&] { numaaff::affinity_on_next_touch(r.p, ps); }).rfind("numaaff: mprotect", 0), 0u);
  }
  EXPECT_FALSE(numaaff::is_armed(r.p, ps));
  // Every slot taken (one page of every second one: separate ranges), then one more.
  std::size_t armed = 0;
  std::error_code full;
  for (; armed < numaaff::detail::registry_capacity && !full; ++armed)
    numaaff::affinity_on_next_touch(r.p + 2 * armed * ps, ps, full);
  EXPECT_EQ(full ? full : std::error_code(numaaff::errc::too_many_ranges), numaaff::errc::too_many_ranges) << full.message();
  try {
    numaaff::affinity_on_next_touch(r.p + ps, ps);
    ADD_FAILURE() << "a full registry armed another range";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), numaaff::errc::too_many_ranges);
    EXPECT_EQ(std::string(e.what()).rfind("numaaff: affinity_on_next_touch", 0), 0u) << e.what();
  }
  numaaff::disarm(r.p, r.bytes);
  r.p[0] = 1;  // plain memory again
}

// The handler is installed by the first arm; if the kernel refuses sigaction, arming throws a
// system_error naming it, leaves the memory plain, and the next arm installs it. Run in a
// fresh process (re-executed), where no arm has installed the handler yet.
TEST(NextTouch, AHandlerThatCannotBeInstalledIsASigactionErrorAndTheNextArmRetries) {
  if (std::getenv("NUMAAFF_TEST_SIGACTION_CHILD") != nullptr) {
    region r(ps);
    r.p[0] = 3;
    {
      scoped_failure refuse(sys::sigaction, EINVAL, 1);
      try {
        numaaff::affinity_on_next_touch(r.p, ps);
        std::printf("[child] armed although sigaction failed\n");
      } catch (const std::system_error& e) {
        std::printf("[child] threw: %s (%d)\n", e.what(), e.code().value());
      }
    }
    std::printf("[child] armed after: %d, plain: %d\n", numaaff::is_armed(r.p, ps) ? 1 : 0, r.p[0]);
    numaaff::affinity_on_next_touch(r.p, ps);
    const int armed = numaaff::is_armed(r.p, ps) ? 1 : 0;
    std::printf("[child] retried: armed %d, then read %d\n", armed, r.p[0]);
    return;
  }
  const std::string out = numaaff_test::run_command("NUMAAFF_TEST_SIGACTION_CHILD=1 /proc/" + std::to_string(getpid()) +
                                                    "/exe --gtest_filter=NextTouch.AHandlerThatCannotBeInstalled*");
  EXPECT_NE(out.find("[child] threw: numaaff: sigaction: Invalid argument (22)"), std::string::npos) << out;
  EXPECT_NE(out.find("[child] armed after: 0, plain: 3"), std::string::npos) << out;
  EXPECT_NE(out.find("[child] retried: armed 1, then read 3"), std::string::npos) << out;
  EXPECT_NE(out.find("PASSED"), std::string::npos) << out;
}

TEST(NextTouch, ArmingSplitsHugePagesAtChunkBoundariesSoEachChunkMovesAlone) {
  char* p = numaaff_test::huge_backed(2, 0x21);
  if (p == nullptr) GTEST_SKIP() << "no transparent huge pages here";
  const std::size_t huge = numaaff::detail::huge_page_size();
  numaaff::reset_next_touch_stats();
  numaaff::affinity_on_next_touch(p, 2 * huge, numaaff::next_touch_options::for_blocks(72 << 10));
  EXPECT_EQ(numaaff_test::smaps_kb(p, "AnonHugePages"), 0) << "a huge page still spans 72 KiB chunks";
  for (std::size_t i = 0; i < 2 * huge; i += ps) ASSERT_EQ(p[i], 0x21);
  EXPECT_EQ(numaaff::next_touch_stats().chunks_migrated, (2 * huge + (72 << 10) - 1) / (72 << 10));
  // Chunks that are whole, aligned huge pages stay huge.
  char* q = numaaff_test::huge_backed(2, 0x22);
  ASSERT_NE(q, nullptr);
  numaaff::next_touch_options whole;
  whole.chunk_bytes = huge;
  numaaff::affinity_on_next_touch(q, 2 * huge, whole);
  for (std::size_t i = 0; i < 2 * huge; i += ps) ASSERT_EQ(q[i], 0x22);
  EXPECT_EQ(numaaff_test::smaps_kb(q, "AnonHugePages") * 1024, static_cast<long>(2 * huge));
}

// Owner mode on one node: every path runs (a toucher that is not the owner, a chunk that
// spans several blocks, touch_now) and each page's target, node 0, is where it ends.
TEST(NextTouch, PlaceBlocksOnNextTouchOpensEveryChunkForWhoeverTouchesIt) {
  region r(8 << 20);
  r.fill();
  const int node = numaaff_test::sysfs_nodes().front();
  const std::size_t block = (72 << 10) + 24;  // not page-aligned: pages shared by two blocks
  const std::vector<numaaff::node_id> owners((r.bytes + block - 1) / block, node);
  numaaff::reset_next_touch_stats();
  numaaff::place_blocks_on_next_touch(r.p, r.bytes, block, owners);
  EXPECT_TRUE(numaaff::is_armed(r.p, r.bytes));
  std::thread halo([&] {  // reads the first half, as a neighbour's halo exchange would
    volatile char sink = 0;
    for (std::size_t i = 0; i < r.bytes / 2; i += ps) sink = static_cast<char>(sink + r.p[i]);
  });
  halo.join();
  numaaff::touch_now(r.p + r.bytes / 2, r.bytes / 2);
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  EXPECT_TRUE(r.intact());
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  EXPECT_EQ(s.chunks_migrated, r.bytes / (numaaff::default_next_touch_pages * ps));
  EXPECT_EQ(sandboxed ? s.pages_failed : s.pages_already_there, r.bytes / ps);
  EXPECT_EQ(s.pages_moved, 0u);
  EXPECT_EQ(numaaff_test::query_pages(r.p, r.bytes).on(node), r.bytes / ps);
}

// The owner of each page, and the table the registry holds: blocks not page-aligned, several
// blocks per page, a range that does not start on a page. Node numbers here are synthetic (the
// range is disarmed, never migrated).
TEST(NextTouch, OwnerModeTargetsEachPageAtTheBlockHoldingItsFirstByte) {
  using numaaff::detail::page_owner;
  const std::vector<numaaff::node_id> owners{5, 6, 7, 8, 9, 10, 11, 12};
  const std::uintptr_t base = 0x100000 + 100;  // 100 bytes into a page
  EXPECT_EQ(page_owner(base, ps + 24, owners, base - 100), 5);  // the range's first page
  EXPECT_EQ(page_owner(base, ps + 24, owners, base - 100 + ps), 5);  // byte ps-100 is in block 0
  EXPECT_EQ(page_owner(base, ps + 24, owners, base - 100 + 2 * ps), 6);  // byte 2ps-100 in block 1
  EXPECT_EQ(page_owner(base, ps / 4, owners, base - 100 + ps), 8);  // byte ps-100 is in block 3
  region r(4 * ps);
  const std::uint16_t table[4] = {3, 1, 4, 1};
  std::error_code ec;
  const auto begin = reinterpret_cast<std::uintptr_t>(r.p);
  numaaff::detail::arm_range(begin, begin + 4 * ps, 2 * ps, numaaff::detail::touch_target::toucher_node, false, 1,
                             table, ec);
  ASSERT_FALSE(ec);
  bool found = false;
  for (std::size_t i = 0; i < numaaff::detail::registry_high.load(); ++i) {
    const numaaff::detail::armed_range& a = numaaff::detail::registry[i];
    if (a.state.load() != numaaff::detail::slot_active || a.begin != begin) continue;
    found = true;
    ASSERT_NE(a.page_nodes, nullptr);
    EXPECT_EQ(std::vector<std::uint16_t>(a.page_nodes, a.page_nodes + 4), std::vector<std::uint16_t>(table, table + 4));
  }
  EXPECT_TRUE(found);
  numaaff::disarm(r.p, r.bytes);
  r.p[0] = 1;  // opened, unmigrated
}

TEST(NextTouch, PlaceBlocksOnNextTouchCallerErrors) {
  region r(4 * ps);
  const int node = numaaff_test::sysfs_nodes().front();
  const std::vector<numaaff::node_id> two(2, node);
  const auto message_of = [](auto&& call) { return numaaff_test::what_of<std::invalid_argument>(call); };
  EXPECT_NE(message_of([&] { numaaff::place_blocks_on_next_touch(r.p, r.bytes, ps, two); }).find("owners"),
            std::string::npos);
  EXPECT_NE(message_of([&] { numaaff::place_blocks_on_next_touch(r.p, r.bytes, 0, two); }).find("block_bytes"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              numaaff::place_blocks_on_next_touch(r.p, r.bytes, 2 * ps, std::vector<numaaff::node_id>{node, 4096});
            }).find("block 1"),
            std::string::npos);
  numaaff::next_touch_options o;
  o.chunk_bytes = ps + 1;
  EXPECT_NE(message_of([&] { numaaff::place_blocks_on_next_touch(r.p, r.bytes, 2 * ps, two, o); }).find("chunk_bytes"),
            std::string::npos);
  EXPECT_THROW(numaaff::place_blocks_on_next_touch(nullptr, 1, ps, two), std::invalid_argument);
  std::error_code ec;
  numaaff::place_blocks_on_next_touch(r.p, r.bytes, ps, two, {}, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  r.p[0] = 1;  // still plain memory
}

TEST(NextTouch, ForBlocksRoundsToPages) {
  EXPECT_EQ(numaaff::next_touch_options::for_blocks(72 << 10).chunk_bytes, std::size_t{72} << 10);
  EXPECT_EQ(numaaff::next_touch_options::for_blocks(1).chunk_bytes, ps);
  EXPECT_EQ(numaaff::next_touch_options::for_blocks(ps + 1).chunk_bytes, 2 * ps);
  EXPECT_THROW(numaaff::next_touch_options::for_blocks(0), std::invalid_argument);
}

TEST(NextTouch, ChunksLargerThanTheRangeOrRangesAtTheTopOfTheAddressSpaceReturnAtOnce) {
  const std::string child = numaaff_test::run_in_child(10, [] {
    char* p = static_cast<char*>(mmap(nullptr, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    p[0] = 5;
    numaaff::next_touch_options o;
    o.chunk_bytes = std::numeric_limits<std::size_t>::max() / ps * ps;  // one chunk, whatever the range
    numaaff::affinity_on_next_touch(p, ps, o);
    if (p[0] != 5 || numaaff::is_armed(p, ps)) return 1;
    std::error_code ec;  // no mapping can be there: an error, not a walk through the address space
    numaaff::affinity_on_next_touch(reinterpret_cast<void*>(~std::uintptr_t{0} - (std::uintptr_t{512} << 10) + 1), ps, ec);
    return ec ? 0 : 2;
  });
  EXPECT_EQ(child, "");
}

TEST(NextTouch, KeptBlocksAreOpenedButNeitherMovedNorCounted) {
  // Owner mode with free slots (keep_in_place): touching any block opens it and keeps every
  // byte; only the blocks with an owner are migrated and counted.
  region r(32 * ps);
  r.fill();
  const int home = numaaff_test::sysfs_nodes().front();
  std::vector<numaaff::node_id> owners(4, numaaff::keep_in_place);
  owners[1] = home;  // pages 8-15
  numaaff::reset_next_touch_stats();
  numaaff::next_touch_options o;
  o.chunk_bytes = 8 * ps;
  numaaff::place_blocks_on_next_touch(r.p, r.bytes, 8 * ps, owners, o);
  EXPECT_TRUE(r.intact());
  EXPECT_FALSE(numaaff::is_armed(r.p, r.bytes));
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  EXPECT_EQ(s.chunks_migrated, 4u);
  EXPECT_EQ(sandboxed ? s.pages_failed : s.pages_already_there, 8u) << "the one owned block, on its node already";
  EXPECT_EQ(s.pages_moved + (sandboxed ? s.pages_already_there : s.pages_failed) + s.pages_unpopulated, 0u);
}

}  // namespace
