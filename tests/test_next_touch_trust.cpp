// Next-touch under hostile use (layer 2): faults that are not ours must behave exactly as
// without numaaff, whatever the application did to armed memory or to SIGSEGV before us.
//
// Every scenario runs in a forked child with a watchdog (a loop or a deadlock ends in SIGALRM
// and fails the test instead of hanging it). The parent never arms anything, so each child
// installs numaaff's handler itself, after whatever handler the scenario installs first; and
// where the kernel's own behaviour is the reference, the same scenario runs once more without
// numaaff and the two outcomes are compared.
#include <numaaff/allocator.hpp>
#include <numaaff/next_touch.hpp>

#include "common/sanitizers.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// ---- the harness -------------------------------------------------------------------------

int report_fd = -1;
/// Async-signal-safe: handlers report what they saw through the pipe to the parent.
void report(const char* s) {
  if (report_fd >= 0 && write(report_fd, s, std::strlen(s)) < 0) _exit(99);
}

struct outcome {
  int exit_code = -1;  ///< -1 if killed
  int signal = 0;      ///< the signal that killed it, 0 if it exited
  std::string reported;
  bool operator==(const outcome& o) const { return exit_code == o.exit_code && signal == o.signal && reported == o.reported; }
};
std::ostream& operator<<(std::ostream& os, const outcome& o) {
  return os << (o.signal != 0 ? "killed by " + std::string(strsignal(o.signal)) : "exit " + std::to_string(o.exit_code))
            << ", reported \"" << o.reported.substr(0, 200) << "\"";
}

/// Runs f in a forked child (exit 0 when it returns), at most `seconds`.
template <class F>
outcome in_child(F f, unsigned seconds = 20) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    report_fd = fds[1];
    alarm(seconds);
    f();
    _exit(0);
  }
  close(fds[1]);
  outcome o;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) o.reported.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  return o;
}

/// No core files from the crashes these tests cause on purpose.
void no_core() {
  rlimit none{0, 0};
  setrlimit(RLIMIT_CORE, &none);
}

char* map(std::size_t bytes, int prot = PROT_READ | PROT_WRITE, void* at = nullptr) {
  void* p = mmap(at, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | (at != nullptr ? MAP_FIXED : 0), -1, 0);
  if (p == MAP_FAILED) _exit(98);
  madvise(p, bytes, MADV_NOHUGEPAGE);
  return static_cast<char*>(p);
}

void write_to(char* p) { *reinterpret_cast<volatile char*>(p) = 1; }
char read_from(const char* p) { return *reinterpret_cast<const volatile char*>(p); }

/// Arms 1 MiB and touches it all (numaaff's handler is installed and has worked), then
/// returns a guard page outside any armed range.
char* after_a_working_next_touch() {
  char* r = map(1 << 20);
  std::memset(r, 7, 1 << 20);
  numaaff::affinity_on_next_touch(r, 1 << 20);
  for (std::size_t i = 0; i < (1 << 20); i += ps)
    if (read_from(r + i) != 7) _exit(97);
  return map(ps, PROT_NONE);
}

constexpr int handled_by_app = 42;

/// How a genuine protection fault ends here without numaaff, after reporting `before`: killed
/// by SIGSEGV, or whatever the handler installed before us does (ASan's reports and exits 1).
outcome genuine_crash(const char* before) {
  return in_child([before] {
    char* guard = map(ps, PROT_NONE);
    report(before);
    write_to(guard);
  });
}

// ---- 1: faults on armed ranges that are no longer ours ------------------------------------

TEST(NextTouchTrust, AFaultOnAChunkReprotectedAfterItOpenedKillsInsteadOfLooping) {
  no_core();
  for (int prot : {PROT_NONE, PROT_READ}) {
    const outcome o = in_child([prot] {
      char* r = map(1 << 20);
      numaaff::affinity_on_next_touch(r, 1 << 20);
      for (std::size_t i = 0; i < (1 << 20); i += ps) write_to(r + i);  // every chunk opened
      mprotect(r + 5 * ps, ps, prot);  // the application protects a page itself
      report("protected;");
      write_to(r + 5 * ps);
      report("survived;");
    });
    EXPECT_EQ(o, genuine_crash("protected;")) << "prot " << prot;
  }
}

