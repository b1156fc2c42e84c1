// Independent placement checks for tests: raw move_pages(2) queries and the kernel's sysfs view
// of CPUs and nodes. Deliberately shares no code with numaaff, so that the library is never
// checked against itself.
#pragma once

#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace numaaff_test {

/// Result of a raw query: pages per node, never-touched pages, other errors.
struct raw_placement {
  std::map<int, std::size_t> per_node;
  std::size_t unpopulated = 0;  // -ENOENT or -EFAULT
  std::size_t other_errors = 0;
  std::size_t total = 0;
  std::size_t on(int node) const {
    const auto it = per_node.find(node);
    return it == per_node.end() ? 0 : it->second;
  }
  /// "node 0: 12, node 2: 6, unpopulated 0, other errors 0": for failure messages.
  std::string to_string() const {
    std::string s;
    for (const auto& [node, count] : per_node) s += "node " + std::to_string(node) + ": " + std::to_string(count) + ", ";
    return s + "unpopulated " + std::to_string(unpopulated) + ", other errors " + std::to_string(other_errors);
  }
};

inline std::vector<int> sysfs_nodes();

/// A page's status when a sandbox denies move_pages (tests/numa_sandbox): not resident is
/// unpopulated; resident is on the host's node when it has exactly one, unknown otherwise.
inline int sandboxed_status(void* page) {
  unsigned char vec = 0;
  if (mincore(page, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), &vec) != 0 || (vec & 1) == 0) return -ENOENT;
  const std::vector<int> nodes = sysfs_nodes();
  return nodes.size() == 1 ? nodes.front() : -EPERM;
}

/// Where the pages of [addr, addr + bytes) are, per the kernel (move_pages with nodes = NULL).
inline raw_placement query_pages(const void* addr, std::size_t bytes) {
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(addr) & ~(ps - 1);
  const std::uintptr_t last = reinterpret_cast<std::uintptr_t>(addr) + bytes;
  raw_placement r;
  std::vector<void*> pages;
  for (std::uintptr_t p = first; p < last; p += ps) pages.push_back(reinterpret_cast<void*>(p));
  std::vector<int> status(pages.size(), 0);
  constexpr std::size_t batch = 1024;
  for (std::size_t i = 0; i < pages.size(); i += batch) {
    const std::size_t n = pages.size() - i < batch ? pages.size() - i : batch;
    if (move_pages(0, n, pages.data() + i, nullptr, status.data() + i, 0) != 0) {
      const int error = errno;
      for (std::size_t k = 0; k < n; ++k) status[i + k] = error == EPERM ? sandboxed_status(pages[i + k]) : -error;
    }
  }
  for (int s : status) {
    if (s >= 0) {
      ++r.per_node[s];
    } else if (s == -ENOENT || s == -EFAULT) {
      ++r.unpopulated;
    } else {
      ++r.other_errors;
    }
  }
  r.total = pages.size();
  return r;
}

/// Parses a kernel cpulist ("0-3,8,10-11").
inline std::vector<int> parse_cpulist(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part == "\n") continue;
    const std::size_t dash = part.find('-');
    const int lo = std::stoi(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

/// The CPUs the kernel assigns to node `node` (/sys/devices/system/node/nodeN/cpulist).
inline std::vector<int> sysfs_cpus_of(int node) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string text;
  std::getline(in, text);
  return parse_cpulist(text);
}

/// The online NUMA nodes per the kernel.
inline std::vector<int> sysfs_nodes() {
  std::ifstream in("/sys/devices/system/node/online");
  std::string text;
  std::getline(in, text);
  return parse_cpulist(text);
}

/// The online nodes with CPUs, and those without (memory-only), per sysfs.
inline std::vector<int> sysfs_cpu_nodes() {
  std::vector<int> out;
  for (int n : sysfs_nodes())
    if (!sysfs_cpus_of(n).empty()) out.push_back(n);
  return out;
}
inline std::vector<int> sysfs_memory_only_nodes() {
  std::vector<int> out;
  for (int n : sysfs_nodes())
    if (sysfs_cpus_of(n).empty()) out.push_back(n);
  return out;
}

/// The node of `cpu` per sysfs, or -1.
inline int sysfs_node_of_cpu(int cpu) {
  for (int n : sysfs_nodes())
    for (int c : sysfs_cpus_of(n))
      if (c == cpu) return n;
  return -1;
}

/// The CPUs the calling thread is bound to now, ascending (the kernel's answer).
inline std::vector<int> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(static_cast<std::size_t>(c), &set)) out.push_back(c);
  return out;
}

/// The distance row of `node` per sysfs.
inline std::vector<int> sysfs_distances(int node) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/distance");
  std::vector<int> row;
  int d = 0;
  while (in >> d) row.push_back(d);
  return row;
}

}  // namespace numaaff_test
