/* The C API from a C program (layer 2, host): the contract's signatures, errno-style errors
 * with no exception ever escaping, and placement checked with a raw move_pages query.
 * Prints one line per check; exit status = number of failed checks. */
#include <numaaff/numaaff.h>

#include "check.h"
#include "misuse.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>


/* The contract's exact types. */
static void* (*const alloc_onnode)(size_t, int) = numaaff_alloc_onnode;
static void (*const free_)(void*, size_t) = numaaff_free;
static int (*const next_touch)(void*, size_t) = numaaff_next_touch;
static int (*const pin_thread)(int) = numaaff_pin_thread;

/* Under tests/numa_sandbox (NUMA calls denied, as in a container) the kernel cannot be asked
 * where a page is: placement checks are skipped there, everything else holds. */
static int sandboxed(void) { return getenv("NUMAAFF_TEST_SANDBOX") != NULL; }

static int raw_node_of(void* p) {
  int status = -1;
  void* pages[1] = {p};
  if (move_pages(0, 1, pages, NULL, &status, 0) != 0) return -1000;
  return status;
}

/* Runs `child` in a forked process with NUMAAFF_HOMENODE set to `value`; its exit status. */
static int with_homenode(const char* value, int (*child)(void)) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("NUMAAFF_HOMENODE", value, 1);
    _exit(child());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}
static int homenode_is_an_error(void) {
  errno = 0;
  const int n = numaaff_homenode(); /* the C++ side throws invalid_argument: it must not escape */
  void* p = numaaff_alloc_local(64);
  return n == -1 && errno == EINVAL && p == NULL ? 0 : 1;
}

static void double_free_small(void) {
  void* p = numaaff_alloc_local(64);
  numaaff_free(p, 64);
  numaaff_free(p, 64);
}
static void double_free_large(void) {
  void* p = numaaff_alloc_local(1 << 20);
  numaaff_free(p, 1 << 20);
  numaaff_free(p, 1 << 20);
}
static void free_foreign(void) { numaaff_free(malloc(64), 64); }
static void free_wrong_size(void) { numaaff_free(numaaff_alloc_local(1 << 20), 1 << 16); }

