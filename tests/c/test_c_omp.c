/* The C API's OpenMP helpers from an OpenMP C program (layer 2, host): numaaff_omp_first_touch
 * touches what this runtime's schedule(static) gives each thread, so every page inside one
 * thread's share is on that thread's node (raw move_pages query); under GCC's libgomp,
 * numaaff_static_thread names the thread of each element exactly.
 * Prints one line per check; exit status = number of failed checks. */
#include <numaaff/numaaff.h>

#include "check.h"

#include <errno.h>
#include <numaif.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int main(void) {
  const int team = omp_get_max_threads();
  CHECK(numaaff_omp_bind_team(team) == 0 || getenv("NUMAAFF_TEST_SANDBOX") != NULL);
  const size_t ps = (size_t)sysconf(_SC_PAGESIZE), n = 1000003; /* not a multiple of the team */
  double* a = NULL;
  CHECK(posix_memalign((void**)&a, ps, n * sizeof *a) == 0);
  /* Which thread touched each element: the static schedule's owner, by the helper. */
  int* toucher = malloc(n * sizeof *toucher);
  for (size_t i = 0; i < n; ++i) toucher[i] = -1;
  CHECK(numaaff_omp_first_touch(a, n, sizeof *a) == 0);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) toucher[i] = omp_get_thread_num();
  size_t zero = 0, agree = 0;
  for (size_t i = 0; i < n; ++i) {
    zero += a[i] == 0.0;
    agree += toucher[i] == numaaff_static_thread(i, n, team);
  }
  CHECK(zero == n);
#if defined(__GNUC__) && !defined(__clang__) /* libgomp's cut; LLVM's libomp cuts otherwise */
  CHECK(agree == n);
#else
  printf("static_thread agrees with this runtime on %zu of %zu elements\n", agree, n);
#endif
  /* Every whole page inside one thread's share is on that thread's node. */
  size_t pages = 0, placed = 0;
  for (size_t at = 0; at + ps <= n * sizeof *a; at += ps) {
    const size_t i0 = at / sizeof *a, i1 = (at + ps - 1) / sizeof *a;
    if (toucher[i0] != toucher[i1]) continue;
    void* page = (char*)a + at;
    int status = -1;
    if (move_pages(0, 1, &page, NULL, &status, 0) != 0) break; /* a sandbox: nothing to check */
    ++pages;
    placed += status == numaaff_team_node(toucher[i0], team);
  }
  printf("%zu of %zu pages on their static owner's node\n", placed, pages);
  CHECK(placed == pages);
  CHECK(numaaff_omp_first_touch(NULL, 3, 8) == EINVAL && numaaff_omp_first_touch(a, (size_t)-1, 8) == EINVAL);
  CHECK(numaaff_omp_first_touch(NULL, 0, 8) == 0);
  free(toucher);
  free(a);
  printf("%d failed\n", failures);
  return failures;
}
