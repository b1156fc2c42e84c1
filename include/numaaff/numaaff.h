/**
 * @file numaaff.h
 * @brief numaaff's C API: topology, memory on a node, placement queries and migration,
 * next-touch, and binding threads to nodes, for C programs (and Fortran, through the module
 * `numaaff` over this header).
 *
 * Link `numaaff::c` in CMake, or `pkg-config --cflags --libs numaaff-c`. The library is C++
 * inside; no C++ exception ever crosses this boundary. Conventions:
 * - functions returning `int` return 0 on success or an errno value (EINVAL for a caller
 *   mistake: a null range, an unknown node; ENOMEM; the errno of a failed system call);
 * - allocation functions return NULL and set errno;
 * - a node is the kernel's node number; ranges need not be page-aligned: a call covers every
 *   page the range touches, and `bytes == 0` is a no-op.
 * All functions are thread-safe. On a one-node machine, or in a sandbox that forbids the NUMA
 * system calls, placement calls succeed as no-ops (see numaaff_system_report).
 *
 * The OpenMP part (numaaff_omp_bind_team, numaaff_omp_first_touch) is inline in this header and compiled only where
 * `_OPENMP` is defined: a C program without OpenMP does not need it.
 *
 * @code{.c}
 * double* a = numaaff_alloc_onnode(n * sizeof *a, 1);      // on node 1
 * if (!a) perror("numaaff_alloc_onnode");
 * numaaff_next_touch(a, n * sizeof *a);                     // each page follows its next toucher
 * #pragma omp parallel
 * { numaaff_pin_thread(numaaff_team_node(omp_get_thread_num(), omp_get_num_threads())); }
 * numaaff_free(a, n * sizeof *a);
 * @endcode
 */
#ifndef NUMAAFF_NUMAAFF_H
#define NUMAAFF_NUMAAFF_H

#include <stddef.h>

/* The library is built with hidden visibility; these are its exports. */
#if defined(__GNUC__)
#define NUMAAFF_C_API __attribute__((visibility("default")))
#else
#define NUMAAFF_C_API
#endif

