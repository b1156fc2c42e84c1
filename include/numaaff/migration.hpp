/**
 * @file migration.hpp
 * @brief Moving pages that exist: move_to (one target) and place_blocks (each block to its owner).
 *
 * A *migration* moves populated pages to another node, keeping their contents: `move_to`
 * sends a whole range to one node; `place_blocks` sends each block of a block-structured range
 * to its owner's node in one batched call (an AMR or PDE code's phase change, when the new
 * owners are known). Both walk the range in bounded batches of one move_pages call each,
 * retry busy pages, split transparent huge pages wherever the range's edge or two owners meet
 * (a huge page migrates whole) and mark what they split not-huge, so that khugepaged never
 * merges it again onto one node; every count in the result is re-queried from the kernel.
 * Moving data on its next touch instead is next_touch.hpp; moving it between memory tiers is
 * tiers.hpp.
 *
 * Ranges and errors as policy.hpp. One node: everything is already there.
 *
 * @code{.cpp}
 * numaaff::move_result r = numaaff::move_to(a.data(), bytes, 1);      // phase change: data to node 1
 * numaaff::place_blocks(grid, bytes, block_bytes, owners);            // owners[b]: node of block b
 * @endcode
 */
#pragma once

#include "detail/counter_segment.hpp"
#include "detail/kernel_nodes.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page_span.hpp"
#include "detail/throw.hpp"
#include "errors.hpp"
#include "topology.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {

/// What move_to() did, page by page.
struct move_result {
  std::size_t total = 0;          ///< pages in the range
  std::size_t moved = 0;          ///< now on the target, were elsewhere
  std::size_t already_there = 0;  ///< were on the target before the call
  std::size_t unpopulated = 0;    ///< never touched: nothing to move (placed by policy at first touch)
  std::size_t failed = 0;         ///< could not be moved (busy, target full, not permitted)
  /// Pages *outside* the range that moved to the target with it: a transparent huge page
  /// held both and could not be split (see move_to). Their owners' data is now on `target`.
  std::size_t carried = 0;
  int first_error = 0;            ///< errno of the first failed page, 0 if none
  /// True when every populated page is now on the target.
  bool complete() const noexcept { return failed == 0; }
};

/**
 * Migrates every populated page of the range to `target`, preserving contents.
 *
 * Batched: the range is walked in bounded batches (no per-range page arrays, whatever its
 * size); each batch costs one placement query and one move_pages call for the pages not yet
 * on the target. Pages that report EBUSY are retried a bounded number of times; after a
 * transparent huge page moves, its tail pages may report EBUSY although they moved, so they
 * are re-queried before being counted as failed.
 *
 * Huge pages: the kernel migrates a transparent huge page whole, so one that straddles an
 * edge of the range would carry its neighbours' data along. move_to first splits a huge page
 * at each edge that is not huge-page-aligned (MADV_COLD on the one page there, which splits a
 * huge page it covers only in part and marks that page cold); if a split is refused (the huge
 * page is shared with another process, or locked) and the neighbours move anyway, they are
 * counted in `carried`, from a raw page-status query before and after. Pages inside the range
 * are always re-queried: `moved` never counts a page that is not on the target. Every
 * huge-page region numaaff splits is marked MADV_NOHUGEPAGE first, so khugepaged never merges
 * it again behind the caller's back (onto one node); regions it did not split keep their huge
 * pages.
 *
 * Thread-safe; allocates O(batch) scratch; blocks for the duration of the copies.
 * @throws std::invalid_argument for a bad range or unknown node.
 * @throws std::system_error named "move_pages" only if the call fails as a whole (ENOMEM).
 *         Per-page failures are in the result instead. A sandbox that denies move_pages
 *         (EPERM) is no error: nothing moves, resident pages not known to be on `target` are
 *         counted as `failed` with `first_error` EPERM (on a one-node machine they are all
 *         `already_there`).
 * @note The data stays intact and readable whatever happens. One node: everything is already
 *       there.
 */
move_result move_to(void* addr, std::size_t bytes, node_id target);
move_result move_to(void* addr, std::size_t bytes, node_id target, std::error_code& ec) noexcept;

