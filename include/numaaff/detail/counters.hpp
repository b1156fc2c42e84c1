// The process's live counters and their image: what numaaff counts per node as it works, and
// the versioned, self-describing array of 64-bit words that another process reads (the format
// is documented for users in counters.hpp; this file is its one writer and its one reader).
//
// Counting costs at most one relaxed increment per event, in memory of the process itself:
// - events of any thread (next-touch chunks, moved pages, heap mappings) go to node_events, a
//   constant-initialised table indexed by kernel node number (async-signal-safe: the
//   next-touch handler counts into it);
// - a thread pool's workers count into their own pool_worker fields (one writer each, no
//   read-modify-write); live pools register a counter_source, and a pool that ends adds its
//   totals to node_events, under the registry's lock, so totals never go backwards.
// collect_image() sums all of it into an image; the publisher (counter_segment.hpp) copies
// images into a shared file ten times a second, and snapshot() reads one directly.
#pragma once

#include "futex.hpp"
#include "kernel_nodes.hpp"
#include "numa_calls.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace numaaff::detail {

/// Kernel node numbers the tables have room for (the kernel's MAX_NUMNODES at NODES_SHIFT 10).
constexpr std::size_t counter_node_limit = 1024;

/// What a heap block was asked for as, in kind::target's order (and the C API's
/// NUMAAFF_KIND_TARGET_* values): the heap keeps each in slabs of its own, and counts its bytes
/// per node apart. The allocators of allocator.hpp count as the kind they place like.
enum class heap_kind : unsigned char { node, local, interleave, fastest, capacity };
constexpr std::size_t heap_kind_count = 5;

/// Per-node events of any thread, and the totals of pools that have ended. Relaxed atomics.
struct node_event_counters {
  // totals of thread pools that ended (live pools are read from their workers)
  std::atomic<std::uint64_t> tasks_run{0}, stolen_local{0}, stolen_in{0}, stolen_out{0}, sleeps{0}, worker_ns{0}, idle_ns{0};
  // next-touch: chunks and pages counted for the node the chunk's pages were sent to, faults
  // (those the handler took as its own, as next_touch_stats().faults) for the node of the
  // faulting thread's CPU
  std::atomic<std::uint64_t> nt_chunks{0}, nt_pages_moved{0}, nt_pages_already{0}, nt_pages_failed{0}, nt_faults{0};
  // move_to, place_blocks, promote and demote: pages moved to this node, and pages that could not be
  std::atomic<std::uint64_t> pages_moved{0}, pages_not_moved{0};
  // bytes the heap holds on this node, bound (strict kinds) and preferred, and the same bytes
  // by the kind they were asked for as (count_heap_bytes)
  std::atomic<std::int64_t> heap_bound_bytes{0}, heap_preferred_bytes{0};
  std::atomic<std::int64_t> heap_kind_bytes[heap_kind_count] = {};
};
inline node_event_counters node_events[counter_node_limit];
/// Tasks the workers of node slot t took from node slot v in pools that ended ([t * 64 + v];
/// slots of kernel_nodes(), the first 64).
inline std::atomic<std::uint64_t> retired_steals[64 * 64];

inline node_event_counters* events_of(int node) noexcept {
  return node >= 0 && static_cast<std::size_t>(node) < counter_node_limit ? &node_events[node] : nullptr;
}
inline void count_event(std::atomic<std::uint64_t> node_event_counters::*field, int node, std::uint64_t n) noexcept {
  if (n == 0) return;
  if (node_event_counters* e = events_of(node)) (e->*field).fetch_add(n, std::memory_order_relaxed);
}
/// The heap: `bytes` more (or fewer, negative) held on `node`, strict or preferred, for blocks
/// of kind `kind`. Counted are the slabs it mapped for small blocks (for the process's life)
/// and its live large blocks.
inline void count_heap_bytes(int node, bool strict, heap_kind kind, std::int64_t bytes) noexcept {
  if (node_event_counters* e = events_of(node)) {
    (strict ? e->heap_bound_bytes : e->heap_preferred_bytes).fetch_add(bytes, std::memory_order_relaxed);
    e->heap_kind_bytes[static_cast<std::size_t>(kind)].fetch_add(bytes, std::memory_order_relaxed);
  }
}