#ifdef __cplusplus
#define NUMAAFF_C_NOEXCEPT noexcept /* no exception crosses into C, and C++ callers know it */
extern "C" {
#else
#define NUMAAFF_C_NOEXCEPT
#endif

/* ---- topology ---------------------------------------------------------------------------- */

/** Number of NUMA nodes this process may use (1 on a machine without NUMA). */
NUMAAFF_C_API int numaaff_node_count(void) NUMAAFF_C_NOEXCEPT;
/** Writes up to `capacity` node numbers (ascending) to `nodes` and the number of nodes to
 *  `*count` (which may exceed `capacity`: call again with more room). */
NUMAAFF_C_API int numaaff_nodes(int* nodes, size_t capacity, size_t* count) NUMAAFF_C_NOEXCEPT;
/** The nodes with CPUs this process may use (memory-only nodes left out), as numaaff_nodes. */
NUMAAFF_C_API int numaaff_cpu_nodes(int* nodes, size_t capacity, size_t* count) NUMAAFF_C_NOEXCEPT;
/** The node of the CPU the caller runs on now, or -1 (errno set). */
NUMAAFF_C_API int numaaff_current_node(void) NUMAAFF_C_NOEXCEPT;
/** Distance between two nodes (10 = local) in `*distance`. */
NUMAAFF_C_API int numaaff_distance(int from, int to, int* distance) NUMAAFF_C_NOEXCEPT;
/** Writes up to `capacity` CPU numbers of `node` this process may use, and their count. */
NUMAAFF_C_API int numaaff_cpus_of(int node, int* cpus, size_t capacity, size_t* count) NUMAAFF_C_NOEXCEPT;

/* ---- threads ----------------------------------------------------------------------------- */

/** Binds the calling thread to the CPUs of `node` this process may use and makes `node` its
 *  homenode. EINVAL for an unknown node or one without usable CPUs. */
NUMAAFF_C_API int numaaff_pin_thread(int node) NUMAAFF_C_NOEXCEPT;
/** Sets the calling thread's homenode (memory only; -1 clears it). */
NUMAAFF_C_API int numaaff_set_homenode(int node) NUMAAFF_C_NOEXCEPT;
/** The calling thread's homenode (its own, else NUMAAFF_HOMENODE, else its current node). */
NUMAAFF_C_API int numaaff_homenode(void) NUMAAFF_C_NOEXCEPT;
/** The node thread `thread` of a team of `team_size` belongs on: threads in node order,
 *  in proportion to each node's usable CPUs (thread_pool's and numaaff/openmp.hpp's
 *  partition), so that with schedule(static) thread i's block is on its node. -1 if invalid. */
NUMAAFF_C_API int numaaff_team_node(int thread, int team_size) NUMAAFF_C_NOEXCEPT;
/** The thread of a team of `team_size` that runs iteration `index` of a `schedule(static)`
 *  loop of `count` iterations as GCC's libgomp cuts it (and numaaff's thread pool and C++
 *  bridges): thread t takes the t-th of `team_size` contiguous blocks, the first
 *  `count % team_size` one iteration longer. LLVM's libomp gives every thread ceil(count /
 *  team_size) iterations instead; numaaff_omp_first_touch follows whichever runtime runs it.
 *  -1 if invalid (index >= count, team_size <= 0). */
NUMAAFF_C_API int numaaff_static_thread(size_t index, size_t count, int team_size) NUMAAFF_C_NOEXCEPT;
/** The node iteration (or block) `index` of such a loop belongs on: numaaff_team_node of its
 *  static thread. With a team bound by numaaff_omp_bind_team, the owners a code splitting its
 *  arrays by the static schedule gives numaaff_place_blocks. -1 if invalid. */
NUMAAFF_C_API int numaaff_static_node(size_t index, size_t count, int team_size) NUMAAFF_C_NOEXCEPT;

/* ---- memory ------------------------------------------------------------------------------ */

/** `bytes` on `node` (16-byte aligned at least; page-aligned above 32 KiB). Free with
 *  numaaff_free. NULL and errno (EINVAL, ENOMEM, or the failing call's) on failure. */
NUMAAFF_C_API void* numaaff_alloc_onnode(size_t bytes, int node) NUMAAFF_C_NOEXCEPT;
/** `bytes` on the calling thread's homenode. */
NUMAAFF_C_API void* numaaff_alloc_local(size_t bytes) NUMAAFF_C_NOEXCEPT;
/** `bytes` spread over the nodes (NUMAAFF_INTERLEAVE_NODES, else all): page by page above
 *  32 KiB, whole blocks round-robin below. */
NUMAAFF_C_API void* numaaff_alloc_interleaved(size_t bytes) NUMAAFF_C_NOEXCEPT;
/** Transparent huge pages in a block (numaaff::huge_page_mode): a huge page sits on one node
 *  whole and migrates whole. NUMAAFF_HUGE_PER_BLOCK, the default of the calls above: no huge
 *  page ever holds two blocks (none under 2 MiB; larger blocks 2 MiB-aligned, with huge pages
 *  where the system makes them). NUMAAFF_HUGE_NEVER: none (MADV_NOHUGEPAGE).
 *  NUMAAFF_HUGE_ALWAYS: 2 MiB-aligned and MADV_HUGEPAGE (large per-node arrays). */
#define NUMAAFF_HUGE_PER_BLOCK 0
#define NUMAAFF_HUGE_NEVER 1
#define NUMAAFF_HUGE_ALWAYS 2
/** numaaff_alloc_onnode with a huge-page choice (EINVAL for another `huge_pages`). */
NUMAAFF_C_API void* numaaff_alloc_onnode_huge(size_t bytes, int node, int huge_pages) NUMAAFF_C_NOEXCEPT;
/** numaaff_alloc_local with a huge-page choice. */
NUMAAFF_C_API void* numaaff_alloc_local_huge(size_t bytes, int huge_pages) NUMAAFF_C_NOEXCEPT;
/** Frees a block of any numaaff_alloc_* function, given the same size. NULL is a no-op. A
 *  second free of a block, a pointer that no numaaff_alloc_* function returned (or one inside
 *  a block), or a size that does not fit the block (larger than a small block; not its page
 *  count for a large one) writes a message to stderr and aborts instead of putting a block on
 *  a free list twice. The C library has a heap of its own: a block from numaaff_alloc_* is
 *  freed with numaaff_free, never with the C++ deallocate of a program's own numaaff (nor the
 *  other way round). */
NUMAAFF_C_API void numaaff_free(void* p, size_t bytes) NUMAAFF_C_NOEXCEPT;

/* ---- the heap by kind ----------------------------------------------------------------------
 * Memory asked for by what it should be, freed without its size (a replacement for malloc in
 * codes that want placement; numaaff/kind.hpp has the model, <numaaff/hbwmalloc.h> the
 * hbwmalloc API over it). A kind names where a block's pages go, resolved at allocation:
 * - NUMAAFF_KIND_LOCAL: the calling thread's homenode, else the node it runs on;
 * - NUMAAFF_KIND_INTERLEAVE: over the interleave nodes (NUMAAFF_INTERLEAVE_NODES, else all):
 *   large blocks page by page, small blocks round-robin;
 * - NUMAAFF_KIND_FASTEST: the highest-bandwidth memory for the caller's node by the HMAT
 *   (HBM); without an HMAT, local DRAM;
 * - NUMAAFF_KIND_CAPACITY: the memory with the most room now, ties nearest first (CXL);
 * - numaaff_kind_onnode(node): that node.
 * All are strict (every page there, MPOL_BIND; a block over 32 KiB larger than the node's
 * free memory at allocation: NULL/ENOMEM; memory taken by others before the first touch
 * still meets the OOM killer, as with any MPOL_BIND); numaaff_kind_with makes a
 * preferred form (pages spill: in attribute order for fastest and capacity) or picks huge
 * pages. Any thread frees any block. A double free, or a pointer the heap did not give,
 * writes a message to stderr and aborts (at the free; for a thread that frees blocks others
 * allocated, when that thread next checks its frees, before the block is handed out again;
 * two threads that free one block at the same instant, a race ThreadSanitizer reports, can
 * escape the check). One node or a sandbox: every kind is node 0's memory.
 * Blocks up to 32 KiB come from per-node slabs with a per-thread cache (no system call in the
 * common case); larger ones are a mapping each. */

/** A kind of memory: a plain value (compare with numaaff_kind_equal). Fill it only through
 *  the constants and functions below; its fields may change between versions. */
typedef struct numaaff_kind {
  int target;         /**< NUMAAFF_KIND_TARGET_*: node, local, interleave, fastest, capacity */
  int node;           /**< the node of an on-node kind; -1 otherwise */
  unsigned options;   /**< NUMAAFF_KIND_PREFERRED | one NUMAAFF_KIND_PAGES_* value */
} numaaff_kind;

#define NUMAAFF_KIND_TARGET_NODE 0
#define NUMAAFF_KIND_TARGET_LOCAL 1
#define NUMAAFF_KIND_TARGET_INTERLEAVE 2
#define NUMAAFF_KIND_TARGET_FASTEST 3
#define NUMAAFF_KIND_TARGET_CAPACITY 4

/** Options of numaaff_kind_with: pages may spill when the kind's node is full. */
#define NUMAAFF_KIND_PREFERRED 0x1u
/** Transparent huge pages (as NUMAAFF_HUGE_*): the default, none shared by two blocks. */
#define NUMAAFF_KIND_PAGES_DEFAULT 0x0u
/** No transparent huge pages. */
#define NUMAAFF_KIND_PAGES_NO_HUGE 0x10u
/** Transparent huge pages everywhere (2 MiB-aligned blocks, MADV_HUGEPAGE). */
#define NUMAAFF_KIND_PAGES_THP 0x20u
/** Explicit 2 MiB huge pages from the node's reserved pool
 *  (/sys/devices/system/node/nodeN/hugepages/hugepages-2048kB): each block whole pages of its
 *  own, placed at allocation. Strict: NULL/ENOMEM when the node's pool has too few free pages;
 *  preferred: another node's pool, else ordinary pages (counted in refusal statistics). */
#define NUMAAFF_KIND_PAGES_HUGE_2MB 0x40u
/** Explicit 1 GiB huge pages, as NUMAAFF_KIND_PAGES_HUGE_2MB (hugepages-1048576kB). */
#define NUMAAFF_KIND_PAGES_HUGE_1GB 0x80u

NUMAAFF_C_API extern const numaaff_kind NUMAAFF_KIND_LOCAL;
NUMAAFF_C_API extern const numaaff_kind NUMAAFF_KIND_INTERLEAVE;
NUMAAFF_C_API extern const numaaff_kind NUMAAFF_KIND_FASTEST;
NUMAAFF_C_API extern const numaaff_kind NUMAAFF_KIND_CAPACITY;

/** The kind of memory on `node`. An unknown node gives a kind whose allocations fail with
 *  EINVAL (this call cannot fail). */
NUMAAFF_C_API numaaff_kind numaaff_kind_onnode(int node) NUMAAFF_C_NOEXCEPT;
/** `base` with `options` (NUMAAFF_KIND_PREFERRED and at most one NUMAAFF_KIND_PAGES_*) in
 *  `*out`: the options replace the base's (pass every option the kind should have). EINVAL for an unknown option or base, or a NULL `out`. */
NUMAAFF_C_API int numaaff_kind_with(numaaff_kind base, unsigned options, numaaff_kind* out) NUMAAFF_C_NOEXCEPT;
/** 1 when `a` and `b` place memory alike, else 0. */
NUMAAFF_C_API int numaaff_kind_equal(numaaff_kind a, numaaff_kind b) NUMAAFF_C_NOEXCEPT;

/** `bytes` of kind `k` (aligned for any object). `bytes` 0 gives a unique pointer to free.
 *  NULL and errno on failure: EINVAL (invalid kind), ENOMEM (a strict kind's node has no
 *  room for a large block, or memory ran out), or the errno of a placement the kernel refused. */
NUMAAFF_C_API void* numaaff_kind_malloc(numaaff_kind k, size_t bytes) NUMAAFF_C_NOEXCEPT;
/** `count * bytes` zeroed bytes of kind `k`; NULL/ENOMEM when the product overflows. */
NUMAAFF_C_API void* numaaff_kind_calloc(numaaff_kind k, size_t count, size_t bytes) NUMAAFF_C_NOEXCEPT;
/** `p` resized to `bytes`, of kind `k`, its contents kept up to the smaller size (the same
 *  pointer when the block already fits). A large block (over 32 KiB) that stays large and keeps
 *  its kind grows or shrinks without a copy where it can: in place, or its mapping moved with
 *  its pages and placement (mremap).
 *  NULL `p`: numaaff_kind_malloc. `bytes` 0: frees `p`, returns NULL. On failure NULL and errno,
 *  and `p` is untouched. */
NUMAAFF_C_API void* numaaff_kind_realloc(numaaff_kind k, void* p, size_t bytes) NUMAAFF_C_NOEXCEPT;
/** `bytes` of kind `k` aligned to `align` in `*out`: 0, or EINVAL (align not a power of two
 *  or not a multiple of sizeof(void*); invalid kind), ENOMEM. */
NUMAAFF_C_API int numaaff_kind_posix_memalign(numaaff_kind k, void** out, size_t align, size_t bytes) NUMAAFF_C_NOEXCEPT;
/** Frees a block of any numaaff_kind_* call (or numaaff_alloc_*) without its size, from any
 *  thread. NULL is a no-op; a double free or a foreign pointer aborts with a message. Memory
 *  goes back to the system: a slab whose small blocks are all free (but one per node, kind and
 *  size), and a large block (its pages are kept for the next block of the same node and
 *  strictness: 1/32 of the memory the process may have at most (the machine's, its cgroup
 *  limit, four times its smallest node), between 32 MiB and 1 GiB, blocks up to a quarter of
 *  that; unmapped once unused for a second, at the next large allocation or free, or when a
 *  strict block finds their node short). Free a block with the protections and placement
 *  numaaff gave it. */
NUMAAFF_C_API void numaaff_kind_free(void* p) NUMAAFF_C_NOEXCEPT;
/** The bytes the block at `p` can hold (at least what was asked); 0 for NULL. */
NUMAAFF_C_API size_t numaaff_kind_usable_size(void* p) NUMAAFF_C_NOEXCEPT;

/** What numaaff_move_to did, page by page. */
typedef struct numaaff_move_result {
  size_t total;         /**< pages in the range */
  size_t moved;         /**< now on the target, were elsewhere */
  size_t already_there; /**< were on the target before */
  size_t unpopulated;   /**< never touched: nothing to move */
  size_t failed;        /**< could not be moved */
  size_t carried;       /**< pages outside the range that a huge page carried along */
  int first_error;      /**< errno of the first failed page, 0 if none */
} numaaff_move_result;

/** Migrates every populated page of the range to `node`; `result` may be NULL. Per-page
 *  failures are in `result`, not the return value. */
NUMAAFF_C_API int numaaff_move_to(void* addr, size_t bytes, int node, numaaff_move_result* result) NUMAAFF_C_NOEXCEPT;
/** The owner value that leaves a block where it is (numaaff_place_blocks and
 *  numaaff_place_blocks_on_next_touch): free slots of a block pool, blocks whose owner did not
 *  change. Their pages are not moved: numaaff_place_blocks counts the resident ones as
 *  already_there, next touch opens them without counting them. Not -1, which the node
 *  functions (numaaff_static_node, numaaff_team_node) return for an error. */
#define NUMAAFF_KEEP (-2)

/** Puts each block of the range on its owner's node now, in one batched call (the phase
 *  change of a block-structured code whose new owners are known): block b is the
 *  `block_bytes` at addr + b * block_bytes, `owners[b]` its node or NUMAAFF_KEEP;
 *  `owner_count` must cover every block. `result` may be NULL. See numaaff::place_blocks. */
NUMAAFF_C_API int numaaff_place_blocks(void* addr, size_t bytes, size_t block_bytes, const int* owners,
                                       size_t owner_count, numaaff_move_result* result) NUMAAFF_C_NOEXCEPT;
/** Spreads the pages of the range over `nodes[i]` in proportion to `weights[i]` (i below
 *  `count`), mixed through the range; any weights, every kernel. See
 *  numaaff::weighted_interleave. */
NUMAAFF_C_API int numaaff_weighted_interleave(void* addr, size_t bytes, const int* nodes, const unsigned* weights,
                                              size_t count) NUMAAFF_C_NOEXCEPT;
/** Weights in proportion to each node's memory bandwidth (the firmware's HMAT; 1 each
 *  without one), for numaaff_weighted_interleave: `*count` nodes, the first `capacity` of them
 *  written to `nodes` and `weights`. See numaaff::bandwidth_weights. */
NUMAAFF_C_API int numaaff_bandwidth_weights(int* nodes, unsigned* weights, size_t capacity, size_t* count) NUMAAFF_C_NOEXCEPT;
/** Moves the range's pages to the fastest memory for the calling thread, spilling to the next
 *  tiers when it is full; `result` may be NULL. See numaaff::promote. */
NUMAAFF_C_API int numaaff_promote(void* addr, size_t bytes, numaaff_move_result* result) NUMAAFF_C_NOEXCEPT;
/** Moves the range's pages to the slowest memory, spilling towards faster memory when it is
 *  full; `result` may be NULL. See numaaff::demote. */
NUMAAFF_C_API int numaaff_demote(void* addr, size_t bytes, numaaff_move_result* result) NUMAAFF_C_NOEXCEPT;
/** Pages of the range now on `node`, in `*pages` (a raw page-status query). */
NUMAAFF_C_API int numaaff_pages_on(const void* addr, size_t bytes, int node, size_t* pages) NUMAAFF_C_NOEXCEPT;
/** Pages of the range never touched, in `*pages`. */
NUMAAFF_C_API int numaaff_pages_unpopulated(const void* addr, size_t bytes, size_t* pages) NUMAAFF_C_NOEXCEPT;

/* ---- next touch -------------------------------------------------------------------------- */

/** Arms the range: each chunk (128 pages, or the range's share per usable CPU if smaller)
 *  moves to the node of the thread that touches it
 *  next. The range must be mapped readable and writable and not executable (opened chunks are
 *  made read-write): EINVAL for any other range, which is then not armed (what was armed in it
 *  before is disarmed). Likewise for every arming call below. */
NUMAAFF_C_API int numaaff_next_touch(void* addr, size_t bytes) NUMAAFF_C_NOEXCEPT;
/** The same with chunks derived from the application's block size: `block_bytes` rounded to
 *  whole pages, so that a chunk never spans two owners' blocks when blocks are page-aligned. */
NUMAAFF_C_API int numaaff_next_touch_blocks(void* addr, size_t bytes, size_t block_bytes) NUMAAFF_C_NOEXCEPT;
/** place_blocks, lazily: arms the range so that the first touch of a chunk, by any thread,
 *  moves each of its pages to its block's owner (`owners[b]` for block b, as in
 *  numaaff_place_blocks), not to the toucher. See numaaff::place_blocks_on_next_touch. */
NUMAAFF_C_API int numaaff_place_blocks_on_next_touch(void* addr, size_t bytes, size_t block_bytes, const int* owners,
                                                     size_t owner_count) NUMAAFF_C_NOEXCEPT;
/** Disarms what is still armed in the range (its pages stay where they are). */
NUMAAFF_C_API int numaaff_disarm(void* addr, size_t bytes) NUMAAFF_C_NOEXCEPT;
/** Opens and migrates now, for the calling thread, every armed chunk of the range (before a
 *  system call such as read() or MPI receive writes into it). */
NUMAAFF_C_API int numaaff_touch_now(void* addr, size_t bytes) NUMAAFF_C_NOEXCEPT;

/** Process-wide next-touch counters since start (or the last reset). */
typedef struct numaaff_next_touch_stats {
  unsigned long long faults;
  unsigned long long chunks_migrated;
  unsigned long long pages_moved;          /**< moved to their target (were elsewhere) */
  unsigned long long pages_failed;         /**< could not be moved */
  unsigned long long pages_unpopulated;    /**< never touched: nothing to move */
  unsigned long long chunks_released;      /**< left to the application (it unmapped or re-protected them) */
  unsigned long long handler_ns;           /**< time in the handler */
  unsigned long long pages_already_there;  /**< were on their target already */
} numaaff_next_touch_stats;
NUMAAFF_C_API int numaaff_get_next_touch_stats(numaaff_next_touch_stats* stats) NUMAAFF_C_NOEXCEPT;
NUMAAFF_C_API int numaaff_reset_next_touch_stats(void) NUMAAFF_C_NOEXCEPT;

/* ---- live counters (numaaff/counters.hpp) ------------------------------------------------- */

/** One node's live counters (see numaaff::node_counters for what each counts). */
typedef struct numaaff_node_counters {
  long long node;
  unsigned long long workers, tasks_run, stolen_local, stolen_in, stolen_out, sleeps;
  unsigned long long worker_ns, idle_ns, queued;
  unsigned long long next_touch_chunks, next_touch_pages_moved, next_touch_pages_already_there, next_touch_pages_failed;
  unsigned long long pages_moved, pages_not_moved, heap_bound_bytes, heap_preferred_bytes;
  unsigned long long next_touch_faults;
} numaaff_node_counters;
/** The per-node counters of process `pid` (0: this process, now; another: what it published,
 *  validated), one row per node, ascending: fills min(max_nodes, count) rows of `nodes` (NULL
 *  when max_nodes is 0) and sets `*node_count` to the count. 0, or EINVAL (node_count NULL,
 *  nodes NULL with max_nodes > 0), ENOENT (the process publishes no counters), ESRCH (it is
 *  gone), EBADMSG (its segment is unreadable: corrupt, truncated, another format), ENOMEM. */
NUMAAFF_C_API int numaaff_snapshot(long long pid, numaaff_node_counters* nodes, size_t max_nodes,
                                   size_t* node_count) NUMAAFF_C_NOEXCEPT;

/** What a process counts as a whole (see numaaff::counter_snapshot and
 *  numaaff::refusal_statistics): its live pools and their workers, and the refusals: calls
 *  that the kernel or a sandbox would not carry out, so that numaaff did less. */
typedef struct numaaff_process_counters {
  unsigned long long pools, workers;
  unsigned long long policies_skipped, mappings_unbound, pages_unmoved, threads_unpinned;
  unsigned long long weighted_fallbacks, huge_page_fallbacks;
} numaaff_process_counters;
/** The process-wide counters of process `pid` (0: this process, now; another: what it
 *  published, validated). 0, or EINVAL (counters NULL, pid < 0), ENOENT, ESRCH, EBADMSG,
 *  ENOMEM as numaaff_snapshot. */
NUMAAFF_C_API int numaaff_snapshot_process(long long pid, numaaff_process_counters* counters) NUMAAFF_C_NOEXCEPT;
/** The steal matrix of process `pid` (0: this process): `steals[t * count + v]` is how many
 *  tasks workers of the t-th node took from the v-th, the nodes in numaaff_snapshot's order.
 *  Fills min(max_cells, count * count) cells (`steals` NULL when max_cells is 0) and sets
 *  `*node_count` to count, or to 0 when the process records no matrix (more than 64 nodes).
 *  Errors as numaaff_snapshot. */
/** The heap's bytes per node and kind of process `pid` (0: this process, now): bytes[i *
 *  NUMAAFF_HEAP_KINDS + t] is what it holds on the i-th node (numaaff_snapshot's order) for
 *  blocks of kind target t (NUMAAFF_KIND_TARGET_*; the C++ allocators count as the kind they
 *  place like, see numaaff::node_counters::heap_by_kind). Fills min(max_cells, count *
 *  NUMAAFF_HEAP_KINDS) cells (`bytes` NULL when max_cells is 0) and sets `*node_count` to
 *  count. Errors as numaaff_snapshot. */
#define NUMAAFF_HEAP_KINDS 5
NUMAAFF_C_API int numaaff_snapshot_heap(long long pid, unsigned long long* bytes, size_t max_cells,
                                        size_t* node_count) NUMAAFF_C_NOEXCEPT;
NUMAAFF_C_API int numaaff_snapshot_steals(long long pid, unsigned long long* steals, size_t max_cells,
                                          size_t* node_count) NUMAAFF_C_NOEXCEPT;

/* ---- report ------------------------------------------------------------------------------ */

/** Writes numaaff's capability report (nodes, whether placement is effective here, THP,
 *  NUMA balancing) as text, NUL-terminated and truncated to `capacity`; `*length` (may be
 *  NULL) gets the full length. */
NUMAAFF_C_API int numaaff_system_report(char* text, size_t capacity, size_t* length) NUMAAFF_C_NOEXCEPT;

/** Text for an error value returned by this API. */
NUMAAFF_C_API const char* numaaff_strerror(int error) NUMAAFF_C_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#if defined(_OPENMP) && !defined(__cplusplus)
#include <omp.h>
#include <string.h>
/** Pins each thread of the next parallel regions of `team_size` threads (0: the runtime's
 *  default) on the node numaaff_team_node gives it. Returns 0 if every thread was pinned,
 *  else the first error. The runtime keeps the same threads for later regions of that size. */
static inline int numaaff_omp_bind_team(int team_size) {
  int first_error = 0;
  if (team_size <= 0) team_size = omp_get_max_threads();
#pragma omp parallel num_threads(team_size)
  {
    const int e = numaaff_pin_thread(numaaff_team_node(omp_get_thread_num(), omp_get_num_threads()));
    if (e != 0) {
#pragma omp critical(numaaff_omp_bind_team)
      if (first_error == 0) first_error = e;
    }
  }
  return first_error;
}

/** First touch by the static schedule: each thread of a parallel region (of the runtime's
 *  default team, bound by numaaff_omp_bind_team first) zero-fills the elements that this
 *  OpenMP runtime's own `schedule(static)` gives it, of the `count` elements of `elem_bytes`
 *  at `data`: a later `#pragma omp for schedule(static)` of `count` iterations finds each
 *  thread's elements on its node, whichever runtime cuts the loop (libgomp and LLVM's libomp
 *  cut differently). 0, or EINVAL for a null `data` with count > 0 or a size that overflows. */
static inline int numaaff_omp_first_touch(void* data, size_t count, size_t elem_bytes) {
  if ((data == NULL && count != 0) || (elem_bytes != 0 && count > (size_t)-1 / elem_bytes)) return 22; /* EINVAL */
#pragma omp parallel
  {
    size_t first = count, end = 0; /* this thread's share: one contiguous run under schedule(static) */
#pragma omp for schedule(static) nowait
    for (size_t i = 0; i < count; ++i) {
      if (first == count) first = i;
      end = i + 1;
    }
    if (end > first) memset((char*)data + first * elem_bytes, 0, (end - first) * elem_bytes);
  }
  return 0;
}
#endif

#endif /* NUMAAFF_NUMAAFF_H */
