/**
 * @file memory.hpp
 * @brief Where the pages of a range live: policies, migration and the placement report.
 *
 * A *memory policy* says on which nodes the kernel places the pages of a range when they are
 * first touched: `bind` (only these nodes), `interleave` (round-robin over nodes, page by page
 * or in coarser granules), `prefer` (this node first, others when it is full) and
 * `set_home_node` (any node, nearest to the home node first; Linux 5.17+). A policy acts on
 * pages allocated after it is set; the `move_existing` option also migrates pages already
 * present (MPOL_MF_MOVE). `move_to` migrates existing pages explicitly, in bounded batches, and
 * `where` reports how many pages of a range are on each node right now (the answer can be
 * stale as soon as it returns: other threads, automatic NUMA balancing and swapping move pages).
 *
 * Ranges: `addr`/`bytes` need not be page-aligned; every call covers each page the range
 * touches (rounded outward to page boundaries), so neighbouring data on the same pages is
 * affected too. `bytes == 0` is a no-op. A null `addr` with non-zero `bytes`, a range that
 * wraps the address space, an empty node list or a node the kernel does not have is a caller
 * error (`std::invalid_argument`).
 *
 * One node: every call works and is a no-op in effect (all pages are on node 0). A kernel
 * without NUMA system calls (ENOSYS): policies are accepted as no-ops; see system_report().
 *
 * @code{.cpp}
 * std::vector<double> a(1 << 24);
 * numaaff::move_to(a.data(), a.size() * sizeof(double), 1);      // phase change: data to node 1
 * numaaff::placement p = numaaff::where(a.data(), a.size() * sizeof(double));
 * std::printf("%.1f%% on node 1\n", 100 * p.fraction_on(1));
 * @endcode
 */
#pragma once

#include "detail/mappings.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page.hpp"
#include "detail/text.hpp"
#include "detail/throw.hpp"
#include "errors.hpp"
#include "topology.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <new>
#include <numeric>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace numaaff {

/// Options shared by the range policies.
struct policy_options {
  /// Also migrate pages already present that do not conform (MPOL_MF_MOVE).
  bool move_existing = false;
  /// With move_existing: fail with EIO if some pages could not be moved (MPOL_MF_STRICT).
  bool strict = false;
};

// ---- range policies ---------------------------------------------------------------------

/**
 * Places the pages of the range on `node` only (MPOL_BIND). When the node is full, allocation
 * fails (the kernel's OOM handling) instead of spilling elsewhere.
 *
 * Thread-safe (acts on the address space); allocates nothing; one mbind call.
 * @throws std::invalid_argument for a null/wrapping range or a node the kernel does not have.
 * @throws std::system_error named "mbind" if the call fails. A kernel without NUMA, or a
 *         sandbox that denies the call (EPERM under a container's seccomp profile), is no
 *         error: the call is a no-op, counted in refusal_stats() (system_report.hpp).
 */
void bind(void* addr, std::size_t bytes, node_id node, policy_options options = {});
void bind(void* addr, std::size_t bytes, node_id node, policy_options options, std::error_code& ec) noexcept;
/// Same, over several nodes (the kernel picks among them, nearest first).
void bind(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options options = {});
void bind(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options options,
          std::error_code& ec) noexcept;

/**
 * Spreads the pages of the range over `nodes` round-robin, one page at a time (MPOL_INTERLEAVE).
 * Same contract as bind(). A transparent huge page is placed whole on one node, so where THP is
 * enabled for the range (`madvise` or `always` mode) the effective granule is 2 MiB; call
 * `madvise(MADV_NOHUGEPAGE)` first for page granularity (numaaff's interleaving allocators do).
 */
void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options options = {});
void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options options,
                std::error_code& ec) noexcept;
/**
 * Spreads the range over `nodes` in granules of `granularity` bytes (a multiple of the page
 * size): granule i is bound to nodes[i % nodes.size()]. One mbind per granule, and each granule
 * becomes its own kernel mapping (VMA): keep ranges / granularity well below vm.max_map_count.
 * A granularity of one page is MPOL_INTERLEAVE.
 * @throws std::invalid_argument if `granularity` is not a non-zero multiple of the page size.
 */
void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, std::size_t granularity,
                policy_options options = {});
void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, std::size_t granularity,
                policy_options options, std::error_code& ec) noexcept;

/**
 * Places pages on `node` while it has memory, elsewhere afterwards (MPOL_PREFERRED).
 * Same contract as bind().
 */
void prefer(void* addr, std::size_t bytes, node_id node, policy_options options = {});
void prefer(void* addr, std::size_t bytes, node_id node, policy_options options, std::error_code& ec) noexcept;
/**
 * Prefers any of `nodes` (MPOL_PREFERRED_MANY, Linux 5.15+). On older kernels it prefers the
 * first node listed (MPOL_PREFERRED), which system_report() announces.
 */
void prefer(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options options = {});
void prefer(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options options,
            std::error_code& ec) noexcept;

/**
 * Makes `home` the first choice for the range's pages, with every other node as fallback in
 * distance order: MPOL_BIND over all nodes plus set_mempolicy_home_node (Linux 5.17+).
 * @throws std::system_error with numaaff::errc::feature_unavailable on older kernels; the
 *         range's policy is then left as it was (default).
 */
void set_home_node(void* addr, std::size_t bytes, node_id home, policy_options options = {});
void set_home_node(void* addr, std::size_t bytes, node_id home, policy_options options, std::error_code& ec) noexcept;

/// A node and its share of a weighted interleave.
struct node_weight {
  node_id node;     ///< a kernel node (with or without CPUs)
  unsigned weight;  ///< its share; 0 leaves the node out
};