TEST(NextTouchTrust, AnArmedChunkTheApplicationReprotectsIsGivenBack) {
  no_core();
  const outcome o = in_child([] {
    char* r = map(1 << 20);
    std::memset(r, 3, 1 << 20);
    numaaff::affinity_on_next_touch(r, 1 << 20);
    mprotect(r, 1 << 20, PROT_READ);  // now read-only by the application's choice
    if (read_from(r + 100) != 3) report("bad read;");
    report("read;");
    write_to(r + 100);  // a write to read-only memory: a real crash
    report("wrote;");
  });
  EXPECT_EQ(o, genuine_crash("read;"));
}

TEST(NextTouchTrust, AGuardPageMappedWhereAnArmedRangeWasUnmappedStillCrashes) {
  no_core();
  // A thread stack with its guard page, mapped where an armed range was unmapped without
  // disarm: touching the guard must crash, whether the old chunk covers the guard and more
  // of the stack, or the guard alone with a hole beside it; and a later disarm of the old
  // range must not open the guard either.
  for (int layout = 0; layout < 3; ++layout) {
    const outcome o = in_child([layout] {
      const std::size_t bytes = 1 << 20;
      char* r = map(bytes);
      numaaff::affinity_on_next_touch(r, bytes);  // 128-page chunks, none touched
      munmap(r, bytes);
      if (layout == 1) {
        map(ps, PROT_NONE, r);  // the guard alone, the rest of its chunk a hole
      } else {
        map(bytes, PROT_READ | PROT_WRITE, r);  // a stack ...
        mprotect(r, ps, PROT_NONE);             // ... and its guard page
      }
      if (layout == 2) numaaff::disarm(r, bytes);
      report("mapped;");
      write_to(r);  // the stack overflows into its guard
      report("overflowed silently;");
    });
    EXPECT_EQ(o, genuine_crash("mapped;")) << "layout " << layout;
  }
}

TEST(NextTouchTrust, ReprotectingOneChunkGivesBackThatChunkOnly) {
  no_core();
  // The application makes the last page of a range read-only while it is armed: disarm and
  // touch_now must still open every other chunk (data reachable), and leave that one alone.
  for (bool by_touch_now : {false, true}) {
    const outcome o = in_child([by_touch_now] {
      numaaff::next_touch_options opt;
      opt.chunk_bytes = 4 * ps;
      char* r = map(16 * ps);
      std::memset(r, 2, 16 * ps);
      numaaff::affinity_on_next_touch(r, 16 * ps, opt);
      mprotect(r + 15 * ps, ps, PROT_READ);
      if (by_touch_now) {
        numaaff::touch_now(r, 16 * ps);
      } else {
        numaaff::disarm(r, 16 * ps);
      }
      for (std::size_t i = 0; i < 12 * ps; i += ps) write_to(r + i);  // chunks 0 to 2
      if (read_from(r + 15 * ps) != 2) report("bad read;");
      report(numaaff::next_touch_stats().chunks_released == 1 ? "released one;" : "released other;");
    });
    EXPECT_EQ(o, (outcome{0, 0, "released one;"})) << (by_touch_now ? "touch_now" : "disarm");
  }
}

TEST(NextTouchTrust, DisarmingWhileOtherThreadsTouchLosesNothing) {
  // Disarm and re-arm race touching threads: no access may ever meet a chunk left protected,
  // and no handler may read the chunk words of a slot being retired.
  const outcome o = in_child(
      [] {
        const std::size_t pages = 256;
        char* r = map(pages * ps);
        numaaff::next_touch_options opt;
        opt.chunk_bytes = ps;
        std::atomic<bool> stop{false};
        auto toucher = [&](unsigned seed) {
          for (unsigned i = seed; !stop.load(std::memory_order_relaxed); i = i * 1103515245u + 12345u) {
            char* at = r + (i % pages) * ps;
            *reinterpret_cast<volatile char*>(at) = static_cast<char>(*reinterpret_cast<volatile char*>(at) + 1);
          }
        };
        std::thread a(toucher, 1u), b(toucher, 7u);
        for (int round = 0; round < 300; ++round) {
          numaaff::affinity_on_next_touch(r, pages * ps, opt);
          numaaff::disarm(r, pages * ps);
        }
        stop = true;
        a.join();
        b.join();
        report("done");
      },
      120);
  EXPECT_EQ(o, (outcome{0, 0, "done"}));
}

// ---- 2: chaining as the kernel would deliver -----------------------------------------------

void logger(int, siginfo_t*, void*) { report("L"); }

/// A scenario that ends in a foreign protection fault, with or without next-touch in use.
outcome foreign_fault(bool with_numaaff, void (*install)()) {
  return in_child([=] {
    install();
    char* guard = with_numaaff ? after_a_working_next_touch() : map(ps, PROT_NONE);
    write_to(guard);
    report("returned;");
  });
}