// ---- owner-aware placement at a phase change ----------------------------------------------

/// The owner that leaves a block where it is, in place_blocks and place_blocks_on_next_touch
/// (C: NUMAAFF_KEEP): a free slot of a block pool, a block whose owner did not change. Not
/// -1, which the C API's node functions return for an error: a failed lookup never reads as
/// "keep".
inline constexpr node_id keep_in_place = -2;

/**
 * Puts each block of a block-structured range on its owner's node, now, in one call: the
 * phase change of an AMR or PDE code whose new owners are known (an OpenMP team plan, a
 * thread-pool partition, a load balancer's map). Block b is the `block_bytes` starting at
 * `addr + b * block_bytes` (the last may be shorter); `owners[b]` is its node, or
 * `keep_in_place` (-2): its pages are not moved, and count as `already_there` (or
 * `unpopulated`).
 * A page shared by two blocks (blocks not page-aligned) goes with the block holding its first
 * byte in the range.
 *
 * When to use which: next touch (affinity_on_next_touch) gives a chunk to whoever touches it
 * first, which is right when the owners are not known, and wrong when a halo exchange touches
 * neighbours' blocks before their owners do. When the owners are known, this is the call: no
 * owner-touch loop, one batched move_pages per 4096 pages with each page's own target, huge
 * pages split wherever two owners' blocks share one (see move_to), every page re-queried.
 *
 * Thread-safe; allocates O(blocks + batch); blocks for the copies. The counts in the result
 * are over pages: `moved` now on their owner's node, `already_there`, `unpopulated` (placed
 * at first touch by whoever touches them), `failed`, and `carried` (neighbours outside the
 * range moved by an unsplittable huge page).
 * @throws std::invalid_argument for a bad range, `block_bytes == 0`, fewer owners than
 *         blocks, or an owner that is neither a kernel node nor keep_in_place (the message
 *         names the block).
 * @throws std::system_error named "move_pages" if the call fails as a whole.
 * @note One node: everything is already there.
 */
move_result place_blocks(void* addr, std::size_t bytes, std::size_t block_bytes, const std::vector<node_id>& owners);
move_result place_blocks(void* addr, std::size_t bytes, std::size_t block_bytes, const std::vector<node_id>& owners,
                         std::error_code& ec) noexcept;
/// The same with the owner of block b given by `owner_of(b)` (called once per block).
template <class OwnerOf, class = std::enable_if_t<std::is_invocable_r_v<node_id, OwnerOf&, std::size_t>>>
move_result place_blocks(void* addr, std::size_t bytes, std::size_t block_bytes, OwnerOf&& owner_of);