/**
 * Spreads the pages of the range over the nodes in proportion to their weights, for any
 * weights and on every kernel: with {{0, 3}, {2, 1}}, three pages of every four go to node 0
 * and one to node 2, mixed through the whole range (so that a stream over any part of it draws
 * on every node in that proportion), not in two halves. Typical use: a bandwidth-bound array
 * over DRAM and a CXL or HBM node, weights in proportion to their bandwidths.
 *
 * How: equal weights are one MPOL_INTERLEAVE. Weights in the proportion of the system's
 * weighted-interleave weights (Linux 6.9+, system_interleave_weights()) are one
 * MPOL_WEIGHTED_INTERLEAVE: the kernel's own policy, which gives exactly what was asked (one
 * mapping, page by page). The kernel reads the system weights at each page fault, so pages
 * placed after an administrator changes them follow the new ones.
 * Otherwise the range is cut into tiles, and in
 * each tile every node gets a run of pages in proportion to its weight, which prefers that
 * node (MPOL_PREFERRED: a full node spills to its neighbours, as MPOL_INTERLEAVE's pages do;
 * one node alone is preferred the same way); one tile holds one round of the reduced
 * weights (3 + 1 pages above) when the process's map count allows, else the smallest tiles
 * whose mappings (one per run) fit in half of the mappings vm.max_map_count has left. numaaff
 * never writes the system's weights: they are the administrator's, shared by every process.
 * `options.move_existing` moves pages already there. Weights from the memory attributes:
 * `weighted_interleave(p, n, bandwidth_weights())`.
 *
 * Thread-safe (acts on the address space); allocates the run plan; one mbind per run.
 * @throws std::invalid_argument naming `weights` for an empty list, a node the kernel does
 *         not have, a node without memory given a weight, a node listed twice or weights that
 *         are all 0; for a null/wrapping range.
 * @throws std::system_error named "mbind" if a call fails (ENOMEM: out of mappings).
 * @note One node: the pages stay on it. A refused call (sandbox) is a counted no-op.
 */
void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights);
void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights, policy_options options);
void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights, policy_options options,
                         std::error_code& ec) noexcept;

/**
 * Weights for weighted_interleave in proportion to each node's memory bandwidth in `topo`: a
 * node's weight is the best bandwidth any CPU node has to it (the firmware's HMAT or the
 * user's override: topology::bandwidth), reduced by their gcd and scaled to at most 100 (a
 * node is never scaled below 1). A node with no known bandwidth gets 0 (left out) while others
 * have one; without any value (no HMAT) every node gets 1: plain interleave. A node of this
 * system without memory (CPUs only) gets 0.
 * Thread-safe; allocates the result. @note One node: {{0, 1}}.
 */
std::vector<node_weight> bandwidth_weights(const topology& topo = topology::system());

/**
 * The system-wide weighted-interleave weights of `nodes`, as the administrator set them (Linux
 * 6.9+: /sys/kernel/mm/mempolicy/weighted_interleave/nodeN); 1 for a node the kernel gives no
 * weight (older kernels: then plain interleave). Given to weighted_interleave, they select the
 * kernel's MPOL_WEIGHTED_INTERLEAVE, which reads them at each page fault (a later change of the
 * system weights applies to pages placed after it).
 * Thread-safe; reads sysfs. @throws std::invalid_argument naming `nodes` for an empty list or
 * a node the kernel does not have.
 */
std::vector<node_weight> system_interleave_weights(const std::vector<node_id>& nodes);

/// Back to the process's default policy (MPOL_DEFAULT: first touch) for the range.
void reset_policy(void* addr, std::size_t bytes);
void reset_policy(void* addr, std::size_t bytes, std::error_code& ec) noexcept;

// ---- migration --------------------------------------------------------------------------

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

// ---- placement report -------------------------------------------------------------------

/// Pages per node of a range, as returned by where().
class placement {
 public:
  /// Resident pages on node `n` (0 for a node without pages or not in the system).
  std::size_t pages_on(node_id n) const noexcept {
    return n >= 0 && static_cast<std::size_t>(n) < per_node_.size() ? per_node_[static_cast<std::size_t>(n)] : 0;
  }
  /// Pages never touched (the kernel reports -ENOENT or -EFAULT, depending on version).
  std::size_t unpopulated() const noexcept { return unpopulated_; }
  /// Pages whose placement could not be read (other errors).
  std::size_t unknown() const noexcept { return unknown_; }
  /// Pages in the range.
  std::size_t total() const noexcept { return total_; }
  /// Pages with a known node.
  std::size_t resident() const noexcept { return total_ - unpopulated_ - unknown_; }
  /// Nodes holding at least one page, ascending.
  std::vector<node_id> nodes() const;
  /// The node holding most resident pages (lowest number on ties), -1 if none is resident.
  node_id dominant_node() const noexcept;
  /// Share of the resident pages that are on `n` (0 when none is resident).
  double fraction_on(node_id n) const noexcept {
    return resident() == 0 ? 0.0 : static_cast<double>(pages_on(n)) / static_cast<double>(resident());
  }
  /// "pages 512: node0 256, node1 256, unpopulated 0"; on a machine with memory tiers each
  /// node carries its tier (detail as placement_table): "node2 (memory) 256".
  std::string to_string() const;

 private:
  friend placement where(const void* addr, std::size_t bytes, std::error_code& ec) noexcept;

  /// Counts one page's move_pages status (where() builds the report).
  void add_status(int status) {
    ++total_;
    if (status >= 0) {
      if (static_cast<std::size_t>(status) >= per_node_.size()) per_node_.resize(static_cast<std::size_t>(status) + 1, 0);
      ++per_node_[static_cast<std::size_t>(status)];
    } else if (status == -ENOENT || status == -EFAULT) {
      ++unpopulated_;
    } else {
      ++unknown_;
    }
  }

  std::vector<std::size_t> per_node_;
  std::size_t unpopulated_ = 0;
  std::size_t unknown_ = 0;
  std::size_t total_ = 0;
};

/**
 * Where the pages of the range are now: one move_pages query per batch, linear in the range.
 *
 * Thread-safe; allocates O(batch) scratch. Pages of a PROT_NONE range (an armed next-touch
 * range) read as unpopulated on kernels before 6.12.
 * @throws std::invalid_argument for a bad range; std::system_error named "move_pages" if the
 *         query fails as a whole. A sandbox that denies move_pages is no error: mincore tells
 *         resident from unpopulated pages, resident ones count on the only node of a one-node
 *         machine and as unknown() on several.
 */
