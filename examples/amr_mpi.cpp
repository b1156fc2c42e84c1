// amr_mpi: the AMR phase change of examples/amr, hybrid: MPI ranks (one per NUMA node), the
// numaaff pool inside each rank.
//
//   mpirun -np 4 --map-by ppr:1:numa --bind-to numa ./amr_mpi [--check]
//
// A 2-D heat equation on a grid of blocks; a refined disc (blocks that cost 4x) moves across
// the grid, and at each phase the blocks are re-partitioned by weight, in row order, among all
// the threads of all ranks. Each step exchanges the halo (the neighbours' arrays owned by
// other ranks) with MPI, then each thread updates its blocks. At a phase change a block that
// changes rank moves by MPI (its owner sends it, the new owner receives it); a block that
// changes thread inside a rank is armed for next touch, so its new thread's first touch puts
// it on that thread's node. Every MPI buffer goes through numaaff::mpi::prepare_buffer first
// (an armed block sent as halo would otherwise reach the kernel's single-copy transfer).
//
// Per rank and phase it prints the share of its blocks' pages on their owner thread's node,
// from a raw move_pages query, and the blocks moved by MPI and by next touch. The checksum (a
// position-weighted sum of every cell, per block, added in block order) equals the
// single-process run's (-np 1) bit for bit: the update of a cell reads only the previous step. --check exits 1 if a rank ends a
// phase below 99% local on a multi-node machine.
#include "amr_model.hpp"
#include "cli.hpp"

#include <numaaff/mpi.hpp>
#include <numaaff/numaaff.hpp>

#include <mpi.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

struct settings {
  std::size_t blocks = 8;  // per side
  std::size_t cells = 32;  // per block side
  std::size_t steps = 3;   // per phase
  std::size_t phases = 4;
};

// The whole grid's address space in every rank: only the blocks it owns, or reads as halo,
// are ever touched there.
class grid {
 public:
  explicit grid(const settings& s) : s_(s) {
    const auto ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    array_bytes_ = (s.cells * s.cells * sizeof(double) + ps - 1) / ps * ps;
    bytes_ = count() * 2 * array_bytes_;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    base_ = static_cast<char*>(p);
    madvise(base_, bytes_, MADV_NOHUGEPAGE);  // blocks of several ranks share a huge page
  }
  ~grid() {
    numaaff::disarm(base_, bytes_);
    munmap(base_, bytes_);
  }
  grid(const grid&) = delete;
  grid& operator=(const grid&) = delete;

  std::size_t count() const { return s_.blocks * s_.blocks; }
  std::size_t cells() const { return s_.cells * s_.cells; }
  std::size_t array_bytes() const { return array_bytes_; }
  double* array(std::size_t b, std::size_t which) const {
    return reinterpret_cast<double*>(base_ + (2 * b + which) * array_bytes_);
  }

  // A temperature that varies from cell to cell everywhere, so that every halo matters from
  // the first step (a wrong or stale halo changes the checksum).
  void init(std::size_t b) {
    std::fill(array(b, 1), array(b, 1) + cells(), 0.0);
    for (std::size_t i = 0; i < cells(); ++i) array(b, 0)[i] = static_cast<double>((b * cells() + i * 7) % 101);
  }

  // One explicit step of block b from array `from` into the other; neighbours' edges are read
  // from their `from` arrays (here, or received as halo).
  void update(std::size_t b, std::size_t from) const {
    amr_model::update(s_.blocks, s_.cells, b, [&](std::size_t k) { return array(k, from); }, array(b, 1 - from));
  }

  std::vector<std::size_t> neighbours(std::size_t b) const {
    const std::size_t n = s_.blocks, x = b % n, y = b / n;
    std::vector<std::size_t> out;
    if (x > 0) out.push_back(b - 1);
    if (x + 1 < n) out.push_back(b + 1);
    if (y > 0) out.push_back(b - n);
    if (y + 1 < n) out.push_back(b + n);
    return out;
  }

 private:
  settings s_;
  std::size_t array_bytes_ = 0, bytes_ = 0;
  char* base_ = nullptr;
};

