// Binding the calling thread to a set of CPUs: the one place numaaff builds a CPU mask and
// calls sched_setaffinity (thread pool workers, OpenMP teams, oneTBB arenas, pin_this_thread).
#pragma once

#include "syscall.hpp"

#include <sched.h>

#include <cstddef>
#include <system_error>
#include <vector>

namespace numaaff::detail {

/// The mask holding `cpus` (numbers at or beyond CPU_SETSIZE are left out).
inline cpu_set_t cpu_mask(const std::vector<int>& cpus) noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(static_cast<std::size_t>(c), &set);
  return set;
}

/// Binds the calling thread to `set`. No allocation; the error names sched_setaffinity.
inline std::error_code pin_to_mask(const cpu_set_t& set) noexcept {
  const auto r = call(sys::sched_setaffinity, [&] { return ::sched_setaffinity(0, sizeof set, &set); });
  return r ? std::error_code{} : r.code();
}

/// Binds the calling thread to `cpu` alone (-1: leaves it as it is and says so).
inline bool pin_to_cpu(int cpu) noexcept {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(cpu), &set);
  return !pin_to_mask(set);
}

/// Which of `slots` CPU slots (CPUs in node order) thread `i` of a team of `threads` takes:
/// spread evenly when there are fewer threads than slots, wrapping when there are more.
constexpr std::size_t team_slot(std::size_t i, std::size_t threads, std::size_t slots) noexcept {
  return threads <= slots ? i * slots / threads : i % slots;
}

/// The calling thread's current binding; false if it cannot be read.
inline bool current_mask(cpu_set_t& set) noexcept {
  CPU_ZERO(&set);
  return static_cast<bool>(call(sys::sched_getaffinity, [&] { return ::sched_getaffinity(0, sizeof set, &set); }));
}

}  // namespace numaaff::detail
