/**
 * @file counters.hpp
 * @brief Live per-node counters of a numaaff process, readable in the process and from others.
 *
 * The model: numaaff counts what it does per NUMA node as it works (the tasks each node's
 * workers ran, stole and waited, the faults next-touch handled there and the chunks and
 * pages it moved to it, the pages move_to/place_blocks moved to it, what the heap holds
 * there) at a cost of at most one relaxed increment per event. From the first numaaff call that counts (a thread_pool, a
 * next-touch arm, a move), a background thread publishes these counters ten times a second
 * to a file, `/dev/shm/numaaff-PID` (mode 0600: the same user reads it), which any process of
 * that user reads while this one runs, without stopping or slowing it: `numaaff-top` does.
 * The file is removed at exit (but for a process whose parent named itself in
 * NUMAAFF_COUNTERS_KEEP_FOR: that launcher reads the final image after the exit and removes
 * it); one left by a process that died is removed by its next reader.
 * `NUMAAFF_COUNTERS=off` publishes nothing (snapshot() still works in the process);
 * `NUMAAFF_COUNTERS_DIR` names another directory. Counters only grow (heap bytes and queue
 * lengths are levels); rates are differences between two snapshots.
 *
 * @code{.cpp}
 * numaaff::counter_snapshot s = numaaff::snapshot();          // this process
 * for (const numaaff::node_counters& n : s.nodes)
 *   std::printf("node %d: %llu tasks\n", n.node, (unsigned long long)n.tasks_run);
 * numaaff::counter_snapshot other = numaaff::snapshot(pid);   // another numaaff process
 * @endcode
 *
 * ## The segment format (version 1), for tools in any language
 * An array of native-endian unsigned 64-bit words; offsets and counts are in words.
 * Header, word: 0 magic "NUMAAFFC" (8 bytes), 1 format version (1), 2 header words (16),
 * 3 total words (the file is exactly this long), 4 sequence (odd while the writer copies: read
 * the file, then this word again, and keep the copy only when both reads are the same even
 * number), 5 pid, 6 start time of the process (clock ticks after boot, /proc/PID/stat field
 * 22: a pid is reused, a pid and its start time are not), 7 CLOCK_MONOTONIC ns of the last
 * copy, 8 ns between copies, 9 node count N, 10 words per node row, 11 words of the process
 * section, 12 offset of the process section, 13 offset of the node rows, 14 offset of the
 * N x N steal matrix (0: not written, for more than 64 nodes), 15 reserved.
 * Process section: 0-1 command name (16 bytes, NUL-padded), 2 CLOCK_MONOTONIC ns when counting
 * began, 3 live thread pools, 4 their workers, 5-10 the refusal_statistics fields in their
 * order.
 * Node row: 0 kernel node number, 1 live workers, 2 tasks run, 3 tasks taken from a sibling
 * worker of the node, 4 tasks taken from another node (stolen in), 5 tasks other nodes took
 * from this one (stolen out), 6 worker sleeps, 7 workers' lifetime ns (summed), 8 of which
 * idle ns (searching or asleep), 9 tasks waiting now, 10 next-touch chunks migrated to the
 * node, 11 pages they moved there, 12 pages already there, 13 pages that failed to move,
 * 14 pages move_to/place_blocks/promote/demote moved to the node, 15 pages they could not
 * move there, 16 heap bytes held bound to the node, 17 heap bytes held preferring it (the
 * heap's slabs for small blocks, mapped for the process's life, and its live large blocks; an
 * interleaved block counts on each node it is interleaved over, by weight, a tier block that
 * spilled on the node of each of its segments),
 * 18 next-touch faults handled for threads running on the node (the thread that opened a
 * chunk, and each fault of one that touched it meanwhile and waited), 19-23 the heap's bytes
 * of words 16 and 17 by the kind its blocks were asked for as: on a node, local, interleave,
 * fastest, capacity (kind::target's order; the allocators of allocator.hpp count as the kind
 * they place like: node_allocator as on a node, local_allocator as local, interleave_allocator
 * as interleave, tier_allocator as capacity for memory_attribute::capacity, else as fastest;
 * in C, numaaff_alloc_onnode as on a node, numaaff_alloc_local as local; hbw_malloc's BIND
 * blocks as on a node, the caller's high-bandwidth one, its PREFERRED ones as fastest, its
 * INTERLEAVE ones as interleave).
 * Words 18-23 came after the format's first rows: a reader takes a word a row lacks (a row
 * of 18 words, or of 19 from before the heap's kinds) as 0.
 * Steal matrix: word [t * N + v] counts tasks workers of node row t took from node row v.
 * Versions add words at the end of each part (a reader uses the sizes of the header, not its
 * own); any other change gets a new version number, which an older reader refuses.
 */
