// RAII for the two hwloc objects numaaff touches. hwloc reports failure with -1/NULL and errno,
// so the helpers below turn that into detail::throw_system_error named after the call.
#pragma once

#include "throw.hpp"

#include <hwloc.h>

#include <cerrno>
#include <memory>
#include <system_error>

namespace numaaff::detail {

struct hwloc_topology_deleter {
  void operator()(hwloc_topology_t t) const noexcept { hwloc_topology_destroy(t); }
};
using hwloc_topology_ptr = std::unique_ptr<std::remove_pointer_t<hwloc_topology_t>, hwloc_topology_deleter>;

struct hwloc_bitmap_deleter {
  void operator()(hwloc_bitmap_t b) const noexcept { hwloc_bitmap_free(b); }
};
using hwloc_bitmap_ptr = std::unique_ptr<std::remove_pointer_t<hwloc_bitmap_t>, hwloc_bitmap_deleter>;

[[noreturn]] inline void throw_hwloc_error(const char* call) {
  const int e = errno != 0 ? errno : EINVAL;
  throw_system_error({e, std::generic_category()}, call);
}

inline hwloc_topology_ptr make_hwloc_topology() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) throw_hwloc_error("hwloc_topology_init");
  return hwloc_topology_ptr(t);
}

inline hwloc_bitmap_ptr make_hwloc_bitmap() {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  if (b == nullptr) throw_bad_alloc();
  return hwloc_bitmap_ptr(b);
}

inline hwloc_bitmap_ptr copy_hwloc_bitmap(hwloc_const_bitmap_t from) {
  hwloc_bitmap_t b = hwloc_bitmap_dup(from);
  if (b == nullptr) throw_bad_alloc();
  return hwloc_bitmap_ptr(b);
}

}  // namespace numaaff::detail
