// The only place numaaff throws (oneTBB's throw_exception idea): one spot to map exceptions to
// abort() for -fno-exceptions builds, and one spot that formats messages the same way.
#pragma once

#include "../config.hpp"
#include "../errors.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

namespace numaaff::detail {

#if defined(NUMAAFF_NO_EXCEPTIONS)
[[noreturn]] inline void fatal(const char* kind, const std::string& what) noexcept {
  std::fprintf(stderr, "numaaff: fatal %s: %s\n", kind, what.c_str());
  std::abort();
}
#endif

/// A caller's mistake. `what` names the argument, the value and what would be valid.
[[noreturn]] inline void throw_invalid_argument(const std::string& what) {
#if defined(NUMAAFF_NO_EXCEPTIONS)
  fatal("invalid argument", what);
#else
  throw std::invalid_argument("numaaff: " + what);
#endif
}

/// A failed call: `call` is the system call or library function ("mbind", "hwloc_topology_load").
[[noreturn]] inline void throw_system_error(std::error_code ec, const std::string& call) {
#if defined(NUMAAFF_NO_EXCEPTIONS)
  fatal("system error", call + ": " + ec.message());
#else
  throw std::system_error(ec, "numaaff: " + call);
#endif
}

[[noreturn]] inline void throw_bad_alloc() {
#if defined(NUMAAFF_NO_EXCEPTIONS)
  fatal("allocation failure", "out of memory");
#else
  throw std::bad_alloc();
#endif
}

[[noreturn]] inline void throw_bad_array_new_length() {
#if defined(NUMAAFF_NO_EXCEPTIONS)
  fatal("allocation failure", "array length overflows size_t");
#else
  throw std::bad_array_new_length();
#endif
}

}  // namespace numaaff::detail
