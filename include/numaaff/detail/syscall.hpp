// Every system call numaaff makes goes through detail::call(): it captures errno right after
// the call (before anything else can clobber it), retries EINTR, and carries the call's name
// for messages. Tests redirect it with scoped_failure to make a named call fail with EPERM,
// ENODEV, ENOSYS or ENOMEM without needing a kernel that does so. The fast path is one relaxed
// atomic load, and everything here is async-signal-safe (the next-touch handler uses it).
#pragma once

#include "../errors.hpp"
#include "throw.hpp"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <sys/mman.h>
#include <system_error>
#include <type_traits>

namespace numaaff::detail {

/// The calls numaaff makes, by name. Each is a separate injection point.
enum class sys : unsigned char {
  mbind,
  move_pages,
  get_mempolicy,
  set_mempolicy_home_node,
  mmap,
  munmap,
  mremap,
  mprotect,
  madvise,
  mincore,
  process_vm_readv,
  sched_getaffinity,
  sched_setaffinity,
  getcpu,
  sigaction,
  count_
};

constexpr const char* sys_name(sys s) noexcept {
  constexpr const char* names[] = {"mbind",         "move_pages",        "get_mempolicy",
                                   "set_mempolicy_home_node",
                                   "mmap",          "munmap",            "mremap",            "mprotect",
                                   "madvise",       "mincore",           "process_vm_readv",
                                   "sched_getaffinity", "sched_setaffinity",
                                   "getcpu",        "sigaction"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<std::size_t>(sys::count_),
                "one name per call");
  return names[static_cast<std::size_t>(s)];
}

/**
 * The call behind the error that a noexcept core reported last on this thread (sys::count_:
 * none, e.g. a caller's mistake or memory that ran out). Per thread, like errno: set where a
 * core turns a failed call into its error code (sys_result::failure()), read by the throwing
 * forms (throw_failure), which so name the call that failed instead of the one they expected.
 * Never touched by the signal handler.
 */
inline thread_local sys failed_call = sys::count_;

/// What a call returned, the errno it left (0 when it succeeded) and which call it was.
template <class R>
struct sys_result {
  R value;
  int error;
  sys id;
  explicit operator bool() const noexcept { return error == 0; }
  /// The error, as is (async-signal-safe).
  std::error_code code() const noexcept { return {error, std::generic_category()}; }
  /// The error, recorded as this thread's failed call for the throwing form (not in a handler).
  std::error_code failure() const noexcept {
    failed_call = id;
    return code();
  }
};

// ---- failure injection ------------------------------------------------------------------

struct injection_slot {
  std::atomic<int> error{0};
  std::atomic<long> remaining{0};  // calls still to fail; negative: every call
};
inline injection_slot injection_table[static_cast<std::size_t>(sys::count_)];
inline std::atomic<int> injections_armed{0};

inline bool take_injection(sys s, int& error) noexcept {
  injection_slot& slot = injection_table[static_cast<std::size_t>(s)];
  const int e = slot.error.load(std::memory_order_acquire);
  if (e == 0) return false;
  long left = slot.remaining.load(std::memory_order_relaxed);
  while (left != 0) {
    if (left < 0 || slot.remaining.compare_exchange_weak(left, left - 1)) {
      error = e;
      return true;
    }
  }
  return false;
}

/**
 * Makes the named call fail with `error` for the lifetime of this object (for `times` calls,
 * or every call when `times` is negative). For tests. Not nestable for the same call.
 */
class scoped_failure {
 public:
  scoped_failure(sys s, int error, long times = -1) noexcept : slot_(&slot_of(s)) {
    slot_->remaining.store(times, std::memory_order_relaxed);
    slot_->error.store(error, std::memory_order_release);
    injections_armed.fetch_add(1, std::memory_order_acq_rel);
  }
  ~scoped_failure() {
    slot_->error.store(0, std::memory_order_release);
    injections_armed.fetch_sub(1, std::memory_order_acq_rel);
  }
  scoped_failure(const scoped_failure&) = delete;
  scoped_failure& operator=(const scoped_failure&) = delete;

 private:
  static injection_slot& slot_of(sys s) noexcept { return injection_table[static_cast<std::size_t>(s)]; }
  injection_slot* slot_;
};

// ---- the wrapper ------------------------------------------------------------------------

template <class R>
constexpr bool is_failure(R r) noexcept {
  if constexpr (std::is_pointer_v<R>) {
    return r == MAP_FAILED;  // the only pointer-returning calls we wrap are mmap-like
  } else {
    return r == static_cast<R>(-1);
  }
}

template <class R>
constexpr R failure_value() noexcept {
  if constexpr (std::is_pointer_v<R>) {
    return static_cast<R>(MAP_FAILED);
  } else {
    return static_cast<R>(-1);
  }
}

/**
 * Runs `f` (a lambda making one system call that reports failure as -1 or MAP_FAILED with
 * errno set) and returns its value and errno. EINTR is retried. Async-signal-safe if `f` is.
 */
template <class F>
inline auto call(sys id, F&& f) noexcept -> sys_result<decltype(f())> {
  using R = decltype(f());
  for (;;) {
    int error = 0;
    R r = failure_value<R>();
    // An injected failure takes the place of the call, so an injected EINTR is retried too.
    if (injections_armed.load(std::memory_order_relaxed) == 0 || !take_injection(id, error)) {
      r = f();
      if (!is_failure(r)) return {r, 0, id};
      error = errno;
    }
    if (error != EINTR) return {r, error, id};
  }
}

/// Same for calls that return an error number instead of setting errno (pthread_*).
template <class F>
inline sys_result<int> call_errnum(sys id, F&& f) noexcept {
  for (;;) {
    int r = 0;
    if (injections_armed.load(std::memory_order_relaxed) == 0 || !take_injection(id, r)) r = f();
    if (r != EINTR) return {r, r, id};
  }
}

/// Reports a failed result through `ec` (noexcept overloads) ...
template <class R>
inline bool report(const sys_result<R>& r, std::error_code& ec) noexcept {
  if (r.error == 0) return true;
  ec = r.failure();
  return false;
}

/// ... or by throwing std::system_error named after the call (throwing overloads).
template <class R>
inline R check(const sys_result<R>& r) {
  if (r.error != 0) throw_system_error(r.code(), sys_name(r.id));
  return r.value;
}

/**
 * The exception for an error a noexcept core reported: std::system_error named after the call
 * that failed (failed_call), else after `what` (an error of numaaff's own, such as a full
 * registry); std::bad_alloc for memory that ran out outside any call.
 */
[[noreturn]] inline void throw_failure(const std::error_code& ec, const char* what) {
  if (failed_call != sys::count_) throw_system_error(ec, sys_name(failed_call));
  if (ec == std::errc::not_enough_memory) throw_bad_alloc();
  throw_system_error(ec, what);
}

/// Runs the noexcept core `core(ec)` and throws what it reports (see throw_failure).
template <class Core>
inline auto or_throw(const char* what, Core&& core) {
  failed_call = sys::count_;
  std::error_code ec;
  if constexpr (std::is_void_v<decltype(core(ec))>) {
    core(ec);
    if (ec) throw_failure(ec, what);
  } else {
    auto r = core(ec);
    if (ec) throw_failure(ec, what);
    return r;
  }
}

}  // namespace numaaff::detail
