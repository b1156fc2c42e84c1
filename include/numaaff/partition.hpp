/**
 * @file partition.hpp
 * @brief How an index range is cut among workers and nodes: OpenMP's schedule(static) over
 * workers listed in node order.
 *
 * The model: a team (the pool's workers, an OpenMP team) is a list of workers in node order,
 * each with its node. An index range [first, last) is cut as `schedule(static)` cuts it: worker
 * i gets the i-th of `workers` contiguous blocks, the first `n % workers` one index longer. A
 * node's block is the union of its workers' blocks, so it is contiguous too. Data first touched
 * with one partition (thread_pool::parallel_for, openmp::first_touch, a `#pragma omp for
 * schedule(static)` of a team bound by openmp::bind_team) is local to the same partition later:
 * that is what keeps the pool, the OpenMP bridge and the oneTBB bridge in agreement.
 *
 * @code{.cpp}
 * numaaff::index_partition part({0, 0, 1, 1});           // two workers on each of nodes 0 and 1
 * for (const numaaff::index_block& b : part.node_blocks(0, 1000))
 *   numaaff::bind(a + b.first, (b.last - b.first) * sizeof *a, b.node);  // [0,500) on 0, [500,1000) on 1
 * @endcode
 *
 * Thread safety: values; const members may be called from any thread. They allocate the
 * vectors they return; they never block and never throw but std::bad_alloc.
 */
#pragma once

#include "topology.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace numaaff {

/// A contiguous block of an index range and the node it belongs to.
struct index_block {
  node_id node;
  std::size_t first;
  std::size_t last;
};

/// Part i of n items cut into `parts` as OpenMP's schedule(static) cuts them: [first, last)
/// relative to 0. Requires parts > 0 and i < parts.
inline std::pair<std::size_t, std::size_t> static_block(std::size_t n, std::size_t parts, std::size_t i) noexcept {
  const std::size_t base = n / parts, extra = n % parts;
  const std::size_t first = i * base + std::min(i, extra);
  return {first, first + base + (i < extra ? 1 : 0)};
}

/// Which of `parts` holds item `at` of n items cut by static_block (its inverse): the first
/// n % parts parts hold one item more. Requires parts > 0 and at < n.
inline std::size_t static_part_of(std::size_t n, std::size_t parts, std::size_t at) noexcept {
  const std::size_t base = n / parts, extra = n % parts, long_items = extra * (base + 1);
  return at < long_items ? at / (base + 1) : extra + (at - long_items) / base;  // base > 0 here: at < n
}

/// The static partition of index ranges over workers in node order (see the file comment).
class index_partition {
 public:
  /// `worker_nodes[i]` is the node of worker i, workers grouped by node.
  explicit index_partition(std::vector<node_id> worker_nodes) : nodes_(std::move(worker_nodes)) {}

  std::size_t workers() const noexcept { return nodes_.size(); }
  const std::vector<node_id>& worker_nodes() const noexcept { return nodes_; }

  /// One block per worker, in worker order (empty blocks included when the range is shorter
  /// than the team); none for an empty range.
  std::vector<index_block> worker_blocks(std::size_t first, std::size_t last) const {
    std::vector<index_block> out;
    if (last <= first || nodes_.empty()) return out;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const auto [lo, hi] = static_block(last - first, nodes_.size(), i);
      out.push_back({nodes_[i], first + lo, first + hi});
    }
    return out;
  }

  /// One block per node, in node order: the union of its workers' blocks.
  std::vector<index_block> node_blocks(std::size_t first, std::size_t last) const {
    std::vector<index_block> out;
    for (const index_block& b : worker_blocks(first, last)) {
      if (!out.empty() && out.back().node == b.node) out.back().last = b.last;
      else out.push_back(b);
    }
    return out;
  }

  /// The worker blocks, each non-empty one cut further into pieces of at most `grain` indices
  /// (0: not cut), evenly; empty blocks are left out. The tasks of a parallel_for.
  std::vector<index_block> task_blocks(std::size_t first, std::size_t last, std::size_t grain) const {
    std::vector<index_block> out;
    for (const index_block& w : worker_blocks(first, last)) {
      const std::size_t len = w.last - w.first;
      if (len == 0) continue;
      const std::size_t pieces = grain == 0 ? 1 : (len + grain - 1) / grain;
      for (std::size_t p = 0; p < pieces; ++p) {
        const auto [a, b] = static_block(len, pieces, p);
        out.push_back({w.node, w.first + a, w.first + b});
      }
    }
    return out;
  }

 private:
  std::vector<node_id> nodes_;
};

}  // namespace numaaff
