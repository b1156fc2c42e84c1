/**
 * @file next_touch.hpp
 * @brief Affinity on next touch: after a phase change, data follows the threads that use it.
 *
 * `affinity_on_next_touch(range)` arms a range: it is protected (PROT_NONE) and registered in
 * chunks. The first touch of each chunk, read or write, by any thread traps in numaaff's SIGSEGV
 * handler, which claims the chunk (exactly one thread wins; the others wait for it), opens it
 * again and migrates all its pages to the toucher's node with one `move_pages` call per chunk
 * of up to 128 pages, then lets the access resume. Later touches cost nothing. This is the
 * "affinity-on-next-touch" that a 2009 kernel patch offered and Linux never merged, done in
 * user space; chunking is what makes it cheap (one fault and one system call per chunk, not
 * per page).
 *
 * What it costs: one protection fault plus one migration call per chunk. The default chunk
 * (128 pages, 512 KiB with 4 KiB pages, or the range's share per CPU if that is smaller, so
 * that a range split by rows over a team gives each thread its own chunks) keeps the fault
 * share of the cost small while threads
 * that own less than a chunk still get their data; see benchmarks/README.md. `adaptive`
 * granularity grows a thread's claim while it touches consecutive chunks from one node and
 * shrinks it when neighbours are claimed from different nodes.
 *
 * What to know:
 * - The range must be ordinary read-write memory: opened chunks are made read-write, so a
 *   range with any page mapped otherwise (read-only, executable, a read-only file mapping) is
 *   refused with std::invalid_argument (EINVAL) and left as it was. The whole page-rounded
 *   range is covered (see policy.hpp for the rounding rule).
 * - **System calls.** The kernel does not trap on an armed chunk: a system call that reads or
 *   writes one fails with EFAULT. Stream sockets and pipes keep their data then, but a
 *   datagram (UDP, AF_UNIX SOCK_DGRAM) received into an armed buffer is consumed and lost,
 *   and libraries that read into buffers behind your back (MPI's single-copy transports) see
 *   errors. Rule: call `touch_now(buffer)` before handing armed memory to the kernel or to
 *   such a library; it opens and migrates the armed chunks to the caller's node, as its
 *   next touch would.
 * - **Threads that block SIGSEGV** (the sigwait pattern: a thread that blocks every signal
 *   and waits for them) die on an armed touch: the kernel cannot deliver the fault to them
 *   and kills the process, and no user-space code can prevent it. Such a thread must not be
 *   the first to touch armed memory: `touch_now` or `disarm` what it uses, or touch it from
 *   another thread first.
 * - The handler owns only protection faults on chunks that are armed and not yet opened,
 *   whose mapping is still the one that was armed. Any other SIGSEGV goes to the handler
 *   installed before numaaff's, exactly as the kernel would have delivered it (its sa_mask,
 *   SA_NODEFER, SA_RESETHAND and SA_SIGINFO honoured; SIG_IGN and SIG_DFL kill), so real
 *   crashes still crash. A handler installed after numaaff's must chain to it, as numaaff
 *   chains to others. A fault that could be stale (its chunk was opened by another thread
 *   after it trapped) is retried once: a foreign fault reaches the previous handler at the
 *   latest on its second occurrence.
 * - Changing armed memory yourself gives it back to you: after mprotect or munmap, numaaff
 *   never opens those chunks (a fault there is yours, counted in `chunks_released`). Memory
 *   freed through numaaff's allocators is disarmed first; disarm memory you unmap yourself.
 *   numaaff notices an unmapped chunk when it has a hole or a readable first or last page,
 *   but a new PROT_NONE mapping that exactly covers an armed chunk (a guard page as large
 *   as the chunk) cannot be told from it.
 * - Pages never touched before arming have nothing to move: they are placed at their first
 *   touch, which is the toucher's node anyway. Pages shared with a forked child cannot be
 *   migrated (counted as failed) but are opened like the rest.
 * - If migration fails (node full, EPERM in a container), the chunk is opened all the same:
 *   data never becomes unreachable; the failure is counted in next_touch_stats().
 * - Transparent huge pages migrate whole: a 2 MiB page holding parts of several chunks would
 *   go, all of it, to the last of their touchers. Arming therefore splits every huge page that
 *   straddles a chunk boundary or an edge of the range (see move_to), so each chunk moves
 *   alone. Each region it splits is marked MADV_NOHUGEPAGE, so khugepaged never merges the
 *   pages again (which would put the whole region on one node).
 *
 * Next touch or place_blocks? Next touch gives a chunk to whoever touches it *first*: right
 * when the new owners are not known, wrong when, say, a halo exchange reads the neighbours'
 * blocks before their owners touch them. When the owners are known (an OpenMP plan, a pool
 * partition, a load balancer's map), `place_blocks(range, block_bytes, owners)` (migration.hpp)
 * puts every block with its owner now, in one batched call, and `place_blocks_on_next_touch`
 * (below) does the same lazily, whoever touches first. With plain next touch, make chunks no
 * larger than the blocks (`next_touch_options::for_blocks(block_bytes)`): a 512 KiB default
 * chunk over 72 KiB blocks goes whole to the first of its seven owners to touch it. No chunk
 * size repairs a wrong first toucher: in examples/amr without an owner-touch loop and without
 * huge pages, chunks of 4 to 128 pages and adaptive claims ended phases at 48-91% local, the
 * owner-aware calls at 100% (benchmarks/README.md).
 * - fork(): the child inherits armed ranges and handles its own first touches; arming,
 *   disarming and freeing in other threads never leave the child a locked or half-done
 *   registry (the locks are held around fork, and numaaff's process-wide tables are built
 *   during static initialisation, since a C++ static whose first initialisation another
 *   thread is running at the fork stays locked in the child).
 * - Signal stack: the handler, compiled -O1 or above, needs under 2 KiB of stack of its own,
 *   so it also runs on an 8 KiB alternate signal stack (SIGSTKSZ) installed by the
 *   application or a runtime.
 * - One node: the whole path runs (trap, open, migrate to node 0); pages stay where they are.
 *
 * @code{.cpp}
 * // At each phase change of an AMR solver, after repartitioning:
 * numaaff::affinity_on_next_touch(block.data(), block.size() * sizeof(double));
 * // ... the worker that now owns the block touches it first and pulls it to its node.
 * @endcode
 */