placement where(const void* addr, std::size_t bytes);
placement where(const void* addr, std::size_t bytes, std::error_code& ec) noexcept;

/**
 * The node that holds most of the range's pages, estimated from at most 16 pages spread evenly
 * over it in one move_pages query (ties: the lowest node): cheap enough to ask per task, which
 * is what thread_pool::submit_near does. -1 when none of those pages is resident (never
 * touched) or the kernel will not say (a sandbox that denies move_pages).
 *
 * Thread-safe; allocates nothing; one system call.
 * @throws std::invalid_argument for a null/wrapping range; std::system_error named
 *         "move_pages" if the query fails as a whole.
 */
node_id data_node(const void* addr, std::size_t bytes);
node_id data_node(const void* addr, std::size_t bytes, std::error_code& ec) noexcept;

/**
 * A table in the style of the classic numa_test output: one line per named range, a column
 * `nodeNN` per node with the share of resident pages there, then unpopulated and total pages.
 * On a machine with memory tiers (memory-only nodes, or nodes hwloc gives a kind), a `tier`
 * line under the header names each column's: the kind (HBM, NVM, CXL-DRAM...) or "memory" /
 * "cpu". @throws as topology::system() (a malformed environment variable).
 */
std::string placement_table(const std::vector<std::pair<std::string, placement>>& rows);

// ---- implementation ---------------------------------------------------------------------

namespace detail {

/// Pages per move_pages batch. See benchmarks/README.md: throughput is flat from 1024 pages
/// up, and 4096 pages (16 MiB of 4 KiB pages) bounds scratch to 64 KiB.
inline constexpr std::size_t migration_batch = 4096;

/// The tables that allocation, arming and freeing read are first built during static
/// initialisation (as libnuma reads sysfs when it is loaded), before any thread can fork: a
/// child forked while another thread runs a C++ static's first initialisation waits on its
/// guard forever.
inline bool build_process_tables() noexcept {
  try {
    (void)page_size();
    (void)huge_page_size();
    (void)huge_pages_possible();
  } catch (...) {  // out of memory at start-up: built on first use instead
  }
  return true;
}
inline const bool process_tables_ready = build_process_tables();

/// A validated, page-rounded range.
struct page_span {
  std::uintptr_t first = 0;  // first page address
  std::size_t pages = 0;
  void* address() const noexcept { return reinterpret_cast<void*>(first); }
  std::size_t bytes() const noexcept { return pages * page_size(); }
};

/// Validates a caller's range and rounds it outward to pages. Allocates nothing, so the
/// noexcept overloads can use it; require_range() words the error for the throwing ones.
inline bool make_span(const void* addr, std::size_t bytes, page_span& span) noexcept {
  span = {};
  if (bytes == 0) return true;
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
  if (addr == nullptr || a + bytes < a || align_up(a + bytes, page_size()) < a) return false;
  span.first = align_down(a, page_size());
  span.pages = (align_up(a + bytes, page_size()) - span.first) / page_size();
  return true;
}

/// Node list -> nodemask for mbind; why is set for an empty list or unknown node.
inline bool make_mask(const std::vector<node_id>& nodes, std::vector<unsigned long>& mask, std::string& why) {
  if (nodes.empty()) {
    why = "the node list is empty";
    return false;
  }
  constexpr std::size_t bits = 8 * sizeof(unsigned long);
  mask.assign(static_cast<std::size_t>(kernel_nodes().back()) / bits + 1, 0);
  for (node_id n : nodes) {
    if (!valid_node(n)) {
      why = node_error(n);
      return false;
    }
    mask[static_cast<std::size_t>(n) / bits] |= 1UL << (static_cast<std::size_t>(n) % bits);
  }
  return true;
}

/// One single-node mask per entry of `nodes` (for calls that bind runs of a range to one node
/// each); false, with `why`, for a node the kernel does not have.
inline bool single_node_masks(const std::vector<node_id>& nodes, std::vector<std::vector<unsigned long>>& masks,
                              std::string& why) {
  masks.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!make_mask({nodes[i]}, masks[i], why)) return false;
  return true;
}

inline unsigned mbind_flags(policy_options o) noexcept {
  return (o.move_existing ? MPOL_MF_MOVE : 0u) | (o.move_existing && o.strict ? MPOL_MF_STRICT : 0u);
}

/// One mbind over a validated span. A refused call (no NUMA, or a sandbox) is a counted,
/// successful no-op.
inline bool apply_policy(const page_span& span, int mode, const std::vector<unsigned long>& mask, policy_options o,
                         std::error_code& ec, bool* was_refused = nullptr) noexcept {
  if (span.pages == 0) return true;
  if (o.move_existing) {  // a huge page straddling an edge would move its neighbours too
    std::uintptr_t edges[2] = {span.first, span.first + span.bytes()};
    split_huge_pages(edges, 2);
  }
  const auto r = sys_mbind(span.address(), span.bytes(), mode, mask.empty() ? nullptr : mask.data(),
                           mask.size() * 8 * sizeof(unsigned long) + 1, mbind_flags(o));
  if (refused(r.error)) {
    if (r.error != ENOSYS) refusals.policies.fetch_add(1, std::memory_order_relaxed);
    if (was_refused != nullptr) *was_refused = true;
    return true;
  }
  return report(r, ec);
}

/**
 * Placement statuses for pages[0, n) when move_pages is refused: what mincore can tell.
 * A page that is not resident is unpopulated (-ENOENT); a resident one is on the kernel's only
 * node when it has one, and unknown (-EPERM) otherwise. mincore counts a page that was only
 * read (the shared zero page) as resident, where move_pages says unpopulated.
 */
