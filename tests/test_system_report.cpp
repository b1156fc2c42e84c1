// The capability report agrees with what the kernel says through other channels.
#include <numaaff/system_report.hpp>

#include "common/placement_check.hpp"

#include "common/seccomp_filter.hpp"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <numaif.h>
#include <stdlib.h>

#include <cstdlib>
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

/// A directory tree of cgroup files for cgroup_memory_of, removed at the end.
struct fake_cgroups {
  std::string root;
  fake_cgroups() {
    char path[] = "/tmp/numaaff-cgroups-XXXXXX";
    root = mkdtemp(path);
  }
  ~fake_cgroups() { std::system(("rm -rf '" + root + "'").c_str()); }
  void put(const std::string& file, const std::string& value) const {
    const std::string path = root + "/" + file;
    std::system(("mkdir -p '" + path.substr(0, path.rfind('/')) + "'").c_str());
    std::ofstream(path) << value << "\n";
  }
};

TEST(CgroupMemory, TheTightestLevelOfV2AndV1Decides) {
  {
    // v2 at the root: the job's limit (1 GiB, 900 MiB used) is tighter than its parent's.
    fake_cgroups t;
    t.put("cgroup.controllers", "cpu memory");
    t.put("jobs/memory.max", "8589934592");
    t.put("jobs/memory.current", "900000000");
    t.put("jobs/run7/memory.max", "1073741824");
    t.put("jobs/run7/memory.current", "943718400");
    t.put("jobs/run7/step/memory.max", "max");
    const auto m = numaaff::detail::cgroup_memory_of("0::/jobs/run7/step\n", t.root);
    ASSERT_TRUE(m.limited);
    EXPECT_EQ(m.limit, 1073741824u);
    EXPECT_EQ(m.room(), 1073741824u - 943718400u);
    EXPECT_EQ(m.where, t.root + "/jobs/run7");
    EXPECT_EQ(m.smallest_limit, 1073741824u);
  }
  {
    // The level with the least room is not the one with the smallest limit: a job of 2 GiB
    // under a parent of 60 GiB that others nearly fill. The job may never hold more than 2 GiB.
    fake_cgroups t;
    t.put("cgroup.controllers", "memory");
    t.put("pods/memory.max", "64424509440");
    t.put("pods/memory.current", "63350767616");
    t.put("pods/job/memory.max", "2147483648");
    t.put("pods/job/memory.current", "104857600");
    const auto m = numaaff::detail::cgroup_memory_of("0::/pods/job\n", t.root);
    ASSERT_TRUE(m.limited);
    EXPECT_EQ(m.where, t.root + "/pods") << "the least room";
    EXPECT_EQ(m.smallest_limit, 2147483648u);
  }
  {
    // Hybrid: v2 under unified/ without a limit, v1's memory controller with one.
    fake_cgroups t;
    t.put("unified/svc/memory.max", "max");
    t.put("memory/svc/memory.limit_in_bytes", "536870912");
    t.put("memory/svc/memory.usage_in_bytes", "600000000");
    t.put("memory/memory.limit_in_bytes", "9223372036854771712");  // v1's "no limit"
    const auto m = numaaff::detail::cgroup_memory_of("4:memory:/svc\n3:cpuset:/\n0::/svc\n", t.root);
    ASSERT_TRUE(m.limited);
    EXPECT_EQ(m.limit, 536870912u);
    EXPECT_EQ(m.room(), 0u) << "over its limit: no room";
  }
  {
    fake_cgroups t;
    t.put("cgroup.controllers", "memory");
    t.put("memory.max", "max");
    EXPECT_FALSE(numaaff::detail::cgroup_memory_of("0::/\n", t.root).limited);
    EXPECT_FALSE(numaaff::detail::cgroup_memory_of("garbage\n", t.root).limited);
  }
}

TEST(SystemReport, ShowsTheCgroupLimitAndTheStartPolicy) {
  const numaaff::capability_report& r = numaaff::system_report();
  const auto now = numaaff::detail::cgroup_memory_now();
  EXPECT_EQ(r.cgroup_memory_limit, now.limited ? now.limit : 0u);
  const std::string text = r.to_string();
  EXPECT_NE(text.find("memory cgroup limit"), std::string::npos);
  EXPECT_NE(text.find("memory policy at start"), std::string::npos);
  // ctest runs this once more under `numactl --interleave=all` (system_report.start_policy).
  if (const char* want = std::getenv("NUMAAFF_TEST_START_POLICY")) {
    EXPECT_EQ(r.start_policy.rfind(want, 0), 0u) << r.start_policy;
    // Kept for the program's own memory: numaaff changed no thread's policy.
    int mode = -1;
    ASSERT_EQ(get_mempolicy(&mode, nullptr, 0, nullptr, 0), 0);
    EXPECT_EQ(mode & 0xff, MPOL_INTERLEAVE);
  } else if (numaaff_test::in_numa_sandbox()) {
    EXPECT_EQ(r.start_policy, "unknown");
  } else {
    EXPECT_EQ(r.start_policy, "default");
  }
}

}  // namespace
