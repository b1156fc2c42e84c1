/**
 * @file node_status.hpp
 * @brief What the kernel says now about each node and a process's memory on it.
 *
 * The model: the kernel's own figures, read from /sys and /proc at the moment of the call, for
 * any process (numaaff's or not): a node's total and free memory and its reserved huge pages,
 * the bytes a process holds on each node (numa_maps, as `numastat -p` counts them), the CPUs'
 * busy and total times, and the kernel's count of pages migrated by NUMA balancing. They sit
 * beside numaaff's own counters (counters.hpp) in numaaff-top.
 *
 * @code{.cpp}
 * for (numaaff::node_id n : numaaff::topology::system().nodes()) {
 *   const numaaff::node_memory_status m = numaaff::node_memory(n);
 *   std::printf("node %d: %lld of %lld bytes free\n", n, m.free_bytes, m.total_bytes);
 * }
 * std::map<numaaff::node_id, std::uint64_t> mine = numaaff::process_memory_by_node(getpid());
 * @endcode
 */
#pragma once

#include "detail/kernel_nodes.hpp"
#include "detail/page.hpp"
#include "detail/proc_files.hpp"
#include "errors.hpp"
#include "topology.hpp"

#include <cerrno>
#include <cstdint>
#include <map>
#include <system_error>
#include <vector>

namespace numaaff {

/// Every node the kernel has online, ascending, whatever the process's cpuset allows (which
/// topology::system() follows). Read once. Thread-safe. One node: {0}.
inline const std::vector<node_id>& online_nodes() { return detail::kernel_nodes(); }

/// Every CPU of kernel node `n` (sysfs cpulist), whatever the process's cpuset and affinity
/// allow (which topology::system() follows); empty for a memory-only node. Thread-safe;
/// allocates. @throws std::invalid_argument if the kernel has no node `n`.
inline std::vector<int> node_cpus(node_id n) {
  detail::require_node("numaaff::node_cpus", n);
  return detail::sysfs_node_list(("/sys/devices/system/node/node" + std::to_string(n) + "/cpulist").c_str());
}

/// A node's memory as the kernel counts it now; -1 for what it does not say.
struct node_memory_status {
  node_id node = -1;
  long long total_bytes = -1;
  long long free_bytes = -1;
  long huge_2mib_reserved = -1, huge_2mib_free = -1;  ///< the node's pool of 2 MiB pages
  long huge_1gib_reserved = -1, huge_1gib_free = -1;  ///< and of 1 GiB pages
  /// The kernel's memory tier of the node (memory_tiering in sysfs; a lower tier is faster
  /// memory: HBM or DRAM before CXL or PMEM), -1 when the kernel has no tiers.
  int tier = -1;
};

/**
 * The memory of kernel node `n` now (sysfs meminfo and hugepages). Thread-safe; allocates;
 * a few file reads. One node: the machine's memory.
 * @throws std::invalid_argument if the kernel has no node `n`.
 */
inline node_memory_status node_memory(node_id n) {
  detail::require_node("numaaff::node_memory", n);
  node_memory_status s;
  s.node = n;
  s.total_bytes = detail::node_meminfo_bytes(n, "MemTotal:");
  s.free_bytes = detail::node_meminfo_bytes(n, "MemFree:");
  const detail::hugetlb_pool two = detail::hugetlb_pool_of(n, std::size_t{2} << 20);
  const detail::hugetlb_pool one = detail::hugetlb_pool_of(n, std::size_t{1} << 30);
  s.huge_2mib_reserved = two.total;
  s.huge_2mib_free = two.free;
  s.huge_1gib_reserved = one.total;
  s.huge_1gib_free = one.free;
  s.tier = detail::memory_tier_of(n);
  return s;
}

/**
 * The bytes process `pid` holds resident on each node (its /proc/PID/numa_maps: every
 * mapping's pages per node, in the mapping's page size). Thread-safe; allocates; the kernel
 * walks the process's page tables (milliseconds for gigabytes).
 * @param pid the process; 0 is not this process (use getpid()).
 * @param ec ENOENT: no such process; EACCES: not readable by this user.
 */
inline std::map<node_id, std::uint64_t> process_memory_by_node(long pid, std::error_code& ec) noexcept {
  try {
    std::map<int, std::uint64_t> out;
    errno = 0;
    if (!detail::process_bytes_per_node(pid, out)) {
      ec.assign(errno != 0 ? errno : ENOENT, std::system_category());
      return {};
    }
    ec.clear();
    return out;
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return {};
  }
}
/// The same. @throws std::system_error named "numa_maps".
inline std::map<node_id, std::uint64_t> process_memory_by_node(long pid) {
  std::error_code ec;
  std::map<node_id, std::uint64_t> out = process_memory_by_node(pid, ec);
  if (ec) throw std::system_error(ec, "numa_maps");
  return out;
}

/// One CPU's times since boot in clock ticks (sysconf(_SC_CLK_TCK) per second).
struct cpu_time {
  std::uint64_t busy = 0;   ///< user, nice, system, irq, softirq and steal
  std::uint64_t total = 0;  ///< busy plus idle and iowait
};
/// Every CPU's times, by OS CPU number (/proc/stat). Thread-safe; allocates.
inline std::vector<cpu_time> cpu_times() {
  std::vector<cpu_time> out;
  for (const detail::cpu_ticks& t : detail::read_cpu_ticks()) out.push_back({t.busy, t.total});
  return out;
}

/// The kernel's count of pages NUMA balancing migrated (numa_pages_migrated in /proc/vmstat:
/// not pgmigrate_success, which counts every reason), -1 on a kernel without it. Thread-safe.
inline long long kernel_numa_pages_migrated() { return detail::vmstat_value("numa_pages_migrated"); }

}  // namespace numaaff
