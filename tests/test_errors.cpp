// The error model: numaaff's category, the one syscall wrapper (errno capture, EINTR retry,
// failure injection by call name), and that throwing and error_code forms agree.
#include <numaaff/errors.hpp>
#include <numaaff/system_report.hpp>
#include <numaaff/topology.hpp>

#include <numaaff/detail/numa_calls.hpp>
#include <numaaff/detail/syscall.hpp>

#include "common/seccomp_filter.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace {

using numaaff::detail::scoped_failure;
using numaaff::detail::sys;

TEST(Errors, CategoryNamesAndMessages) {
  EXPECT_STREQ(numaaff::error_category().name(), "numaaff");
  const std::error_code ec = numaaff::errc::too_many_ranges;
  EXPECT_EQ(&ec.category(), &numaaff::error_category());
  EXPECT_EQ(ec.message(), "too many ranges are armed for next-touch at once");
  EXPECT_NE(numaaff::error_category().message(999).find("999"), std::string::npos);
  for (int e = 7; e <= 9; ++e) EXPECT_EQ(numaaff::error_category().message(e).find("unknown"), std::string::npos) << e;
  EXPECT_NE(numaaff::error_category().message(1).find("unknown"), std::string::npos);  // retired
}

TEST(Errors, EquivalentToPortableConditions) {
  EXPECT_EQ(std::error_code(numaaff::errc::feature_unavailable), std::errc::function_not_supported);
  EXPECT_NE(std::error_code(numaaff::errc::too_many_ranges), std::errc::function_not_supported);
}

TEST(Errors, WrapperCapturesErrnoAndNamesTheCall) {
  const auto r = numaaff::detail::call(sys::mprotect, [] {
    errno = EACCES;
    return -1;
  });
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error, EACCES);
  EXPECT_EQ(r.code(), std::errc::permission_denied);
  try {
    numaaff::detail::check(r);
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::permission_denied);
    EXPECT_EQ(std::string(e.what()).rfind("numaaff: mprotect", 0), 0u) << e.what();
  }
}

TEST(Errors, WrapperRetriesEintr) {
  int calls = 0;
  const auto r = numaaff::detail::call(sys::madvise, [&] {
    ++calls;
    if (calls < 3) {
      errno = EINTR;
      return -1;
    }
    return 0;
  });
  EXPECT_TRUE(r);
  EXPECT_EQ(calls, 3);
  // Injected EINTRs are retried as well; the real call then runs.
  scoped_failure twice(sys::madvise, EINTR, 2);
  int real = 0;
  EXPECT_TRUE(numaaff::detail::call(sys::madvise, [&] { return ++real, 0; }));
  EXPECT_EQ(real, 1);
}

TEST(Errors, InjectionIsPerCallAndCounted) {
  {
    scoped_failure once(sys::move_pages, ENOMEM, 1);
    int status = 0;
    EXPECT_EQ(numaaff::detail::sys_move_pages(0, nullptr, nullptr, &status, 0).error, ENOMEM);
    const int real = numaaff_test::in_numa_sandbox() ? EPERM : 0;  // what the kernel answers here
    EXPECT_EQ(numaaff::detail::sys_move_pages(0, nullptr, nullptr, &status, 0).error, real);  // used up
    int mode = 0;
    EXPECT_EQ(numaaff::detail::sys_get_mempolicy(&mode, nullptr, 0, nullptr, 0).error, real);  // other call
  }
  {
    scoped_failure always(sys::mmap, ENODEV);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(numaaff::detail::sys_mmap(4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS).error, ENODEV);
  }
  const auto ok = numaaff::detail::sys_mmap(4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS);
  ASSERT_TRUE(ok);
  numaaff::detail::sys_munmap(ok.value, 4096);
}

TEST(Errors, ThrowingAndErrorCodeFormsAgree) {
  scoped_failure fail(sys::getcpu, EPERM);
  std::error_code ec;
  EXPECT_EQ(numaaff::current_node(ec), -1);
  EXPECT_EQ(ec, std::errc::operation_not_permitted);
  try {
    (void)numaaff::current_node();
    FAIL() << "no exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), ec);
    EXPECT_EQ(std::string(e.what()).rfind("numaaff: getcpu", 0), 0u) << e.what();
  }
}

// The capability report turns kernel refusals into facts, not failures.
TEST(Errors, ReportDegradesOnEpermEnosysEnodev) {
  const numaaff::topology& topo = numaaff::topology::system();
  {
    scoped_failure deny(sys::move_pages, EPERM);
    const numaaff::capability_report r = numaaff::probe_capabilities(topo);
    EXPECT_EQ(r.migration, numaaff::probe_state::forbidden);
    EXPECT_FALSE(r.placement_effective());
    EXPECT_NE(r.to_string().find("move_pages: EPERM"), std::string::npos) << r.to_string();
  }
  {
    scoped_failure missing(sys::get_mempolicy, ENOSYS);
    EXPECT_EQ(numaaff::probe_capabilities(topo).numa_syscalls, numaaff::probe_state::no);
  }
  {
    scoped_failure old_kernel(sys::set_mempolicy_home_node, ENOSYS);
    EXPECT_EQ(numaaff::probe_capabilities(topo).home_node, numaaff::probe_state::no);
  }
  {
    scoped_failure no_mbind(sys::mbind, ENODEV);
    // move_pages answers for itself: denied in the sandbox, which takes precedence
    EXPECT_EQ(numaaff::probe_capabilities(topo).migration,
              numaaff_test::in_numa_sandbox() ? numaaff::probe_state::forbidden : numaaff::probe_state::no);
  }
  {
    scoped_failure no_memory(sys::mmap, ENOMEM);
    const numaaff::capability_report r = numaaff::probe_capabilities(topo);  // must not crash
    EXPECT_FALSE(r.placement_effective());
  }
}

}  // namespace