namespace detail {

inline void count_failure(move_result& r, int error) noexcept {
  ++r.failed;
  if (r.first_error == 0) r.first_error = error;
}

/**
 * Moves one batch: pages[0, n) to want[0, n), one move_pages call for all that are elsewhere
 * (each page may have its own target). Returns false if the call itself failed.
 */
inline bool move_batch(std::vector<void*>& pages, std::size_t n, const std::vector<int>& want, move_result& r,
                       std::vector<int>& status, std::error_code& ec) {
  status.assign(n, 0);
  const auto q = sys_move_pages(n, pages.data(), nullptr, status.data(), 0);
  if (!q && !refused(q.error)) return report(q, ec), false;
  if (!q) residency_status(pages.data(), n, status.data());  // and nothing can be moved
  std::vector<void*> todo;
  std::vector<int> dest;
  for (std::size_t i = 0; i < n; ++i) {
    const int s = status[i];
    if (want[i] == keep_in_place) {  // wherever it is, it is where it belongs
      if (s == -ENOENT || s == -EFAULT) {
        ++r.unpopulated;
      } else {
        ++r.already_there;
      }
    } else if (!q && s != want[i] && s != -ENOENT) {
      count_failure(r, q.error);  // resident, elsewhere or unknown, and the kernel moves nothing
      count_event(&node_event_counters::pages_not_moved, want[i], 1);
    } else if (s == want[i]) {
      ++r.already_there;
    } else if (s == -ENOENT || s == -EFAULT) {
      ++r.unpopulated;
    } else {
      todo.push_back(pages[i]);
      dest.push_back(want[i]);
    }
  }
  constexpr int attempts = 4;
  for (int attempt = 0; attempt < attempts && !todo.empty(); ++attempt) {
    status.assign(todo.size(), 0);
    const auto m = sys_move_pages(todo.size(), todo.data(), dest.data(), status.data(), MPOL_MF_MOVE);
    if (!m && refused(m.error)) {  // queries allowed, moves not
      for (std::size_t i = 0; i < todo.size(); ++i) {
        count_failure(r, m.error);
        count_event(&node_event_counters::pages_not_moved, dest[i], 1);
      }
      refusals.pages.fetch_add(todo.size(), std::memory_order_relaxed);
      return true;
    }
    if (!m && m.error != ENOENT) return report(m, ec), false;
    // Re-query: tail pages of a moved huge page report EBUSY, and ENOENT for the whole call
    // leaves status undefined.
    const auto rq = sys_move_pages(todo.size(), todo.data(), nullptr, status.data(), 0);
    if (!rq) return report(rq, ec), false;
    std::vector<void*> busy;
    std::vector<int> busy_dest;
    for (std::size_t i = 0; i < todo.size(); ++i) {
      if (status[i] == dest[i]) {
        ++r.moved;
        count_event(&node_event_counters::pages_moved, dest[i], 1);
      } else if (status[i] == -ENOENT || status[i] == -EFAULT) {
        ++r.unpopulated;  // unmapped or discarded meanwhile
      } else if (attempt + 1 < attempts) {
        busy.push_back(todo[i]);
        busy_dest.push_back(dest[i]);
      } else {
        count_failure(r, status[i] < 0 ? -status[i] : EBUSY);
        count_event(&node_event_counters::pages_not_moved, dest[i], 1);
      }
    }
    todo.swap(busy);
    dest.swap(busy_dest);
  }
  return true;
}

/// Node of each page (negative errno for none), or false if the query itself failed.
inline bool query_nodes(std::vector<void*>& pages, std::vector<int>& status) {
  status.assign(pages.size(), -ENOENT);
  return pages.empty() || static_cast<bool>(sys_move_pages(pages.size(), pages.data(), nullptr, status.data(), 0));
}

/**
 * The pages outside a span that lie in the same huge-page-aligned regions as its edges: the
 * only ones a migration of the span can carry along.
 */
inline std::vector<void*> edge_neighbours(const page_span& span) {
  const std::size_t ps = page_size(), huge = huge_page_size();
  const std::uintptr_t end = span.first + span.pages * ps;
  std::vector<void*> out;
  for (std::uintptr_t p = align_down(span.first, huge); p < span.first; p += ps) out.push_back(reinterpret_cast<void*>(p));
  for (std::uintptr_t p = end; p < align_up(end, huge); p += ps) out.push_back(reinterpret_cast<void*>(p));
  return out;
}

/**
 * The shared body of move_to and place_blocks: splits huge pages at the span's edges (and
 * at the boundaries `cuts(list)` appends), then moves each batch of pages to the nodes
 * `targets(first_page, n, want)` fills in, and counts neighbours outside the span that a huge
 * page carried along anyway (from a raw status query before and after).
 */
template <class Cuts, class Targets>
inline move_result move_span(const page_span& span, Cuts&& cuts, Targets&& targets, std::error_code& ec,
                             bool verify_all = false) {
  publish_counters();
  move_result r;
  r.total = span.pages;
  std::vector<void*> pages;
  std::vector<int> status, want;
  // Only where huge pages can exist: two extra queries of up to 1,022 pages otherwise wasted.
  std::vector<void*> neighbours = huge_pages_possible() ? edge_neighbours(span) : std::vector<void*>{};
  std::vector<int> neighbours_before, neighbours_after;
  const bool watched = !neighbours.empty() && query_nodes(neighbours, neighbours_before);
  std::vector<std::uintptr_t> boundaries{span.first, span.first + span.bytes()};
  cuts(boundaries);
  split_huge_pages(boundaries.data(), boundaries.size());
  // Splits again, without marking (done above): a huge page that was busy, or merged again.
  const auto split = [&] {
    for (std::uintptr_t b : boundaries) split_huge_page_at(b);
  };
  std::size_t done = 0;
  for_each_batch(span, pages, [&](std::size_t n) {
    want.resize(n);
    targets(done, n, want);
    done += n;
    return move_batch(pages, n, want, r, status, ec);
  });
  // Owners' blocks (several targets): check the span once more, batch by batch. A huge page
  // that could not be split (busy, or merged again under load) moved whole when one of its
  // pages did, taking pages already counted as there with it. Such pages are split and moved
  // again; a second look counts what is still elsewhere as failed, taken from the counts it
  // was in, so that moved + already_there + unpopulated + failed stays the total.
  if (verify_all && !ec) {
    bool split_again = false, counted = false;
    std::vector<void*> wrong;
    std::vector<int> wrong_dest;
    std::size_t elsewhere = 0;
    for (int look = 0; look < 2; ++look) {
      done = 0;
      elsewhere = 0;
      const bool known = for_each_batch(span, pages, [&](std::size_t n) {
        want.resize(n);
        targets(done, n, want);
        done += n;
        status.assign(n, 0);
        if (!sys_move_pages(n, pages.data(), nullptr, status.data(), 0)) return false;
        wrong.clear();
        wrong_dest.clear();
        for (std::size_t i = 0; i < n; ++i)
          if (status[i] >= 0 && want[i] != keep_in_place && status[i] != want[i]) {
            wrong.push_back(pages[i]);
            wrong_dest.push_back(want[i]);
          }
        elsewhere += wrong.size();
        if (look == 0 && !wrong.empty()) {
          if (!split_again) split();
          split_again = true;
          status.assign(wrong.size(), 0);
          (void)sys_move_pages(wrong.size(), wrong.data(), wrong_dest.data(), status.data(), MPOL_MF_MOVE);
        }
        return true;
      });
      if (!known || !split_again) break;  // a query refused, or everything was in place
      counted = look == 1;
    }
    if (counted) {
      for (std::size_t k = r.failed; k < elsewhere; ++k) {  // counted as placed, but elsewhere
        if (r.moved > 0) {
          --r.moved;
        } else if (r.already_there > 0) {
          --r.already_there;
        } else if (r.unpopulated > 0) {
          --r.unpopulated;  // touched elsewhere meanwhile
        } else {
          break;
        }
        count_failure(r, EBUSY);
      }
      if (elsewhere < r.failed) {  // the second try moved pages that had failed
        r.moved += r.failed - elsewhere;
        r.failed = elsewhere;
        if (r.failed == 0) r.first_error = 0;
      }
    }
  }
  if (watched && query_nodes(neighbours, neighbours_after))
    for (std::size_t i = 0; i < neighbours.size(); ++i)
      if (neighbours_before[i] >= 0 && neighbours_after[i] >= 0 && neighbours_after[i] != neighbours_before[i]) ++r.carried;
  // Pages not accounted for when a call failed as a whole (that batch and the ones after it)
  // are failures too.
  const std::size_t accounted = r.moved + r.already_there + r.unpopulated + r.failed;
  if (ec && accounted < r.total) {
    r.failed += r.total - accounted;
    if (r.first_error == 0) r.first_error = ec.value();
  }
  return r;
}

}  // namespace detail