#pragma once

#include "detail/counter_segment.hpp"
#include "errors.hpp"
#include "system_report.hpp"
#include "topology.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff {

/// One node's counters (see the file comment for what each counts).
struct node_counters {
  node_id node = -1;
  std::uint64_t workers = 0;       ///< live workers of numaaff thread pools on the node
  std::uint64_t tasks_run = 0;     ///< tasks its workers ran
  std::uint64_t stolen_local = 0;  ///< tasks its workers took from a sibling on the node
  std::uint64_t stolen_in = 0;     ///< tasks its workers took from another node
  std::uint64_t stolen_out = 0;    ///< tasks other nodes' workers took from it
  std::uint64_t sleeps = 0;        ///< times one of its workers went to sleep
  std::chrono::nanoseconds worker_time{0};  ///< lifetime of its workers, summed
  std::chrono::nanoseconds idle_time{0};    ///< of which idle: searching for work or asleep
  std::uint64_t queued = 0;                 ///< tasks waiting to run there now (a level)
  std::uint64_t next_touch_chunks = 0;      ///< next-touch chunks migrated to the node
  std::uint64_t next_touch_pages_moved = 0;
  std::uint64_t next_touch_pages_already_there = 0;
  std::uint64_t next_touch_pages_failed = 0;
  std::uint64_t pages_moved = 0;      ///< moved there by move_to, place_blocks, promote, demote
  std::uint64_t pages_not_moved = 0;  ///< that those calls could not move there
  /// Heap memory held bound to the node (a level): its slabs for small blocks, mapped for the
  /// process's life, and its live large blocks (an interleaved one for its share of each node,
  /// a tier block that spilled for its segment there).
  std::uint64_t heap_bound_bytes = 0;
  std::uint64_t heap_preferred_bytes = 0;  ///< the same, preferring the node
  /// heap_bound_bytes + heap_preferred_bytes by the kind the blocks were asked for as (see the
  /// format's words 19-23 for the allocators' kinds). Small blocks of different kinds never
  /// share a slab, so every byte counts for exactly one kind.
  struct heap_kinds {
    std::uint64_t node = 0, local = 0, interleave = 0, fastest = 0, capacity = 0;
  } heap_by_kind;
  /// Next-touch faults handled for threads running on the node: the thread that opened a
  /// chunk, and each fault of a thread that touched it meanwhile and waited (a waiter may
  /// fault again before the chunk is open): next_touch_stats().faults, per node.
  std::uint64_t next_touch_faults = 0;
};

/// The counters of one process at one moment.
struct counter_snapshot {
  long pid = 0;
  std::string command;                     ///< the process's command name (comm)
  std::chrono::nanoseconds taken_at{0};    ///< CLOCK_MONOTONIC when the counters were read
  std::chrono::nanoseconds started_at{0};  ///< CLOCK_MONOTONIC when counting began
  std::uint64_t pools = 0, workers = 0;    ///< live thread pools and their workers
  refusal_statistics refusals;
  std::vector<node_counters> nodes;          ///< the kernel's nodes, ascending
  /// [t * nodes.size() + v]: tasks workers of nodes[t] took from nodes[v]; empty when the
  /// process has more than 64 nodes.
  std::vector<std::uint64_t> steals;

  /// The row of node `n`, or nullptr.
  const node_counters* node(node_id n) const noexcept {
    for (const node_counters& c : nodes)
      if (c.node == n) return &c;
    return nullptr;
  }
  /// Tasks workers of `thief` took from `victim` (0 when either is unknown or not recorded).
  std::uint64_t stolen_between(node_id thief, node_id victim) const noexcept {
    std::size_t t = nodes.size(), v = nodes.size();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].node == thief) t = i;
      if (nodes[i].node == victim) v = i;
    }
    return t < nodes.size() && v < nodes.size() && steals.size() == nodes.size() * nodes.size() ? steals[t * nodes.size() + v] : 0;
  }
};

/// Whether and where this process publishes its counters.
struct counters_publication {
  bool published = false;  ///< the segment exists and is kept current
  std::string path;        ///< the segment, when published
  std::string why_not;     ///< when not: NUMAAFF_COUNTERS=off, not started yet, or the failure
};