inline void residency_status(void* const* pages, std::size_t n, int* status) {
  const std::size_t ps = page_size();
  const std::vector<node_id>& nodes = kernel_nodes();
  const int resident = nodes.size() == 1 ? nodes.front() : -EPERM;
  std::vector<unsigned char> vec(n);
  // The pages of a batch are consecutive: one call, or one per page where the range has holes.
  const bool whole = call(sys::mincore, [&] { return ::mincore(pages[0], n * ps, vec.data()); }).error == 0;
  std::uint64_t unknown = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!whole && !call(sys::mincore, [&] { return ::mincore(pages[i], ps, &vec[i]); })) vec[i] = 0;
    status[i] = (vec[i] & 1) != 0 ? resident : -ENOENT;
    unknown += status[i] == -EPERM ? 1 : 0;
  }
  refusals.pages.fetch_add(unknown, std::memory_order_relaxed);
}

/// Shared front of every policy call: range + nodes validation, then one mbind.
inline void policy_call(void* addr, std::size_t bytes, int mode, const std::vector<node_id>& nodes, policy_options o,
                        std::error_code& ec) noexcept {
  ec.clear();
  try {
    page_span span;
    std::string why;
    std::vector<unsigned long> mask;
    if (!make_span(addr, bytes, span) || (mode != MPOL_DEFAULT && !make_mask(nodes, mask, why))) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    apply_policy(span, mode, mask, o, ec);
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}

/// Throwing forms check their arguments first, so caller errors carry a message naming them.
inline void require_range(const char* fn, const void* addr, std::size_t bytes) {
  page_span span;
  if (make_span(addr, bytes, span)) return;
  if (addr == nullptr) throw_invalid_argument(std::string(fn) + ": addr is null with bytes = " + std::to_string(bytes));
  throw_invalid_argument(std::string(fn) + ": the range at " + std::to_string(reinterpret_cast<std::uintptr_t>(addr)) +
                         " of " + std::to_string(bytes) + " bytes wraps the address space");
}
inline void require_nodes(const char* fn, const std::vector<node_id>& nodes) {
  std::vector<unsigned long> mask;
  std::string why;
  if (!make_mask(nodes, mask, why)) throw_invalid_argument(std::string(fn) + ": " + why);
}

/// The throwing form of a policy call.
inline void policy_call_or_throw(const char* fn, void* addr, std::size_t bytes, int mode,
                                 const std::vector<node_id>& nodes, policy_options o) {
  require_range(fn, addr, bytes);
  if (mode != MPOL_DEFAULT) require_nodes(fn, nodes);
  or_throw(fn, [&](std::error_code& ec) { policy_call(addr, bytes, mode, nodes, o, ec); });
}

/// Pages of a span in batches: calls f(count) with `pages` filled in, until f returns false;
/// true when every batch was seen.
template <class F>
inline bool for_each_batch(const page_span& span, std::vector<void*>& pages, F&& f) {
  const std::size_t ps = page_size();
  for (std::size_t done = 0; done < span.pages;) {
    const std::size_t n = std::min(migration_batch, span.pages - done);
    pages.resize(n);
    for (std::size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(span.first + (done + i) * ps);
    if (!f(n)) return false;
    done += n;
  }
  return true;
}

}  // namespace detail

// ---- range policies: definitions ----------------------------------------------------------

inline void bind(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o) {
  detail::policy_call_or_throw("bind", addr, bytes, MPOL_BIND, nodes, o);
}
inline void bind(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o,
                 std::error_code& ec) noexcept {
  detail::policy_call(addr, bytes, MPOL_BIND, nodes, o, ec);
}
inline void bind(void* addr, std::size_t bytes, node_id node, policy_options o) {
  detail::policy_call_or_throw("bind", addr, bytes, MPOL_BIND, {node}, o);
}
inline void bind(void* addr, std::size_t bytes, node_id node, policy_options o, std::error_code& ec) noexcept {
  try {
    bind(addr, bytes, std::vector<node_id>{node}, o, ec);
  } catch (...) {  // vector construction only
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}

inline void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o) {
  detail::policy_call_or_throw("interleave", addr, bytes, MPOL_INTERLEAVE, nodes, o);
}
inline void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o,
                       std::error_code& ec) noexcept {
  detail::policy_call(addr, bytes, MPOL_INTERLEAVE, nodes, o, ec);
}

