// Page arithmetic. The page size is read once; it is a runtime value (4 KiB on x86-64, 16/64
// KiB on some arm64 kernels), so nothing in numaaff hard-codes 4096.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace numaaff::detail {

inline std::size_t page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

inline std::uintptr_t align_down(std::uintptr_t v, std::size_t a) noexcept { return v & ~(std::uintptr_t{a} - 1); }
inline std::uintptr_t align_up(std::uintptr_t v, std::size_t a) noexcept { return align_down(v + a - 1, a); }

}  // namespace numaaff::detail