namespace detail {
inline counter_snapshot snapshot_of(const parsed_image& m) {
  using namespace image;
  counter_snapshot s;
  s.pid = static_cast<long>(m.pid);
  char comm[17] = {};
  std::memcpy(comm, &m.process[p_comm0], 16);
  s.command = comm;
  s.taken_at = std::chrono::nanoseconds(m.published_ns);
  s.started_at = std::chrono::nanoseconds(m.process[p_started_ns]);
  s.pools = m.process[p_pools];
  s.workers = m.process[p_workers];
  s.refusals.policies_skipped = m.process[p_refused_policies];
  s.refusals.mappings_unbound = m.process[p_refused_mappings];
  s.refusals.pages_unmoved = m.process[p_refused_pages];
  s.refusals.threads_unpinned = m.process[p_refused_pinnings];
  s.refusals.weighted_fallbacks = m.process[p_weighted_fallbacks];
  s.refusals.huge_page_fallbacks = m.process[p_huge_page_fallbacks];
  for (std::uint64_t i = 0; i < m.node_count; ++i) {
    const std::uint64_t* r = m.nodes + i * m.node_stride;
    node_counters n;
    n.node = static_cast<node_id>(r[n_node]);
    n.workers = r[n_workers];
    n.tasks_run = r[n_tasks_run];
    n.stolen_local = r[n_stolen_local];
    n.stolen_in = r[n_stolen_in];
    n.stolen_out = r[n_stolen_out];
    n.sleeps = r[n_sleeps];
    const std::uint64_t cap = static_cast<std::uint64_t>(INT64_MAX);
    n.worker_time = std::chrono::nanoseconds(static_cast<std::int64_t>(r[n_worker_ns] < cap ? r[n_worker_ns] : cap));
    n.idle_time = std::chrono::nanoseconds(static_cast<std::int64_t>(r[n_idle_ns] < cap ? r[n_idle_ns] : cap));
    n.queued = r[n_queued];
    n.next_touch_chunks = r[n_nt_chunks];
    n.next_touch_pages_moved = r[n_nt_pages_moved];
    n.next_touch_pages_already_there = r[n_nt_pages_already];
    n.next_touch_pages_failed = r[n_nt_pages_failed];
    n.pages_moved = r[n_pages_moved];
    n.pages_not_moved = r[n_pages_not_moved];
    n.heap_bound_bytes = r[n_heap_bound_bytes];
    n.heap_preferred_bytes = r[n_heap_preferred_bytes];
    // An older writer's row may end before these words: they read as 0.
    const auto word = [&](std::size_t w) { return m.node_stride > w ? r[w] : 0; };
    n.next_touch_faults = word(n_nt_faults);
    n.heap_by_kind.node = word(n_heap_kind_bytes + static_cast<std::size_t>(heap_kind::node));
    n.heap_by_kind.local = word(n_heap_kind_bytes + static_cast<std::size_t>(heap_kind::local));
    n.heap_by_kind.interleave = word(n_heap_kind_bytes + static_cast<std::size_t>(heap_kind::interleave));
    n.heap_by_kind.fastest = word(n_heap_kind_bytes + static_cast<std::size_t>(heap_kind::fastest));
    n.heap_by_kind.capacity = word(n_heap_kind_bytes + static_cast<std::size_t>(heap_kind::capacity));
    s.nodes.push_back(n);
  }
  if (m.steals != nullptr) s.steals.assign(m.steals, m.steals + m.node_count * m.node_count);
  return s;
}
}  // namespace detail

/**
 * This process's counters now. Starts publishing them if nothing has yet.
 * Thread-safe; allocates; takes the registry's lock of live pools for a moment (never a
 * pool's own lock: workers keep running). On a one-node machine: one row.
 * @throws std::bad_alloc.
 */
inline counter_snapshot snapshot() {
  detail::publish_counters();
  std::vector<std::uint64_t> words;
  const long pid = static_cast<long>(::getpid());
  detail::collect_image(words, pid, 0, detail::counter_publish_interval_ns, detail::process_comm(), detail::counting_started_ns());
  words[detail::image::h_published_ns] = detail::monotonic_ns();
  detail::parsed_image m;
  std::string why;
  if (!detail::parse_image(words.data(), words.size(), m, why)) detail::abort_with_message(("numaaff::snapshot: " + why).c_str());
  return detail::snapshot_of(m);
}

/**
 * The counters another numaaff process published (or this one's, as published), read from
 * its segment without stopping it. Every word is validated: a truncated, corrupt or hostile
 * segment, or one of another format version, is an error, never a crash or an out-of-range
 * figure. Thread-safe; allocates; blocks at most about 10 ms while the writer copies.
 * @param pid the process (any user's: another user's segment is not readable).
 * @param ec ENOENT: `pid` publishes no counters here (not numaaff, NUMAAFF_COUNTERS=off, or
 *        another user's: EACCES); ESRCH: the process is gone (its file is removed when it is
 *        this user's); errc::bad_counter_segment: unreadable content.
 */
