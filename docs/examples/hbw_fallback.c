/* hbw_fallback: a memkind program on numaaff. Code written for memkind's <hbwmalloc.h> builds
 * against numaaff by including <numaaff/hbwmalloc.h> instead and linking numaaff's C library
 * (CMake numaaff::c, pkg-config numaaff-c). It asks whether the machine has high-bandwidth
 * memory (a node the firmware's HMAT gives a CPU node more bandwidth than its own), allocates
 * with the default policy, HBW_POLICY_PREFERRED, which falls back to ordinary memory when
 * there is none or it is full, and checks where the pages went.
 * Asserted on any machine, as hbwmalloc(3) says: the policy is PREFERRED until set and cannot
 * be set after the first allocation (EPERM); a block is usable, keeps its contents through
 * hbw_realloc and is freed with hbw_free; hbw_verify_memory_region says 0 only when the
 * machine has high-bandwidth memory (without any, the block is in ordinary memory and it says
 * -1, or EFAULT where a sandbox refuses the page query).
 * Prints "hbw_fallback: ok" at the end. */
#include <numaaff/hbwmalloc.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Every check is something the API promises; a broken promise ends the program with status 1. */
static void require(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "hbw_fallback: FAILED: %s\n", what);
    exit(1);
  }
}

int main(void) {
  const size_t n = (size_t)1 << 18; /* 2 MiB of doubles */
  size_t i;
  int verified;
  double* a;

  /* [allocate] */
  /* 0: some node is faster for this CPU's threads (or MEMKIND_HBW_NODES names one); ENODEV:
   * none (no HMAT, or no faster node).
   * Either way PREFERRED gives memory: the fast node while it has room, else ordinary. */
  const int available = hbw_check_available();
  printf("high-bandwidth memory: %s\n", available == 0 ? "yes" : "no, blocks come from ordinary memory");
  require(hbw_get_policy() == HBW_POLICY_PREFERRED, "the default policy is PREFERRED");

  a = hbw_malloc(n * sizeof *a);
  require(a != NULL, "hbw_malloc under PREFERRED always finds memory");
  for (i = 0; i < n; ++i) a[i] = (double)i;
  a = hbw_realloc(a, 2 * n * sizeof *a);
  require(a != NULL, "hbw_realloc");
  /* [allocate] */
  for (i = 0; i < n; ++i) require(a[i] == (double)i, "hbw_realloc keeps the contents");
  require(hbw_malloc_usable_size(a) >= 2 * n * sizeof *a, "the block holds what was asked");

  /* [verify] */
  /* Where the pages are: 0 when every page is on a high-bandwidth node, -1 when one is not. */
  verified = hbw_verify_memory_region(a, n * sizeof *a, 0);
  printf("hbw_verify_memory_region: %d\n", verified);
  /* The policy is set once, before the first allocation: too late now. */
  require(hbw_set_policy(HBW_POLICY_BIND) == EPERM, "the policy cannot change after an allocation");
  hbw_free(a);
  /* [verify] */
  if (available != 0) require(verified == -1 || verified == EFAULT, "without fast memory no page is on it");

  puts("hbw_fallback: ok");
  return 0;
}