#pragma once

#include "detail/armed_ranges.hpp"
#include "detail/pinning.hpp"
#include "detail/throw.hpp"
#include "errors.hpp"
#include "memory.hpp"  // the umbrella, not one part: programs that include this header use all of it

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff {

/// Where a touched chunk goes.
enum class next_touch_target {
  toucher_node,      ///< the node of the CPU the toucher runs on (default)
  toucher_homenode,  ///< the toucher's homenode (thread pool / set_homenode), else its node
};

/// Options of affinity_on_next_touch.
struct next_touch_options {
  /// Bytes per chunk, a multiple of the page size; 0 means the default: the range divided by
  /// the CPUs the process may use (whole pages, at least one), at most 128 pages, so that a
  /// range split by rows over a team gives each thread its own chunks.
  std::size_t chunk_bytes = 0;
  next_touch_target target = next_touch_target::toucher_node;
  /// Grow a thread's claim up to `max_adaptive_chunks` chunks while it touches consecutive
  /// chunks from one node; shrink to one when a neighbour belongs to another node.
  bool adaptive = false;
  std::uint32_t max_adaptive_chunks = 32;

  /// Chunks of `block_bytes` rounded up to whole pages: with page-aligned blocks, no chunk
  /// spans two blocks. @throws std::invalid_argument if block_bytes is 0.
  static next_touch_options for_blocks(std::size_t block_bytes) {
    if (block_bytes == 0 || block_bytes > std::numeric_limits<std::size_t>::max() - detail::page_size())
      detail::throw_invalid_argument("next_touch_options::for_blocks: block_bytes " + std::to_string(block_bytes) +
                                     " is 0 or cannot be rounded to whole pages");
    next_touch_options o;
    o.chunk_bytes = static_cast<std::size_t>(detail::align_up(block_bytes, detail::page_size()));
    return o;
  }
};

/// Largest default chunk of next-touch, in pages (see benchmarks/README.md for the
/// measurement): what a range of at least 128 pages per CPU gets.
inline constexpr std::size_t default_next_touch_pages = 128;

/**
 * Arms the range for affinity on next touch (see the file comment).
 *
 * Re-arming a range that is partly armed replaces the overlapping part. Thread-safe; allocates
 * one word per chunk (an anonymous mapping), blocks only on other arm/disarm calls.
 * @throws std::invalid_argument for a null/wrapping range, a chunk size that is not a
 *         non-zero multiple of the page size, or a range not all mapped readable, writable
 *         and not executable (reading /proc/self/maps says; the range is then not armed, and
 *         what was armed in it before is disarmed).
 * @throws std::system_error: "mprotect" if the range cannot be protected (ENOMEM: too many
 *         mappings), "sigaction" if the handler cannot be installed, or
 *         numaaff::errc::too_many_ranges when 4096 ranges are armed at once.
 */
void affinity_on_next_touch(void* addr, std::size_t bytes);
void affinity_on_next_touch(void* addr, std::size_t bytes, const next_touch_options& options);
void affinity_on_next_touch(void* addr, std::size_t bytes, std::error_code& ec) noexcept;
void affinity_on_next_touch(void* addr, std::size_t bytes, const next_touch_options& options,
                            std::error_code& ec) noexcept;

/**
 * place_blocks, lazily: arms the range as affinity_on_next_touch does, but the first touch of
 * a chunk, by whichever thread, moves each of its pages to the owner of its block instead of
 * to the toucher. Blocks and owners as in place_blocks (migration.hpp): block b is the
 * `block_bytes` at `addr + b * block_bytes`, `owners[b]` its node, a page shared by two blocks
 * goes with the one holding its first byte in the range.
 *
 * Which to call at a phase change whose new owners are known: place_blocks moves everything
 * now, in the calling thread; this spreads the same migration over the threads that touch the
 * data first, when they touch it (a halo exchange that reads a neighbour's block first sends
 * it to its owner, not to itself), and never moves a block nobody touches. Placement does not
 * depend on the chunk size here (every page has its own target): larger chunks mean fewer
 * faults. Huge pages are split at the range's edges and wherever two owners' blocks share
 * one, nowhere else. Pages never touched before arming have nothing to move and are placed by
 * their first toucher, as with place_blocks. `options.target` does not apply; chunk size and
 * adaptive claims do. disarm opens without moving, touch_now moves to the owners. Blocks
 * nobody touches are never migrated, but stay armed (a system call on them fails with EFAULT:
 * see "System calls" above) until touched, touch_now or disarm. An owner node without memory
 * the process may use fails its pages' migration (counted in next_touch_stats().pages_failed,
 * with the rest of their handler batch); the chunks open all the same.
 *
 * Thread-safety, blocking and errors as affinity_on_next_touch; allocates a table of two bytes
 * per page while arming (and as much again, held by the registry until the range is swept).
 * @throws std::invalid_argument as place_blocks (bad range, `block_bytes == 0`, too few
 *         owners, an owner that is neither a kernel node nor keep_in_place), for a bad chunk
 *         size, or for a range that is not read-write memory (as affinity_on_next_touch).
 *         Blocks owned by keep_in_place are armed and opened like the rest, never moved.
 * @code{.cpp}
 * balance(mesh);  // new owners: owner_node[b] for each block
 * numaaff::place_blocks_on_next_touch(mesh.data(), mesh.bytes(), block_bytes, owner_node);
 * exchange_halos(mesh);  // neighbours' first reads move blocks to their owners
 * @endcode
 * @note One node: the whole path runs; pages stay where they are.
 */
void place_blocks_on_next_touch(void* addr, std::size_t bytes, std::size_t block_bytes,
                                const std::vector<node_id>& owners, const next_touch_options& options = {});
void place_blocks_on_next_touch(void* addr, std::size_t bytes, std::size_t block_bytes,
                                const std::vector<node_id>& owners, const next_touch_options& options,
                                std::error_code& ec) noexcept;

/**
 * Opens every still-armed chunk overlapping the range, without migrating it. Chunks are opened
 * whole, so a chunk straddling the range's edge is opened entirely. Thread-safe; never throws
 * for a range that was never armed (a no-op).
 * @throws std::invalid_argument for a null/wrapping range.
 */
void disarm(void* addr, std::size_t bytes);
void disarm(void* addr, std::size_t bytes, std::error_code& ec) noexcept;

/**
 * Makes the range ready for the kernel now: opens every still-armed chunk overlapping it and
 * migrates it to the calling thread's node (or homenode, as the range's options say), exactly
 * as the caller's next touch would, and waits for chunks other threads are opening. Call it
 * before a system call or a library reads or writes armed memory (recv, read, an MPI
 * receive): see "System calls" in the file comment.
 *
 * Thread-safe; blocks on other arm/disarm/touch_now calls and on chunks being opened; no
 * allocation. A range that is not armed is a no-op. One node: opens, pages stay.
 * @code{.cpp}
 * numaaff::touch_now(buffer, sizeof buffer);   // armed at the last phase change
 * recv(fd, buffer, sizeof buffer, 0);          // a datagram is never lost to EFAULT
 * @endcode
 * @throws std::invalid_argument for a null/wrapping range.
 * @throws std::system_error "mprotect" if the chunks cannot be opened (ENOMEM).
 */
void touch_now(void* addr, std::size_t bytes);
void touch_now(void* addr, std::size_t bytes, std::error_code& ec) noexcept;

/// True if some chunk overlapping the range is still armed. Thread-safe, lock-free.
bool is_armed(const void* addr, std::size_t bytes) noexcept;

/// Process-wide counters of the next-touch handler since start (or the last reset).
struct next_touch_statistics {
  std::uint64_t faults = 0;             ///< faults on armed ranges handled
  std::uint64_t chunks_migrated = 0;    ///< chunks opened and migrated by a toucher
  std::uint64_t pages_moved = 0;          ///< pages moved to their target node (the toucher's, or the owner's)
  std::uint64_t pages_already_there = 0;  ///< pages found on their target node already: nothing to move
  std::uint64_t pages_failed = 0;       ///< pages that could not be moved (busy, node full, EPERM)
  std::uint64_t pages_unpopulated = 0;  ///< never-touched pages found in migrated chunks
  std::uint64_t widenings = 0;          ///< chunks widened because mprotect ran out of mappings
  std::uint64_t waits = 0;              ///< times a thread slept while another opened its chunk
  std::uint64_t chunks_released = 0;    ///< armed chunks the application unmapped or re-protected,
                                        ///< left to it untouched
  std::chrono::nanoseconds handler_time{0};  ///< total time spent in the handler
};

/// A snapshot of the counters. Thread-safe, lock-free, no allocation.
next_touch_statistics next_touch_stats() noexcept;
/// Zeroes the counters (for measurements). Thread-safe.
void reset_next_touch_stats() noexcept;

/**
 * Arms a range for the duration of a phase: armed on construction, disarmed (what nobody
 * touched is opened, unmigrated) on destruction. Not copyable.
 *
 * @code{.cpp}
 * {
 *   numaaff::next_touch_phase phase(grid.data(), grid.size() * sizeof(cell));
 *   run_phase(grid);   // data follows the threads that touch it
 * }
 * @endcode
 */
class next_touch_phase {
 public:
  next_touch_phase(void* addr, std::size_t bytes, const next_touch_options& options = {})
      : addr_(addr), bytes_(bytes) {
    affinity_on_next_touch(addr, bytes, options);
  }
  ~next_touch_phase() {
    std::error_code ignored;
    disarm(addr_, bytes_, ignored);
  }
  next_touch_phase(const next_touch_phase&) = delete;
  next_touch_phase& operator=(const next_touch_phase&) = delete;

 private:
  void* addr_;
  std::size_t bytes_;
};

// ---- implementation ---------------------------------------------------------------------

namespace detail {

inline bool valid_chunk(std::size_t chunk) noexcept { return chunk != 0 && chunk % page_size() == 0; }
/// The chunk of a range of `pages` pages: the caller's, else the default. The default is no
/// larger than the range's share per CPU: a 64-page array split by rows over four threads is
/// four 16-page chunks, one per thread, not one chunk that its first toucher takes whole
/// (row-split arrays of a Fortran code ended 40% placed so).
inline std::size_t effective_chunk(const next_touch_options& o, std::size_t pages) noexcept {
  if (o.chunk_bytes != 0) return o.chunk_bytes;
  // process_cpus(), read during static initialisation, not topology::system(): arming must not
  // run a first initialisation that a child forked meanwhile would wait for forever.
  std::size_t cpus = 1;
  try {
    cpus = std::max<std::size_t>(1, process_cpus().size());
  } catch (...) {  // only if its first use (static initialisation) ran out of memory
  }
  return std::clamp<std::size_t>(pages / cpus, 1, default_next_touch_pages) * page_size();
}
/// Runs `arm(ec)` (arguments already checked), throwing as or_throw does, except that a range
/// arming refuses for its protection (EINVAL with no system call failed) is the caller's
/// mistake: std::invalid_argument.
template <class Arm>
inline void arm_or_throw(const char* call, Arm&& arm) {
  or_throw(call, [&](std::error_code& ec) {
    arm(ec);
    if (ec == std::errc::invalid_argument && failed_call == sys::count_)
      throw_invalid_argument(std::string(call) +
                             ": addr, bytes: the range is not all readable, writable, non-executable memory; "
                             "arm only ordinary data (opened chunks are made read-write)");
  });
}

inline void require_chunk(const char* call, std::size_t chunk) {
  if (!valid_chunk(chunk))
    throw_invalid_argument(std::string(call) + ": chunk_bytes " + std::to_string(chunk) +
                           " is not a non-zero multiple of the page size (" + std::to_string(page_size()) + ")");
}

}  // namespace detail

inline void affinity_on_next_touch(void* addr, std::size_t bytes, const next_touch_options& options,
                                   std::error_code& ec) noexcept {
  ec.clear();
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span) || !detail::valid_chunk(detail::effective_chunk(options, span.pages))) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  if (span.pages == 0) return;
  detail::arm_range(span.first, span.first + span.bytes(), detail::effective_chunk(options, span.pages),
                    options.target == next_touch_target::toucher_homenode ? detail::touch_target::toucher_homenode
                                                                          : detail::touch_target::toucher_node,
                    options.adaptive, options.max_adaptive_chunks, nullptr, ec);
}

