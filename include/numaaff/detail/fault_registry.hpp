// The state behind affinity_on_next_touch: a fixed-capacity table of armed ranges, one 32-bit
// word per chunk, process-wide counters, and the code the SIGSEGV handler runs for a fault on
// an armed chunk. Everything the handler touches is preallocated and lock-free; it calls only
// mprotect, move_pages, mincore, process_vm_readv, gettid, getcpu, futex, sched_yield and
// clock_gettime, all plain system calls (bound before the first fault: signal_handler.hpp).
//
// Chunk word: bits 0-7 state, bits 8-23 node+1 of the thread that claimed it (adaptive
// granularity looks at its neighbours), bit 31 "someone waits on the futex".
//   armed --claim (CAS, one winner)--> claimed --mprotect RW--> moving --move_pages--> open
// Threads faulting on a claimed chunk sleep on its futex until it is unprotected, then retry
// the access; threads faulting on a moving or open chunk retry once (the kernel serialises
// accesses with the migration itself, so no write is lost). A chunk is ours only while it is
// armed or claimed and its mapping is still the one we armed; any other fault goes on to the
// previous handler, at the latest the second time the same thread faults at the same address
// with nothing of ours changed in between (see handle_fault).
#pragma once

#include "counters.hpp"
#include "futex.hpp"
#include "numa_calls.hpp"
#include "page.hpp"
#include "syscall.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>