inline move_result move_to(void* addr, std::size_t bytes, node_id target, std::error_code& ec) noexcept {
  ec.clear();
  move_result r;
  detail::page_span span;
  try {
    if (!detail::make_span(addr, bytes, span) || !detail::valid_node(target)) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return r;
    }
    r = detail::move_span(
        span, [](std::vector<std::uintptr_t>&) {},
        [target](std::size_t, std::size_t n, std::vector<int>& want) { want.assign(n, target); }, ec);
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
  return r;
}

inline move_result move_to(void* addr, std::size_t bytes, node_id target) {
  detail::require_range("move_to", addr, bytes);
  detail::require_node("move_to", target);
  move_result r = detail::or_throw("move_to", [&](std::error_code& ec) { return move_to(addr, bytes, target, ec); });
  return r;
}

// ---- owner-aware placement: definitions ---------------------------------------------------

namespace detail {

inline std::size_t block_count(std::size_t bytes, std::size_t block_bytes) noexcept {
  return bytes / block_bytes + (bytes % block_bytes != 0 ? 1 : 0);
}

/// Why `owners` cannot place `bytes` in blocks of `block_bytes` ("" if it can).
inline std::string owners_error(std::size_t bytes, std::size_t block_bytes, const std::vector<node_id>& owners) {
  if (block_bytes == 0) return "block_bytes is 0";
  const std::size_t blocks = block_count(bytes, block_bytes);
  if (owners.size() < blocks)
    return "owners has " + std::to_string(owners.size()) + " entries for " + std::to_string(blocks) + " blocks";
  for (std::size_t b = 0; b < blocks; ++b)
    if (owners[b] != keep_in_place && !valid_node(owners[b]))
      return "owner of block " + std::to_string(b) + ": " + node_error(owners[b]) + " (keep_in_place is -2)";
  return "";
}

/// The owner of the page at `page`: that of the block holding its first byte in the range
/// starting at `base` (a page shared by two blocks goes with the first).
inline node_id page_owner(std::uintptr_t base, std::size_t block_bytes, const std::vector<node_id>& owners,
                          std::uintptr_t page) noexcept {
  return owners[((page > base ? page : base) - base) / block_bytes];
}

/// Appends to `out` every boundary where two owners' blocks meet: where huge pages must be
/// split so that each block migrates alone.
inline void owner_boundaries(std::uintptr_t base, std::size_t bytes, std::size_t block_bytes,
                             const std::vector<node_id>& owners, std::vector<std::uintptr_t>& out) {
  const std::size_t blocks = block_count(bytes, block_bytes);
  for (std::size_t b = 1; b < blocks; ++b)
    if (owners[b] != owners[b - 1]) out.push_back(align_up(base + b * block_bytes, page_size()));
}

}  // namespace detail