TEST(NextTouchTrust, AResetHandCrashLoggerSeesTheFaultOnceAndTheProcessDies) {
  no_core();
  auto install = [] {
    struct sigaction sa = {};
    sa.sa_sigaction = logger;
    sa.sa_flags = static_cast<int>(SA_SIGINFO | SA_RESETHAND);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
  };
  const outcome without = foreign_fault(false, install);
  EXPECT_EQ(without, (outcome{-1, SIGSEGV, "L"}));  // the kernel's behaviour
  EXPECT_EQ(foreign_fault(true, install), without);
}

void report_mask(const char* who) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  report(who);
  report(sigismember(&now, SIGSEGV) ? "+segv" : "-segv");
  report(sigismember(&now, SIGUSR1) ? "+usr1" : "-usr1");
  report(sigismember(&now, SIGUSR2) ? "+usr2;" : "-usr2;");
  _exit(handled_by_app);
}
void siginfo_handler(int, siginfo_t*, void*) { report_mask("siginfo"); }
void plain_handler(int) { report_mask("plain"); }

TEST(NextTouchTrust, ThePreviousHandlerRunsWithItsOwnMaskAndFlags) {
  no_core();
  static int flags;
  static bool siginfo;
  for (bool with_siginfo : {true, false}) {
    for (int extra : {0, SA_NODEFER}) {
      flags = extra;
      siginfo = with_siginfo;
      auto install = [] {
        struct sigaction sa = {};
        if (siginfo) {
          sa.sa_sigaction = siginfo_handler;
          sa.sa_flags = SA_SIGINFO | flags;
        } else {
          sa.sa_handler = plain_handler;
          sa.sa_flags = flags;
        }
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGUSR1);
        sigaction(SIGSEGV, &sa, nullptr);
      };
      const outcome without = foreign_fault(false, install);
      ASSERT_EQ(without.exit_code, handled_by_app) << without;
      EXPECT_EQ(foreign_fault(true, install), without) << "siginfo " << with_siginfo << ", flags " << extra;
    }
  }
}

TEST(NextTouchTrust, IgnoredOrDefaultSegvStillKills) {
  no_core();
  for (auto disposition : {SIG_IGN, SIG_DFL}) {
    static void (*d)(int);
    d = disposition;
    auto install = [] { signal(SIGSEGV, d); };
    const outcome without = foreign_fault(false, install);
    EXPECT_EQ(without, (outcome{-1, SIGSEGV, ""}));
    EXPECT_EQ(foreign_fault(true, install), without);
  }
}

// ---- 3: a small alternate signal stack ----------------------------------------------------

constexpr std::size_t alt_stack_bytes = 8192;  // SIGSTKSZ before glibc made it dynamic
constexpr unsigned char paint = 0xa5;

/// An 8 KiB alternate stack with a guard page below it, painted so that its use can be read.
char* install_small_alt_stack() {
  char* base = map(ps + alt_stack_bytes);
  mprotect(base, ps, PROT_NONE);
  char* stack = base + ps;
  std::memset(stack, paint, alt_stack_bytes);
  stack_t ss = {};
  ss.ss_sp = stack;
  ss.ss_size = alt_stack_bytes;
  sigaltstack(&ss, nullptr);
  return stack;
}
std::size_t used(const char* stack) {
  std::size_t untouched = 0;
  while (untouched < alt_stack_bytes && static_cast<unsigned char>(stack[untouched]) == paint) ++untouched;
  return alt_stack_bytes - untouched;
}
void on_alt_stack(int) {}

/// Bytes of the alternate stack that one delivery used: a trivial handler (the kernel's frame)
/// or numaaff's handling of the first touch of a populated 128-page chunk.
std::size_t alt_stack_use(bool numaaff_handler) {
  const outcome o = in_child([numaaff_handler] {
    char* stack = install_small_alt_stack();
    struct sigaction sa = {};
    sa.sa_handler = on_alt_stack;
    sa.sa_flags = SA_ONSTACK;  // a runtime's handler, on its alternate stack
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGUSR1, &sa, nullptr);
    if (numaaff_handler) {
      const std::size_t bytes = 4 << 20;
      char* r = map(bytes);
      std::memset(r, 1, bytes);
      numaaff::affinity_on_next_touch(r, bytes);  // takes over SA_ONSTACK
      for (std::size_t i = 0; i < bytes; i += ps)
        if (read_from(r + i) != 1) _exit(97);
    } else {
      raise(SIGUSR1);
    }
    report(std::to_string(used(stack)).c_str());
  });
  if (o.exit_code != 0) ADD_FAILURE() << "with numaaff's handler: " << numaaff_handler << ": " << o;
  return o.reported.empty() ? alt_stack_bytes : std::stoul(o.reported);
}

