// Scratch memory and thread placement shared by tests and benchmarks: an anonymous mapping
// that is disarmed before it is unmapped (so no next-touch registration outlives it), and
// pinning a thread to a node's CPUs as the kernel lists them.
#pragma once

#include <numaaff/next_touch.hpp>

#include "placement_check.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace numaaff_test {

/// `bytes` of fresh read-write anonymous memory. `thp_advice`: MADV_NOHUGEPAGE (default, for
/// page-exact placement), MADV_HUGEPAGE, or 0 for the system's default.
class scratch {
 public:
  explicit scratch(std::size_t size, int thp_advice = MADV_NOHUGEPAGE, int extra_flags = 0) : bytes(size) {
    p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0));
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (thp_advice != 0) madvise(p, bytes, thp_advice);
  }
  ~scratch() {
    numaaff::disarm(p, bytes);
    munmap(p, bytes);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;

  char* p;
  std::size_t bytes;
};

/// Binds the calling thread to the CPUs of `node` (per sysfs). Returns false if the kernel refused.
inline bool pin_to_node(int node) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : sysfs_cpus_of(node)) CPU_SET(static_cast<std::size_t>(c), &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace numaaff_test
