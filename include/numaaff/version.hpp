/**
 * @file version.hpp
 * @brief numaaff's version. The numbers below are the only place it is written; CMake reads
 * them from here (`project(numaaff VERSION ...)` parses this file), so the package, the
 * pkg-config file and the headers cannot disagree.
 */
#pragma once

#define NUMAAFF_VERSION_MAJOR 0
#define NUMAAFF_VERSION_MINOR 1
#define NUMAAFF_VERSION_PATCH 0

/// Single integer for `#if` comparisons: major * 10000 + minor * 100 + patch.
#define NUMAAFF_VERSION (NUMAAFF_VERSION_MAJOR * 10000 + NUMAAFF_VERSION_MINOR * 100 + NUMAAFF_VERSION_PATCH)

namespace numaaff {

/// The version as "major.minor.patch". Thread-safe, does not allocate.
constexpr const char* version() noexcept {
#define NUMAAFF_STRINGIFY_(x) #x
#define NUMAAFF_STRINGIFY(x) NUMAAFF_STRINGIFY_(x)
  return NUMAAFF_STRINGIFY(NUMAAFF_VERSION_MAJOR) "." NUMAAFF_STRINGIFY(
      NUMAAFF_VERSION_MINOR) "." NUMAAFF_STRINGIFY(NUMAAFF_VERSION_PATCH);
#undef NUMAAFF_STRINGIFY
#undef NUMAAFF_STRINGIFY_
}

}  // namespace numaaff