TEST(NextTouchTrust, TheHandlerRunsOnAnEightKiBAlternateSignalStack) {
  no_core();
  if (!numaaff_test::optimized && (numaaff_test::address_sanitizer || numaaff_test::thread_sanitizer))
    GTEST_SKIP() << "sanitized -O0 build: the budget is for the handler compiled -O1 and up";
  const std::size_t kernel = alt_stack_use(false);
  if (kernel + 2048 > alt_stack_bytes)
    GTEST_SKIP() << "the kernel's signal frame takes " << kernel << " of 8192 bytes here";
  const std::size_t ours = alt_stack_use(true);
  // The documented budget (next_touch.hpp): under 2 KiB above the kernel's frame; sanitizer
  // instrumentation of the handler's frames gets twice that.
  const std::size_t budget = numaaff_test::address_sanitizer || numaaff_test::thread_sanitizer ? 4096 : 2048;
  EXPECT_LE(ours, kernel + budget) << "kernel frame " << kernel << " bytes, with numaaff's handler " << ours;
  std::printf("alternate stack used: kernel frame %zu bytes, next-touch handler %zu bytes more\n", kernel,
              ours > kernel ? ours - kernel : 0);
}

// ---- 5: fork while other threads arm, disarm and free -------------------------------------

/// Forks a child that arms 1 MiB of its own and touches it (then, with `and_more`, disarms
/// and allocates through the arenas); the child's wait status. A hang ends in its alarm.
int forked_child_arms_and_touches(bool and_more) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    char* r = map(1 << 20);
    numaaff::affinity_on_next_touch(r, 1 << 20);
    write_to(r + 3 * ps);
    if (and_more) {
      numaaff::disarm(r, 1 << 20);
      std::vector<int, numaaff::node_allocator<int>> small(64, 1, numaaff::node_allocator<int>(0));
      std::vector<char, numaaff::node_allocator<char>> large(1 << 20, 1, numaaff::node_allocator<char>(0));
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(NextTouchTrust, ChildrenForkedWhileOtherThreadsArmDisarmAndFreeNeverHang) {
  const outcome o = in_child(
      [] {
        std::atomic<bool> stop{false};
        auto churn = [&stop](int seed) {
          char* r = map(1 << 20);
          for (int i = 0; !stop.load(std::memory_order_relaxed); ++i) {
            numaaff::affinity_on_next_touch(r, 1 << 20);
            write_to(r + static_cast<std::size_t>((i * 37 + seed) % 256) * ps);
            numaaff::disarm(r, 1 << 20);
            std::vector<int, numaaff::node_allocator<int>> small(64, 1, numaaff::node_allocator<int>(0));
            std::vector<char, numaaff::node_allocator<char>> large(1 << 20, 1, numaaff::node_allocator<char>(0));
          }
        };
        std::thread a(churn, 1), b(churn, 2);
        int failures = 0;
        std::string how;
        for (int i = 0; i < 200; ++i) {
          const int status = forked_child_arms_and_touches(true);
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (++failures == 1)
              how = WIFEXITED(status) ? " (first: exit " + std::to_string(WEXITSTATUS(status)) + ")"
                                      : " (first: signal " + std::to_string(WTERMSIG(status)) + ")";
          }
        }
        stop = true;
        a.join();
        b.join();
        report((std::to_string(failures) + how).c_str());
      },
      120);
  EXPECT_EQ(o, (outcome{0, 0, "0"})) << "children that hung or crashed";
}

// fork() copies the signal actions before the memory: a thread that installs the handler
// while another forks could leave the child believing it installed, with the old action.
TEST(NextTouchTrust, AChildForkedWhileAnotherThreadInstallsTheHandlerHasItInstalled) {
  no_core();
  int crashed = 0;
  for (int round = 0; round < 150; ++round) {
    const outcome o = in_child(
        [round] {  // a fresh process: its first arm installs the handler
          std::atomic<bool> arming{false};
          std::thread installer([&arming] {
            char* r = map(1 << 20);
            arming = true;
            numaaff::affinity_on_next_touch(r, 1 << 20);
            write_to(r);
          });
          while (!arming) {
          }
          for (std::atomic<int> spin{0}; spin.load(std::memory_order_relaxed) < (round % 50) * 400;)
            spin.fetch_add(1, std::memory_order_relaxed);  // a varying delay before the fork
          const int status = forked_child_arms_and_touches(false);
          installer.join();
          report(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "crashed");
        },
        30);
    if (!(o == outcome{0, 0, "ok"})) ++crashed;
  }
  EXPECT_EQ(crashed, 0) << "children of 150 forks that met the default SIGSEGV action on their own armed range";
}

