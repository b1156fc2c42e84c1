/**
 * @file policy.hpp
 * @brief Range policies: where the kernel places the pages of a range when they are first touched.
 *
 * A *memory policy* says on which nodes the kernel places the pages of a range when they are
 * first touched: `bind` (only these nodes), `interleave` (round-robin over nodes, page by page
 * or in coarser granules), `prefer` (this node first, others when it is full) and
 * `set_home_node` (any node, nearest to the home node first; Linux 5.17+); `reset_policy` goes
 * back to the process's default (first touch). A policy acts on pages allocated after it is
 * set; the `move_existing` option also migrates pages already present (MPOL_MF_MOVE). Moving
 * pages explicitly is migration.hpp; weighted mixes over unequal nodes are interleave.hpp.
 *
 * Ranges (the same for every call on a range in numaaff): `addr`/`bytes` need not be
 * page-aligned; every call covers each page the range touches (rounded outward to page
 * boundaries), so neighbouring data on the same pages is affected too. `bytes == 0` is a
 * no-op. A null `addr` with non-zero `bytes`, a range that wraps the address space, an empty
 * node list or a node the kernel does not have is a caller error (`std::invalid_argument`).
 *
 * One node: every call works and is a no-op in effect (all pages are on node 0). A kernel
 * without NUMA system calls (ENOSYS), or a sandbox that refuses them: policies are accepted
 * as no-ops; see system_report().
 *
 * @code{.cpp}
 * std::vector<double> a(1 << 24);
 * numaaff::interleave(a.data(), a.size() * sizeof(double), {0, 1});  // before the first touch
 * numaaff::bind(b, bytes, 1);                                       // b: only on node 1
 * @endcode
 */
#pragma once

#include "detail/kernel_nodes.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page_span.hpp"
#include "detail/throw.hpp"
#include "errors.hpp"
#include "topology.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff {

/// Options shared by the range policies.
struct policy_options {
  /// Also migrate pages already present that do not conform (MPOL_MF_MOVE).
  bool move_existing = false;
  /// With move_existing: fail with EIO if some pages could not be moved (MPOL_MF_STRICT).
  bool strict = false;
};


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

/// Back to the process's default policy (MPOL_DEFAULT: first touch) for the range.
void reset_policy(void* addr, std::size_t bytes);
void reset_policy(void* addr, std::size_t bytes, std::error_code& ec) noexcept;

namespace detail {

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

/// The throwing form of a policy call.
inline void policy_call_or_throw(const char* fn, void* addr, std::size_t bytes, int mode,
                                 const std::vector<node_id>& nodes, policy_options o) {
  require_range(fn, addr, bytes);
  if (mode != MPOL_DEFAULT) require_nodes(fn, nodes);
  or_throw(fn, [&](std::error_code& ec) { policy_call(addr, bytes, mode, nodes, o, ec); });
}

}  // namespace detail

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

inline void reset_policy(void* addr, std::size_t bytes, std::error_code& ec) noexcept {
  detail::policy_call(addr, bytes, MPOL_DEFAULT, {}, {}, ec);
}
inline void reset_policy(void* addr, std::size_t bytes) {
  detail::policy_call_or_throw("reset_policy", addr, bytes, MPOL_DEFAULT, {}, {});
}

}  // namespace numaaff
