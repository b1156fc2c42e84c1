// A hint to the CPU: memory the thread is about to use.
#pragma once

#include <cstddef>
#include <utility>

namespace numaaff::detail {

inline void prefetch_line(const char* at) noexcept {
#if defined(__x86_64__) || (defined(__i386__) && defined(__SSE__))
  asm volatile("prefetcht0 %0" : : "m"(*at));  // g++ 12 drops __builtin_prefetch here after inlining
#else
  __builtin_prefetch(at, 0, 3);
#endif
}
template <std::size_t... Line>
inline void prefetch_each(const char* at, std::index_sequence<Line...>) noexcept {
  (prefetch_line(at + 64 * Line), ...);
}

/// Asks for the cache lines at p, p + 64, ... below p + Bytes without waiting for them (all of
/// [p, p + Bytes) when p is 64-byte aligned; nothing for a null p).
/// For recycled blocks that another CPU wrote last (it ran their task, or freed them): asked
/// for one allocation ahead, their lines arrive while the current block is written instead of
/// stalling the first locked instruction after its stores. A read prefetch: x86-64 has no
/// write prefetch without PREFETCHW.
template <std::size_t Bytes>
inline void prefetch_lines(const void* p) noexcept {
  if (p != nullptr) prefetch_each(static_cast<const char*>(p), std::make_index_sequence<(Bytes + 63) / 64>{});
}

}  // namespace numaaff::detail
