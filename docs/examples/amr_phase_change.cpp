// amr_phase_change: the phase changes of a block-structured (AMR) solver, three ways. The grid
// is one array of blocks; each phase gives the blocks new owners, and the data should follow.
// 1. Owners known, move now: place_blocks sends every block to its owner's node in one call,
//    then a parallel_for over the blocks (the same partition) updates them.
// 2. Owners known, move lazily: place_blocks_on_next_touch arms the grid; whoever touches a
//    block first (here the main thread reading halos) moves it to its owner, not to itself.
// 3. Owners unknown: affinity_on_next_touch (in a next_touch_phase, which disarms what was not
//    touched) moves each block to the node of the first thread that touches it, and the solver
//    step is a dynamic loop that follows the data (each node works on the blocks it holds).
// Asserted on any machine: every cell is updated once per step (the data survives every
// move), nothing stays armed after a phase, each armed block trapped at least once, and every
// move and the next touches count each page once. Which node a block ends on is printed, not
// asserted: on one node it is always node 0. Prints "amr_phase_change: ok" at the end.
#include <numaaff/numaaff.hpp>

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "amr_phase_change: FAILED: %s\n", what);
    std::exit(1);
  }
}

// One solver step on block b: every cell of it gains 1.
void update(double* grid, std::size_t cells_per_block, std::size_t b) {
  for (std::size_t c = b * cells_per_block; c < (b + 1) * cells_per_block; ++c) grid[c] += 1;
}

// Every cell was updated `steps` times.
void require_steps(const numaaff::node_vector<double>& grid, double steps, const char* what) {
  for (double x : grid) require(x == steps, what);
}

// The counts of a move add up to the range, whatever the kernel allowed.
void require_accounted(const numaaff::move_result& r) {
  require(r.moved + r.already_there + r.unpopulated + r.failed == r.total, "a move counts every page once");
}

}  // namespace

int main() {
  numaaff::thread_pool pool;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t blocks = 8 * pool.worker_count();
  const std::size_t block_bytes = 16 * page;  // whole pages: each block moves alone
  const std::size_t cells_per_block = block_bytes / sizeof(double);
  const std::size_t bytes = blocks * block_bytes;
  // The grid as the main thread built it (read from a file, say): all on one node.
  numaaff::node_vector<double> grid(blocks * cells_per_block, 0.0,
                                    numaaff::node_allocator<double>(pool.nodes().front()));
  double* g = grid.data();

  //! [place_blocks]
  // Phase 1: the new owners are known. Block b belongs to the worker the pool's partition
  // gives it (the partition parallel_for uses below), so move each block to that node now.
  std::vector<numaaff::node_id> owners(blocks);
  for (const numaaff::index_block& w : pool.worker_blocks(0, blocks))
    for (std::size_t b = w.first; b < w.last; ++b) owners[b] = w.node;
  const numaaff::move_result moved = numaaff::place_blocks(g, bytes, block_bytes, owners);
  pool.parallel_for(0, blocks, [&](std::size_t b) { update(g, cells_per_block, b); });
  //! [place_blocks]
  std::printf("phase 1, place_blocks: %zu pages moved, %zu already there, %zu failed\n", moved.moved,
              moved.already_there, moved.failed);
  require_accounted(moved);
  require_steps(grid, 1, "phase 1 updated every cell once");

  //! [place_blocks_on_next_touch]
  // Phase 2: owners known, data moved lazily. The refined region moved by one block: block b
  // now belongs to the owner of block b + 1. Reading a neighbour's halo first (the main thread
  // here) sends the block to its owner, not to the reader.
  std::vector<numaaff::node_id> next_owners(blocks);
  for (std::size_t b = 0; b < blocks; ++b) next_owners[b] = owners[(b + 1) % blocks];
  numaaff::place_blocks_on_next_touch(g, bytes, block_bytes, next_owners);
  double halo_sum = 0;
  for (std::size_t b = 0; b < blocks; ++b) halo_sum += g[b * cells_per_block];  // first touch of each block
  pool.parallel_for(0, blocks, [&](std::size_t b) { update(g, cells_per_block, b); });
  //! [place_blocks_on_next_touch]
  require(halo_sum == static_cast<double>(blocks), "the halo reads saw phase 1's data");
  require(!numaaff::is_armed(g, bytes), "phase 2: every block was touched, nothing is armed");
  require_steps(grid, 2, "phase 2 updated every cell once");

  //! [next_touch]
  // Phase 3: owners not known in advance (a work-stealing solver). Arm the grid with one
  // chunk per block: the first thread to touch a block pulls it to its own node. The solver
  // step then follows the data: each node's workers take the blocks that node holds.
  const numaaff::next_touch_statistics before = numaaff::next_touch_stats();
  {
    numaaff::next_touch_phase phase(g, bytes, numaaff::next_touch_options::for_blocks(block_bytes));
    pool.parallel_for(0, blocks, [&](std::size_t b) { update(g, cells_per_block, b); },
                      numaaff::dynamic_schedule{1}.following(g, block_bytes));
  }  // the phase ends: whatever nobody touched is opened where it is
  const numaaff::next_touch_statistics after = numaaff::next_touch_stats();
  //! [next_touch]
  std::printf("phase 3, next touch: %llu faults, %llu pages moved, %llu already there, %llu failed\n",
              static_cast<unsigned long long>(after.faults - before.faults),
              static_cast<unsigned long long>(after.pages_moved - before.pages_moved),
              static_cast<unsigned long long>(after.pages_already_there - before.pages_already_there),
              static_cast<unsigned long long>(after.pages_failed - before.pages_failed));
  require(after.faults - before.faults >= blocks, "each armed block trapped at least once");
  require(after.pages_moved + after.pages_already_there + after.pages_failed + after.pages_unpopulated -
                  (before.pages_moved + before.pages_already_there + before.pages_failed + before.pages_unpopulated) ==
              bytes / page,
          "next touch counts every page of the grid once");
  require(!numaaff::is_armed(g, bytes), "phase 3: nothing is armed after the phase");
  require_steps(grid, 3, "phase 3 updated every cell once");

  // Where the blocks are now (on one node: all on node 0).
  std::vector<std::pair<std::string, numaaff::placement>> rows;
  for (std::size_t b = 0; b < blocks; b += blocks / 4)
    rows.emplace_back("block " + std::to_string(b), numaaff::where(g + b * cells_per_block, block_bytes));
  std::fputs(numaaff::placement_table(rows).c_str(), stdout);
  std::puts("amr_phase_change: ok");
  return 0;
}
