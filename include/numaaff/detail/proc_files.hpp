// What the kernel says about nodes, CPUs and processes in /proc and /sys, each file read in one
// place: a node's meminfo, a process's pages per node (numa_maps), the CPUs' times (/proc/stat)
// and a /proc/vmstat event. Every parser bounds what it reads and takes malformed text as
// "unknown", never as a crash: the files of another process may change under the reader.
#pragma once

#include "text.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace numaaff::detail {

/// A field of /sys/devices/system/node/nodeN/meminfo ("MemFree:", "MemTotal:") in bytes; -1
/// when it cannot be read.
inline long long node_meminfo_bytes(int node, const char* field) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/meminfo");
  std::string word;
  while (in >> word) {
    if (word == field) {
      long long kib = -1;
      return in >> kib ? kib * 1024 : -1;
    }
  }
  return -1;
}

/// The bytes of each node a process's mappings hold, from /proc/PID/numa_maps (each mapping's
/// N<node>=<pages> in pages of its kernelpagesize_kB). False when the file cannot be read (no
/// such process, not this user's, or a kernel without NUMA) or is empty (a zombie).
inline bool process_bytes_per_node(long pid, std::map<int, std::uint64_t>& out) {
  out.clear();
  std::ifstream in("/proc/" + std::to_string(pid) + "/numa_maps");
  if (!in) return false;
  std::string line;
  bool any_line = false;
  std::vector<std::pair<int, std::uint64_t>> pages;
  while (std::getline(in, line)) {
    any_line = true;
    pages.clear();
    std::uint64_t page_kib = 4;
    std::size_t at = 0;
    while (at < line.size()) {
      std::size_t end = line.find(' ', at);
      if (end == std::string::npos) end = line.size();
      const std::string word = line.substr(at, end - at);
      at = end + 1;
      const std::size_t eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      char* stop = nullptr;
      const unsigned long long v = std::strtoull(value.c_str(), &stop, 10);
      if (stop == value.c_str() || *stop != '\0') continue;
      if (key == "kernelpagesize_kB") {
        page_kib = v;
      } else if (key.size() > 1 && key[0] == 'N' && key.find_first_not_of("0123456789", 1) == std::string::npos &&
                 key.size() < 6) {
        pages.emplace_back(std::atoi(key.c_str() + 1), v);
      }
    }
    for (const auto& [node, n] : pages) out[node] += n * page_kib * 1024;
  }
  return any_line;  // a live process has mappings; a zombie's file is empty
}

/// One CPU's times from /proc/stat, in clock ticks.
struct cpu_ticks {
  std::uint64_t busy = 0;   ///< user, nice, system, irq, softirq, steal
  std::uint64_t total = 0;  ///< busy plus idle and iowait
};
/// Every CPU's line of /proc/stat, by CPU number (absent CPUs: zeros).
inline std::vector<cpu_ticks> read_cpu_ticks() {
  std::vector<cpu_ticks> out;
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    const char* p = line.c_str() + 3;
    char* end = nullptr;
    const long cpu = std::strtol(p, &end, 10);
    if (cpu < 0 || cpu > (1 << 20)) continue;
    std::uint64_t f[8] = {};
    p = end;
    for (int i = 0; i < 8; ++i) {
      f[i] = std::strtoull(p, &end, 10);
      if (end == p) break;
      p = end;
    }
    // user nice system idle iowait irq softirq steal
    cpu_ticks t;
    t.busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    t.total = t.busy + f[3] + f[4];
    if (static_cast<std::size_t>(cpu) >= out.size()) out.resize(static_cast<std::size_t>(cpu) + 1);
    out[static_cast<std::size_t>(cpu)] = t;
  }
  return out;
}

/// The kernel's memory tier of `node` (the N of /sys/devices/virtual/memory_tiering/memory_tierN
/// whose nodelist has it: a lower tier is faster memory), -1 when the kernel has no tiers.
inline int memory_tier_of(int node) {
  DIR* d = ::opendir("/sys/devices/virtual/memory_tiering");
  if (d == nullptr) return -1;
  int tier = -1;
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "memory_tier", 11) != 0) continue;
    std::ifstream in(std::string("/sys/devices/virtual/memory_tiering/") + e->d_name + "/nodelist");
    std::string text;
    std::getline(in, text);
    std::vector<int> nodes;
    if (parse_list(text, nodes) && std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
      tier = std::atoi(e->d_name + 11);
      break;
    }
  }
  ::closedir(d);
  return tier;
}

/// An event counter of /proc/vmstat ("numa_pages_migrated"); -1 when absent.
inline long long vmstat_value(const char* name) {
  std::ifstream in("/proc/vmstat");
  std::string key;
  long long value = 0;
  while (in >> key >> value)
    if (key == name) return value;
  return -1;
}

}  // namespace numaaff::detail
