// Page arithmetic. The page size is read once; it is a runtime value (4 KiB on x86-64, 16/64
// KiB on some arm64 kernels), so nothing in numaaff hard-codes 4096.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#ifndef MADV_COLD
#define MADV_COLD 20  // Linux 5.4
#endif

namespace numaaff::detail {

inline std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

/// The size of a transparent huge page (the kernel's PMD size), read once; 2 MiB when the
/// kernel does not say (no THP support).
inline std::size_t huge_page_size() noexcept {
  static const std::size_t size = [] {
    unsigned long long v = 0;
    const int fd = ::open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[32] = {};
      if (::read(fd, buf, sizeof buf - 1) > 0) v = std::strtoull(buf, nullptr, 10);
      ::close(fd);
    }
    return v != 0 && (v & (v - 1)) == 0 ? static_cast<std::size_t>(v) : std::size_t{2} << 20;
  }();
  return size;
}

/// Whether the kernel makes transparent huge pages now (`enabled` is not "never"): one
/// open, read and close of sysfs (async-signal-safe).
inline bool thp_enabled_now() noexcept {
  const int fd = ::open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64] = {};
  const bool read = ::read(fd, buf, sizeof buf - 1) > 0;
  ::close(fd);
  return read && std::strstr(buf, "[never]") == nullptr;
}

/// Set once THP has been seen enabled: an administrator may switch it on while the process
/// runs (the kernel leaves it off by default below 512 MiB of RAM), and huge pages made
/// while it was on stay after it is switched off again. Never cleared.
inline std::atomic<bool> huge_pages_seen{thp_enabled_now()};

/// True when the process may hold transparent huge pages: THP is enabled now, or was when
/// numaaff last looked. Reads sysfs on each call until the answer is yes, then never again.
inline bool huge_pages_possible() noexcept {
  if (huge_pages_seen.load(std::memory_order_relaxed)) return true;
  if (!thp_enabled_now()) return false;
  huge_pages_seen.store(true, std::memory_order_relaxed);
  return true;
}

/// The next-touch handler's form of huge_pages_possible: what has been seen, no system call
/// (arming asked huge_pages_possible, so a range armed with huge pages possible sees yes).
inline bool huge_pages_seen_so_far() noexcept { return huge_pages_seen.load(std::memory_order_relaxed); }

inline std::uintptr_t align_down(std::uintptr_t v, std::size_t a) noexcept { return v & ~(std::uintptr_t{a} - 1); }
inline std::uintptr_t align_up(std::uintptr_t v, std::size_t a) noexcept { return align_down(v + a - 1, a); }

/// A node's pool of explicit huge pages of one size (sysfs): reserved and free pages, -1
/// each when the node has no such pool or it cannot be read.
struct hugetlb_pool {
  long total = -1;
  long free = -1;
};
inline hugetlb_pool hugetlb_pool_of(int node, std::size_t page_bytes) {
  const std::string dir = "/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/hugepages-" +
                          std::to_string(page_bytes >> 10) + "kB/";
  hugetlb_pool p;
  std::ifstream total(dir + "nr_hugepages"), free(dir + "free_hugepages");
  if (!(total >> p.total)) p.total = -1;
  if (!(free >> p.free)) p.free = -1;
  return p;
}

}  // namespace numaaff::detail
