/* A C solver's phase change with numaaff's C API: an array first placed on one node, then
 * re-owned by an OpenMP team (thread t owns block t, schedule(static)); next touch moves each
 * block to its owner's node. Placement is checked with a raw move_pages query per page.
 *
 * usage: phase_change [--mib N] [--require FRACTION]
 * exit 0 if the data survived and (with --require) at least FRACTION of the pages sit on the
 * node of the thread that owns them (not checked where the kernel refuses the query, as in a
 * container that denies the NUMA calls: it says so); 1 otherwise; 2 for a bad argument. */
#include <numaaff/numaaff.h>

#include <numaif.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void) {
  fprintf(stderr, "usage: phase_change [--mib N] [--require FRACTION]\n");
  return 2;
}

int main(int argc, char** argv) {
  size_t mib = 32;
  double require = -1.0;
  for (int i = 1; i < argc; ++i) {
    char* end = NULL;
    if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
      mib = strtoul(argv[++i], &end, 10);
      if (*end != '\0' || mib == 0) return usage();
    } else if (strcmp(argv[i], "--require") == 0 && i + 1 < argc) {
      require = strtod(argv[++i], &end);
      if (*end != '\0') return usage();
    } else {
      return usage();
    }
  }
  const size_t bytes = mib << 20, n = bytes / sizeof(double);
  int first = 0;
  size_t count = 0;
  if (numaaff_nodes(&first, 1, &count) != 0) return 1;

  double* a = numaaff_alloc_onnode(bytes, first);
  if (a == NULL) {
    perror("numaaff_alloc_onnode");
    return 1;
  }
  for (size_t i = 0; i < n; ++i) a[i] = (double)i;  /* phase 1: everything on the first node */

  const int team = omp_get_max_threads();
  int e = numaaff_omp_bind_team(team);
  if (e != 0) fprintf(stderr, "numaaff_omp_bind_team: %s\n", numaaff_strerror(e));
  /* Phase 2: thread t owns block t; each block follows its owner at its next touch. */
  const size_t block = (n + (size_t)team - 1) / (size_t)team * sizeof(double);
  e = numaaff_next_touch_blocks(a, bytes, block);
  if (e != 0) {
    fprintf(stderr, "numaaff_next_touch_blocks: %s\n", numaaff_strerror(e));
    return 1;
  }
  int* owner_node = calloc((size_t)team, sizeof *owner_node);
  const size_t per_thread = (n + (size_t)team - 1) / (size_t)team;
  double sum = 0.0;
#pragma omp parallel num_threads(team) reduction(+ : sum)
  {
    owner_node[omp_get_thread_num()] = numaaff_current_node();
#pragma omp for schedule(static, per_thread)
    for (size_t i = 0; i < n; ++i) {
      a[i] += 1.0;
      sum += a[i];
    }
  }
  numaaff_disarm(a, bytes);

  /* The kernel's own answer, page by page. */
  const size_t ps = (size_t)sysconf(_SC_PAGESIZE), pages = bytes / ps;
  void** addr = malloc(pages * sizeof *addr);
  int* status = malloc(pages * sizeof *status);
  for (size_t p = 0; p < pages; ++p) addr[p] = (char*)a + p * ps;
  size_t placed = 0;
  const int verifiable = move_pages(0, (unsigned long)pages, addr, NULL, status, 0) == 0;
  if (!verifiable) perror("move_pages (placement cannot be verified here)");
  if (verifiable) {
    for (size_t p = 0; p < pages; ++p) {
      const size_t t = (p * ps / sizeof(double)) / per_thread;
      if (status[p] == owner_node[t < (size_t)team ? t : (size_t)team - 1]) ++placed;
    }
  }
  const double expect = (double)n * ((double)n - 1.0) / 2.0 + (double)n;
  const int intact = sum == expect;
  const double fraction = (double)placed / (double)pages;
  numaaff_next_touch_stats st;
  numaaff_get_next_touch_stats(&st);
  printf("phase change: %zu MiB, %d threads, %zu nodes: %.3f of the pages on their owner's node "
         "(raw move_pages); %llu chunks migrated; data %s\n",
         mib, team, count, fraction, st.chunks_migrated, intact ? "intact" : "CORRUPTED");
  free(addr);
  free(status);
  free(owner_node);
  numaaff_free(a, bytes);
  return intact && (require < 0 || !verifiable || fraction >= require) ? 0 : 1;
}