// ---- the image (format version 1) ----------------------------------------------------------
// Words are native-endian 64-bit unsigned integers; offsets and counts are in words.
namespace image {
constexpr char magic[8] = {'N', 'U', 'M', 'A', 'A', 'F', 'F', 'C'};
constexpr std::uint64_t version = 1;
enum header_word : std::size_t {
  h_magic, h_version, h_header_words, h_total_words, h_sequence, h_pid, h_start_time, h_published_ns,
  h_interval_ns, h_node_count, h_node_words, h_process_words, h_process_offset, h_nodes_offset,
  h_steals_offset, h_reserved, header_words
};
enum process_word : std::size_t {
  p_comm0, p_comm1, p_started_ns, p_pools, p_workers, p_refused_policies, p_refused_mappings, p_refused_pages,
  p_refused_pinnings, p_weighted_fallbacks, p_huge_page_fallbacks, process_words
};
enum node_word : std::size_t {
  n_node, n_workers, n_tasks_run, n_stolen_local, n_stolen_in, n_stolen_out, n_sleeps, n_worker_ns, n_idle_ns,
  n_queued, n_nt_chunks, n_nt_pages_moved, n_nt_pages_already, n_nt_pages_failed, n_pages_moved,
  n_pages_not_moved, n_heap_bound_bytes, n_heap_preferred_bytes, n_nt_faults,
  n_heap_kind_bytes,  // heap_kind_count words: the heap's bytes by heap_kind
  node_words = n_heap_kind_bytes + heap_kind_count
};
/// The node row as format 1 was first written, before n_nt_faults: the least a reader takes.
/// Words added since are read where a row has them, else count as zero.
constexpr std::uint64_t first_node_words = n_nt_faults;
/// Limits a reader enforces: larger counts are a hostile or corrupt segment.
constexpr std::uint64_t max_nodes = counter_node_limit, max_fields = 4096;
/// The node-to-node steal matrix is written for up to this many nodes.
constexpr std::size_t max_matrix_nodes = 64;  // retired_steals' side
}  // namespace image

/// A live thread pool's counters, summed into an image by the publisher and snapshot().
class counter_source {
 public:
  /// Adds the pool's figures to `rows` (node_words per slot of kernel_nodes()) and `steals`
  /// (slot x slot, thief row), with `slot_of(kernel node)` (-1: not counted). Called with the
  /// registry's lock held; must not take it.
  virtual void add_counters(std::uint64_t* rows, std::uint64_t* steals, std::size_t slots,
                            const std::vector<int>& slot_of, std::uint64_t now) const noexcept = 0;

 protected:
  ~counter_source() = default;
};

/// The live pools. Never destroyed (a detached publisher may read it during exit); fork-safe
/// (the child's copy is unlocked by the atfork handler in counter_segment.hpp).
struct counter_registry {
  std::mutex lock;
  std::vector<const counter_source*> sources;
};
inline counter_registry& registry_of_counters() {
  static counter_registry* r = new counter_registry;  // leaked on purpose: see above
  return *r;
}
inline void register_counters(const counter_source* s) {
  counter_registry& r = registry_of_counters();
  std::lock_guard<std::mutex> l(r.lock);
  r.sources.push_back(s);
}
/// Removes `s`; `retire()` runs under the same lock, so a reader sees a pool's figures either
/// live or in node_events, never both and never neither.
template <class Retire>
void unregister_counters(const counter_source* s, Retire&& retire) noexcept {
  counter_registry& r = registry_of_counters();
  std::lock_guard<std::mutex> l(r.lock);
  retire();
  for (std::size_t i = 0; i < r.sources.size(); ++i)
    if (r.sources[i] == s) {
      r.sources[i] = r.sources.back();
      r.sources.pop_back();
      break;
    }
}

/// When the process's counters began: its static initialisation.
inline std::uint64_t counters_started_ns() noexcept {
  static const std::uint64_t t = monotonic_ns();
  return t;
}

/// Kernel node number -> its row in the image (-1: none), for every number below the limit.
inline const std::vector<int>& counter_slots() {
  static const std::vector<int> slots = [] {
    const std::vector<int>& nodes = kernel_nodes();
    std::vector<int> s(counter_node_limit, -1);
    for (std::size_t i = 0; i < nodes.size() && i < image::max_nodes; ++i)
      if (nodes[i] >= 0 && static_cast<std::size_t>(nodes[i]) < counter_node_limit) s[static_cast<std::size_t>(nodes[i])] = static_cast<int>(i);
    return s;
  }();
  return slots;
}

/// The calling process's start time in clock ticks after boot (field 22 of /proc/PID/stat),
/// 0 if unreadable. Together with the pid it names one process: pids are reused.
inline std::uint64_t process_start_time(long pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  char buf[1024];
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return 0;
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may hold spaces and ')': skip to the last.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  for (int field = 2; field < 22 && *p != '\0'; ++p)
    if (*p == ' ') ++field;
  return std::strtoull(p, nullptr, 10);
}

