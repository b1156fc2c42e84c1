// What the process's memory cgroup still allows it: a cgroup's limit caps the process whatever
// each node's MemFree says, so every "room on a node" decision takes the smaller of the two.
// The one place numaaff reads the cgroup memory files (v2 memory.max / memory.current, v1
// memory.limit_in_bytes / memory.usage_in_bytes), from the process's cgroup up to the root:
// the tightest level decides.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace numaaff::detail {

/// The tightest memory limit over the process's cgroup and its ancestors: the level with the
/// least room now, and the smallest limit of any level (the most the process may ever hold).
struct cgroup_memory {
  bool limited = false;
  std::uint64_t limit = 0;  ///< bytes the cgroup of least room may use
  std::uint64_t used = 0;   ///< bytes it uses now
  std::string where;        ///< the cgroup directory of that limit
  std::uint64_t smallest_limit = 0;  ///< the smallest limit of any level (when limited)
  std::uint64_t room() const noexcept { return limit > used ? limit - used : 0; }
};

/// A cgroup file's number; false for "max", a missing file, or a v1 "no limit" (>= 2^62).
inline bool read_cgroup_number(const std::string& path, std::uint64_t& value) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return false;
  char* end = nullptr;
  value = std::strtoull(word.c_str(), &end, 10);
  return end != word.c_str() && *end == '\0' && value < (std::uint64_t{1} << 62);
}

/**
 * The limit for the cgroups named in `proc_cgroup` (the text of /proc/self/cgroup), under the
 * cgroup file systems mounted at `root` (v2 at root or root/unified, v1's memory controller
 * at root/memory). Pure but for the file reads, so tests can give it a tree of their own.
 */
inline cgroup_memory cgroup_memory_of(const std::string& proc_cgroup, const std::string& root = "/sys/fs/cgroup") {
  cgroup_memory best;
  std::uint64_t smallest = 0;
  const auto consider = [&](const std::string& base, std::string path, const char* max_file, const char* used_file) {
    for (;;) {
      std::uint64_t limit = 0, used = 0;
      const std::string dir = base + path;
      if (read_cgroup_number(dir + "/" + max_file, limit)) {
        if (!read_cgroup_number(dir + "/" + used_file, used)) used = 0;
        const std::uint64_t room = limit > used ? limit - used : 0;
        if (!best.limited || limit < smallest) smallest = limit;
        if (!best.limited || room < best.room()) best = {true, limit, used, dir};
      }
      if (path.empty() || path == "/") break;
      const std::size_t slash = path.find_last_of('/');
      path = slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
    }
  };
  std::istringstream lines(proc_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {  // the v2 hierarchy
      const bool unified_at_root = std::ifstream(root + "/cgroup.controllers").good();
      consider(unified_at_root ? root : root + "/unified", path, "memory.max", "memory.current");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      consider(root + "/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes");
    }
  }
  best.smallest_limit = smallest;
  return best;
}

/// The process's limit now (read on each call: usage changes).
inline cgroup_memory cgroup_memory_now() {
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  return cgroup_memory_of(text.str());
}

}  // namespace numaaff::detail
