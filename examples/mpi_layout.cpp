// mpi_layout: where the ranks of an MPI job sit, as numaaff sees them, and what that view costs.
//
//   mpirun -np 4 --map-by ppr:1:numa --bind-to numa ./mpi_layout
//
// Rank 0 prints the job's layout (per host, per node: the ranks and their CPUs, then the
// layouts that are usually mistakes: a rank spanning nodes, ranks sharing CPUs or a node), then
// each rank's pool: its workers' nodes and CPUs, which stay inside what the launcher gave the
// rank. --repeat N times numaaff::mpi::gather_layout against an MPI_Allgather of one int (the
// least a layout exchange costs) in the same run: the bridge's cost at start-up; nothing in
// numaaff uses MPI afterwards.
#include "../benchmarks/ratio_line.hpp"
#include "cli.hpp"

#include <numaaff/mpi.hpp>
#include <numaaff/numaaff.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <vector>

namespace {

// Median wall time of `repeat` runs of f, each started together on every rank.
template <class F>
double median_us(std::size_t repeat, F&& f) {
  std::vector<double> t;
  for (std::size_t k = 0; k < repeat; ++k) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  example_cli::args a(argc, argv, "[--repeat N]");
  const std::size_t repeat = a.size("repeat", 0, 0, 100000);
  a.done();
  int status = 0;
  try {
    const numaaff::mpi::job_layout layout = numaaff::mpi::gather_layout(MPI_COMM_WORLD);
    if (rank == 0) std::printf("%s", layout.to_string().c_str());
    numaaff::thread_pool pool;
    std::string workers;
    for (std::size_t w = 0; w < pool.worker_count(); ++w)
      workers += " " + std::to_string(pool.worker_node(w)) + "@" + std::to_string(pool.worker_cpu(w));
    // One line per rank (mpirun forwards them as they come).
    std::printf("rank %d: pool of %zu worker(s), node@cpu:%s\n", rank, pool.worker_count(), workers.c_str());
    std::fflush(stdout);
    if (repeat > 0) {
      const double gather = median_us(repeat, [] { (void)numaaff::mpi::gather_layout(MPI_COMM_WORLD); });
      int one = rank, all[1024];
      const int size = static_cast<int>(layout.ranks().size());
      const double base = size <= 1024 ? median_us(repeat, [&] { MPI_Allgather(&one, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD); }) : 0;
      if (rank == 0) {
        std::printf("gather_layout: %.1f us (median of %zu); MPI_Allgather of one int: %.1f us; ratio %.2f\n", gather, repeat, base,
                    base > 0 ? gather / base : 0.0);
        // The same as an information line of the benchmarks (benchmarks/report.py reads it): it
        // runs once, at start-up, so it has no speed target; the bound of 100 allgathers only
        // flags a layout exchange far costlier than the two it is made of.
        numaaff_report::print_context();
        numaaff_report::print_ratio_heading();
        if (base > 0)
          numaaff_report::print_ratio_line("gather_layout vs one MPI_Allgather of an int, median (info)", gather / base, "x", "<=", 100, 2);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_layout: rank %d: %s\n", rank, e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