/// The calling process's command name (/proc/self/comm), at most 15 characters.
inline std::string process_comm() {
  char name[32] = {};
  if (std::FILE* f = std::fopen("/proc/self/comm", "re")) {
    if (std::fgets(name, sizeof name, f) == nullptr) name[0] = '\0';
    std::fclose(f);
  }
  name[std::strcspn(name, "\n")] = '\0';
  name[15] = '\0';
  return name;
}

/// The image of this process's counters now, sequence word 0, in `out` (resized). `started_ns`:
/// when this process's counting began (a forked child's begins at its first call that counts).
inline void collect_image(std::vector<std::uint64_t>& out, long pid, std::uint64_t start_time,
                          std::uint64_t interval_ns, const std::string& comm, std::uint64_t started_ns) {
  using namespace image;
  const std::vector<int>& nodes = kernel_nodes();
  const std::size_t slots = nodes.size() < max_nodes ? nodes.size() : max_nodes;
  const std::size_t matrix = slots <= max_matrix_nodes ? slots * slots : 0;
  const std::size_t process_at = header_words, nodes_at = process_at + process_words,
                    steals_at = nodes_at + slots * node_words, total = steals_at + matrix;
  out.assign(total, 0);
  std::uint64_t* h = out.data();
  std::memcpy(&h[h_magic], magic, sizeof magic);
  h[h_version] = version;
  h[h_header_words] = header_words;
  h[h_total_words] = total;
  h[h_pid] = static_cast<std::uint64_t>(pid);
  h[h_start_time] = start_time;
  h[h_interval_ns] = interval_ns;
  h[h_node_count] = slots;
  h[h_node_words] = node_words;
  h[h_process_words] = process_words;
  h[h_process_offset] = process_at;
  h[h_nodes_offset] = nodes_at;
  h[h_steals_offset] = matrix != 0 ? steals_at : 0;

  const std::vector<int>& slot_of = counter_slots();
  std::uint64_t* rows = h + nodes_at;
  std::vector<std::uint64_t> steals(slots * slots, 0);
  const std::uint64_t now = monotonic_ns();
  std::uint64_t* p = h + process_at;
  std::memcpy(&p[p_comm0], comm.data(), comm.size() < 16 ? comm.size() : 16);
  p[p_started_ns] = started_ns;
  {
    counter_registry& r = registry_of_counters();
    std::lock_guard<std::mutex> l(r.lock);
    p[p_pools] = r.sources.size();
    for (const counter_source* s : r.sources) s->add_counters(rows, steals.data(), slots, slot_of, now);
    // Ended pools' totals are added under the same lock as they are retired.
    for (std::size_t i = 0; i < slots; ++i) {
      const node_event_counters* e = events_of(nodes[i]);
      if (e == nullptr) continue;
      std::uint64_t* row = rows + i * node_words;
      row[n_tasks_run] += e->tasks_run.load(std::memory_order_relaxed);
      row[n_stolen_local] += e->stolen_local.load(std::memory_order_relaxed);
      row[n_stolen_in] += e->stolen_in.load(std::memory_order_relaxed);
      row[n_stolen_out] += e->stolen_out.load(std::memory_order_relaxed);
      row[n_sleeps] += e->sleeps.load(std::memory_order_relaxed);
      row[n_worker_ns] += e->worker_ns.load(std::memory_order_relaxed);
      row[n_idle_ns] += e->idle_ns.load(std::memory_order_relaxed);
    }
  }
  for (std::size_t i = 0; i < slots; ++i) {
    std::uint64_t* row = rows + i * node_words;
    row[n_node] = static_cast<std::uint64_t>(nodes[i]);
    p[p_workers] += row[n_workers];
    const node_event_counters* e = events_of(nodes[i]);
    if (e == nullptr) continue;
    row[n_nt_chunks] = e->nt_chunks.load(std::memory_order_relaxed);
    row[n_nt_pages_moved] = e->nt_pages_moved.load(std::memory_order_relaxed);
    row[n_nt_pages_already] = e->nt_pages_already.load(std::memory_order_relaxed);
    row[n_nt_pages_failed] = e->nt_pages_failed.load(std::memory_order_relaxed);
    row[n_nt_faults] = e->nt_faults.load(std::memory_order_relaxed);
    row[n_pages_moved] = e->pages_moved.load(std::memory_order_relaxed);
    row[n_pages_not_moved] = e->pages_not_moved.load(std::memory_order_relaxed);
    const std::int64_t bound = e->heap_bound_bytes.load(std::memory_order_relaxed);
    const std::int64_t preferred = e->heap_preferred_bytes.load(std::memory_order_relaxed);
    row[n_heap_bound_bytes] = bound > 0 ? static_cast<std::uint64_t>(bound) : 0;
    row[n_heap_preferred_bytes] = preferred > 0 ? static_cast<std::uint64_t>(preferred) : 0;
    for (std::size_t k = 0; k < heap_kind_count; ++k) {
      const std::int64_t held = e->heap_kind_bytes[k].load(std::memory_order_relaxed);
      row[n_heap_kind_bytes + k] = held > 0 ? static_cast<std::uint64_t>(held) : 0;
    }
  }
  if (matrix != 0) {
    for (std::size_t t = 0; t < slots; ++t)
      for (std::size_t v = 0; v < slots; ++v) steals[t * slots + v] += retired_steals[t * 64 + v].load(std::memory_order_relaxed);
    std::memcpy(h + steals_at, steals.data(), matrix * sizeof(std::uint64_t));
  }
  p[p_refused_policies] = refusals.policies.load(std::memory_order_relaxed);
  p[p_refused_mappings] = refusals.mappings.load(std::memory_order_relaxed);
  p[p_refused_pages] = refusals.pages.load(std::memory_order_relaxed);
  p[p_refused_pinnings] = refusals.pinnings.load(std::memory_order_relaxed);
  p[p_weighted_fallbacks] = refusals.weighted_fallbacks.load(std::memory_order_relaxed);
  p[p_huge_page_fallbacks] = refusals.huge_page_fallbacks.load(std::memory_order_relaxed);
}

