// numa_sandbox -- COMMAND [ARGS...]: runs COMMAND with the NUMA system calls denied (EPERM), as
// in a container under Docker's default seccomp profile, and NUMAAFF_TEST_SANDBOX=1 so that
// tests assert numaaff's degraded behaviour. Exits 2 on a usage error, 1 if the filter could
// not be installed or does not deny what it should.
#include "common/seccomp_filter.hpp"

#include <numaif.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

int main(int argc, char** argv) {
  int first = 1;
  if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
  if (first >= argc) {
    std::fprintf(stderr, "usage: numa_sandbox [--] COMMAND [ARGS...]\n");
    return 2;
  }
  if (!numaaff_test::deny_numa_calls()) {
    std::perror("numa_sandbox: seccomp");
    return 1;
  }
  int mode = 0;
  errno = 0;
  if (get_mempolicy(&mode, nullptr, 0, nullptr, 0) == 0 || errno != EPERM) {
    std::fprintf(stderr, "numa_sandbox: get_mempolicy is not denied under the filter\n");
    return 1;
  }
  setenv("NUMAAFF_TEST_SANDBOX", "1", 1);
  execvp(argv[first], argv + first);
  std::fprintf(stderr, "numa_sandbox: %s: %s\n", argv[first], std::strerror(errno));
  return 127;
}
