/**
 * @file placement.hpp
 * @brief Where the pages of a range are now: the placement report and the data's node.
 *
 * `where` asks the kernel, page by page in batches, which node holds each page of a range and
 * returns a `placement` (pages per node, unpopulated, unknown); `placement_table` prints
 * several in the style of numa_test, with each node's memory tier where the machine has tiers.
 * `data_node` is the cheap form for scheduling: the node holding most of a range, estimated
 * from 16 pages in one call (what thread_pool::submit_near and the dataflow tasks ask). Every
 * answer can be stale as soon as it returns: other threads, automatic NUMA balancing and
 * swapping move pages.
 *
 * Ranges and errors as policy.hpp. One node: every resident page is on it.
 *
 * @code{.cpp}
 * numaaff::placement p = numaaff::where(a.data(), a.size() * sizeof(double));
 * std::printf("%.1f%% on node 1 (%s)\n", 100 * p.fraction_on(1), p.to_string().c_str());
 * @endcode
 */
#pragma once

#include "detail/data_directory.hpp"
#include "detail/kernel_nodes.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page_span.hpp"
#include "detail/throw.hpp"
#include "errors.hpp"
#include "topology.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace numaaff {

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