/// An image checked against everything the format promises. Fields a newer minor writer
/// appended are kept in the counts but not named.
struct parsed_image {
  std::uint64_t pid = 0, start_time = 0, published_ns = 0, interval_ns = 0;
  std::uint64_t node_count = 0, node_stride = 0, process_stride = 0;
  const std::uint64_t* process = nullptr;  // process_stride words
  const std::uint64_t* nodes = nullptr;    // node_count rows of node_stride words
  const std::uint64_t* steals = nullptr;   // node_count x node_count, or null
};

/// Checks `words` (count `n`) and points `out` into it; false with `why` otherwise. Reads
/// nothing outside [words, words + n) whatever the content says.
inline bool parse_image(const std::uint64_t* words, std::size_t n, parsed_image& out, std::string& why) {
  using namespace image;
  auto fail = [&](std::string w) {
    why = std::move(w);
    return false;
  };
  if (n < header_words) return fail("truncated: " + std::to_string(n * 8) + " bytes is less than a header");
  if (std::memcmp(&words[h_magic], magic, sizeof magic) != 0) return fail("not a numaaff counter segment (bad magic)");
  if (words[h_version] != version)
    return fail("counter format " + std::to_string(words[h_version]) + ", this reader knows format " + std::to_string(version) +
                (words[h_version] > version ? " (written by a newer numaaff)" : " (written by an older numaaff)"));
  const std::uint64_t hw = words[h_header_words], total = words[h_total_words];
  if (hw < header_words || hw > max_fields) return fail("bad header size");
  if (total != n) return fail("size " + std::to_string(n * 8) + " bytes, the header says " + std::to_string(total) + " words");
  if (words[h_sequence] % 2 != 0) return fail("caught in the middle of an update");
  const std::uint64_t nodes = words[h_node_count], nw = words[h_node_words], pw = words[h_process_words];
  if (nodes > max_nodes) return fail("node count " + std::to_string(nodes) + " is more than " + std::to_string(max_nodes));
  if (nw < first_node_words || nw > max_fields) return fail("bad node row size");
  if (pw < process_words || pw > max_fields) return fail("bad process section size");
  // Every section inside the image and after the header; none overlapping another.
  struct section {
    std::uint64_t at, words;
  };
  const section s[3] = {{words[h_process_offset], pw}, {words[h_nodes_offset], nodes * nw},
                        {words[h_steals_offset], words[h_steals_offset] != 0 ? nodes * nodes : 0}};
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && s[i].at == 0) continue;
    if (s[i].at < hw || s[i].at > total || s[i].words > total - s[i].at) return fail("a section lies outside the segment");
    for (int j = 0; j < i; ++j)
      if (s[i].at < s[j].at + s[j].words && s[j].at < s[i].at + s[i].words) return fail("sections overlap");
  }
  out.pid = words[h_pid];
  out.start_time = words[h_start_time];
  out.published_ns = words[h_published_ns];
  out.interval_ns = words[h_interval_ns];
  out.node_count = nodes;
  out.node_stride = nw;
  out.process_stride = pw;
  out.process = words + s[0].at;
  out.nodes = words + s[1].at;
  out.steals = s[2].at != 0 ? words + s[2].at : nullptr;
  for (std::uint64_t i = 0; i < nodes; ++i)
    if (out.nodes[i * nw + n_node] >= counter_node_limit) return fail("a node number is out of range");
  return true;
}

}  // namespace numaaff::detail
