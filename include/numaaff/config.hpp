/**
 * @file config.hpp
 * @brief Compile-time configuration.
 *
 * numaaff is configured by a few macros that a user may define before including any numaaff
 * header, and at run time by `NUMAAFF_*` environment variables (read where they are used, see
 * topology.hpp). Nothing here changes behaviour silently: each macro is listed below.
 *
 * - `NUMAAFF_NO_EXCEPTIONS`: every place that would throw prints the message to stderr and
 *   calls `std::abort()` instead (for `-fno-exceptions` builds; detected automatically).
 */
#pragma once

#if !defined(NUMAAFF_NO_EXCEPTIONS) && !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#define NUMAAFF_NO_EXCEPTIONS 1
#endif

#if !defined(__linux__)
#error "numaaff needs Linux: it is built on mbind, move_pages, get_mempolicy and sched_getcpu"
#endif
