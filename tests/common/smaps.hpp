// The kernel's record of one mapping, from /proc/self/smaps: its VmFlags ("nh" is
// MADV_NOHUGEPAGE, "hg" MADV_HUGEPAGE) and its fields in kB (AnonHugePages: how much of it
// transparent huge pages back now).
#pragma once

#include <numaaff/allocator.hpp>
#include <numaaff/memory.hpp>
#include <numaaff/detail/page.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace numaaff_test {

/// The smaps lines of the mapping holding `p` ("" if none).
inline std::string smaps_of(const void* p) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return "";
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  std::string out;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    if (std::sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
      if (inside) break;
      inside = lo <= at && at < hi;
    }
    if (inside) out += line;
  }
  std::fclose(f);
  return out;
}

/// The mapping's VmFlags, space-separated, with a space at each end.
inline std::string vm_flags(const void* p) {
  const std::string s = smaps_of(p);
  const std::size_t at = s.find("VmFlags:");
  if (at == std::string::npos) return " ";
  const std::size_t end = s.find('\n', at);
  return s.substr(at + 8, end - at - 8) + " ";
}
inline bool has_vm_flag(const void* p, const char* flag) { return vm_flags(p).find(std::string(" ") + flag + " ") != std::string::npos; }

/// A kB field of the mapping (e.g. "AnonHugePages"), -1 if absent.
inline long smaps_kb(const void* p, const char* field) {
  const std::string s = smaps_of(p);
  const std::size_t at = s.find(std::string(field) + ":");
  return at == std::string::npos ? -1 : std::strtol(s.c_str() + at + std::strlen(field) + 1, nullptr, 10);
}

/// `count` huge-page-aligned huge pages' worth of memory asking for transparent huge pages,
/// filled with `fill` (on `node` if it is not -1; the policy is reset afterwards). Never
/// unmapped: a test's lifetime.
inline char* huge_candidate(std::size_t count, char fill, int node) {
  const std::size_t huge = numaaff::detail::huge_page_size(), bytes = count * huge;
  void* raw = mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  char* p = reinterpret_cast<char*>(numaaff::detail::align_up(reinterpret_cast<std::uintptr_t>(raw), huge));
  if (madvise(p, bytes, MADV_HUGEPAGE) != 0) return nullptr;
  if (node >= 0) numaaff::bind(p, bytes, node);
  std::memset(p, fill, bytes);
  if (node >= 0) numaaff::reset_policy(p, bytes);
  return p;
}

/// Whether all of [p, p + bytes) is backed by transparent huge pages now.
inline bool all_huge(const void* p, std::size_t bytes) { return smaps_kb(p, "AnonHugePages") * 1024 == static_cast<long>(bytes); }

/// `count` transparent huge pages, aligned, filled with `fill`, or nullptr where the kernel
/// gives none (THP off, or no free huge page).
inline char* huge_backed(std::size_t count, char fill = 0x33) {
  char* p = huge_candidate(count, fill, -1);
  return p != nullptr && all_huge(p, count * numaaff::detail::huge_page_size()) ? p : nullptr;
}

/// The same on one of `nodes`, trying the one with the most free memory first (a node that
/// holds the guest's files may have no free 2 MiB left); if none gives huge pages, plain
/// pages on the first node tried, with `*huge` false.
inline char* huge_backed_on(std::size_t count, char fill, std::vector<int> nodes, int& node, bool& huge) {
  std::sort(nodes.begin(), nodes.end(), [](int a, int b) {
    return numaaff::detail::node_free_bytes(a) > numaaff::detail::node_free_bytes(b);
  });
  for (int n : nodes) {
    char* p = huge_candidate(count, fill, n);
    if (p != nullptr && all_huge(p, count * numaaff::detail::huge_page_size())) {
      node = n;
      huge = true;
      return p;
    }
  }
  node = nodes.front();
  huge = false;
  return huge_candidate(count, fill, node);
}

}  // namespace numaaff_test
