// Binding the calling thread to a set of CPUs: the one place numaaff builds a CPU mask and
// calls sched_setaffinity (thread pool workers, OpenMP teams, oneTBB arenas, pin_this_thread).
// Masks are sized to the highest CPU: cpu_set_t stops at 1,024 CPUs, and a CPU beyond that
// must not be dropped silently.
#pragma once

#include "homenode.hpp"
#include "syscall.hpp"
#include "text.hpp"

#include <sched.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff::detail {

/// A CPU mask of any size, in the kernel's layout (bit c of word c / bits).
using cpu_mask_bits = std::vector<unsigned long>;
inline constexpr std::size_t mask_word_bits = sizeof(unsigned long) * CHAR_BIT;

/// The mask holding `cpus` (negative numbers are left out).
inline cpu_mask_bits cpu_mask(const std::vector<int>& cpus) {
  cpu_mask_bits m;
  for (int c : cpus) {
    if (c < 0) continue;
    const auto u = static_cast<std::size_t>(c);
    if (m.size() <= u / mask_word_bits) m.resize(u / mask_word_bits + 1, 0);
    m[u / mask_word_bits] |= 1UL << (u % mask_word_bits);
  }
  return m;
}

/// The CPUs of a mask, ascending.
inline std::vector<int> mask_cpus(const cpu_mask_bits& m) {
  std::vector<int> out;
  for (std::size_t w = 0; w < m.size(); ++w)
    for (std::size_t b = 0; b < mask_word_bits; ++b)
      if ((m[w] >> b) & 1UL) out.push_back(static_cast<int>(w * mask_word_bits + b));
  return out;
}

/// Binds the calling thread to `m`. No allocation; the error names sched_setaffinity.
inline std::error_code pin_to_mask(const cpu_mask_bits& m) noexcept {
  if (m.empty()) return std::make_error_code(std::errc::invalid_argument);
  const auto r = call(sys::sched_setaffinity, [&] {
    return ::sched_setaffinity(0, m.size() * sizeof(unsigned long), reinterpret_cast<const cpu_set_t*>(m.data()));
  });
  forget_current_node();  // the thread may now run elsewhere: local blocks follow at once
  return r ? std::error_code{} : r.failure();
}

/// Binds the calling thread to `cpu` alone (-1: leaves it as it is and says so).
inline bool pin_to_cpu(int cpu) noexcept {
  if (cpu < 0) return false;
  try {
    return !pin_to_mask(cpu_mask({cpu}));
  } catch (...) {
    return false;
  }
}

/// Which of `slots` CPU slots (CPUs in node order) thread `i` of a team of `threads` takes:
/// spread evenly when there are fewer threads than slots, wrapping when there are more.
constexpr std::size_t team_slot(std::size_t i, std::size_t threads, std::size_t slots) noexcept {
  return threads <= slots ? i * slots / threads : i % slots;
}

/// The calling thread's current binding, whatever the number of CPUs; false if unreadable.
inline bool current_mask(cpu_mask_bits& m) noexcept {
  try {
    for (std::size_t words = 1024 / mask_word_bits; words <= (std::size_t{1} << 20); words *= 2) {
      m.assign(words, 0);
      const auto r = call(sys::sched_getaffinity, [&] {
        return ::sched_getaffinity(0, words * sizeof(unsigned long), reinterpret_cast<cpu_set_t*>(m.data()));
      });
      if (r) return true;
      if (r.error != EINVAL) return false;  // EINVAL: the kernel's mask is larger
    }
  } catch (...) {
  }
  return false;
}

/// The CPUs the process may use, as its binding was at start-up (taskset, numactl, an MPI
/// launcher, the cgroup cpuset): read once during static initialisation, before any thread
/// can narrow its own binding (pinning) or fork.
inline const std::vector<int>& process_cpus() {
  static const std::vector<int> cpus = [] {
    cpu_mask_bits m;
    return current_mask(m) ? mask_cpus(m) : std::vector<int>{};
  }();
  return cpus;
}
inline const bool process_cpus_ready = (process_cpus(), true);

/// The CPUs of kernel node `node` this process may use (its sysfs cpulist within
/// process_cpus()); empty for a memory-only node or one outside the binding.
inline std::vector<int> usable_cpus_of(int node) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string text;
  std::getline(in, text);
  std::vector<int> listed, out;
  if (!parse_list(text, listed)) return out;
  const std::vector<int>& allowed = process_cpus();
  for (int c : listed)
    for (int a : allowed)
      if (a == c) out.push_back(c);
  return out;
}

}  // namespace numaaff::detail