inline void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, std::size_t granularity,
                       policy_options o, std::error_code& ec) noexcept {
  ec.clear();
  const std::size_t ps = detail::page_size();
  if (granularity == 0 || granularity % ps != 0 || nodes.empty()) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  if (granularity == ps) return interleave(addr, bytes, nodes, o, ec);
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  try {
    std::string why;
    std::vector<std::vector<unsigned long>> masks;
    if (!detail::single_node_masks(nodes, masks, why)) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    const std::size_t per = granularity / ps;
    for (std::size_t g = 0; g * per < span.pages; ++g) {
      detail::page_span part{span.first + g * granularity, std::min(per, span.pages - g * per)};
      if (!detail::apply_policy(part, MPOL_BIND, masks[g % masks.size()], o, ec)) return;
    }
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}
inline void interleave(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, std::size_t granularity,
                       policy_options o) {
  const std::size_t ps = detail::page_size();
  if (granularity == 0 || granularity % ps != 0) {
    detail::throw_invalid_argument("interleave: granularity " + std::to_string(granularity) +
                                   " is not a non-zero multiple of the page size (" + std::to_string(ps) + ")");
  }
  detail::require_range("interleave", addr, bytes);
  detail::require_nodes("interleave", nodes);
  detail::or_throw("interleave", [&](std::error_code& ec) { interleave(addr, bytes, nodes, granularity, o, ec); });
}

inline void prefer(void* addr, std::size_t bytes, node_id node, policy_options o) {
  detail::policy_call_or_throw("prefer", addr, bytes, MPOL_PREFERRED, {node}, o);
}
inline void prefer(void* addr, std::size_t bytes, node_id node, policy_options o, std::error_code& ec) noexcept {
  try {
    detail::policy_call(addr, bytes, MPOL_PREFERRED, std::vector<node_id>{node}, o, ec);
  } catch (...) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}

namespace detail {
/// MPOL_PREFERRED_MANY where the kernel has it (EINVAL otherwise: then the first node alone).
inline void prefer_many(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o,
                        std::error_code& ec) noexcept {
  if (nodes.size() == 1) return policy_call(addr, bytes, MPOL_PREFERRED, nodes, o, ec);
  policy_call(addr, bytes, MPOL_PREFERRED_MANY, nodes, o, ec);
  if (ec == std::errc::invalid_argument && !nodes.empty()) {
    std::error_code again;
    try {
      policy_call(addr, bytes, MPOL_PREFERRED, std::vector<node_id>{nodes.front()}, o, again);
    } catch (...) {
      again = std::make_error_code(std::errc::not_enough_memory);
    }
    // Keep the original EINVAL if the single-node form is invalid too (a caller error).
    if (!again) ec.clear();
  }
}
}  // namespace detail

inline void prefer(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o,
                   std::error_code& ec) noexcept {
  detail::prefer_many(addr, bytes, nodes, o, ec);
}
inline void prefer(void* addr, std::size_t bytes, const std::vector<node_id>& nodes, policy_options o) {
  detail::require_range("prefer", addr, bytes);
  detail::require_nodes("prefer", nodes);
  detail::or_throw("prefer", [&](std::error_code& ec) { detail::prefer_many(addr, bytes, nodes, o, ec); });
}

inline void set_home_node(void* addr, std::size_t bytes, node_id home, policy_options o, std::error_code& ec) noexcept {
  ec.clear();
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span) || !detail::valid_node(home)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return;
  }
  if (span.pages == 0) return;
  const std::uint64_t refused_before = detail::refusals.policies.load(std::memory_order_relaxed);
  detail::policy_call(addr, bytes, MPOL_BIND, detail::kernel_nodes(), o, ec);
  if (ec || detail::refusals.policies.load(std::memory_order_relaxed) != refused_before) return;  // refused: one no-op
  const auto r = detail::sys_set_mempolicy_home_node(span.address(), span.bytes(), static_cast<unsigned long>(home), 0);
  if (r) return;
  std::error_code ignored;
  detail::policy_call(addr, bytes, MPOL_DEFAULT, {}, {}, ignored);  // leave the range as it was
  if (r.error == EPERM) {  // a sandbox: a counted no-op, as for the other policies
    detail::refusals.policies.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::error_code failure = r.failure();
  ec = r.error == ENOSYS ? make_error_code(errc::feature_unavailable) : failure;
}
inline void set_home_node(void* addr, std::size_t bytes, node_id home, policy_options o) {
  detail::require_range("set_home_node", addr, bytes);
  detail::require_node("set_home_node", home);
  detail::or_throw("set_home_node", [&](std::error_code& ec) { set_home_node(addr, bytes, home, o, ec); });
}

namespace detail {

/// What is wrong with a weight list ("" when nothing); `with_memory`: the nodes that have memory.
inline std::string weights_error(const std::vector<node_weight>& weights, const std::vector<node_id>& with_memory = memory_nodes()) {
  if (weights.empty()) return "weights: the list is empty";
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!valid_node(weights[i].node)) return "weights: " + node_error(weights[i].node);
    if (weights[i].weight != 0 && std::find(with_memory.begin(), with_memory.end(), weights[i].node) == with_memory.end())
      return "weights: node " + std::to_string(weights[i].node) + " has no memory (nodes with memory: " + format_list(with_memory) + ")";
    for (std::size_t j = 0; j < i; ++j)
      if (weights[j].node == weights[i].node) return "weights: node " + std::to_string(weights[i].node) + " is listed twice";
    total += weights[i].weight;
  }
  return total == 0 ? "weights: every weight is 0" : "";
}

/// A run of `pages` pages from page `first` of a range, for entry `owner` of a weight list.
struct page_run {
  std::size_t first;
  std::size_t pages;
  std::size_t owner;
};

/**
 * The runs of a weighted interleave of `pages` pages over `weights` (not all 0), at most about
 * `max_runs` of them. The weights are reduced by their gcd to a round of W pages; a tile is k
 * rounds, with k the smallest that keeps the runs within max_runs (at least 1), and entry i
 * gets k * w_i consecutive pages of each tile, in list order. The last, partial tile is split
 * by the same proportions (rounded to nearest at each cumulative boundary). Pure: calls
 * f(page_run) in address order.
 */
template <class F>
void for_each_weighted_run(std::size_t pages, const std::vector<std::uint64_t>& weights, std::size_t max_runs, F&& f) {
  // Reduced by the gcd; a round of more than 2^20 pages is scaled down to 2^20 (a relative
  // error below 1e-6, far under one page of any range a round fits in), which keeps every
  // product below in 64 bits.
  constexpr std::uint64_t round_max = std::uint64_t{1} << 20;
  std::uint64_t g = 0, total = 0;
  std::size_t used = 0;
  for (std::uint64_t w : weights) {
    if (w == 0) continue;
    g = std::gcd(g, w);
    ++used;
  }
  if (used == 0 || pages == 0) return;
  std::vector<std::uint64_t> share(weights.size(), 0);
  for (std::size_t i = 0; i < weights.size(); ++i) total += share[i] = weights[i] / g;
  if (total > round_max) {
    std::uint64_t scaled = 0;
    for (std::size_t i = 0; i < weights.size(); ++i)
      if (share[i] != 0) scaled += share[i] = std::max<std::uint64_t>(1, share[i] * round_max / total);
    total = scaled;
  }
  const std::size_t tiles_allowed = std::max<std::size_t>(1, max_runs / used);
  const std::uint64_t per_tile_min = (pages + tiles_allowed - 1) / tiles_allowed;  // pages a tile must hold
  const std::uint64_t k = std::max<std::uint64_t>(1, (per_tile_min + total - 1) / total);
  const std::uint64_t tile = k * total;  // <= per_tile_min + total: no overflow
  std::size_t at = 0;
  const auto split = [&](std::uint64_t span_pages) {
    // Entry i's run covers [round(span * C_i / W), round(span * C_(i+1) / W)), C the running
    // sum: rounded to nearest, so that no entry is favoured by its place in the list.
    std::uint64_t before = 0, start = 0;
    for (std::size_t i = 0; i < share.size(); ++i) {
      before += share[i];
      const std::uint64_t end = span_pages / total * before + (span_pages % total * before + total / 2) / total;
      if (end > start) f(page_run{at + static_cast<std::size_t>(start), static_cast<std::size_t>(end - start), i});
      start = end;
    }
    at += static_cast<std::size_t>(span_pages);
  };
  while (pages - at >= tile) split(tile);
  if (at < pages) split(pages - at);
}

