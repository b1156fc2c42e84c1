// homenode.hpp on this host: pin_this_thread binds the calling thread to its node's usable
// CPUs and sets its homenode; caller mistakes are invalid_argument naming the call; a refused
// sched_setaffinity is a counted no-op. (tests/numa checks every node of a multi-node kernel.)
#include <numaaff/homenode.hpp>
#include <numaaff/system_report.hpp>

#include "common/numa_test.hpp"
#include "common/process.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

TEST(Homenode, PinThisThreadBindsToTheNodesCpusAndSetsTheHomenode) {
  const int node = numaaff_test::sysfs_nodes().front();
  const std::vector<int> allowed = numaaff_test::thread_cpus();
  std::vector<int> expected;  // the node's CPUs this process may use
  for (int c : numaaff_test::sysfs_cpus_of(node))
    for (int a : allowed)
      if (a == c) expected.push_back(c);
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<std::size_t>(allowed.front()), &one);
    sched_setaffinity(0, sizeof one, &one);  // narrowed first: pinning must widen it again
    numaaff::pin_this_thread(node);
    EXPECT_EQ(numaaff_test::thread_cpus(), expected);
    EXPECT_EQ(numaaff::this_homenode(), node);
  }).join();
  EXPECT_EQ(numaaff_test::thread_cpus(), allowed) << "only the calling thread is bound";
}

TEST(Homenode, CallerMistakesNameTheCall) {
  try {
    numaaff::pin_this_thread(4000);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pin_this_thread"), std::string::npos) << e.what();
  }
  std::error_code ec;
  numaaff::pin_this_thread(-1, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  EXPECT_THROW(numaaff::set_homenode(4000), std::invalid_argument);
}

TEST(Homenode, ARefusedBindingIsACountedNoOpThatStillSetsTheHomenode) {
  const int node = numaaff_test::sysfs_nodes().front();
  const std::string child = numaaff_test::run_in_child(10, [node] {
    const auto before = numaaff::refusal_stats().threads_unpinned;
    numaaff::detail::scoped_failure deny(numaaff::detail::sys::sched_setaffinity, EPERM);
    std::error_code ec;
    numaaff::pin_this_thread(node, ec);
    if (ec) return 1;
    if (numaaff::refusal_stats().threads_unpinned != before + 1) return 2;
    return numaaff::this_homenode() == node ? 0 : 3;
  });
  EXPECT_EQ(child, "");
}

}  // namespace