namespace detail {

/// Arms a validated range in owner mode. Allocates the page table (std::bad_alloc).
inline void arm_for_owners(void* addr, std::size_t bytes, std::size_t block_bytes, const std::vector<node_id>& owners,
                           const next_touch_options& options, const page_span& span, std::error_code& ec) {
  const auto base = reinterpret_cast<std::uintptr_t>(addr);
  std::vector<std::uint16_t> page_nodes(span.pages);
  for (std::size_t i = 0; i < span.pages; ++i) {
    const node_id owner = page_owner(base, block_bytes, owners, span.first + i * page_size());
    page_nodes[i] = owner == keep_in_place ? page_node_keep : static_cast<std::uint16_t>(owner);
  }
  arm_range(span.first, span.first + span.bytes(), effective_chunk(options, span.pages), touch_target::toucher_node,
            options.adaptive, options.max_adaptive_chunks, page_nodes.data(), ec);
  if (ec) return;  // refused before anything changed
  // Split where owners meet once armed (a range arming refuses is left as it was); a touch
  // in between splits there itself before migrating (split_where_targets_meet).
  std::vector<std::uintptr_t> cuts;
  owner_boundaries(base, bytes, block_bytes, owners, cuts);
  split_huge_pages(cuts.data(), cuts.size());
}

}  // namespace detail

