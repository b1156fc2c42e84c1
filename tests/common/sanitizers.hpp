// Which sanitizer runtime the test binary carries: g++ says so with __SANITIZE_*__, clang++
// with __has_feature. Tests that measure the process (resident size, stack frames) need it,
// because a sanitizer's allocator and instrumentation are part of what they would measure.
#pragma once

namespace numaaff_test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool address_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool address_sanitizer = true;
#else
inline constexpr bool address_sanitizer = false;
#endif
#else
inline constexpr bool address_sanitizer = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool thread_sanitizer = true;
#else
inline constexpr bool thread_sanitizer = false;
#endif
#else
inline constexpr bool thread_sanitizer = false;
#endif

// An unoptimised build (the ASan configuration compiles at -O0 to halve CI's compile time)
// keeps every frame uninlined, and instrumented frames at -O0 are far larger.
#if defined(__OPTIMIZE__)
inline constexpr bool optimized = true;
#else
inline constexpr bool optimized = false;
#endif

}  // namespace numaaff_test
