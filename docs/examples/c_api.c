/* c_api: numaaff from C. Every call returns 0 or an errno value (allocations: NULL and errno),
 * and no C++ exception crosses into C. The program lists the nodes, allocates an array on the
 * first one, moves its blocks to the nodes that own them in a team of threads split as
 * `schedule(static)` splits a loop (numaaff_static_node gives each block's node), counts the
 * pages per node, and shows a caller's mistake reported as EINVAL. Link numaaff::c in CMake,
 * or `pkg-config --cflags --libs numaaff-c`.
 * Asserted on any machine: the node list has numaaff_node_count() nodes, the page counts
 * cover the array and none is left unpopulated, place_blocks counts every page once (on one
 * node: all already there), the data is intact, the report says whether placement is
 * effective, and a bad node is EINVAL. Prints "c_api: ok" at the end. */
#define _POSIX_C_SOURCE 200809L
#include <numaaff/numaaff.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every check is something the API promises; a broken promise ends the program with status 1. */
static void require(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "c_api: FAILED: %s\n", what);
    exit(1);
  }
}

int main(void) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t blocks = 16, block_bytes = 16 * page; /* blocks of whole pages move alone */
  const size_t bytes = blocks * block_bytes, n = bytes / sizeof(double);
  const int team = 4; /* the threads of the solver's OpenMP team, say */
  int nodes[64], owners[16], e;
  size_t count = 0, i, b, on_nodes = 0, unpopulated = 0, pages = 0;
  numaaff_move_result r;
  char report[16384];
  size_t length = 0;
  double* a;

  /* [nodes] */
  e = numaaff_nodes(nodes, 64, &count);
  require(e == 0, numaaff_strerror(e));
  printf("%zu node(s):", count);
  for (i = 0; i < count && i < 64; ++i) printf(" %d", nodes[i]);
  printf("\n");
  /* [nodes] */
  require(count == (size_t)numaaff_node_count(), "numaaff_nodes lists numaaff_node_count() nodes");

  /* [place] */
  /* The array, written on the first node; then each block to the node of the thread that owns
   * it under schedule(static) (block b of `blocks`, team threads). */
  a = numaaff_alloc_onnode(bytes, nodes[0]);
  if (a == NULL) {
    perror("numaaff_alloc_onnode");
    return 1;
  }
  for (i = 0; i < n; ++i) a[i] = (double)i;
  for (b = 0; b < blocks; ++b) owners[b] = numaaff_static_node(b, blocks, team);
  e = numaaff_place_blocks(a, bytes, block_bytes, owners, blocks, &r);
  require(e == 0, numaaff_strerror(e));
  printf("place_blocks: %zu pages, %zu moved, %zu already there, %zu failed\n", r.total, r.moved, r.already_there,
         r.failed);
  /* [place] */
  require(r.moved + r.already_there + r.unpopulated + r.failed == r.total, "place_blocks counts every page once");
  if (count == 1) require(r.already_there == r.total, "one node: every page is already there");

  /* [count] */
  /* Pages per node now (a raw page-status query), and pages nobody has touched. */
  for (i = 0; i < count && i < 64; ++i) {
    size_t here = 0;
    e = numaaff_pages_on(a, bytes, nodes[i], &here);
    require(e == 0, numaaff_strerror(e));
    printf("node %d: %zu pages\n", nodes[i], here);
    on_nodes += here;
  }
  e = numaaff_pages_unpopulated(a, bytes, &unpopulated);
  require(e == 0, numaaff_strerror(e));
  /* [count] */
  pages = bytes / page;
  require(unpopulated == 0, "every page was written");
  /* A sandbox on several nodes cannot name the nodes (the pages count on none); elsewhere the
   * nodes hold every page. */
  require(on_nodes == pages || (count > 1 && on_nodes == 0), "the nodes hold every page");
  for (i = 0; i < n; ++i) require(a[i] == (double)i, "place_blocks keeps the data");
  numaaff_free(a, bytes);

  /* [errors] */
  /* A caller's mistake is an errno value, never a crash: node 100000 does not exist. */
  errno = 0;
  require(numaaff_alloc_onnode(page, 100000) == NULL && errno == EINVAL, "an unknown node is EINVAL");
  e = numaaff_move_to(report, sizeof report, 100000, NULL);
  printf("numaaff_move_to to node 100000: %s\n", numaaff_strerror(e));
  /* [errors] */
  require(e == EINVAL, "numaaff_move_to to an unknown node is EINVAL");

  /* [report] */
  /* The capability report as text: its last line says whether placement calls act here. */
  e = numaaff_system_report(report, sizeof report, &length);
  require(e == 0 && length < sizeof report, "the whole report fits");
  require(strstr(report, "placement effective: ") != NULL, "the report says whether placement is effective");
  fputs(strstr(report, "placement effective: "), stdout);
  /* [report] */

  puts("c_api: ok");
  return 0;
}