inline void place_blocks_on_next_touch(void* addr, std::size_t bytes, std::size_t block_bytes,
                                       const std::vector<node_id>& owners, const next_touch_options& options,
                                       std::error_code& ec) noexcept {
  ec.clear();
  detail::page_span span;
  try {
    if (!detail::make_span(addr, bytes, span) || !detail::valid_chunk(detail::effective_chunk(options, span.pages)) ||
        !detail::owners_error(bytes, block_bytes, owners).empty()) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    if (span.pages != 0) detail::arm_for_owners(addr, bytes, block_bytes, owners, options, span, ec);
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}

inline void affinity_on_next_touch(void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  affinity_on_next_touch(addr, bytes, next_touch_options{}, ec);
}

inline void affinity_on_next_touch(void* addr, std::size_t bytes, const next_touch_options& options) {
  detail::require_range("affinity_on_next_touch", addr, bytes);
  if (options.chunk_bytes != 0) detail::require_chunk("affinity_on_next_touch", options.chunk_bytes);
  detail::arm_or_throw("affinity_on_next_touch", [&](std::error_code& ec) { affinity_on_next_touch(addr, bytes, options, ec); });
}

inline void affinity_on_next_touch(void* addr, std::size_t bytes) {
  affinity_on_next_touch(addr, bytes, next_touch_options{});
}

inline void place_blocks_on_next_touch(void* addr, std::size_t bytes, std::size_t block_bytes,
                                       const std::vector<node_id>& owners, const next_touch_options& options) {
  detail::require_range("place_blocks_on_next_touch", addr, bytes);
  const std::string why = detail::owners_error(bytes, block_bytes, owners);
  if (!why.empty()) detail::throw_invalid_argument("place_blocks_on_next_touch: " + why);
  if (options.chunk_bytes != 0) detail::require_chunk("place_blocks_on_next_touch", options.chunk_bytes);
  detail::page_span span;
  detail::make_span(addr, bytes, span);
  if (span.pages == 0) return;
  detail::arm_or_throw("place_blocks_on_next_touch", [&](std::error_code& ec) {
    detail::arm_for_owners(addr, bytes, block_bytes, owners, options, span, ec);  // std::bad_alloc as it is
  });
}

inline void disarm(void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  ec.clear();
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  if (span.pages != 0) detail::disarm_range(span.first, span.first + span.bytes());
}

inline void disarm(void* addr, std::size_t bytes) {
  detail::require_range("disarm", addr, bytes);
  std::error_code ec;
  disarm(addr, bytes, ec);
}

inline void touch_now(void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  ec.clear();
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  if (span.pages != 0) detail::touch_range(span.first, span.first + span.bytes(), ec);
}

inline void touch_now(void* addr, std::size_t bytes) {
  detail::require_range("touch_now", addr, bytes);
  detail::or_throw("touch_now", [&](std::error_code& ec) { touch_now(addr, bytes, ec); });
}

inline bool is_armed(const void* addr, std::size_t bytes) noexcept {
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span) || span.pages == 0) return false;
  return detail::range_is_armed(span.first, span.first + span.bytes());
}

