// The oneTBB bridge on this host: the kernel-node <-> oneTBB NUMA id conversion (on a synthetic
// machine whose firmware numbers nodes out of topology order), and arenas that run work on
// their node's CPUs, checked with sched_getaffinity.
#include <numaaff/tbb.hpp>

#include "common/placement_check.hpp"

#include <gtest/gtest.h>
#include <oneapi/tbb/parallel_for.h>
#include <sched.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using numaaff::node_id;

std::set<int> allowed_cpus() {
  const std::vector<int> cpus = numaaff_test::thread_cpus();
  return {cpus.begin(), cpus.end()};
}

std::set<int> cpus_of(node_id n) {
  const auto v = numaaff::topology::system().cpus_of(n);
  return {v.begin(), v.end()};
}

TEST(TbbBridge, NumaIdsAreHwlocLogicalIndexesNotKernelNumbers) {
  // Package 0 holds kernel node 1, package 1 kernel node 0: topology order differs from numbering.
  const auto t = numaaff::topology::from_synthetic("pack:2 numa:1(indexes=1,0) core:1 pu:1");
  ASSERT_EQ(t.nodes(), (std::vector<node_id>{0, 1}));
  EXPECT_EQ(numaaff::tbb_numa_id(1, t), 0);
  EXPECT_EQ(numaaff::tbb_numa_id(0, t), 1);
  EXPECT_EQ(numaaff::node_of_tbb_numa_id(0, t), 1);
  EXPECT_EQ(numaaff::node_of_tbb_numa_id(1, t), 0);
  EXPECT_THROW(numaaff::node_of_tbb_numa_id(2, t), std::invalid_argument);
  EXPECT_THROW(numaaff::tbb_numa_id(5, t), std::invalid_argument);
}

TEST(TbbBridge, EveryNumaIdOneTbbReportsMapsToAKernelNode) {
  if (!numaaff::tbb_binds()) GTEST_SKIP() << "oneTBB runs without tbbbind here: it reports no NUMA ids";
  std::set<node_id> mapped;
  for (int id : tbb::info::numa_nodes()) mapped.insert(numaaff::node_of_tbb_numa_id(id));
  const auto& nodes = numaaff::topology::system().nodes();
  EXPECT_EQ(mapped, std::set<node_id>(nodes.begin(), nodes.end()));
}

TEST(TbbBridge, RunOnUsesAnArenaThreadPinnedToTheNode) {
  numaaff::node_arenas arenas;
  ASSERT_FALSE(arenas.nodes().empty());
  const auto caller = std::this_thread::get_id();
  for (node_id n : arenas.nodes()) {
    auto f = arenas.run_on(n, [] { return std::make_pair(std::this_thread::get_id(), allowed_cpus()); });
    const auto [who, cpus] = f.get();
    EXPECT_NE(who, caller);
    EXPECT_EQ(cpus, cpus_of(n));
  }
  EXPECT_THROW(arenas.run_on(0, [] { throw std::runtime_error("x"); }).get(), std::runtime_error);
  EXPECT_THROW(arenas.arena(99), std::invalid_argument);
}

TEST(TbbBridge, ExecutePinsTheCallerForItsDurationOnly) {
  numaaff::node_arenas arenas;
  const std::set<int> before = allowed_cpus();
  const node_id n = arenas.nodes().front();
  std::atomic<int> outside{0};
  const int r = arenas.execute(n, [&] {
    tbb::parallel_for(0, 1000, [&](int) {
      if (allowed_cpus() != cpus_of(n)) outside.fetch_add(1);
    });
    return 7;
  });
  EXPECT_EQ(r, 7);
  EXPECT_EQ(outside.load(), 0);
  EXPECT_EQ(allowed_cpus(), before);
}

}  // namespace
