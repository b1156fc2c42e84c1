// A seccomp filter that denies the NUMA system calls with EPERM, as Docker's default profile
// does for a container without CAP_SYS_NICE: mbind, move_pages, get_mempolicy, set_mempolicy,
// migrate_pages and set_mempolicy_home_node. Raw BPF, no libseccomp. Used by the numa_sandbox
// launcher (the CI stage that runs the host layer in such a "container") and by test_sandbox.
#pragma once

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace numaaff_test {

#if defined(__x86_64__)
inline constexpr unsigned sandbox_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
inline constexpr unsigned sandbox_arch = AUDIT_ARCH_AARCH64;
#else
#error "numa_sandbox: add this architecture's AUDIT_ARCH"
#endif

/// Installs the filter on the calling thread (and everything it starts or execs). False if the
/// kernel refused it.
inline bool deny_numa_calls() {
#ifndef __NR_set_mempolicy_home_node
  constexpr unsigned nr_home_node = 450;
#else
  constexpr unsigned nr_home_node = __NR_set_mempolicy_home_node;
#endif
  constexpr unsigned denied[] = {__NR_mbind,         __NR_move_pages,    __NR_get_mempolicy,
                                 __NR_set_mempolicy, __NR_migrate_pages, nr_home_node};
  constexpr std::size_t n = sizeof(denied) / sizeof(denied[0]);
  sock_filter prog[4 + 2 * n + 1];
  std::size_t k = 0;
  prog[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  prog[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, sandbox_arch, 1, 0);
  prog[k++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  prog[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  for (unsigned nr : denied) {
    prog[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1);
    prog[k++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
  }
  prog[k++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  sock_fprog fprog{static_cast<unsigned short>(k), prog};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) == 0;
}

/// True when this process runs under the launcher (NUMAAFF_TEST_SANDBOX=1) and the filter
/// really is in force; the launcher's own check keeps the two from disagreeing.
inline bool in_numa_sandbox() {
  const char* v = std::getenv("NUMAAFF_TEST_SANDBOX");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace numaaff_test