// ---- arming memory that is not read-write ----------------------------------------------

// Opened chunks are made read-write, so arming anything else would change what the program
// may do with it: a read-only private mapping would become writable, a read-only shared file
// mapping could never be opened. Such a range is a caller error, and it is left as it was.
TEST(NextTouchTrust, ArmingMemoryThatIsNotReadWriteIsACallerErrorAndChangesNothing) {
  const outcome o = in_child([] {
    no_core();
    char* ro = map(8 * ps);
    std::memset(ro, 3, 8 * ps);
    mprotect(ro, 8 * ps, PROT_READ);
    try {
      numaaff::affinity_on_next_touch(ro, 8 * ps);
      report("read-only armed;");
    } catch (const std::invalid_argument&) {
      report("read-only refused;");
    }
    if (numaaff::is_armed(ro, 8 * ps)) report("armed anyway;");
    if (read_from(ro + 5 * ps) != 3) report("data lost;");
    // Half read-write, half read-only: nothing of it is armed.
    char* mixed = map(16 * ps);
    mprotect(mixed + 8 * ps, 8 * ps, PROT_READ);
    std::error_code ec;
    numaaff::affinity_on_next_touch(mixed, 16 * ps, ec);
    if (ec == std::errc::invalid_argument && !numaaff::is_armed(mixed, 16 * ps)) report("mixed refused;");
    const std::vector<int> owners(2, numaaff::keep_in_place);
    numaaff::place_blocks_on_next_touch(mixed, 16 * ps, 8 * ps, owners, {}, ec);
    if (ec == std::errc::invalid_argument) report("owners refused;");
    // A read-only shared file mapping (a checkpoint mapped for reading).
    char path[] = "/tmp/numaaff-ro-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(4 * ps)) != 0) _exit(96);
    unlink(path);
    const int ro_fd = open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDONLY);
    auto* file = static_cast<char*>(mmap(nullptr, 4 * ps, PROT_READ, MAP_SHARED, ro_fd, 0));
    if (file == MAP_FAILED) _exit(95);
    numaaff::affinity_on_next_touch(file, 4 * ps, ec);
    if (ec == std::errc::invalid_argument) report("file refused;");
    if (read_from(file + ps) != 0) report("file unreadable;");
    // Executable memory keeps its execute right.
    char* code = map(4 * ps, PROT_READ | PROT_WRITE | PROT_EXEC);
    numaaff::affinity_on_next_touch(code, 4 * ps, ec);
    if (ec == std::errc::invalid_argument) report("exec refused;");
    report("writing;");
    write_to(ro + ps);  // still read-only: the kernel's SIGSEGV, not ours
    report("wrote to read-only memory;");
  });
  // The write to read-only memory ends as a genuine crash does here (SIGSEGV, or ASan's report).
  EXPECT_EQ(o, genuine_crash("read-only refused;mixed refused;owners refused;file refused;exec refused;writing;")) << o;
}

TEST(NextTouchTrust, ReArmingAnArmedRangeIsStillAllowed) {
  // An armed range is PROT_NONE: arming it again (a new phase before every chunk was touched)
  // must not be taken for arming memory that is not read-write.
  const outcome o = in_child([] {
    char* r = map(64 * ps);
    std::memset(r, 9, 64 * ps);
    numaaff::next_touch_options eight;
    eight.chunk_bytes = 8 * ps;
    numaaff::affinity_on_next_touch(r, 64 * ps, eight);
    if (read_from(r) != 9) report("lost;");  // opens the first chunk only
    if (numaaff::is_armed(r, ps) || !numaaff::is_armed(r + 8 * ps, 56 * ps)) report("not partly armed;");
    numaaff::affinity_on_next_touch(r, 64 * ps, eight);  // 8 pages read-write, 56 PROT_NONE (ours)
    if (!numaaff::is_armed(r, ps) || !numaaff::is_armed(r + 63 * ps, ps)) report("not re-armed;");
    for (std::size_t i = 0; i < 64 * ps; i += ps)
      if (read_from(r + i) != 9) report("lost after re-arming;");
  });
  EXPECT_EQ(o.exit_code, 0) << o;
  EXPECT_EQ(o.reported, "") << o;
}

}  // namespace