inline counter_snapshot snapshot(long pid, std::error_code& ec) noexcept {
  try {
    std::vector<std::uint64_t> words;
    detail::parsed_image m;
    std::string why;
    if (!detail::read_segment(detail::counters_directory(), pid, words, m, why, ec)) return {};
    return detail::snapshot_of(m);
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return {};
  }
}

/// The same. @throws std::system_error with the reason and the segment's path.
inline counter_snapshot snapshot(long pid) {
  std::vector<std::uint64_t> words;
  detail::parsed_image m;
  std::string why;
  std::error_code ec;
  if (!detail::read_segment(detail::counters_directory(), pid, words, m, why, ec))
    throw std::system_error(ec, "numaaff::snapshot: " + why);
  return detail::snapshot_of(m);
}

/**
 * One process's published counters read from its segment held open, so that its last image
 * stays readable after the process ended (a numaaff process publishes a final image at exit,
 * with its final counts): what a launcher that waits for its command uses. Every read is
 * validated as snapshot(pid)'s. Not copyable; movable. A read is thread-safe.
 */
class counter_reader {
 public:
  counter_reader() = default;
  /// Opens the segment of `pid`. @param pid the process. @param ec ENOENT while `pid` publishes nothing (not yet, or
  /// never), EACCES for another user's.
  counter_reader(long pid, std::error_code& ec) : pid_(pid) {
    std::string why;
    fd_ = detail::open_segment(detail::counters_directory(), pid, why, ec);
  }
  counter_reader(const counter_reader&) = delete;
  counter_reader& operator=(const counter_reader&) = delete;
  counter_reader(counter_reader&& o) noexcept : pid_(o.pid_), fd_(o.fd_) { o.fd_ = -1; }
  counter_reader& operator=(counter_reader&& o) noexcept {
    if (this != &o) {
      close();
      pid_ = o.pid_;
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  ~counter_reader() { close(); }

  bool is_open() const noexcept { return fd_ >= 0; }
  long pid() const noexcept { return pid_; }
  /// Removes the segment's file (the reader stays open), when it is this user's and its process
  /// is gone: what a launcher does with the file its child left for it (see the file comment).
  void discard() const noexcept {
    struct stat st {};
    if (fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_uid == ::geteuid() && ::kill(static_cast<pid_t>(pid_), 0) != 0 && errno == ESRCH)
      ::unlink(detail::counter_file_of(detail::counters_directory(), pid_).c_str());
  }
  /// The counters as last published, whether the process still runs or not.
  /// @param ec EBADF when not open; errc::bad_counter_segment for unreadable content.
  counter_snapshot read(std::error_code& ec) const noexcept {
    if (fd_ < 0) {
      ec = std::make_error_code(std::errc::bad_file_descriptor);
      return {};
    }
    try {
      std::vector<std::uint64_t> words;
      detail::parsed_image m;
      std::string why;
      if (!detail::read_open_segment(fd_, detail::counter_file_of(detail::counters_directory(), pid_), pid_, false, words, m,
                                     why, ec))
        return {};
      return detail::snapshot_of(m);
    } catch (const std::bad_alloc&) {
      ec = std::make_error_code(std::errc::not_enough_memory);
      return {};
    }
  }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  long pid_ = 0;
  int fd_ = -1;
};

/**
 * The processes of this user (the effective uid) that publish counters now, ascending. Another
 * user's segment is not listed even when it is readable: what numaaff-top sums and follows by
 * name must be this user's processes, not figures another user chose (snapshot(pid) still
 * reads a readable one asked for by its pid). Files left by this user's processes that are
 * gone are removed on the way. Thread-safe; allocates.
 */
inline std::vector<long> counter_processes() {
  std::vector<long> out;
  const std::string dir = detail::counters_directory();
  for (long pid : detail::segment_pids(dir)) {
    struct stat st {};
    if (::lstat(detail::counter_file_of(dir, pid).c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid())
      continue;  // not read at all: another user's file costs no read of its contents
    std::vector<std::uint64_t> words;
    detail::parsed_image m;
    std::string why;
    std::error_code ec;
    if (detail::read_segment(dir, pid, words, m, why, ec)) out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Whether this process publishes its counters, where, or why not. Thread-safe.
inline counters_publication counters_status() {
  detail::counter_publisher& p = detail::publisher();
  std::lock_guard<std::mutex> l(p.start_lock);
  counters_publication c;
  using st = detail::counter_publisher::state;
  switch (static_cast<st>(p.st.load(std::memory_order_acquire))) {
    case st::publishing:
      c.published = true;
      c.path = p.path;
      break;
    case st::idle: c.why_not = "not started: nothing has counted yet"; break;
    case st::off:
    case st::failed: c.why_not = p.why; break;
  }
  return c;
}

}  // namespace numaaff
