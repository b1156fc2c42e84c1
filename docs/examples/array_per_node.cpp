// array_per_node: four ways to put an array's pages on the nodes that use them, each checked
// with where(). One array per node from a node allocator; one array whose blocks go to their
// owners' nodes with place_blocks; one array moved whole with move_to; one array placed by a
// parallel first touch in the thread pool. What is asserted holds on every machine: each
// where() counts every page of the range, nothing is lost or changed by a move, and where the
// placement can be known exactly (one node, or NUMA calls allowed) the pages are on the node
// asked for. On a one-node machine that node is node 0 and every move finds its pages there
// already; in a sandbox that denies the NUMA calls the same code runs and moves nothing.
// Prints one line per check and "array_per_node: ok" at the end.
#include <numaaff/numaaff.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "array_per_node: FAILED: %s\n", what);
    std::exit(1);
  }
}

// The pages a range touches, counted from its addresses (where() covers exactly these).
std::size_t pages_of(const void* addr, std::size_t bytes) {
  const auto ps = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(addr) / ps;
  const auto last = (reinterpret_cast<std::uintptr_t>(addr) + bytes + ps - 1) / ps;
  return static_cast<std::size_t>(last - first);
}

// True when where() can name each page's node: one node, or a kernel that lets this process
// query and move pages. In a sandbox on several nodes resident pages count as unknown().
bool placement_is_exact() {
  return numaaff::topology::system().node_count() == 1 || !numaaff::system_report().numa_calls_forbidden();
}

// A placement report is complete: it covers every page of the range, every page is resident
// (the data was written), and where it can be known the pages are all on `node`.
void require_on(const numaaff::placement& p, const void* addr, std::size_t bytes, numaaff::node_id node,
                const char* what) {
  require(p.total() == pages_of(addr, bytes), what);
  require(p.unpopulated() == 0, what);
  require(placement_is_exact() ? p.pages_on(node) == p.total() : p.unknown() == p.total(), what);
}

// The counts of a move add up to the range, whatever the kernel allowed.
void require_accounted(const numaaff::move_result& r, const char* what) {
  require(r.moved + r.already_there + r.unpopulated + r.failed == r.total, what);
  if (numaaff::topology::system().node_count() == 1) require(r.already_there == r.total, what);
}

}  // namespace

int main() {
  const numaaff::topology& topo = numaaff::topology::system();
  const std::vector<numaaff::node_id> nodes = topo.cpu_nodes();
  const std::size_t n = 1 << 19;  // 4 MiB of doubles per array
  const std::size_t bytes = n * sizeof(double);

  //! [allocators]
  // One array per node: a node_allocator places every page of its vector on its node
  // (MPOL_BIND), whichever thread writes it first.
  std::vector<numaaff::node_vector<double>> per_node;
  for (numaaff::node_id node : nodes)
    per_node.emplace_back(n, 1.0, numaaff::node_allocator<double>(node));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const numaaff::placement p = numaaff::where(per_node[i].data(), bytes);
    std::printf("node_vector on node %d: %s\n", nodes[i], p.to_string().c_str());
    require_on(p, per_node[i].data(), bytes, nodes[i], "a node_vector's pages are on its node");
  }
  //! [allocators]

  //! [place_blocks]
  // One array in blocks, each owned by a node (here round-robin; in a real code the owner of
  // block b comes from a partition or a load balancer). place_blocks moves every block to its
  // owner in one batched call; the array was first written on nodes.front().
  const std::size_t block_bytes = 64 * 1024;  // 16 pages: blocks of whole pages move alone
  const std::size_t blocks = bytes / block_bytes;
  numaaff::node_vector<double> grid(n, 2.0, numaaff::node_allocator<double>(nodes.front()));
  std::vector<numaaff::node_id> owners(blocks);
  for (std::size_t b = 0; b < blocks; ++b) owners[b] = nodes[b % nodes.size()];
  const numaaff::move_result placed = numaaff::place_blocks(grid.data(), bytes, block_bytes, owners);
  std::printf("place_blocks: %zu pages, %zu moved, %zu already there, %zu failed\n", placed.total, placed.moved,
              placed.already_there, placed.failed);
  //! [place_blocks]
  require_accounted(placed, "place_blocks counts every page once");
  if (placed.complete()) {  // nothing failed: each block is on its owner's node
    for (std::size_t b = 0; b < blocks; ++b) {
      const char* block = reinterpret_cast<const char*>(grid.data()) + b * block_bytes;
      require_on(numaaff::where(block, block_bytes), block, block_bytes, owners[b],
                 "each block is on its owner's node");
    }
  }
  for (double x : grid) require(x == 2.0, "place_blocks keeps the data");

  //! [move_to]
  // A whole array to one node: the phase that uses it now runs there.
  const numaaff::node_id target = nodes.back();
  const numaaff::move_result moved = numaaff::move_to(per_node.front().data(), bytes, target);
  std::printf("move_to node %d: %zu moved, %zu already there, %zu failed\n", target, moved.moved, moved.already_there,
              moved.failed);
  //! [move_to]
  require_accounted(moved, "move_to counts every page once");
  if (moved.complete())
    require_on(numaaff::where(per_node.front().data(), bytes), per_node.front().data(), bytes, target,
               "a complete move_to leaves every page on the target");
  for (double x : per_node.front()) require(x == 1.0, "move_to keeps the data");

  //! [first_touch]
  // Parallel first touch: pages nobody has touched yet are placed by the first thread that
  // writes them. A fresh anonymous mapping has none; the pool's parallel_for gives each node
  // one contiguous block of indices, so each node's workers write (and place) their block.
  numaaff::thread_pool pool;
  void* raw = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  require(raw != MAP_FAILED, "mmap");
  auto* a = static_cast<double*>(raw);
  require(numaaff::where(a, bytes).unpopulated() == pages_of(a, bytes), "fresh memory has no page yet");
  pool.parallel_for(0, n, [a](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) a[i] = static_cast<double>(i);
  });
  for (const numaaff::index_block& b : pool.node_blocks(0, n)) {
    const numaaff::placement p = numaaff::where(a + b.first, (b.last - b.first) * sizeof(double));
    std::printf("first touch, indices [%zu, %zu) of node %d: %s\n", b.first, b.last, b.node, p.to_string().c_str());
  }
  //! [first_touch]
  const numaaff::placement touched = numaaff::where(a, bytes);
  require(touched.unpopulated() == 0, "parallel_for wrote every page");
  if (topo.node_count() == 1) require_on(touched, a, bytes, nodes.front(), "one node: every page is on it");
  for (std::size_t i = 0; i < n; ++i) require(a[i] == static_cast<double>(i), "parallel_for wrote every element");
  munmap(raw, bytes);

  std::puts("array_per_node: ok");
  return 0;
}