/// Most mappings one weighted interleave adds: 1 GiB in 2 MiB tiles of two runs each. More
/// would take map count from the rest of the program (next-touch arming splits mappings too)
/// for a finer mix that only a single sequential stream could notice.
inline constexpr std::size_t weighted_runs_max = 1024;

/**
 * Mappings one weighted interleave may add: weighted_runs_max, or half of what is left above
 * the reserve (mapping_reserve) if that is less; 0 when nothing is. Process-wide by
 * construction: it is computed from the process's real mapping count, so all the calls
 * together (and whatever the program unmapped meanwhile) never take the process past the
 * reserve.
 */
inline std::size_t mapping_budget() { return std::min(weighted_runs_max, mapping_headroom() / 2); }

/// True when the kernel's MPOL_WEIGHTED_INTERLEAVE gives `shares` of `nodes` exactly: the
/// system weights exist and are in the same proportion.
inline bool system_weights_match(const std::vector<node_id>& nodes, const std::vector<std::uint64_t>& shares) {
  std::vector<std::uint64_t> sys(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if ((sys[i] = system_interleave_weight(nodes[i])) == 0) return false;
  for (std::size_t i = 1; i < nodes.size(); ++i)
    if (shares[i] * sys[0] != shares[0] * sys[i]) return false;  // weights < 2^32: no overflow
  return true;
}

}  // namespace detail

namespace detail {

/// The bandwidth of node `n`'s memory from its best CPU node (0 when unknown): a property of
/// the memory, as the kernel's memory tiers see it, where topology::bandwidth is per pair
/// (and Linux reports only a target's best initiators).
inline std::uint64_t node_bandwidth(const topology& topo, node_id n) {
  std::uint64_t best = 0;
  for (node_id i : topo.cpu_nodes()) best = std::max(best, topo.bandwidth(i, n));
  return best;
}

}  // namespace detail

inline std::vector<node_weight> bandwidth_weights(const topology& topo) {
  std::vector<std::uint64_t> best(topo.node_count(), 0);
  std::vector<bool> has_memory(topo.node_count(), true);  // a node without memory takes no share
  const auto& with_memory = detail::memory_nodes();
  std::uint64_t g = 0, most = 0;
  for (std::size_t j = 0; j < best.size(); ++j) {
    if (topo.is_this_system())
      has_memory[j] = std::find(with_memory.begin(), with_memory.end(), topo.nodes()[j]) != with_memory.end();
    best[j] = has_memory[j] ? detail::node_bandwidth(topo, topo.nodes()[j]) : 0;
    g = std::gcd(g, best[j]);
    most = std::max(most, best[j]);
  }
  std::vector<node_weight> out;
  for (std::size_t j = 0; j < best.size(); ++j) {
    std::uint64_t w = most == 0 ? (has_memory[j] ? 1 : 0) : best[j] / g;
    if (most != 0 && most / g > 100 && w != 0)  // g is 0 when no node has a value
      w = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(100.0 * static_cast<double>(best[j]) / static_cast<double>(most) + 0.5));
    out.push_back({topo.nodes()[j], static_cast<unsigned>(w)});
  }
  return out;
}

inline std::vector<node_weight> system_interleave_weights(const std::vector<node_id>& nodes) {
  detail::require_nodes("system_interleave_weights", nodes);
  std::vector<node_weight> out;
  for (node_id n : nodes) out.push_back({n, std::max(1u, detail::system_interleave_weight(n))});
  return out;
}

inline void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights,
                                policy_options o, std::error_code& ec) noexcept {
  ec.clear();
  try {
    detail::page_span span;
    if (!detail::make_span(addr, bytes, span) || !detail::weights_error(weights).empty()) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    std::vector<node_id> nodes;
    std::vector<std::uint64_t> shares;
    for (const node_weight& w : weights) {
      if (w.weight == 0) continue;
      nodes.push_back(w.node);
      shares.push_back(w.weight);
    }
    std::string why;
    // One policy for the whole range where the kernel has one that gives exactly this.
    const bool equal = std::all_of(shares.begin(), shares.end(), [&](std::uint64_t s) { return s == shares.front(); });
    const int mode = equal ? (nodes.size() == 1 ? MPOL_PREFERRED : MPOL_INTERLEAVE)
                           : detail::system_weights_match(nodes, shares) ? MPOL_WEIGHTED_INTERLEAVE : MPOL_DEFAULT;
    if (mode != MPOL_DEFAULT) {
      std::vector<unsigned long> mask;
      detail::make_mask(nodes, mask, why);
      detail::apply_policy(span, mode, mask, o, ec);
      if (mode != MPOL_WEIGHTED_INTERLEAVE || ec != std::errc::invalid_argument) return;
      ec.clear();  // a kernel that lists weights but lacks the mode: the method below
    }
    // Too few mappings left for one run per node: plain interleave (one policy, counted)
    // rather than taking the mappings the rest of the program needs.
    const std::size_t budget = detail::mapping_budget();
    if (budget < nodes.size()) {
      std::vector<unsigned long> mask;
      detail::make_mask(nodes, mask, why);
      detail::refusals.weighted_fallbacks.fetch_add(1, std::memory_order_relaxed);
      detail::apply_policy(span, MPOL_INTERLEAVE, mask, o, ec);
      return;
    }
    std::vector<std::vector<unsigned long>> masks;
    detail::single_node_masks(nodes, masks, why);  // nodes validated above
    const std::size_t ps = detail::page_size();
    bool refused = false;  // a sandbox: one counted no-op, not one per run
    detail::for_each_weighted_run(span.pages, shares, budget, [&](const detail::page_run& r) {
      if (ec || refused) return;
      detail::apply_policy(detail::page_span{span.first + r.first * ps, r.pages}, MPOL_PREFERRED, masks[r.owner], o, ec,
                           &refused);
    });
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}
inline void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights,
                                policy_options o) {
  detail::require_range("weighted_interleave", addr, bytes);
  const std::string why = detail::weights_error(weights);
  if (!why.empty()) detail::throw_invalid_argument("weighted_interleave: " + why);
  detail::or_throw("weighted_interleave", [&](std::error_code& ec) { weighted_interleave(addr, bytes, weights, o, ec); });
}
inline void weighted_interleave(void* addr, std::size_t bytes, const std::vector<node_weight>& weights) {
  weighted_interleave(addr, bytes, weights, policy_options{});
}