int main(void) {
  /* First: NUMAAFF_HOMENODE is read once per process, at the first use of a homenode (a
   * forked child of a process that has read it keeps what the parent read). */
  CHECK(with_homenode("banana", homenode_is_an_error) == 0);
  const long ps = sysconf(_SC_PAGESIZE);
  int first = -1;
  size_t count = 0;
  CHECK(numaaff_nodes(&first, 1, &count) == 0 && count >= 1 && first >= 0);
  CHECK(numaaff_node_count() == (int)count);
  CHECK(numaaff_nodes(NULL, 0, &count) == 0);
  CHECK(numaaff_nodes(NULL, 1, &count) == EINVAL);
  int d = 0;
  CHECK(numaaff_distance(first, first, &d) == 0 && d == 10);
  CHECK(numaaff_distance(first, 4000, &d) == EINVAL);

  /* memory on a node, at every size class */
  const size_t sizes[] = {1, 100, 40000, (size_t)4 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    char* p = alloc_onnode(sizes[i], first);
    CHECK(p != NULL);
    if (p == NULL) continue;
    memset(p, 0x5a, sizes[i]);
    CHECK(sandboxed() || raw_node_of(p) == first);
    free_(p, sizes[i]);
  }
  errno = 0;
  CHECK(alloc_onnode(64, 4000) == NULL && errno == EINVAL);
  errno = 0;
  CHECK(alloc_onnode(64, -1) == NULL && errno == EINVAL);
  free_(NULL, 64); /* a no-op */
  char* il = numaaff_alloc_interleaved((size_t)1 << 20);
  CHECK(il != NULL);
  memset(il, 1, (size_t)1 << 20);
  numaaff_free(il, (size_t)1 << 20);

  /* move_to and the page counts */
  const size_t bytes = (size_t)2 << 20;
  char* m = numaaff_alloc_onnode(bytes, first);
  numaaff_move_result r;
  size_t on = 0, never = 0;
  {
    /* Never touched: a mapping of our own (the heap may hand out pages a freed block kept);
     * a private mapping of /dev/zero, as MAP_ANONYMOUS is not POSIX 2008. */
    const int zero = open("/dev/zero", O_RDWR);
    void* fresh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, zero, 0);
    CHECK(zero >= 0 && fresh != MAP_FAILED);
    close(zero);
    CHECK(numaaff_pages_unpopulated(fresh, bytes, &never) == 0 && never == bytes / (size_t)ps);
    munmap(fresh, bytes);
  }
  memset(m, 3, bytes);
  CHECK(numaaff_pages_unpopulated(m, bytes, &never) == 0 && never == 0);
  CHECK(numaaff_move_to(m, bytes, first, &r) == 0 && r.total == bytes / (size_t)ps && r.failed == 0);
  CHECK(numaaff_pages_on(m, bytes, first, &on) == 0 && on == bytes / (size_t)ps);
  CHECK(numaaff_move_to(m, bytes, 4000, &r) == EINVAL);
  {
    int owners[32];
    for (int b = 0; b < 32; ++b) owners[b] = first;
    CHECK(numaaff_place_blocks(m, bytes, 72 * 1024, owners, 32, &r) == 0 && r.already_there == bytes / (size_t)ps &&
          r.carried == 0);
    CHECK(numaaff_place_blocks(m, bytes, 72 * 1024, owners, 2, &r) == EINVAL); /* too few owners */
    for (int b = 0; b < 32; b += 2) owners[b] = NUMAAFF_KEEP; /* free slots: left where they are */
    CHECK(numaaff_place_blocks(m, bytes, 72 * 1024, owners, 32, &r) == 0 && r.already_there == bytes / (size_t)ps &&
          r.failed == 0);
    for (int b = 0; b < 32; ++b) owners[b] = first;
    /* the same lazily: armed, opened by whoever touches, every byte kept */
    numaaff_reset_next_touch_stats();
    CHECK(numaaff_place_blocks_on_next_touch(m, bytes, 72 * 1024, owners, 32) == 0);
    long lazy_sum = 0;
    for (size_t i = 0; i < bytes; i += (size_t)ps) lazy_sum += m[i];
    CHECK(lazy_sum == 3L * (long)(bytes / (size_t)ps));
    numaaff_next_touch_stats lazy;
    CHECK(numaaff_get_next_touch_stats(&lazy) == 0 && lazy.faults >= 1 && lazy.chunks_migrated >= 1);
    CHECK(numaaff_place_blocks_on_next_touch(m, bytes, 72 * 1024, owners, 2) == EINVAL);
    owners[5] = 4000;
    CHECK(numaaff_place_blocks(m, bytes, 72 * 1024, owners, 32, NULL) == EINVAL);
    CHECK(numaaff_place_blocks_on_next_touch(m, bytes, 72 * 1024, owners, 32) == EINVAL);
    CHECK(numaaff_place_blocks(m, bytes, 0, owners, 32, NULL) == EINVAL);
  }
  CHECK(numaaff_move_to(NULL, 10, first, NULL) == EINVAL);
  {
    /* Tiers and weights: on one node everything stays; bad arguments are EINVAL. */
    int cpu = -1, wn[8];
    unsigned ww[8];
    size_t n = 0, wc = 0;
    CHECK(numaaff_cpu_nodes(&cpu, 1, &n) == 0 && n >= 1 && cpu >= 0);
    CHECK(numaaff_bandwidth_weights(wn, ww, 8, &wc) == 0 && wc == count && (count > 1 || ww[0] == 1));
    CHECK(numaaff_bandwidth_weights(NULL, NULL, 1, &wc) == EINVAL);
    CHECK(numaaff_weighted_interleave(m, bytes, wn, ww, wc < 8 ? wc : 8) == 0);
    CHECK(numaaff_weighted_interleave(m, bytes, wn, ww, 0) == EINVAL);
    CHECK(numaaff_promote(m, bytes, &r) == 0 && r.total == bytes / (size_t)ps && r.failed == 0);
    CHECK(numaaff_demote(m, bytes, NULL) == 0);
    CHECK(sandboxed() || count > 1 || (numaaff_pages_on(m, bytes, first, &on) == 0 && on == bytes / (size_t)ps));
    CHECK(numaaff_promote(NULL, 10, &r) == EINVAL && r.total == 0);
  }

  /* next touch: armed, touched, every byte kept, counted */
  numaaff_reset_next_touch_stats();
  CHECK(next_touch(m, bytes) == 0);
  long sum = 0;
  for (size_t i = 0; i < bytes; i += (size_t)ps) sum += m[i];
  CHECK(sum == 3L * (long)(bytes / (size_t)ps));
  numaaff_next_touch_stats st;
  CHECK(numaaff_get_next_touch_stats(&st) == 0 && st.faults >= 1 && st.chunks_migrated >= 1);
  /* one node: every page was local already, and is counted so, not as moved */
  CHECK(sandboxed() || count > 1 || (st.pages_already_there == bytes / (size_t)ps && st.pages_moved == 0));
  CHECK(numaaff_next_touch_blocks(m, bytes, 72 * 1024) == 0);
  CHECK(numaaff_touch_now(m, bytes) == 0);
  CHECK(numaaff_disarm(m, bytes) == 0);
  CHECK(numaaff_next_touch_blocks(m, bytes, 0) == EINVAL);
  CHECK(next_touch(NULL, 4096) == EINVAL);
  numaaff_free(m, bytes);

  /* huge-page choices: the blocks are real, freed by numaaff_free; an unknown choice is EINVAL */
  {
    const size_t big = 4u << 20;
    char* h = numaaff_alloc_onnode_huge(big, first, NUMAAFF_HUGE_ALWAYS);
    char* n = numaaff_alloc_local_huge(big, NUMAAFF_HUGE_NEVER);
    CHECK(h != NULL && n != NULL && ((size_t)h % (2u << 20)) == 0);
    if (h != NULL && n != NULL) {
      memset(h, 1, big);
      memset(n, 2, big);
      CHECK(h[big - 1] == 1 && n[big - 1] == 2);
    }
    numaaff_free(h, big);
    numaaff_free(n, big);
    errno = 0;
    CHECK(numaaff_alloc_onnode_huge(64, first, 7) == NULL && errno == EINVAL);
    CHECK(numaaff_alloc_local_huge(64, -1) == NULL && errno == EINVAL);
  }

  /* misuse of the heap aborts with a message instead of giving one block to two owners */
  CHECK(aborts_saying(double_free_small, "numaaff: double free"));
  CHECK(aborts_saying(double_free_large, "numaaff: free of a pointer numaaff did not allocate, or a double free"));
  CHECK(aborts_saying(free_foreign, "numaaff: free of a pointer numaaff did not allocate"));
  CHECK(aborts_saying(free_wrong_size, "numaaff: free with a size that does not match"));

  /* threads */
  CHECK(pin_thread(first) == 0 && numaaff_homenode() == first && numaaff_current_node() == first);
  CHECK(pin_thread(4000) == EINVAL);
  CHECK(numaaff_set_homenode(-1) == 0);
  CHECK(numaaff_set_homenode(4000) == EINVAL);
  CHECK(numaaff_team_node(0, 4) == first);
  CHECK(numaaff_team_node(4, 4) == -1);
  /* schedule(static) of 10 iterations over 3 threads: 0-3, 4-6, 7-9 */
  CHECK(numaaff_static_thread(0, 10, 3) == 0 && numaaff_static_thread(3, 10, 3) == 0);
  CHECK(numaaff_static_thread(4, 10, 3) == 1 && numaaff_static_thread(6, 10, 3) == 1);
  CHECK(numaaff_static_thread(7, 10, 3) == 2 && numaaff_static_thread(9, 10, 3) == 2);
  CHECK(numaaff_static_thread(10, 10, 3) == -1 && numaaff_static_thread(0, 10, 0) == -1);
  CHECK(numaaff_static_thread(1, 2, 4) == 1); /* fewer iterations than threads */
  CHECK(numaaff_static_node(9, 10, 3) == numaaff_team_node(2, 3) && numaaff_static_node(10, 10, 3) == -1);

  /* the live counters: this process's (the next-touch chunks above are counted on their
     node), and the errors */
  {
    numaaff_node_counters rows[1024];
    size_t n = 0;
    CHECK(numaaff_snapshot(0, rows, 1024, &n) == 0 && n >= (size_t)numaaff_node_count());
    unsigned long long chunks = 0, faults = 0;
    int has_first = 0;
    for (size_t i = 0; i < n && i < 1024; ++i) {
      chunks += rows[i].next_touch_chunks;
      faults += rows[i].next_touch_faults;
      has_first |= rows[i].node == first;
    }
    CHECK(has_first && chunks >= 1 && faults >= 1);
    size_t again = 0;
    CHECK(numaaff_snapshot(0, NULL, 0, &again) == 0 && again == n); /* count only */
    CHECK(numaaff_snapshot(0, rows, 1, NULL) == EINVAL && numaaff_snapshot(0, NULL, 1, &again) == EINVAL);
    CHECK(numaaff_snapshot(-1, rows, 1, &again) == EINVAL);
    CHECK(numaaff_snapshot(0x3ffffffe, rows, 1, &again) == ENOENT); /* no such process publishes */
    /* the process as a whole: a C program runs no pool; the steal matrix is one row and column
       per node of the rows above, all zero without a pool */
    numaaff_process_counters pc;
    memset(&pc, 0xff, sizeof pc);
    CHECK(numaaff_snapshot_process(0, &pc) == 0 && pc.pools == 0 && pc.workers == 0);
    CHECK(pc.pages_unmoved != ~0ULL && pc.huge_page_fallbacks != ~0ULL); /* every field written */
    CHECK(numaaff_snapshot_process(0, NULL) == EINVAL && numaaff_snapshot_process(-1, &pc) == EINVAL);
    CHECK(numaaff_snapshot_process(0x3ffffffe, &pc) == ENOENT);
    unsigned long long cells[64 * 64];
    size_t side = 0;
    CHECK(numaaff_snapshot_steals(0, NULL, 0, &side) == 0 && (side == n || (side == 0 && n > 64)));
    memset(cells, 0xff, sizeof cells);
    CHECK(numaaff_snapshot_steals(0, cells, 64 * 64, &side) == 0);
    unsigned long long stolen = 0;
    for (size_t i = 0; i < side * side && i < 64 * 64; ++i) stolen += cells[i];
    CHECK(stolen == 0);
    CHECK(numaaff_snapshot_steals(0, NULL, 1, &side) == EINVAL && numaaff_snapshot_steals(0, cells, 1, NULL) == EINVAL);
    CHECK(numaaff_snapshot_steals(0x3ffffffe, cells, 1, &side) == ENOENT);
    /* the heap by kind: a large block of fastest memory counts for fastest, once, on whichever
       node it went to, and its free gives it back */
    static unsigned long long heap[1024 * NUMAAFF_HEAP_KINDS];
    size_t heap_nodes = 0;
    unsigned long long fastest[3] = {0, 0, 0};
    const size_t big_bytes = (size_t)16 << 20;
    for (int round = 0; round < 3; ++round) {
      static void* big;
      if (round == 1) CHECK((big = numaaff_kind_malloc(NUMAAFF_KIND_FASTEST, big_bytes)) != NULL);
      if (round == 2) numaaff_kind_free(big);
      CHECK(numaaff_snapshot_heap(0, heap, 1024 * NUMAAFF_HEAP_KINDS, &heap_nodes) == 0 && heap_nodes == n);
      for (size_t i = 0; i < heap_nodes && i < 1024; ++i) fastest[round] += heap[i * NUMAAFF_HEAP_KINDS + NUMAAFF_KIND_TARGET_FASTEST];
    }
    CHECK(fastest[1] - fastest[0] == big_bytes && fastest[2] == fastest[0]);
    CHECK(numaaff_snapshot_heap(0, NULL, 0, &heap_nodes) == 0 && heap_nodes == n); /* count only */
    CHECK(numaaff_snapshot_heap(0, NULL, 1, &heap_nodes) == EINVAL && numaaff_snapshot_heap(0, heap, 1, NULL) == EINVAL);
    CHECK(numaaff_snapshot_heap(0x3ffffffe, heap, 1, &heap_nodes) == ENOENT);
  }

  /* the report */
  char text[64];
  size_t length = 0;
  CHECK(numaaff_system_report(text, sizeof text, &length) == 0 && length > 0 && strlen(text) < sizeof text);
  CHECK(strlen(numaaff_strerror(EINVAL)) > 0);

  printf("%d failed\n", failures);
  return failures;
}
