// The process's mappings, as /proc/self/maps lists them: the only place numaaff reads that
// file (how many mappings there are, for budgets; what protection a range has, for arming).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace numaaff::detail {

/// One line of /proc/self/maps.
struct mapping_info {
  std::uintptr_t begin = 0, end = 0;
  bool read = false, write = false, exec = false, shared = false;
};

/// Calls f(mapping_info) for each mapping in address order while f returns true. False when
/// the file cannot be read (no /proc). Allocates; not for signal handlers.
template <class F>
bool for_each_mapping(F&& f) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return false;
  for (std::string line; std::getline(maps, line);) {
    mapping_info m;
    char* at = nullptr;
    m.begin = static_cast<std::uintptr_t>(std::strtoull(line.c_str(), &at, 16));
    if (*at != '-') continue;
    m.end = static_cast<std::uintptr_t>(std::strtoull(at + 1, &at, 16));
    if (at[0] != ' ' || at[1] == '\0' || at[2] == '\0' || at[3] == '\0' || at[4] == '\0') continue;
    m.read = at[1] == 'r';
    m.write = at[2] == 'w';
    m.exec = at[3] == 'x';
    m.shared = at[4] == 's';
    if (!f(m)) break;
  }
  return true;
}

/// How many mappings the process has (0 when unknown).
inline std::size_t mapping_count() {
  std::size_t n = 0;
  for_each_mapping([&](const mapping_info&) { return ++n, true; });
  return n;
}

/// Mappings numaaff leaves to the rest of the program whatever it does itself: an eighth of
/// vm.max_map_count, at least 1,024 (thread stacks, malloc's large blocks, libraries).
inline std::size_t mapping_reserve(std::size_t limit) noexcept { return limit / 8 > 1024 ? limit / 8 : 1024; }

/// Mappings the process may still add before it reaches the reserve (0 when it has): the
/// budget of everything numaaff does that splits mappings without being asked to map
/// (weighted interleave runs, marking split huge-page regions). Reads two files.
inline std::size_t mapping_headroom() {
  std::size_t limit = 65530;  // the kernel's default
  if (std::ifstream in("/proc/sys/vm/max_map_count"); in) in >> limit;
  const std::size_t floor = mapping_count() + mapping_reserve(limit);
  return floor < limit ? limit - floor : 0;
}

/**
 * The first address in [begin, end) mapped other than readable, writable and not executable,
 * or `end` if there is none (unmapped holes are not looked at: the system call on the range
 * reports them). `end` too when /proc cannot be read.
 */
inline std::uintptr_t first_not_read_write(std::uintptr_t begin, std::uintptr_t end) {
  std::uintptr_t bad = end;
  for_each_mapping([&](const mapping_info& m) {
    if (m.begin >= end) return false;  // in address order: nothing further overlaps
    if (m.end > begin && !(m.read && m.write && !m.exec)) {
      bad = m.begin > begin ? m.begin : begin;
      return false;
    }
    return true;
  });
  return bad;
}

}  // namespace numaaff::detail
