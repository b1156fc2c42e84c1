// The SIGSEGV handler of next-touch: installed once, SA_SIGINFO, chained. It owns only
// protection faults (SEGV_ACCERR) inside ranges we armed; every other fault goes to the
// handler that was installed before ours (an application's, a sanitizer's, a JVM's), or, if
// there was none, the default action is restored and the fault repeats, so a real crash still
// crashes and still dumps core. Nothing here allocates, locks or throws, and errno is kept.
#pragma once

#include "fault_registry.hpp"
#include "homenode.hpp"
#include "syscall.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <system_error>

namespace numaaff::detail {

inline struct sigaction previous_segv_action = {};
inline std::atomic<bool> segv_handler_installed{false};

/// Hands a fault that is not ours to whoever was there before us.
inline void chain_fault(int sig, siginfo_t* info, void* context) noexcept {
  const struct sigaction& prev = previous_segv_action;
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(sig, info, context);
    return;
  }
  if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
    // Returning re-executes the faulting instruction, which now meets the default action.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGSEGV, &dfl, nullptr);
    return;
  }
  prev.sa_handler(sig);
}

inline void segv_handler(int sig, siginfo_t* info, void* context) noexcept {
  const int saved_errno = errno;
  int verdict = 0;
  if (info != nullptr && info->si_code == SEGV_ACCERR)
    verdict = handle_fault(reinterpret_cast<std::uintptr_t>(info->si_addr), thread_homenode);
  errno = saved_errno;
  if (verdict <= 0) chain_fault(sig, info, context);
}

/// A child forked while a chunk was being opened has no thread to finish it: finish it here.
inline void finish_chunks_after_fork() noexcept {
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    if (r.state.load(std::memory_order_acquire) != slot_active) continue;
    for (std::size_t k = 0; k < r.count; ++k) {
      const std::uint32_t s = r.words[k].load(std::memory_order_acquire) & chunk_state_mask;
      if (s != chunk_claimed && s != chunk_moving) continue;
      sys_mprotect(reinterpret_cast<void*>(chunk_begin(r, k)), chunk_end(r, k + 1) - chunk_begin(r, k),
                   PROT_READ | PROT_WRITE);
      r.words[k].store(chunk_open, std::memory_order_release);
    }
  }
}

/// Installs the handler once per process (thread-safe). The handler takes the previous
/// handler's SA_ONSTACK so that faults it must pass on (stack overflows) still reach it.
inline std::error_code install_segv_handler() noexcept {
  static std::once_flag once;
  static std::error_code result;
  try {
    std::call_once(once, [] {
      struct sigaction ours = {};
      ours.sa_sigaction = segv_handler;
      sigemptyset(&ours.sa_mask);
      struct sigaction prev = {};
      auto r = call(sys::sigaction, [&] { return ::sigaction(SIGSEGV, nullptr, &prev); });
      if (!r) {
        result = r.code();
        return;
      }
      ours.sa_flags = SA_SIGINFO | SA_RESTART | (prev.sa_flags & SA_ONSTACK);
      previous_segv_action = prev;
      r = call(sys::sigaction, [&] { return ::sigaction(SIGSEGV, &ours, &previous_segv_action); });
      if (!r) {
        result = r.code();
        return;
      }
      ::pthread_atfork(nullptr, nullptr, [] { finish_chunks_after_fork(); });
      segv_handler_installed.store(true, std::memory_order_release);
    });
  } catch (...) {
    return std::make_error_code(std::errc::resource_unavailable_try_again);
  }
  return result;
}

}  // namespace numaaff::detail