inline void reset_policy(void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  detail::policy_call(addr, bytes, MPOL_DEFAULT, {}, {}, ec);
}
inline void reset_policy(void* addr, std::size_t bytes) {
  detail::policy_call_or_throw("reset_policy", addr, bytes, MPOL_DEFAULT, {}, {});
}

// ---- migration: definitions -------------------------------------------------------------

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
      for (std::size_t i = 0; i < todo.size(); ++i) count_failure(r, m.error);
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
      } else if (status[i] == -ENOENT || status[i] == -EFAULT) {
        ++r.unpopulated;  // unmapped or discarded meanwhile
      } else if (attempt + 1 < attempts) {
        busy.push_back(todo[i]);
        busy_dest.push_back(dest[i]);
      } else {
        count_failure(r, status[i] < 0 ? -status[i] : EBUSY);
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

// ---- placement: definitions -------------------------------------------------------------

inline std::vector<node_id> placement::nodes() const {
  std::vector<node_id> out;
  for (std::size_t n = 0; n < per_node_.size(); ++n)
    if (per_node_[n] != 0) out.push_back(static_cast<node_id>(n));
  return out;
}

inline node_id placement::dominant_node() const noexcept {
  node_id best = -1;
  std::size_t most = 0;
  for (std::size_t n = 0; n < per_node_.size(); ++n) {
    if (per_node_[n] > most) {
      most = per_node_[n];
      best = static_cast<node_id>(n);
    }
  }
  return best;
}

namespace detail {

/**
 * The indices [first, last) of an array (`stride` > 0 bytes per index, from `data`) cut into
 * blocks of at least `grain` indices and of a page of data (at most 2^16 blocks), with the
 * node of each block's first page: one batched page query; -1 where a page is unpopulated, or
 * where the query is refused (a sandbox) on a machine of several nodes (on one, its node).
 * Calls f(lo, hi, node) in index order. Allocates.
 * @throws std::invalid_argument naming `fn` and `last` when data + last * stride wraps;
 *         std::system_error named "move_pages" if the query fails otherwise.
 */
template <class F>
void for_each_data_block(const char* fn, const void* data, std::size_t stride, std::size_t first, std::size_t last,
                         std::size_t grain, F&& f) {
  if (last <= first) return;
  const auto base = reinterpret_cast<std::uintptr_t>(data);
  if (last > (UINTPTR_MAX - base) / stride)
    throw_invalid_argument(std::string(fn) + ": last = " + std::to_string(last) + " indices of " + std::to_string(stride) +
                           " bytes from the array wrap the address space");
  const std::size_t ps = page_size(), n = last - first;
  std::size_t block = std::max<std::size_t>({grain, 1, (ps + stride - 1) / stride});
  constexpr std::size_t max_blocks = std::size_t{1} << 16;
  if (n / block >= max_blocks) block = n / max_blocks + 1;
  const std::size_t blocks = n / block + (n % block != 0 ? 1 : 0);
  std::vector<void*> pages(blocks);
  std::vector<int> status(blocks, -1);
  for (std::size_t b = 0; b < blocks; ++b) pages[b] = reinterpret_cast<void*>((base + (first + b * block) * stride) / ps * ps);
  constexpr std::size_t batch = 4096;
  for (std::size_t b = 0; b < blocks; b += batch) {
    const std::size_t count = std::min(batch, blocks - b);
    const auto q = sys_move_pages(count, pages.data() + b, nullptr, status.data() + b, 0);
    if (q) continue;
    if (!refused(q.error)) throw_failure(q.failure(), "move_pages");
    const int only = kernel_nodes().size() == 1 ? kernel_nodes().front() : -1;  // a sandbox
    std::fill(status.begin() + static_cast<std::ptrdiff_t>(b), status.end(), only);
    break;
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t lo = first + b * block;
    f(lo, lo + std::min(block, last - lo), status[b] >= 0 ? status[b] : -1);
  }
}

/// The tier of kernel node `n` for reports: hwloc's kind (HBM, CXL-DRAM...), else "memory"
/// for a memory-only node and "cpu" for the others; "" where the system topology does not
/// describe the kernel's nodes (synthetic, XML).
inline std::string tier_label(node_id n) {
  const topology& topo = topology::system();
  if (!topo.is_this_system() || !topo.has_node(n)) return "";
  if (!topo.kind_of(n).empty()) return topo.kind_of(n);
  return topo.has_cpus(n) ? "cpu" : "memory";
}
/// True when some of `nodes` is not a plain CPU node: reports then label every node's tier.
inline bool shows_tiers(const std::vector<node_id>& nodes) {
  return std::any_of(nodes.begin(), nodes.end(), [](node_id n) {
    const std::string t = tier_label(n);
    return !t.empty() && t != "cpu";
  });
}

}  // namespace detail

inline std::string placement::to_string() const {
  std::string s = "pages " + std::to_string(total_) + ":";
  const std::vector<node_id> held = nodes();
  const bool tiers = detail::shows_tiers(held);
  for (node_id n : held) {
    s += " node" + std::to_string(n) + (tiers ? " (" + detail::tier_label(n) + ")" : std::string()) + " " +
         std::to_string(pages_on(n)) + ",";
  }
  s += " unpopulated " + std::to_string(unpopulated_);
  if (unknown_ != 0) s += ", unknown " + std::to_string(unknown_);
  return s;
}

inline placement where(const void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  ec.clear();
  placement p;
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return p;
  }
  try {
    std::vector<void*> pages;
    std::vector<int> status;
    detail::for_each_batch(span, pages, [&](std::size_t n) {
      status.assign(n, 0);
      const auto q = detail::sys_move_pages(n, pages.data(), nullptr, status.data(), 0);
      if (!q) {
        if (!detail::refused(q.error)) return detail::report(q, ec), false;
        detail::residency_status(pages.data(), n, status.data());
      }
      for (std::size_t i = 0; i < n; ++i) p.add_status(status[i]);
      return true;
    });
  } catch (const std::bad_alloc&) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
  return p;
}