namespace numaaff::detail {

inline constexpr std::uint32_t chunk_open = 0;
inline constexpr std::uint32_t chunk_armed = 1;
inline constexpr std::uint32_t chunk_claimed = 2;
inline constexpr std::uint32_t chunk_moving = 3;
inline constexpr std::uint32_t chunk_state_mask = 0xff;
inline constexpr std::uint32_t chunk_waiters = 1u << 31;
/// A claim's node + 1 (0: none) sits in bits 8-23 of the chunk word.
inline constexpr unsigned chunk_node_shift = 8;
inline constexpr std::uint32_t chunk_node_mask = 0xffffu << chunk_node_shift;
/// Node bits of a claim made for a whole range (no node can have them).
inline constexpr std::uint32_t range_claim_bits = chunk_node_mask;

inline constexpr int slot_free = 0;
inline constexpr int slot_setup = 1;
inline constexpr int slot_active = 2;
inline constexpr int slot_retiring = 3;  // disarm is opening what is still armed
inline constexpr int slot_draining = 4;  // ... and waits for handlers to leave: words off limits

inline constexpr std::size_t registry_capacity = 4096;
/// Pages per move_pages call in the handler. One call per 128-page chunk is what keeps
/// next-touch cheap (each call drains the LRU caches of every CPU), so the arrays are large
/// (2 KiB) and live in a preallocated pool, not on the handler's stack, which may be a small
/// alternate signal stack.
inline constexpr std::size_t handler_batch = 128;
/// Pages per call when every pooled buffer is in use (256 bytes on the stack).
inline constexpr std::size_t handler_stack_batch = 16;
inline constexpr std::size_t handler_buffer_count = 64;
/// Pages whose residency one mincore call reads while checking a chunk's mapping (one byte
/// each, on the stack).
inline constexpr std::size_t probe_batch = 128;

/// The public next_touch_target as the handler reads it (same enumerators; next_touch.hpp converts).
enum class touch_target : int { toucher_node, toucher_homenode };

struct armed_range {
  std::atomic<int> state{slot_free};
  std::atomic<int> users{0};  // handlers inside this slot right now
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::size_t chunk = 0;  // bytes, a page multiple
  std::size_t count = 0;  // chunks
  std::atomic<std::uint32_t>* words = nullptr;
  std::size_t words_bytes = 0;  // the mapping holding words, then page_nodes
  // Owner mode: the node of each page of [begin, end); opened chunks go there, whoever
  // touches them. Null: they go to the toucher's node (or homenode).
  const std::uint16_t* page_nodes = nullptr;
  touch_target target = touch_target::toucher_node;
  bool adaptive = false;
  std::uint32_t max_run = 1;
  std::atomic<std::uint32_t> run{1};          // adaptive: chunks claimed per fault now
  std::atomic<std::size_t> armed_left{0};     // chunks not yet claimed
  std::atomic<bool> opened_whole{false};      // out of mappings, the whole range was opened
};

struct next_touch_counters {
  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> chunks{0};
  std::atomic<std::uint64_t> pages_moved{0};
  std::atomic<std::uint64_t> pages_already_there{0};
  std::atomic<std::uint64_t> pages_failed{0};
  std::atomic<std::uint64_t> pages_unpopulated{0};
  std::atomic<std::uint64_t> widened{0};
  std::atomic<std::uint64_t> waits{0};
  std::atomic<std::uint64_t> handler_ns{0};
  std::atomic<std::uint64_t> released{0};
};

inline armed_range registry[registry_capacity];
inline std::atomic<std::size_t> registry_high{0};  // every used slot is below this index
inline std::atomic<std::size_t> registry_live{0};  // slots not free
/// Bumped whenever protections we set may have changed: a range armed, a chunk opened, a slot
/// retired. A fault we cannot attribute to an armed chunk is retried once per (thread,
/// address, epoch): if nothing of ours changed since the same thread faulted at the same
/// address, the fault is not ours.
inline std::atomic<std::uint64_t> open_epoch{1};
inline next_touch_counters nt_counters;

/// The last fault this thread retried without finding an armed chunk. Constant-initialised
/// and initial-exec, so the handler reads it without a TLS call that could allocate.
struct retried_fault {
  std::uintptr_t addr = 0;
  std::uint64_t epoch = 0;
};
__attribute__((tls_model("initial-exec"))) inline thread_local retried_fault last_retried_fault;

/// Sets a chunk's state, keeping nothing but the node bits, and wakes sleepers if any.
inline void publish(std::atomic<std::uint32_t>& w, std::uint32_t state, std::uint32_t node_bits) noexcept {
  const std::uint32_t old = w.exchange(node_bits | state, std::memory_order_acq_rel);
  if ((old & chunk_waiters) != 0) futex_wake(w);
}

/// Claims chunk k if it is armed. Async-signal-safe.
inline bool try_claim(armed_range& r, std::size_t k, std::uint32_t node_bits) noexcept {
  std::uint32_t w = r.words[k].load(std::memory_order_acquire);
  while ((w & chunk_state_mask) == chunk_armed) {
    if (r.words[k].compare_exchange_weak(w, (w & chunk_waiters) | node_bits | chunk_claimed, std::memory_order_acq_rel)) {
      r.armed_left.fetch_sub(1, std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

/// Gives claimed chunks [first, last) back to the armed state (a later toucher claims them).
inline void unclaim(armed_range& r, std::size_t first, std::size_t last) noexcept {
  for (std::size_t k = first; k < last; ++k) {
    r.armed_left.fetch_add(1, std::memory_order_relaxed);
    publish(r.words[k], chunk_armed, 0);
  }
}

inline std::uintptr_t chunk_begin(const armed_range& r, std::size_t k) noexcept { return r.begin + k * r.chunk; }
inline std::uintptr_t chunk_end(const armed_range& r, std::size_t k) noexcept {
  const std::uintptr_t e = r.begin + k * r.chunk;
  return e < r.end ? e : r.end;
}

// ---- is this still the mapping we armed? ------------------------------------------------

/// True if every page of [begin, end) is mapped (mincore fails with ENOMEM on a hole).
inline bool fully_mapped(std::uintptr_t begin, std::uintptr_t end) noexcept {
  const std::size_t ps = page_size();
  unsigned char vec[probe_batch];
  for (std::uintptr_t at = begin; at < end;) {
    const std::size_t len = end - at < probe_batch * ps ? end - at : probe_batch * ps;
    const auto r = call(sys::mincore, [&] { return ::mincore(reinterpret_cast<void*>(at), len, vec); });
    if (!r && r.error == ENOMEM) return false;
    at += len;
  }
  return true;
}

/// True if the page at `addr` can be read now. process_vm_readv on ourselves honours page
/// protections (it never forces access), and unlike a load it cannot fault. A sandbox that
/// forbids it makes the answer "no", which leaves the armed state as the only evidence.
inline bool readable(std::uintptr_t addr) noexcept {
  char byte = 0;
  iovec local{&byte, 1};
  iovec remote{reinterpret_cast<void*>(addr), 1};
  return static_cast<bool>(
      call(sys::process_vm_readv, [&] { return ::process_vm_readv(::gettid(), &local, 1, &remote, 1, 0); }));
}

/**
 * True if [begin, end), which we armed, still looks armed: mapped throughout, and neither its
 * first nor its last page readable. It is not once the application unmapped it (a new
 * mapping may sit there now, a thread stack with its guard page, say) or changed its
 * protection; then the pages are not ours to open. A new PROT_NONE mapping that covers the
 * span exactly cannot be told apart: disarm before unmapping.
 */
inline bool still_armed(std::uintptr_t begin, std::uintptr_t end) noexcept {
  const std::uintptr_t last = end - page_size();
  return fully_mapped(begin, end) && !readable(begin) && (last == begin || !readable(last));
}

// ---- opening and migrating ---------------------------------------------------------------

/// Page arrays of one move_pages call.
template <std::size_t N>
struct page_batch {
  void* pages[N];
  int nodes[N];
  int status[N];
};

inline page_batch<handler_batch> handler_buffers[handler_buffer_count];
inline std::atomic<std::uint64_t> handler_buffers_busy{0};
static_assert(handler_buffer_count <= 64, "one bit per buffer");

/**
 * After a move_pages that stopped early (b.status holds a fresh query of the n pages): moves
 * once more the resident pages that are not on their target, then queries them again, so that
 * b.status says where every page is. Pages are regrouped in place; counting needs no order.
 */
template <std::size_t N>
inline void retry_untried(page_batch<N>& b, std::size_t n) noexcept {
  std::size_t m = 0;  // the pages to retry, moved to the front
  for (std::size_t i = 0; i < n; ++i)
    if (b.status[i] >= 0 && b.status[i] != b.nodes[i]) {
      void* const page = b.pages[i];
      const int node = b.nodes[i], status = b.status[i];
      b.pages[i] = b.pages[m];
      b.nodes[i] = b.nodes[m];
      b.status[i] = b.status[m];
      b.pages[m] = page;
      b.nodes[m] = node;
      b.status[m] = status;
      ++m;
    }
  if (m == 0) return;
  (void)sys_move_pages(m, b.pages, b.nodes, b.status, MPOL_MF_MOVE);
  (void)sys_move_pages(m, b.pages, nullptr, b.status, 0);
}

/// In a page-node table (owner mode): the page stays where it is (owner keep_in_place).
inline constexpr std::uint16_t page_node_keep = 0xffff;

/// Moves [start, start + len) to `node` (or each page to its entry of `page_nodes`), N pages
/// per call, counting the outcome. A query comes first: pages already on their target are
/// counted as already there and not handed to move_pages, which would report them as if it
/// had moved them.
template <std::size_t N>
inline void move_span_with(page_batch<N>& b, std::uintptr_t start, std::size_t len, int node,
                           const std::uint16_t* page_nodes) noexcept {
  const std::size_t ps = page_size();
  for (std::uintptr_t at = start; at < start + len;) {
    std::size_t n = 0;
    for (; n < N && at < start + len; at += ps) {
      const int to = page_nodes != nullptr ? *page_nodes++ : node;
      if (to == page_node_keep) continue;
      b.pages[n] = reinterpret_cast<void*>(at);
      b.nodes[n] = to;
      ++n;
    }
    if (n == 0) continue;
    const auto q = sys_move_pages(n, b.pages, nullptr, b.status, 0);
    if (!q && q.error == ENOSYS) continue;  // no NUMA, nothing to move; the chunk is open all the same
    std::uint64_t there = 0, unpopulated = 0;
    std::size_t m = n;  // the pages to move, regrouped at the front
    if (q) {
      m = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (b.status[i] == b.nodes[i]) {
          ++there;
          count_event(&node_event_counters::nt_pages_already, b.nodes[i], 1);
        } else if (b.status[i] == -ENOENT || b.status[i] == -EFAULT) {
          ++unpopulated;
        } else {
          b.pages[m] = b.pages[i];
          b.nodes[m] = b.nodes[i];
          ++m;
        }
      }
    }
    nt_counters.pages_already_there.fetch_add(there, std::memory_order_relaxed);
    if (m == 0) {
      nt_counters.pages_unpopulated.fetch_add(unpopulated, std::memory_order_relaxed);
      continue;
    }
    const auto r = sys_move_pages(m, b.pages, b.nodes, b.status, MPOL_MF_MOVE);
    // A positive result counts pages the kernel did not move: it stopped at the first page it
    // could not migrate, wrote no status for that page's group and did not try the pages after
    // it. A failed call (ENOMEM) may have moved the groups before the failure. Tail pages of a
    // transparent huge page report EBUSY although the huge page moved.
    bool requery = !r || r.value > 0;
    for (std::size_t i = 0; i < m && !requery; ++i) requery = b.status[i] == -EBUSY;
    if (requery) {
      if (!sys_move_pages(m, b.pages, nullptr, b.status, 0)) {
        nt_counters.pages_failed.fetch_add(m, std::memory_order_relaxed);  // where they are is unknown
        for (std::size_t i = 0; i < m; ++i) count_event(&node_event_counters::nt_pages_failed, b.nodes[i], 1);
        nt_counters.pages_unpopulated.fetch_add(unpopulated, std::memory_order_relaxed);
        continue;
      }
      if (r && r.value > 0) retry_untried(b, m);
    }
    std::uint64_t moved = 0, failed = 0;
    for (std::size_t i = 0; i < m; ++i) {
      if (b.status[i] == b.nodes[i]) {
        ++moved;
        count_event(&node_event_counters::nt_pages_moved, b.nodes[i], 1);
      } else if (b.status[i] == -ENOENT || b.status[i] == -EFAULT) {
        ++unpopulated;
      } else {
        ++failed;
        count_event(&node_event_counters::nt_pages_failed, b.nodes[i], 1);
      }
    }
    nt_counters.pages_moved.fetch_add(moved, std::memory_order_relaxed);
    nt_counters.pages_unpopulated.fetch_add(unpopulated, std::memory_order_relaxed);
    nt_counters.pages_failed.fetch_add(failed, std::memory_order_relaxed);
  }
}

/// Moves [start, start + len) to `node`, or page i to page_nodes[i] if page_nodes is not null,
/// with a pooled buffer (handler_batch pages per call), or in small on-stack batches while
/// every pooled one is in use. Lock-free and async-signal-safe.
inline void move_span(std::uintptr_t start, std::size_t len, int node, const std::uint16_t* page_nodes) noexcept {
  std::uint64_t busy = handler_buffers_busy.load(std::memory_order_relaxed);
  while (busy != ~std::uint64_t{0}) {
    const auto i = static_cast<std::size_t>(__builtin_ctzll(~busy));
    if (i >= handler_buffer_count) break;
    const std::uint64_t bit = std::uint64_t{1} << i;
    if (handler_buffers_busy.compare_exchange_weak(busy, busy | bit, std::memory_order_acquire)) {
      move_span_with(handler_buffers[i], start, len, node, page_nodes);
      handler_buffers_busy.fetch_and(~bit, std::memory_order_release);
      return;
    }
  }
  page_batch<handler_stack_batch> small;
  move_span_with(small, start, len, node, page_nodes);
}

/// Marks claimed chunks [first, last) open (read-write already, or found to be no longer
/// our mapping). The epoch moves before the state, so a handler that sees the chunk open
/// also sees a new epoch and retries a stale fault.
inline void mark_open(armed_range& r, std::size_t first, std::size_t last, std::uint32_t state = chunk_open,
                      std::uint32_t node_bits = 0) noexcept {
  open_epoch.fetch_add(1, std::memory_order_acq_rel);
  for (std::size_t k = first; k < last; ++k) publish(r.words[k], state, node_bits);
}

/// Owner mode, right before [b, e) migrates: splits again every huge page in which two
/// targets meet (at its edges and inside). Arming split them, but khugepaged may have merged
/// them since, or a split may have found the page busy; a huge page migrates whole.
inline void split_where_targets_meet(const armed_range& r, std::uintptr_t b, std::uintptr_t e) noexcept {
  if (!huge_pages_seen_so_far()) return;
  const std::size_t ps = page_size();
  if (b == r.begin) split_huge_page_at(b);
  if (e == r.end) split_huge_page_at(e);
  for (std::uintptr_t at = b == r.begin ? b + ps : b; at < e + (e < r.end ? ps : 0); at += ps) {
    const std::size_t i = (at - r.begin) / ps;
    if (r.page_nodes[i] != r.page_nodes[i - 1]) split_huge_page_at(at);
  }
}

/// Claimed chunks [first, last) are read-write now: mark them so and migrate them.
inline void move_opened(armed_range& r, std::size_t first, std::size_t last, int node, std::uint32_t node_bits) noexcept {
  mark_open(r, first, last, chunk_moving, node_bits);
  const std::uintptr_t b = chunk_begin(r, first), e = chunk_end(r, last);
  if (r.page_nodes != nullptr) split_where_targets_meet(r, b, e);
  move_span(b, e - b, node, r.page_nodes ? r.page_nodes + (b - r.begin) / page_size() : nullptr);
  for (std::size_t k = first; k < last; ++k) publish(r.words[k], chunk_open, node_bits);
  nt_counters.chunks.fetch_add(last - first, std::memory_order_relaxed);
  count_event(&node_event_counters::nt_chunks, node, last - first);
}

/// Opens claimed chunks [first, last) read-write. When mprotect runs out of mappings (ENOMEM:
/// vm.max_map_count), the span is widened over armed neighbours up to the nearest open ones
/// (claimed for us, so [first, last) grows), so that the opening merges with existing ones;
/// as a last resort the whole range is opened, and every other armed chunk is marked open
/// without migration (data stays reachable; the rest of this phase loses next-touch).
/// Returns 0, or the errno of mprotect if the chunks could not be opened.
inline int open_claimed(armed_range& r, std::size_t& first, std::size_t& last, std::uint32_t node_bits) noexcept {
  auto open = [](std::uintptr_t b, std::uintptr_t e) {
    return sys_mprotect(reinterpret_cast<void*>(b), e - b, PROT_READ | PROT_WRITE);
  };
  auto result = open(chunk_begin(r, first), chunk_end(r, last));
  if (result || result.error != ENOMEM) return result.error;
  nt_counters.widened.fetch_add(1, std::memory_order_relaxed);
  while (last < r.count && try_claim(r, last, node_bits)) ++last;
  while (first > 0 && try_claim(r, first - 1, node_bits)) --first;
  result = open(chunk_begin(r, first), chunk_end(r, last));
  if (result || result.error != ENOMEM) return result.error;
  // Claim what is still armed before opening it, so that no chunk is ever read-write while
  // marked armed; these claims carry range_claim_bits, which tell them from other threads'.
  // mprotect of a range with a hole changes the part before the hole: only a range still
  // mapped throughout is opened whole.
  for (std::size_t k = 0; k < r.count; ++k)
    if (k < first || k >= last) try_claim(r, k, range_claim_bits);
  // Chunks other threads have claimed become readable here before they check them: the flag
  // tells them why (see claim_and_open).
  r.opened_whole.store(true, std::memory_order_seq_cst);
  const bool opened = fully_mapped(r.begin, r.end) && static_cast<bool>(open(r.begin, r.end));
  for (std::size_t k = 0; k < r.count; ++k) {
    const std::uint32_t w = r.words[k].load(std::memory_order_acquire);
    if ((k >= first && k < last) || (w & ~chunk_waiters) != (chunk_claimed | range_claim_bits)) continue;
    if (opened) {
      mark_open(r, k, k + 1);
    } else {
      unclaim(r, k, k + 1);
    }
  }
  return opened ? 0 : ENOMEM;
}

/// The node of the CPU the faulting thread runs on, -1 if getcpu fails.
inline int toucher_node() noexcept {
  unsigned cpu = 0, node = 0;
  if (!call(sys::getcpu, [&] { return ::getcpu(&cpu, &node); })) return -1;
  return static_cast<int>(node);
}

/// The node the toucher's chunk goes to (node 0 when the toucher's is unknown).
inline int fault_target(const armed_range& r, int homenode) noexcept {
  if (r.target == touch_target::toucher_homenode && homenode >= 0) return homenode;
  const int node = toucher_node();
  return node >= 0 ? node : 0;
}

inline std::uint32_t node_bits_of(int node) noexcept {
  return (static_cast<std::uint32_t>(node + 1) << chunk_node_shift) & chunk_node_mask;
}

/// Outcome of a fault inside one armed range.
enum class chunk_verdict {
  handled,   ///< opened (by us or by the thread we waited for): retry the access
  open,      ///< this range has the chunk open: the fault is stale, or not ours
  not_ours,  ///< the chunk was armed, but its mapping is no longer the one we armed
  failed,    ///< ours, but it could not be opened
};

/// Sleeps while chunk word `w` is claimed (another thread is opening it).
inline void wait_while_claimed(std::atomic<std::uint32_t>& w) noexcept {
  bool counted = false;
  for (;;) {
    std::uint32_t v = w.load(std::memory_order_acquire);
    if ((v & chunk_state_mask) != chunk_claimed) return;
    if ((v & chunk_waiters) == 0 && !w.compare_exchange_weak(v, v | chunk_waiters, std::memory_order_acq_rel)) continue;
    if (!counted) nt_counters.waits.fetch_add(1, std::memory_order_relaxed);
    counted = true;
    futex_wait(w, v | chunk_waiters);
  }
}

/// Claims chunk k (and, adaptively, a run after it), checks that the mapping is still the one
/// we armed, opens and migrates. Returns handled also when another thread claimed k first.
inline chunk_verdict claim_and_open(armed_range& r, std::size_t k, int node) noexcept {
  const std::uint32_t node_bits = node_bits_of(node);
  if (!try_claim(r, k, node_bits)) return chunk_verdict::handled;
  std::size_t first = k, last = k + 1;
  if (r.adaptive) {
    // Grow the claim while consecutive chunks are touched from the same node; fall back to
    // one chunk as soon as a neighbour was claimed from another node.
    std::uint32_t run = r.run.load(std::memory_order_relaxed);
    if (k > 0) {
      const std::uint32_t prev = r.words[k - 1].load(std::memory_order_relaxed);
      const std::uint32_t prev_state = prev & chunk_state_mask;
      const std::uint32_t prev_node = prev & chunk_node_mask;
      if (prev_state != chunk_armed && prev_node == node_bits) {
        run = run * 2 < r.max_run ? run * 2 : r.max_run;
      } else if (prev_state != chunk_armed && prev_node != 0) {
        run = 1;
      }
    }
    r.run.store(run, std::memory_order_relaxed);
    while (last < r.count && last - k < run && try_claim(r, last, node_bits)) ++last;
  }
  // Each chunk is checked: only the run of chunks still as we armed them is opened.
  if (!still_armed(chunk_begin(r, k), chunk_end(r, k + 1))) {
    unclaim(r, k + 1, last);
    if (r.opened_whole.load(std::memory_order_seq_cst)) {  // opened by another thread for all
      move_opened(r, k, k + 1, node, node_bits);
      return chunk_verdict::handled;
    }
    mark_open(r, k, k + 1);  // not ours to open, now or later
    nt_counters.released.fetch_add(1, std::memory_order_relaxed);
    return chunk_verdict::not_ours;
  }
  std::size_t ours = k + 1;
  while (ours < last && still_armed(chunk_begin(r, ours), chunk_end(r, ours + 1))) ++ours;
  unclaim(r, ours, last);
  last = ours;
  if (open_claimed(r, first, last, node_bits) != 0) {
    unclaim(r, first, last);
    return chunk_verdict::failed;
  }
  move_opened(r, first, last, node, node_bits);
  return chunk_verdict::handled;
}

/// A fault at `addr` inside slot r (users already counted; r active or retiring).
inline chunk_verdict handle_chunk_fault(armed_range& r, bool retiring, std::uintptr_t addr, int homenode) noexcept {
  std::atomic<std::uint32_t>& w = r.words[(addr - r.begin) / r.chunk];
  const std::uint32_t state = w.load(std::memory_order_acquire) & chunk_state_mask;
  if (state == chunk_open || state == chunk_moving) return chunk_verdict::open;
  if (state == chunk_claimed) {
    wait_while_claimed(w);
    return chunk_verdict::handled;
  }
  if (retiring) {  // disarm is opening what is still armed: retry once it is done (it never
                   // gives a chunk back armed: see retire_slot)
    ::sched_yield();
    return chunk_verdict::handled;
  }
  return claim_and_open(r, (addr - r.begin) / r.chunk, fault_target(r, homenode));
}

/// What the handler does with a fault.
enum class fault_verdict { retry, not_ours, failed };

/// Looks the address up among armed ranges. Ranges may overlap when a newer one re-armed part
/// of an older one: the range holding the chunk armed (or being opened) decides. A fault that
/// no range claims is retried once per thread, address and epoch (it may be stale: the chunk
/// was opened, or its range retired, after the access trapped); the same fault again with
/// nothing of ours changed in between is not ours, and goes on to the previous handler.
inline fault_verdict handle_fault(std::uintptr_t addr, int homenode) noexcept {
  const std::size_t high = registry_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < high; ++i) {
    armed_range& r = registry[i];
    const int seen = r.state.load(std::memory_order_acquire);
    if (seen == slot_draining) {
      // Retiring, and waiting for a handler still inside, which may hold this very chunk: the
      // words are off limits, but the access is in flight, not foreign, until it is done.
      if (addr >= r.begin && addr < r.end) {
        ::sched_yield();
        return fault_verdict::retry;
      }
      continue;
    }
    if (seen != slot_active && seen != slot_retiring) continue;
    // seq_cst on both sides (with retire_slot's draining store and users load): either the
    // retiring thread sees us here, or we see it draining and keep off the words it unmaps.
    r.users.fetch_add(1, std::memory_order_seq_cst);
    const int state = r.state.load(std::memory_order_seq_cst);
    chunk_verdict verdict = chunk_verdict::open;
    if ((state == slot_active || state == slot_retiring) && addr >= r.begin && addr < r.end) {
      const std::uint64_t t0 = monotonic_ns();
      verdict = handle_chunk_fault(r, state == slot_retiring, addr, homenode);
      if (verdict == chunk_verdict::handled) {
        nt_counters.faults.fetch_add(1, std::memory_order_relaxed);
        count_event(&node_event_counters::nt_faults, toucher_node(), 1);
      }
      nt_counters.handler_ns.fetch_add(monotonic_ns() - t0, std::memory_order_relaxed);
    }
    r.users.fetch_sub(1, std::memory_order_acq_rel);
    switch (verdict) {
      case chunk_verdict::handled: last_retried_fault = {}; return fault_verdict::retry;
      case chunk_verdict::failed: return fault_verdict::failed;
      case chunk_verdict::not_ours: return fault_verdict::not_ours;
      case chunk_verdict::open: break;
    }
  }
  const std::uint64_t epoch = open_epoch.load(std::memory_order_acquire);
  retried_fault& last = last_retried_fault;
  if (last.addr == addr && last.epoch == epoch) {
    last = {};
    return fault_verdict::not_ours;
  }
  last = {addr, epoch};
  return fault_verdict::retry;
}

}  // namespace numaaff::detail
