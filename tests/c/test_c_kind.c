/* The heap by kind and the hbwmalloc API from a C program (host): the contract's signatures,
 * size-less free, realloc, calloc, posix_memalign, errno-style errors, misuse that aborts, and
 * hbwmalloc's rules (policy set once, before any allocation; BIND with no high-bandwidth
 * memory is NULL/ENOMEM; PREFERRED falls back to standard memory). Each policy runs in a child
 * of its own, since a policy can be set once per process. On a host with an HMAT that names
 * high-bandwidth memory the hbw checks that assume none are skipped.
 * Prints one line per check; exit status = number of failed checks. */
#include <numaaff/hbwmalloc.h>
#include <numaaff/numaaff.h>

#include "check.h"
#include "misuse.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The contract's exact types. */
static numaaff_kind (*const kind_onnode)(int) = numaaff_kind_onnode;
static void* (*const kind_malloc)(numaaff_kind, size_t) = numaaff_kind_malloc;
static void* (*const kind_calloc)(numaaff_kind, size_t, size_t) = numaaff_kind_calloc;
static void* (*const kind_realloc)(numaaff_kind, void*, size_t) = numaaff_kind_realloc;
static int (*const kind_memalign)(numaaff_kind, void**, size_t, size_t) = numaaff_kind_posix_memalign;
static void (*const kind_free)(void*) = numaaff_kind_free;
static size_t (*const kind_usable)(void*) = numaaff_kind_usable_size;

/* Runs `child` in a forked process: its exit status (100 + signal when killed). */
static int in_child(int (*child)(void)) {
  fflush(NULL);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    _exit(child());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const int result = WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
  if (result != 0) printf("     the child's first failed check: %d\n", result);
  return result;
}

static void double_free_small(void) {
  void* p = numaaff_kind_malloc(NUMAAFF_KIND_LOCAL, 64);
  numaaff_kind_free(p);
  numaaff_kind_free(p);
}
static void double_free_large(void) {
  void* p = numaaff_kind_malloc(NUMAAFF_KIND_INTERLEAVE, 1 << 20);
  numaaff_kind_free(p);
  numaaff_kind_free(p);
}
static void free_foreign(void) { numaaff_kind_free(malloc(64)); }
static void hbw_double_free(void) {
  void* p = hbw_malloc(100);
  hbw_free(p);
  hbw_free(p);
}

static int filled(const unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != v) return 0;
  return 1;
}

/* hbw in children: each returns the number of its failed checks. */
static int hbw_policy_rules(void) {
  if (hbw_get_policy() != HBW_POLICY_PREFERRED) return 1;            /* the default */
  if (hbw_set_policy((hbw_policy_t)7) != EINVAL) return 2;
  if (hbw_set_policy((hbw_policy_t)100) != EINVAL) return 7;           /* any int, from C */
  if (hbw_set_policy(HBW_POLICY_INTERLEAVE) != 0) return 3;
  if (hbw_get_policy() != HBW_POLICY_INTERLEAVE) return 4;
  if (hbw_set_policy(HBW_POLICY_BIND) != EPERM) return 5;              /* once */
  void* p = NULL;
  if (hbw_posix_memalign_psize(&p, 64, 64, HBW_PAGESIZE_2MB) != EINVAL) return 6; /* not interleaved */
  return 0;
}
static int hbw_policy_after_allocation(void) {
  void* p = hbw_malloc(64);
  const int e = hbw_set_policy(HBW_POLICY_BIND);
  hbw_free(p);
  return e == EPERM ? 0 : 1;
}
static int hbw_bind_without_hbm(void) {
  if (hbw_set_policy(HBW_POLICY_BIND) != 0) return 1;
  errno = 0;
  void* p = hbw_malloc(64);
  if (p != NULL || errno != ENOMEM) return 2;
  void* q = NULL;
  if (hbw_posix_memalign(&q, 64, 1 << 20) != ENOMEM || q != NULL) return 3;
  return 0;
}
static int hbw_preferred_falls_back(void) {
  unsigned char* p = hbw_malloc(1 << 20);
  if (p == NULL) return 1;
  memset(p, 7, 1 << 20);
  unsigned char* q = hbw_realloc(p, 3 << 20);
  if (q == NULL || !filled(q, 1 << 20, 7)) return 2;
  if (hbw_malloc_usable_size(q) < (3u << 20)) return 3;
  if (hbw_verify_memory_region(q, 1 << 20, 0) != -1) return 4; /* no page on high-bandwidth memory */
  if (hbw_realloc(q, 0) != NULL) return 5;                      /* frees */
  return 0;
}

