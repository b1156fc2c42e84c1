// The SIGSEGV handler of next-touch: installed once, SA_SIGINFO, chained. It owns only
// protection faults (SEGV_ACCERR) on chunks we armed and have not opened; every other fault
// goes to the handler that was installed before ours (an application's, a sanitizer's, a
// JVM's) as the kernel would have delivered it, or, if there was none, the default action is
// restored and the fault repeats, so a real crash still crashes and still dumps core. Nothing
// here allocates, locks or throws, and errno is kept.
//
// Stack budget: the handler needs under 2 KiB above the kernel's signal frame (its own frames
// are under 1 KiB: the move_pages arrays come from a preallocated pool, and every function it
// calls is bound before the first fault), so it runs on an 8 KiB alternate signal stack
// (SIGSTKSZ) beside the kernel's frame; tests/test_next_touch_trust.cpp measures it on one.
#pragma once

#include "fault_registry.hpp"
#include "homenode.hpp"
#include "syscall.hpp"

#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace numaaff::detail {

inline struct sigaction previous_segv_action = {};
inline std::atomic<bool> segv_handler_installed{false};
/// The previous handler had SA_RESETHAND and has been called once: it is SIG_DFL now, as the
/// kernel would have made it.
inline std::atomic<bool> previous_segv_reset{false};

/// Makes SIGSEGV take its default action; returning re-executes the faulting instruction,
/// which then meets it (and dumps core) exactly as without numaaff.
inline void restore_default_segv() noexcept {
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGSEGV, &dfl, nullptr);
}

/// Hands a fault that is not ours to whoever was there before us, as the kernel would have
/// delivered it: with the mask of the interrupted code plus that handler's sa_mask, SIGSEGV
/// itself blocked unless SA_NODEFER, and SA_RESETHAND honoured (called once, then the default
/// action). SIG_IGN is the default action too: the kernel never ignores a fault.
inline void chain_fault(int sig, siginfo_t* info, void* context) noexcept {
  const struct sigaction& prev = previous_segv_action;
  // sa_handler and sa_sigaction share storage: SIG_DFL and SIG_IGN whatever the flags say.
  const bool dfl = prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN;
  if (dfl || ((static_cast<unsigned>(prev.sa_flags) & SA_RESETHAND) != 0 && previous_segv_reset.exchange(true))) {
    restore_default_segv();
    return;
  }
  sigset_t mask;
  if (context != nullptr) {
    mask = static_cast<const ucontext_t*>(context)->uc_sigmask;
  } else {
    ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  }
  for (int s = 1; s < NSIG; ++s)
    if (sigismember(&prev.sa_mask, s) == 1) sigaddset(&mask, s);
  if ((prev.sa_flags & SA_NODEFER) != 0) {
    sigdelset(&mask, SIGSEGV);
  } else {
    sigaddset(&mask, SIGSEGV);
  }
  sigset_t saved;
  ::pthread_sigmask(SIG_SETMASK, &mask, &saved);
  if ((prev.sa_flags & SA_SIGINFO) != 0) {
    prev.sa_sigaction(sig, info, context);
  } else {
    prev.sa_handler(sig);
  }
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

inline void segv_handler(int sig, siginfo_t* info, void* context) noexcept {
  const int saved_errno = errno;
  fault_verdict verdict = fault_verdict::not_ours;
  if (info != nullptr && info->si_code == SEGV_ACCERR)
    verdict = handle_fault(reinterpret_cast<std::uintptr_t>(info->si_addr), memory_homenode());
  errno = saved_errno;
  if (verdict != fault_verdict::retry) chain_fault(sig, info, context);
}

/**
 * Calls, once and harmlessly, every function the handler calls, so that the dynamic linker
 * has bound them before the first fault: a lazily bound first call saves the whole vector
 * register state on the stack (2.7 KiB with AVX-512), which an 8 KiB alternate signal stack
 * holding the kernel's own frame cannot spare.
 */
inline void bind_handler_calls() noexcept {
  // Raw calls, not through call(): binding must not consume a test's injected failure.
  static char byte = 0;
  static std::atomic<std::uint32_t> word{0};
  void* page = reinterpret_cast<void*>(align_down(reinterpret_cast<std::uintptr_t>(&byte), page_size()));
  ::mprotect(page, 0, PROT_READ | PROT_WRITE);
  ::move_pages(0, 0, nullptr, nullptr, nullptr, MPOL_MF_MOVE);
  ::madvise(page, 0, MADV_COLD);  // owner mode splits huge pages again before migrating
  unsigned char resident = 0;
  ::mincore(page, page_size(), &resident);
  char copy = 0;
  iovec local{&copy, 1};
  iovec remote{&byte, 1};
  ::process_vm_readv(::gettid(), &local, 1, &remote, 1, 0);
  unsigned cpu = 0, node = 0;
  ::getcpu(&cpu, &node);
  (void)monotonic_ns();
  futex_wake(word, 1);
  ::sched_yield();
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  // chain_fault's and restore_default_segv's calls
  sigset_t scratch;
  sigemptyset(&scratch);
  sigaddset(&scratch, SIGSEGV);
  (void)sigismember(&scratch, SIGSEGV);
  sigdelset(&scratch, SIGSEGV);
  struct sigaction current = {};
  ::sigaction(SIGSEGV, nullptr, &current);
}

/**
 * Installs the handler once per process; a failed attempt is tried again by the next call.
 * The handler takes the previous handler's SA_ONSTACK so that faults it must pass on (stack
 * overflows) still reach it.
 *
 * The caller holds arm_lock, which is also held around fork(): the kernel copies a process's
 * signal actions before its memory, so a child forked while another thread installs could
 * otherwise see "installed" in its memory and the old action in its signal table.
 */
inline std::error_code install_segv_handler_locked() noexcept {
  if (segv_handler_installed.load(std::memory_order_acquire)) return {};
  bind_handler_calls();
  struct sigaction ours = {};
  ours.sa_sigaction = segv_handler;
  // Every other signal waits while the handler holds a chunk: a signal handler touching
  // that chunk would otherwise wait for its own thread. (Faults cannot be held back; the
  // previous handler gets the mask it asked for, see chain_fault.)
  sigfillset(&ours.sa_mask);
  struct sigaction prev = {};
  auto r = call(sys::sigaction, [&] { return ::sigaction(SIGSEGV, nullptr, &prev); });
  if (!r) return r.failure();
  ours.sa_flags = SA_SIGINFO | SA_RESTART | (prev.sa_flags & SA_ONSTACK);
  previous_segv_action = prev;
  r = call(sys::sigaction, [&] { return ::sigaction(SIGSEGV, &ours, &previous_segv_action); });
  if (!r) return r.failure();
  segv_handler_installed.store(true, std::memory_order_release);
  return {};
}

}  // namespace numaaff::detail
