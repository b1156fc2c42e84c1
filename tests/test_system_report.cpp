// The capability report agrees with what the kernel says through other channels.
#include <numaaff/system_report.hpp>

#include "common/placement_check.hpp"

#include "common/seccomp_filter.hpp"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <fstream>
#include <string>

namespace {

TEST(SystemReport, AgreesWithTheKernel) {
  const numaaff::capability_report& r = numaaff::system_report();
  EXPECT_EQ(&r, &numaaff::system_report());
  utsname u{};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(r.kernel_release, u.release);
  EXPECT_EQ(r.node_count, numaaff_test::sysfs_nodes().size());
  std::ifstream nb("/proc/sys/kernel/numa_balancing");
  int balancing = -1;
  if (nb >> balancing) {
    EXPECT_EQ(r.numa_balancing, balancing);
  }
  std::ifstream mm("/proc/sys/vm/max_map_count");
  long maps = -1;
  if (mm >> maps) {
    EXPECT_EQ(r.max_map_count, maps);
  }
  if (numaaff_test::in_numa_sandbox()) {
    EXPECT_TRUE(r.numa_calls_forbidden());
    EXPECT_EQ(r.unpopulated_status, 0);  // move_pages denied: unknown, and said so
  } else {
    EXPECT_FALSE(r.numa_calls_forbidden());
    EXPECT_TRUE(r.unpopulated_status == -ENOENT || r.unpopulated_status == -EFAULT) << r.unpopulated_status;
  }
  EXPECT_EQ(r.placement_effective(), r.node_count > 1 && r.migration == numaaff::probe_state::yes &&
                                         r.numa_syscalls == numaaff::probe_state::yes);
}

TEST(SystemReport, PrintsEveryFactWithItsConsequence) {
  const numaaff::capability_report& r = numaaff::system_report();
  const std::string text = r.to_string();
  ASSERT_GE(r.items.size(), 8u);
  for (const numaaff::capability& c : r.items) {
    EXPECT_NE(text.find(c.name), std::string::npos) << c.name;
    EXPECT_NE(text.find(c.action), std::string::npos) << c.action;
  }
  EXPECT_NE(text.find("placement effective"), std::string::npos);
}

}  // namespace
