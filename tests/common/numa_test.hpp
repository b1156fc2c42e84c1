// Helpers for tests that need several NUMA nodes. On a one-node host such a test skips with a
// message saying how to run it for real; inside the emulated VM (tests/vm/run-numa-suite sets
// NUMAAFF_TEST_REQUIRE_NODES) the same shortage is a failure, so the multi-node suite can never
// pass by skipping.
#pragma once

#include "placement_check.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace numaaff_test {

/// Nodes the rig promised (0 when not running under the rig).
inline int vm_required_nodes() {
  const char* v = std::getenv("NUMAAFF_TEST_REQUIRE_NODES");
  return v != nullptr ? std::atoi(v) : 0;
}

/// Integer environment variable set by the rig, or `fallback`.
inline int vm_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

/// Drops the clean page cache (root only; a no-op elsewhere). A test that fills a node to leave
/// it a known room calls this first: the kernel reclaims cached file pages (such as the test
/// binaries, read through the rig's shared folder) to satisfy a node-bound allocation, so
/// MemFree understates what the node can still take by however much of them it holds.
inline void drop_page_cache() {
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3" << std::flush;
}

}  // namespace numaaff_test

/// Skips unless the kernel shows at least `n` nodes with CPUs: on the host, or in a rig topology
/// that has fewer CPU nodes by design (tiered: memory-only nodes); fails in any other guest.
#define NUMAAFF_REQUIRE_CPU_NODES(n)                                                                \
  do {                                                                                              \
    NUMAAFF_REQUIRE_NODES(n);                                                                       \
    const int cpu_nodes_ = static_cast<int>(::numaaff_test::sysfs_cpu_nodes().size());             \
    if (cpu_nodes_ < (n)) {                                                                         \
      if (::numaaff_test::vm_int("NUMAAFF_TEST_CPU_NODES", -1) != cpu_nodes_) {                    \
        FAIL() << "needs >= " << (n) << " nodes with CPUs but the guest has " << cpu_nodes_;       \
      }                                                                                             \
      GTEST_SKIP() << "needs >= " << (n) << " nodes with CPUs; this topology has " << cpu_nodes_  \
                   << " CPU nodes by design";                                                       \
    }                                                                                               \
  } while (0)

/// Runs only in the rig's tiered guest (memory-only nodes with HMAT values, whose layout the test
/// knows); skips elsewhere (the host, or a rig topology without them by design); fails in a
/// guest that was promised them and does not show them.
#define NUMAAFF_REQUIRE_MEMORY_TIERS()                                                              \
  do {                                                                                              \
    const int mem_only_ = static_cast<int>(::numaaff_test::sysfs_memory_only_nodes().size());      \
    const int promised_ = ::numaaff_test::vm_int("NUMAAFF_TEST_MEMORY_ONLY_NODES", -1);           \
    if (promised_ <= 0 || mem_only_ == 0 || !numaaff::topology::system().has_memory_attributes()) { \
      if (promised_ > 0) FAIL() << "the rig promised " << promised_ << " memory-only nodes with HMAT"; \
      GTEST_SKIP() << "needs a memory-only node with HMAT values; "                                \
                   << (promised_ == 0 ? "this topology has none by design" : "run tests/vm/run-numa-suite --topology tiered"); \
    }                                                                                               \
  } while (0)

/// Skips (host) or fails (VM) unless the kernel shows at least `n` online NUMA nodes.
#define NUMAAFF_REQUIRE_NODES(n)                                                                    \
  do {                                                                                              \
    const int have_ = static_cast<int>(::numaaff_test::sysfs_nodes().size());                     \
    if (have_ < (n)) {                                                                              \
      if (::numaaff_test::vm_required_nodes() > 0) {                                                \
        FAIL() << "needs >= " << (n) << " NUMA nodes but the rig's guest has " << have_;           \
      }                                                                                             \
      GTEST_SKIP() << "needs >= " << (n) << " NUMA nodes (this host has " << have_                  \
                   << "); run it in the emulated NUMA VM: tests/vm/run-numa-suite --build-dir BUILD"; \
    }                                                                                               \
  } while (0)
