// The only place numaaff throws (oneTBB's throw_exception idea): one spot to map exceptions to
// abort() for -fno-exceptions builds, and one spot that formats messages the same way.
#pragma once

#include "../config.hpp"
#include "../errors.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

namespace numaaff::detail {

/// Writes "numaaff: <what>[ (pointer 0x...)]: aborting" to stderr and aborts: for misuse that
/// no caller could handle, such as a double free (continuing would corrupt) or a pool
/// destroyed by its own task (waiting would never end). No allocation and no lock, so it is
/// safe where the heap or a lock is what went wrong.
[[noreturn]] inline void abort_with_message(const char* what, const void* pointer = nullptr) noexcept {
  char text[256];
  std::size_t n = 0;
  const auto put = [&](const char* s) {
    while (*s != '\0' && n < sizeof text - 1) text[n++] = *s++;
  };
  put("numaaff: ");
  put(what);
  if (pointer != nullptr) {
    char hex[2 * sizeof(std::uintptr_t) + 1];
    std::size_t h = sizeof hex - 1;
    hex[h] = '\0';
    std::uintptr_t v = reinterpret_cast<std::uintptr_t>(pointer);
    do {
      hex[--h] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v != 0);
    put(" (pointer 0x");
    put(hex + h);
    put(")");
  }
  put(": aborting\n");
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::write(STDERR_FILENO, text + done, n - done);
    if (w <= 0) break;
    done += static_cast<std::size_t>(w);
  }
  std::abort();
}

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