inline move_result place_blocks(void* addr, std::size_t bytes, std::size_t block_bytes,
                                const std::vector<node_id>& owners, std::error_code& ec) noexcept {
  ec.clear();
  move_result r;
  detail::page_span span;
  try {
    if (!detail::make_span(addr, bytes, span) || !detail::owners_error(bytes, block_bytes, owners).empty()) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return r;
    }
    const auto base = reinterpret_cast<std::uintptr_t>(addr);
    const std::size_t ps = detail::page_size();
    const auto split = [&](std::vector<std::uintptr_t>& cuts) { detail::owner_boundaries(base, bytes, block_bytes, owners, cuts); };
    const auto targets = [&](std::size_t first, std::size_t n, std::vector<int>& want) {
      for (std::size_t i = 0; i < n; ++i)
        want[i] = detail::page_owner(base, block_bytes, owners, span.first + (first + i) * ps);
    };
    r = detail::move_span(span, split, targets, ec, true);
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
  return r;
}

inline move_result place_blocks(void* addr, std::size_t bytes, std::size_t block_bytes,
                                const std::vector<node_id>& owners) {
  detail::require_range("place_blocks", addr, bytes);
  const std::string why = detail::owners_error(bytes, block_bytes, owners);
  if (!why.empty()) detail::throw_invalid_argument("place_blocks: " + why);
  move_result r = detail::or_throw("place_blocks", [&](std::error_code& ec) { return place_blocks(addr, bytes, block_bytes, owners, ec); });
  return r;
}

template <class OwnerOf, class>
move_result place_blocks(void* addr, std::size_t bytes, std::size_t block_bytes, OwnerOf&& owner_of) {
  detail::require_range("place_blocks", addr, bytes);
  if (block_bytes == 0) detail::throw_invalid_argument("place_blocks: block_bytes is 0");
  std::vector<node_id> owners(detail::block_count(bytes, block_bytes));
  for (std::size_t b = 0; b < owners.size(); ++b) owners[b] = owner_of(b);
  return place_blocks(addr, bytes, block_bytes, owners);
}

}  // namespace numaaff
