// memory_tiers: memory asked for by what it should be (the fastest, the nearest, the largest)
// rather than by node number, for machines with HBM or a CXL expander beside DRAM. It prints
// how the machine ranks every node's memory for this thread (the firmware's HMAT where there
// is one, else the distance order), allocates from the heap by kind (kind::fastest(),
// kind::capacity(); freed without a size, resized in place where it can), builds containers
// on a tier (tier_allocator, tier_resource), and moves data between tiers (promote, demote).
// Asserted on any machine: each ranking lists known nodes once and starts with best_target,
// every block is usable to its size and keeps its contents when resized, every move counts
// each page once, and on a one-node machine every tier is node 0 (and promote/demote find
// nothing to move). Prints "memory_tiers: ok" at the end.
#include <numaaff/numaaff.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory_resource>
#include <string>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "memory_tiers: FAILED: %s\n", what);
    std::exit(1);
  }
}

// On one node every tier is that node: the whole range is there once written.
void require_on_the_only_node(const void* addr, std::size_t bytes, const char* what) {
  const numaaff::topology& topo = numaaff::topology::system();
  const numaaff::placement p = numaaff::where(addr, bytes);
  require(p.unpopulated() == 0, what);
  if (topo.node_count() == 1) require(p.pages_on(topo.nodes().front()) == p.total(), what);
}

// The counts of a move add up to the range; on one node nothing moves and nothing fails.
void require_accounted(const numaaff::move_result& r, const char* what) {
  require(r.moved + r.already_there + r.unpopulated + r.failed == r.total, what);
  if (numaaff::topology::system().node_count() == 1) require(r.moved == 0 && r.failed == 0, what);
}

// A ranking of memory lists known nodes, each once, and starts with best_target.
void require_ranking(const std::vector<numaaff::node_id>& order, numaaff::node_id best) {
  const numaaff::topology& topo = numaaff::topology::system();
  require(!order.empty() && order.front() == best, "best_target is the ranking's first");
  for (numaaff::node_id t : order)
    require(topo.has_node(t) && std::count(order.begin(), order.end(), t) == 1, "a ranking lists known nodes once");
}

}  // namespace

int main() {
  const numaaff::topology& topo = numaaff::topology::system();
  const std::size_t n = 1 << 18;  // 2 MiB of doubles
  const std::size_t bytes = n * sizeof(double);

  //! [ranking]
  // How this thread's node ranks every node's memory. Without an HMAT bandwidth and latency
  // both mean "nearest first"; capacity is the node with the most memory first.
  const numaaff::node_id home = numaaff::this_homenode();
  using numaaff::memory_attribute;
  std::printf("memory attributes from the firmware: %s\n", topo.has_memory_attributes() ? "yes" : "no");
  const std::pair<const char*, memory_attribute> tiers[] = {{"bandwidth", memory_attribute::bandwidth},
                                                            {"latency", memory_attribute::latency},
                                                            {"capacity", memory_attribute::capacity}};
  for (const auto& [name, attribute] : tiers) {
    const std::vector<numaaff::node_id> order = topo.targets_by(attribute, home);
    std::string text;
    for (numaaff::node_id t : order)  // the node, and hwloc's name for its memory where it has one
      text += " " + std::to_string(t) + (topo.kind_of(t).empty() ? "" : " (" + topo.kind_of(t) + ")");
    std::printf("  %-9s for node %d:%s\n", name, home, text.c_str());
    require_ranking(order, topo.best_target(attribute, home));
  }
  //! [ranking]

  //! [kinds]
  // The heap by kind: the fastest memory for this thread, spilling to the next tier when it
  // is full (preferred), and the memory with the most room. Freed without a size.
  auto* hot = static_cast<double*>(numaaff::allocate(numaaff::kind::fastest().preferred(), bytes));
  for (std::size_t i = 0; i < n; ++i) hot[i] = static_cast<double>(i);
  hot = static_cast<double*>(numaaff::reallocate(numaaff::kind::fastest().preferred(), hot, 2 * bytes));
  auto* big = static_cast<double*>(numaaff::allocate(numaaff::kind::capacity(), bytes));
  std::fill(big, big + n, 3.0);
  //! [kinds]
  require(numaaff::usable_size(hot) >= 2 * bytes && numaaff::usable_size(big) >= bytes, "blocks hold what was asked");
  for (std::size_t i = 0; i < n; ++i) require(hot[i] == static_cast<double>(i), "reallocate keeps the contents");
  require_on_the_only_node(hot, bytes, "the fastest block is written where its kind says");
  require_on_the_only_node(big, bytes, "the capacity block is written where its kind says");

  //! [tier_allocator]
  // Containers on a tier: a bandwidth-bound vector on the fastest memory, a pmr vector on the
  // nearest.
  const numaaff::tier_allocator<double> fastest(numaaff::memory_attribute::bandwidth);
  std::vector<double, numaaff::tier_allocator<double>> stream(n, 1.0, fastest);
  numaaff::tier_resource nearest(numaaff::memory_attribute::latency);
  std::pmr::vector<int> index(n, 2, &nearest);
  //! [tier_allocator]
  require_on_the_only_node(stream.data(), bytes, "the tier vector is written");
  require_on_the_only_node(index.data(), n * sizeof(int), "the pmr tier vector is written");

  //! [promote]
  // Data whose use changed: hot data to the fastest memory (the rest spills in tier order
  // when it is full), cold data to the slowest (a CXL expander before DRAM).
  const numaaff::move_result up = numaaff::promote(big, bytes);
  const numaaff::move_result down = numaaff::demote(hot, 2 * bytes);
  std::printf("promote: %zu pages moved, %zu already there; demote: %zu moved, %zu already there\n", up.moved,
              up.already_there, down.moved, down.already_there);
  //! [promote]
  require_accounted(up, "promote counts every page once");
  require_accounted(down, "demote counts every page once");
  for (std::size_t i = 0; i < n; ++i)
    require(hot[i] == static_cast<double>(i) && big[i] == 3.0, "moves keep the data");

  numaaff::deallocate(hot);
  numaaff::deallocate(big);
  std::puts("memory_tiers: ok");
  return 0;
}