inline next_touch_statistics next_touch_stats() noexcept {
  const detail::next_touch_counters& c = detail::nt_counters;
  next_touch_statistics s;
  s.faults = c.faults.load(std::memory_order_relaxed);
  s.chunks_migrated = c.chunks.load(std::memory_order_relaxed);
  s.pages_moved = c.pages_moved.load(std::memory_order_relaxed);
  s.pages_already_there = c.pages_already_there.load(std::memory_order_relaxed);
  s.pages_failed = c.pages_failed.load(std::memory_order_relaxed);
  s.pages_unpopulated = c.pages_unpopulated.load(std::memory_order_relaxed);
  s.widenings = c.widened.load(std::memory_order_relaxed);
  s.waits = c.waits.load(std::memory_order_relaxed);
  s.chunks_released = c.released.load(std::memory_order_relaxed);
  s.handler_time = std::chrono::nanoseconds(c.handler_ns.load(std::memory_order_relaxed));
  return s;
}

inline void reset_next_touch_stats() noexcept {
  detail::next_touch_counters& c = detail::nt_counters;
  for (auto* a : {&c.faults, &c.chunks, &c.pages_moved, &c.pages_already_there, &c.pages_failed, &c.pages_unpopulated, &c.widened, &c.waits,
                  &c.handler_ns, &c.released})
    a->store(0, std::memory_order_relaxed);
}

}  // namespace numaaff