namespace detail {

inline constexpr std::size_t data_node_samples = 16;

/// data_node over a validated span (-1: not resident, not known, or the query failed: `ec`).
inline node_id sampled_node(const page_span& span, std::error_code& ec) noexcept {
  if (span.pages == 0) return -1;
  void* pages[data_node_samples];
  int status[data_node_samples];
  const std::size_t n = std::min(data_node_samples, span.pages);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t page = n == 1 ? 0 : i * (span.pages - 1) / (n - 1);
    pages[i] = reinterpret_cast<void*>(span.first + page * page_size());
  }
  const auto q = sys_move_pages(n, pages, nullptr, status, 0);
  if (!q) {
    if (!refused(q.error)) report(q, ec);
    return -1;
  }
  node_id best = -1;
  std::size_t best_count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (status[i] < 0) continue;
    std::size_t count = 0;
    for (std::size_t j = 0; j < n; ++j) count += status[j] == status[i] ? 1 : 0;
    if (count > best_count || (count == best_count && status[i] < best)) {
      best = status[i];
      best_count = count;
    }
  }
  return best;
}

/**
 * data_node for scheduling hints, cached per thread: an answer is reused for the same
 * (addr, bytes) while numaaff has migrated nothing since (migration_epoch) and for at most
 * data_node_ttl, after which pages the kernel moved on its own are seen again. "Not resident"
 * is never cached (a first touch changes it without a migration). -1 for any failure: a hint
 * is never an error.
 */
inline constexpr std::chrono::milliseconds data_node_ttl{50};
inline node_id cached_data_node(const void* addr, std::size_t bytes) noexcept {
  struct entry {
    const void* addr = nullptr;
    std::size_t bytes = 0;
    std::uint64_t epoch = 0;
    std::chrono::steady_clock::time_point at{};
    node_id node = -1;
  };
  // 32 sets of 4 (5 KiB per thread that gives hints), Fibonacci-hashed: blocks a power of two
  // apart, the usual case, spread over every set; a miss replaces the set's oldest answer.
  constexpr std::size_t ways = 4;
  static thread_local entry cache[32][ways];
  const std::uint64_t key = (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(addr)) ^ (bytes << 1)) *
                            0x9E3779B97F4A7C15ull;
  entry* set = cache[key >> 59];  // the top 5 bits
  const std::uint64_t epoch = migration_epoch.load(std::memory_order_acquire);
  const auto now = std::chrono::steady_clock::now();
  entry* victim = &set[0];
  for (std::size_t w = 0; w < ways; ++w) {
    entry& e = set[w];
    if (e.addr == addr && e.bytes == bytes) {
      if (e.node >= 0 && e.epoch == epoch && now - e.at < data_node_ttl) return e.node;
      victim = &e;
      break;
    }
    if (e.at < victim->at) victim = &e;
  }
  entry& e = *victim;
  page_span span;
  if (!make_span(addr, bytes, span)) return -1;
  std::error_code ec;
  const node_id n = sampled_node(span, ec);
  e = entry{addr, bytes, epoch, now, n};
  return n;
}

}  // namespace detail

inline node_id data_node(const void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  ec.clear();
  detail::page_span span;
  if (!detail::make_span(addr, bytes, span)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    return -1;
  }
  return detail::sampled_node(span, ec);
}
inline node_id data_node(const void* addr, std::size_t bytes) {
  detail::require_range("data_node", addr, bytes);
  return detail::or_throw("data_node", [&](std::error_code& ec) { return data_node(addr, bytes, ec); });
}

inline placement where(const void* addr, std::size_t bytes) {
  detail::require_range("where", addr, bytes);
  placement p = detail::or_throw("where", [&](std::error_code& ec) { return where(addr, bytes, ec); });
  return p;
}

inline std::string placement_table(const std::vector<std::pair<std::string, placement>>& rows) {
  std::vector<node_id> columns = detail::kernel_nodes();
  for (const auto& row : rows)
    for (node_id n : row.second.nodes())
      if (std::find(columns.begin(), columns.end(), n) == columns.end()) columns.push_back(n);
  std::sort(columns.begin(), columns.end());
  std::size_t width = 5;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  char cell[32];
  std::string s = "range" + std::string(width - 5, ' ');
  for (node_id n : columns) {
    std::snprintf(cell, sizeof cell, "  node%02d", n);
    s += cell;
  }
  s += "  unpopulated      total\n";
  if (detail::shows_tiers(columns)) {  // each column's tier, cut to the column's width
    s += "tier" + std::string(width - 4, ' ');
    for (node_id n : columns) {
      std::snprintf(cell, sizeof cell, "  %6s", detail::tier_label(n).substr(0, 6).c_str());
      s += cell;
    }
    s += "\n";
  }
  for (const auto& row : rows) {
    s += row.first + std::string(width - row.first.size(), ' ');
    for (node_id n : columns) {
      std::snprintf(cell, sizeof cell, "  %5.1f%%", 100.0 * row.second.fraction_on(n));
      s += cell;
    }
    std::snprintf(cell, sizeof cell, "  %11zu  %9zu\n", row.second.unpopulated(), row.second.total());
    s += cell;
  }
  return s;
}

}  // namespace numaaff
