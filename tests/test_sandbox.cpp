// numaaff in a container whose seccomp profile denies the NUMA calls (layer 2): it degrades,
// never fails. Each scenario runs in a forked child that installs the same filter as the
// numa_sandbox launcher (Docker's default profile without CAP_SYS_NICE: EPERM), so every build
// configuration checks it; the CI stage that runs the whole host layer under the launcher
// checks that nothing else in numaaff throws there either.
#include <numaaff/allocator.hpp>
#include <numaaff/memory.hpp>
#include <numaaff/next_touch.hpp>
#include <numaaff/system_report.hpp>
#include <numaaff/thread_pool.hpp>

#include "common/placement_check.hpp"
#include "common/seccomp_filter.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

/// Runs `f` in a child under the filter; returns "" if it returned, else what failed.
template <class F>
std::string in_sandbox(F f) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(60);
    std::string failure;
    if (!numaaff_test::deny_numa_calls()) {
      failure = "the filter could not be installed";
    } else {
      try {
        failure = f();
      } catch (const std::exception& e) {
        failure = std::string("threw: ") + e.what();
      }
    }
    if (!failure.empty() && write(fds[1], failure.data(), failure.size()) < 0) _exit(3);
    _exit(failure.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "child died with signal " + std::to_string(WTERMSIG(status)) + ": " + out;
  return WEXITSTATUS(status) == 0 ? "" : out;
}

#define SANDBOX_CHECK(cond)                                                     \
  do {                                                                          \
    if (!(cond)) return std::string("line ") + std::to_string(__LINE__) + ": " #cond; \
  } while (0)

TEST(Sandbox, TheReportNamesTheCase) {
  EXPECT_EQ(in_sandbox([]() -> std::string {
              const numaaff::capability_report& r = numaaff::system_report();
              SANDBOX_CHECK(r.numa_calls_forbidden());
              SANDBOX_CHECK(!r.placement_effective());
              const std::string text = r.to_string();
              SANDBOX_CHECK(text.find("sandbox") != std::string::npos);
              SANDBOX_CHECK(text.find("seccomp filter active") != std::string::npos);
              SANDBOX_CHECK(text.find("counted no-op") != std::string::npos);
              return "";
            }),
            "");
  // And outside it (unless this whole run is inside the launcher's), the calls are allowed.
  EXPECT_EQ(numaaff::system_report().numa_calls_forbidden(), numaaff_test::in_numa_sandbox());
}

TEST(Sandbox, AllocationsSucceedPlacedByFirstTouch) {
  EXPECT_EQ(in_sandbox([]() -> std::string {
              const numaaff::node_id node = numaaff::topology::system().nodes().front();
              std::vector<double, numaaff::node_allocator<double>> v(1 << 16, 1.0, numaaff::node_allocator<double>(node));
              std::vector<int, numaaff::local_allocator<int>> small(100, 2);
              std::vector<int, numaaff::interleave_allocator<int>> spread(1 << 18, 3, numaaff::interleave_allocator<int>(numaaff::topology::system().nodes()));
              numaaff::node_resource res(node);
              std::pmr::vector<int> p(1000, 4, &res);
              void* raw = numaaff::allocate_on_node(1 << 20, node);
              std::memset(raw, 5, 1 << 20);
              numaaff::deallocate(raw, 1 << 20);
              SANDBOX_CHECK(v[12345] == 1.0 && small[99] == 2 && spread[(1 << 18) - 1] == 3 && p[999] == 4);
              SANDBOX_CHECK(numaaff::refusal_stats().mappings_unbound >= 3);
              numaaff::thread_pool pool;
              const int in_task = pool.submit([] {
                std::vector<int, numaaff::local_allocator<int>> t(1 << 16, 6);
                return t[100];
              }).get();
              SANDBOX_CHECK(in_task == 6);
              return "";
            }),
            "");
}

TEST(Sandbox, PoliciesAreCountedNoOps) {
  EXPECT_EQ(in_sandbox([]() -> std::string {
              const numaaff::node_id node = numaaff::topology::system().nodes().front();
              const std::size_t bytes = 64 * ps;
              void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
              const std::uint64_t before = numaaff::refusal_stats().policies_skipped;
              numaaff::bind(p, bytes, node);
              numaaff::interleave(p, bytes, {node});
              numaaff::interleave(p, bytes, {node}, 4 * ps);
              numaaff::prefer(p, bytes, node);
              numaaff::set_home_node(p, bytes, node);
              numaaff::reset_policy(p, bytes);
              SANDBOX_CHECK(numaaff::refusal_stats().policies_skipped >= before + 6);
              // Caller mistakes are still mistakes.
              bool rejected = false;
              try {
                numaaff::bind(p, bytes, 4000);
              } catch (const std::invalid_argument&) {
                rejected = true;
              }
              SANDBOX_CHECK(rejected);
              munmap(p, bytes);
              return "";
            }),
            "");
}

TEST(Sandbox, WhereAndMoveToReportWhatCanBeKnown) {
  EXPECT_EQ(in_sandbox([]() -> std::string {
              const std::vector<numaaff::node_id>& nodes = numaaff::topology::system().nodes();
              const std::size_t bytes = 32 * ps;
              char* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
              madvise(p, bytes, MADV_NOHUGEPAGE);
              for (std::size_t i = 0; i < 20 * ps; i += ps) p[i] = 1;  // 20 touched, 12 never
              const numaaff::placement where = numaaff::where(p, bytes);
              SANDBOX_CHECK(where.total() == 32);
              SANDBOX_CHECK(where.unpopulated() == 12);
              if (nodes.size() == 1) {
                SANDBOX_CHECK(where.pages_on(nodes.front()) == 20);  // one node: residency is placement
              } else {
                SANDBOX_CHECK(where.unknown() == 20);
              }
              const numaaff::move_result r = numaaff::move_to(p, bytes, nodes.front());
              SANDBOX_CHECK(r.total == 32 && r.unpopulated == 12 && r.moved == 0);
              if (nodes.size() == 1) {
                SANDBOX_CHECK(r.already_there == 20 && r.failed == 0);
              } else {
                SANDBOX_CHECK(r.failed == 20 && r.first_error == EPERM);
              }
              munmap(p, bytes);
              return "";
            }),
            "");
}

TEST(Sandbox, NextTouchStillOpensEveryChunk) {
  EXPECT_EQ(in_sandbox([]() -> std::string {
              const std::size_t bytes = 4 << 20;
              char* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
              std::memset(p, 9, bytes);
              numaaff::affinity_on_next_touch(p, bytes);
              for (std::size_t i = 0; i < bytes; i += ps) SANDBOX_CHECK(p[i] == 9);
              SANDBOX_CHECK(!numaaff::is_armed(p, bytes));
              numaaff::affinity_on_next_touch(p, bytes);
              numaaff::touch_now(p, bytes);
              SANDBOX_CHECK(!numaaff::is_armed(p, bytes));
              munmap(p, bytes);
              return "";
            }),
            "");
}

}  // namespace