int main(void) {
  /* ---- kinds ---- */
  numaaff_kind k;
  CHECK(numaaff_kind_equal(kind_onnode(0), kind_onnode(0)) == 1);
  CHECK(numaaff_kind_equal(kind_onnode(0), NUMAAFF_KIND_LOCAL) == 0);
  CHECK(numaaff_kind_with(NUMAAFF_KIND_FASTEST, NUMAAFF_KIND_PREFERRED, &k) == 0 &&
        k.target == NUMAAFF_KIND_TARGET_FASTEST && numaaff_kind_equal(k, NUMAAFF_KIND_FASTEST) == 0);
  CHECK(numaaff_kind_with(NUMAAFF_KIND_LOCAL, 0x8000u, &k) == EINVAL);
  CHECK(numaaff_kind_with(NUMAAFF_KIND_LOCAL, NUMAAFF_KIND_PAGES_NO_HUGE | NUMAAFF_KIND_PAGES_THP, &k) == EINVAL);
  CHECK(numaaff_kind_with(NUMAAFF_KIND_LOCAL, NUMAAFF_KIND_PAGES_THP | NUMAAFF_KIND_PAGES_HUGE_2MB, &k) == EINVAL);
  CHECK(numaaff_kind_with(NUMAAFF_KIND_LOCAL, NUMAAFF_KIND_PAGES_HUGE_2MB | NUMAAFF_KIND_PAGES_HUGE_1GB, &k) == EINVAL);
  {
    /* Explicit huge pages: strict fails with ENOMEM when the node's pool is short (it has no
       free page here unless an administrator reserved some), preferred falls back. */
    numaaff_kind huge, huge_pref;
    CHECK(numaaff_kind_with(kind_onnode(0), NUMAAFF_KIND_PAGES_HUGE_2MB, &huge) == 0);
    CHECK(numaaff_kind_with(kind_onnode(0), NUMAAFF_KIND_PREFERRED | NUMAAFF_KIND_PAGES_HUGE_2MB, &huge_pref) == 0);
    FILE* f = fopen("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages", "r");
    long free_pages = -1;
    if (f != NULL) {
      if (fscanf(f, "%ld", &free_pages) != 1) free_pages = -1;
      fclose(f);
    }
    if (free_pages == 0) {
      errno = 0;
      CHECK(kind_malloc(huge, 100) == NULL && errno == ENOMEM);
      char* h = (char*)kind_malloc(huge_pref, 100);
      CHECK(h != NULL);
      if (h != NULL) {
        memset(h, 1, 100);
        CHECK(numaaff_kind_usable_size(h) == (size_t)2 << 20);
        kind_free(h);
      }
    }
    numaaff_kind huge_interleave;
    CHECK(numaaff_kind_with(NUMAAFF_KIND_INTERLEAVE, NUMAAFF_KIND_PAGES_HUGE_2MB, &huge_interleave) == 0);
    CHECK(kind_malloc(huge_interleave, 64) == NULL && errno == EINVAL); /* not for interleaved blocks */
  }
  CHECK(numaaff_kind_with(NUMAAFF_KIND_LOCAL, 0, NULL) == EINVAL);
  errno = 0;
  CHECK(kind_malloc(kind_onnode(4096), 64) == NULL && errno == EINVAL);
  numaaff_kind bogus = {99, -1, 0};
  errno = 0;
  CHECK(kind_malloc(bogus, 64) == NULL && errno == EINVAL);

  const numaaff_kind kinds[] = {NUMAAFF_KIND_LOCAL, NUMAAFF_KIND_INTERLEAVE, NUMAAFF_KIND_FASTEST,
                                NUMAAFF_KIND_CAPACITY, kind_onnode(0)};
  const size_t sizes[] = {1, 64, 1000, 32768, 32769, 1 << 20};
  int all_ok = 1;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i)
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; ++j) {
      unsigned char* p = kind_malloc(kinds[i], sizes[j]);
      if (p == NULL || kind_usable(p) < sizes[j]) all_ok = 0;
      if (p != NULL) memset(p, 0xab, sizes[j]);
      kind_free(p);
    }
  CHECK(all_ok);
  kind_free(NULL);
  CHECK(kind_usable(NULL) == 0);

  /* calloc: zeroed, also when the block was used before; overflow is ENOMEM. */
  unsigned char* used = kind_malloc(NUMAAFF_KIND_LOCAL, 200);
  memset(used, 0xff, 200);
  kind_free(used);
  unsigned char* z = kind_calloc(NUMAAFF_KIND_LOCAL, 25, 8);
  CHECK(z != NULL && filled(z, 200, 0));
  kind_free(z);
  errno = 0;
  CHECK(kind_calloc(NUMAAFF_KIND_LOCAL, SIZE_MAX / 2, 4) == NULL && errno == ENOMEM);

  /* realloc: contents kept from 64 B to 1 MiB; the same block where it fits; 0 frees. */
  unsigned char* r = kind_realloc(NUMAAFF_KIND_LOCAL, NULL, 64);
  memset(r, 3, 64);
  CHECK(kind_realloc(NUMAAFF_KIND_LOCAL, r, 50) == r);
  int kept = 1;
  for (size_t n = 128; n <= (1u << 20); n *= 2) {
    r = kind_realloc(NUMAAFF_KIND_LOCAL, r, n);
    if (r == NULL || !filled(r, 64, 3)) kept = 0;
  }
  CHECK(kept);
  errno = 0;
  CHECK(kind_realloc(NUMAAFF_KIND_LOCAL, r, SIZE_MAX - 4096) == NULL && errno == ENOMEM && filled(r, 64, 3));
  CHECK(kind_realloc(NUMAAFF_KIND_LOCAL, r, 0) == NULL);

  /* posix_memalign */
  void* a = NULL;
  CHECK(kind_memalign(NUMAAFF_KIND_LOCAL, &a, 4096, 100) == 0 && a != NULL && ((uintptr_t)a % 4096) == 0);
  kind_free(a);
  CHECK(kind_memalign(NUMAAFF_KIND_LOCAL, &a, 48, 100) == EINVAL);
  CHECK(kind_memalign(NUMAAFF_KIND_LOCAL, &a, 4, 100) == EINVAL); /* not a multiple of sizeof(void*) */
  CHECK(kind_memalign(NUMAAFF_KIND_LOCAL, NULL, 64, 100) == EINVAL);

  /* misuse aborts with a message */
  CHECK(aborts_saying(double_free_small, "double free"));
  CHECK(aborts_saying(double_free_large, "double free"));
  CHECK(aborts_saying(free_foreign, "did not allocate"));
  CHECK(aborts_saying(hbw_double_free, "double free"));

  /* ---- hbwmalloc ---- (the policy children first: a child inherits "allocated already") */
  CHECK(in_child(hbw_policy_rules) == 0);
  CHECK(in_child(hbw_policy_after_allocation) == 0);
  if (hbw_check_available() == ENODEV) {
    CHECK(in_child(hbw_bind_without_hbm) == 0);
    CHECK(in_child(hbw_preferred_falls_back) == 0);
  } else {
    printf("skip the no-high-bandwidth-memory checks: this host has some\n");
  }
  CHECK(hbw_malloc(0) == NULL);
  CHECK(hbw_calloc(0, 8) == NULL && hbw_calloc(8, 0) == NULL);
  void* h = (void*)1;
  CHECK(hbw_posix_memalign(&h, 64, 0) == 0 && h == NULL);
  CHECK(hbw_posix_memalign(&h, 24, 64) == EINVAL);
  CHECK(hbw_posix_memalign_psize(&h, 64, 64, (hbw_pagesize_t)9) == EINVAL);
  CHECK(hbw_posix_memalign_psize(&h, 64, 64, HBW_PAGESIZE_1GB_STRICT) == EINVAL); /* not whole GiB */
  CHECK(hbw_posix_memalign_psize(&h, 64, 64, HBW_PAGESIZE_4KB) == 0 && h != NULL);
  hbw_free(h);
  /* PREFERRED: a pool's 2 MiB page, or else ordinary pages, a whole huge page's worth. */
  CHECK(hbw_posix_memalign_psize(&h, 2u << 20, 512, HBW_PAGESIZE_2MB) == 0 && h != NULL);
  CHECK(hbw_malloc_usable_size(h) == (size_t)2 << 20);
  memset(h, 1, 512);
  hbw_free(h);
  CHECK(hbw_verify_memory_region(NULL, 64, 0) == EINVAL);
  int local = 0;
  CHECK(hbw_verify_memory_region(&local, 0, 0) == EINVAL);
  CHECK(hbw_verify_memory_region(&local, sizeof local, 0x40) == EINVAL);
  return failures;
}
