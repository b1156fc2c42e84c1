// How the compiled C libraries (the C API and hbwmalloc) turn C++ errors into errno values:
// nothing thrown may cross into C (or Fortran) frames. Internal to src/, not installed.
#pragma once

#include <numaaff/errors.hpp>

#include <cerrno>
#include <new>
#include <stdexcept>
#include <system_error>

namespace numaaff_c {

/// The errno value for an error code: its own for a system error, the generic condition's for
/// numaaff's (too many armed ranges: ENOSPC), EIO for anything else.
inline int from_code(const std::error_code& ec) noexcept {
  if (!ec) return 0;
  if (ec.category() == std::generic_category() || ec.category() == std::system_category()) return ec.value();
  if (ec == numaaff::errc::too_many_ranges) return ENOSPC;
  const std::error_condition c = ec.default_error_condition();
  return c.category() == std::generic_category() ? c.value() : EIO;
}

/// Runs f, turning whatever it throws into an errno value.
template <class F>
inline int guarded(F&& f) noexcept {
  try {
    f();
    return 0;
  } catch (const std::invalid_argument&) {
    return EINVAL;
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  } catch (const std::system_error& e) {
    return from_code(e.code());
  } catch (...) {
    return EIO;
  }
}

/// p, and errno set to `error` (ENOMEM when 0) when p is null: how an allocating C call returns.
inline void* allocated(int error, void* p) noexcept {
  if (p == nullptr) errno = error != 0 ? error : ENOMEM;
  return p;
}

}  // namespace numaaff_c
