// mpi_hybrid: MPI ranks with numaaff's threads and memory inside each. Each rank's numaaff
// sees only what the launcher gave it (its CPUs and nodes: cpuset and binding), the job's
// layout is gathered and printed like `numactl -H`, communicators per host and per node are
// split, and a halo buffer that was armed for next touch at a phase change is made ready for
// MPI with prepare_buffer() before the exchange (the kernel's single copy between ranks does
// not take numaaff's faults).
// Asserted on any machine, with any number of ranks (one included): the rank's view is not
// empty and the pool's workers stay on its CPUs, the layout has every rank in order, the
// per-node communicator holds this rank, the ring exchange delivers the neighbour's data into
// the armed buffer, and the buffer is no longer armed after prepare_buffer().
// Run: mpirun -np 2 ./mpi_hybrid (or ./mpi_hybrid for one rank). Prints "mpi_hybrid: ok" on
// rank 0 at the end.
#include <numaaff/mpi.hpp>
#include <numaaff/numaaff.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the job with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "mpi_hybrid: FAILED: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Only the main thread calls MPI; numaaff's workers compute between the calls.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  //! [layout]
  // What this rank may use, and where every rank of the job sits (collective, once).
  const numaaff::mpi::rank_view me = numaaff::mpi::this_rank();
  const numaaff::mpi::job_layout layout = numaaff::mpi::gather_layout(MPI_COMM_WORLD);
  if (rank == 0) std::fputs(layout.to_string().c_str(), stdout);  // names suspicious layouts too
  // The ranks that share this rank's nodes (one per node: just this rank).
  MPI_Comm node_comm = numaaff::mpi::split_by_node(MPI_COMM_WORLD);
  //! [layout]
  require(!me.cpus.empty() && !me.cpu_nodes.empty(), "the rank may use some CPUs and nodes");
  require(layout.ranks().size() == static_cast<std::size_t>(size), "the layout has every rank");
  for (int r = 0; r < size; ++r) require(layout.ranks()[static_cast<std::size_t>(r)].rank == r, "ranks in order");
  int node_size = 0;
  MPI_Comm_size(node_comm, &node_size);
  require(node_size >= 1 && node_size <= size, "the per-node communicator holds this rank");
  MPI_Comm_free(&node_comm);

  //! [pool]
  // The pool inside the rank: one worker per CPU the launcher gave this rank, no more.
  numaaff::thread_pool pool;
  //! [pool]
  for (std::size_t w = 0; w < pool.worker_count(); ++w) {
    const int cpu = pool.worker_cpu(w);
    require(cpu < 0 || std::find(me.cpus.begin(), me.cpus.end(), cpu) != me.cpus.end(),
            "every worker is on one of the rank's CPUs");
  }

  //! [halo]
  // A halo buffer in the rank's memory, armed at the last phase change so that the thread
  // that next uses it pulls it to its node. MPI must not meet an armed page: prepare it.
  const int count = 1 << 17;  // 1 MiB of doubles
  std::vector<double, numaaff::local_allocator<double>> send(static_cast<std::size_t>(count));
  std::vector<double, numaaff::local_allocator<double>> recv(static_cast<std::size_t>(count), -1.0);
  pool.parallel_for(0, send.size(), [&](std::size_t i) { send[i] = rank + static_cast<double>(i) / count; });
  numaaff::affinity_on_next_touch(recv.data(), recv.size() * sizeof(double));

  numaaff::mpi::prepare_buffer(recv.data(), count, MPI_DOUBLE);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Sendrecv(send.data(), count, MPI_DOUBLE, right, 0, recv.data(), count, MPI_DOUBLE, left, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  //! [halo]
  require(!numaaff::is_armed(recv.data(), recv.size() * sizeof(double)), "prepare_buffer opened the buffer");
  for (std::size_t i = 0; i < recv.size(); ++i)
    require(recv[i] == left + static_cast<double>(i) / count, "the exchange delivered the neighbour's halo");

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::printf("mpi_hybrid: ok (%d rank%s)\n", size, size == 1 ? "" : "s");
  MPI_Finalize();
  return 0;
}