// Share of the pages of `blocks` (both arrays) on the node of the thread that owns each,
// from a raw page query.
double local_share(const grid& g, const std::vector<std::size_t>& blocks, const std::vector<int>& node_of_block) {
  const auto ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<void*> pages;
  std::vector<int> want;
  for (std::size_t k = 0; k < blocks.size(); ++k)
    for (std::size_t off = 0; off < 2 * g.array_bytes(); off += ps) {
      pages.push_back(reinterpret_cast<char*>(g.array(blocks[k], 0)) + off);
      want.push_back(node_of_block[k]);
    }
  if (pages.empty()) return 1.0;
  std::vector<int> status(pages.size(), -1);
  if (move_pages(0, pages.size(), pages.data(), nullptr, status.data(), 0) != 0) return -1.0;
  std::size_t local = 0;
  for (std::size_t i = 0; i < pages.size(); ++i) local += status[i] == want[i];
  return static_cast<double>(local) / static_cast<double>(pages.size());
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// Sends and receives `from` arrays of blocks: each pair (block, peer rank) once, tag = block.
void exchange(const grid& g, std::size_t from, const std::vector<std::pair<std::size_t, int>>& sends,
              const std::vector<std::pair<std::size_t, int>>& receives) {
  const int count = static_cast<int>(g.cells());
  std::vector<MPI_Request> requests;
  requests.reserve(sends.size() + receives.size());
  for (const auto& [b, peer] : receives) {
    numaaff::mpi::prepare_buffer(g.array(b, from), count, MPI_DOUBLE);
    requests.emplace_back();
    MPI_Irecv(g.array(b, from), count, MPI_DOUBLE, peer, static_cast<int>(b), MPI_COMM_WORLD, &requests.back());
  }
  for (const auto& [b, peer] : sends) {
    numaaff::mpi::prepare_buffer(g.array(b, from), count, MPI_DOUBLE);
    requests.emplace_back();
    MPI_Isend(g.array(b, from), count, MPI_DOUBLE, peer, static_cast<int>(b), MPI_COMM_WORLD, &requests.back());
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  example_cli::args a(argc, argv, "[--blocks N] [--cells C] [--steps K] [--phases P] [--check]");
  settings s;
  s.blocks = a.size("blocks", 8, 2, 128);
  s.cells = a.size("cells", 32, 4, 1024);
  s.steps = a.size("steps", 3, 1, 10000);
  s.phases = a.size("phases", 4, 1, 1000);
  const bool check = a.flag("check");
  a.done();
  int status = 0;
  try {
    const numaaff::mpi::job_layout layout = numaaff::mpi::gather_layout(MPI_COMM_WORLD);
    const numaaff::mpi::rank_view& me = layout.ranks()[static_cast<std::size_t>(rank)];
    if (rank == 0) std::printf("%s", layout.to_string().c_str());
    numaaff::thread_pool pool;
    // Global owners: rank r's threads are owners first[r] .. first[r + 1] - 1.
    int mine = static_cast<int>(pool.worker_count());
    std::vector<int> threads(static_cast<std::size_t>(ranks));
    MPI_Allgather(&mine, 1, MPI_INT, threads.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<std::size_t> first(static_cast<std::size_t>(ranks) + 1, 0);
    for (std::size_t r = 0; r < threads.size(); ++r) first[r + 1] = first[r] + static_cast<std::size_t>(threads[r]);
    const std::size_t owners = first.back();
    const auto rank_of = [&](std::size_t owner) {
      return static_cast<int>(std::upper_bound(first.begin(), first.end(), owner) - first.begin() - 1);
    };
    const auto me_first = first[static_cast<std::size_t>(rank)];

    grid g(s);
    std::vector<int> weight;
    std::vector<std::size_t> owner = amr_model::partition(s.blocks, s.phases, 0, owners, weight);
    // Each thread runs one owner: worker w of the rank is owner me_first + w, on its node.
    const auto team = [&](auto&& body) {
      pool.parallel_for(0, pool.worker_count(), [&](std::size_t w) { body(me_first + w); });
    };
    team([&](std::size_t o) {
      for (std::size_t b = 0; b < g.count(); ++b)
        if (owner[b] == o) g.init(b);
    });
    std::size_t from = 0;
    bool low = false;
    numaaff::next_touch_options chunk;
    chunk.chunk_bytes = g.array_bytes();
    for (std::size_t phase = 0; phase < s.phases; ++phase) {
      std::size_t by_mpi = 0, by_touch = 0;
      if (phase > 0) {
        const std::vector<std::size_t> next = amr_model::partition(s.blocks, s.phases, phase, owners, weight);
        std::vector<std::pair<std::size_t, int>> sends, receives;
        for (std::size_t b = 0; b < g.count(); ++b) {
          const int was = rank_of(owner[b]), will = rank_of(next[b]);
          if (was != will) {
            if (was == rank) sends.emplace_back(b, will);
            if (will == rank) receives.emplace_back(b, was), ++by_mpi;
          } else if (will == rank && owner[b] != next[b]) {
            // A new thread of this rank: its first touch moves the block to its node. One
            // chunk per array, so that the owner's touch of each array's first element moves
            // all of it (the default chunk would split an array among its first touchers).
            numaaff::affinity_on_next_touch(g.array(b, 0), 2 * g.array_bytes(), chunk);
            ++by_touch;
          }
        }
        exchange(g, from, sends, receives);
        owner = next;
        // Owners touch their armed blocks before anyone reads a neighbour's edge: the first
        // touch decides where a chunk goes.
        if (by_touch > 0) team([&](std::size_t o) {
          for (std::size_t b = 0; b < g.count(); ++b)
            if (owner[b] == o && numaaff::is_armed(g.array(b, 0), 2 * g.array_bytes())) {
              g.array(b, 0)[0] += 0.0;
              g.array(b, 1)[0] += 0.0;
            }
        });
      }
      for (std::size_t step = 0; step < s.steps; ++step, from = 1 - from) {
        // The halo: the `from` arrays of other ranks' blocks next to this rank's.
        std::set<std::pair<std::size_t, int>> sends, receives;
        for (std::size_t b = 0; b < g.count(); ++b) {
          if (rank_of(owner[b]) != rank) continue;
          for (std::size_t n : g.neighbours(b)) {
            const int other = rank_of(owner[n]);
            if (other == rank) continue;
            sends.emplace(b, other);
            receives.emplace(n, other);
          }
        }
        exchange(g, from, {sends.begin(), sends.end()}, {receives.begin(), receives.end()});
        team([&](std::size_t o) {
          for (std::size_t b = 0; b < g.count(); ++b)
            if (owner[b] == o)
              for (int k = 0; k < weight[b]; ++k) g.update(b, from);
        });
      }
      std::vector<std::size_t> owned;
      std::vector<int> node_of_block;
      for (std::size_t b = 0; b < g.count(); ++b)
        if (rank_of(owner[b]) == rank) {
          owned.push_back(b);
          node_of_block.push_back(pool.worker_node(owner[b] - me_first));
        }
      const double local = local_share(g, owned, node_of_block);
      low = low || local < 0.99;
      std::printf("rank %d node %s phase %zu: %zu blocks, %5.1f%% of their pages on their thread's node (moved by MPI %zu, by next touch %zu)\n",
                  rank, join(me.cpu_nodes).c_str(), phase, owned.size(), 100.0 * local, by_mpi, by_touch);
      std::fflush(stdout);
    }
    // Each block's weighted sum (a cell's weight depends on where it is, so misplaced or stale
    // cells show) from its owner, added in block order on rank 0.
    std::vector<double> sums(g.count(), 0.0), all(g.count(), 0.0);
    for (std::size_t b = 0; b < g.count(); ++b)
      if (rank_of(owner[b]) == rank)
        for (std::size_t i = 0; i < g.cells(); ++i) sums[b] += g.array(b, from)[i] * static_cast<double>(1 + (b * g.cells() + i) % 13);
    MPI_Reduce(sums.data(), all.data(), static_cast<int>(g.count()), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double total = 0;
      for (double x : all) total += x;
      std::printf("checksum %.17g (%d ranks, %zu threads)\n", total, ranks, owners);
    }
    int any_low = low ? 1 : 0, job_low = 0;
    MPI_Allreduce(&any_low, &job_low, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (check && job_low != 0 && numaaff::system_report().placement_effective()) {
      if (rank == 0) std::printf("check: a rank ended a phase below 99%% local\n");
      status = 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "amr_mpi: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
