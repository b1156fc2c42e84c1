// An MPI program that links numaaff::mpi and nothing else: the rank's view of its nodes.
#include <numaaff/mpi.hpp>

#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const numaaff::mpi::job_layout layout = numaaff::mpi::gather_layout(MPI_COMM_WORLD);
  std::printf("%s", layout.to_string().c_str());
  const bool ok = !layout.hosts().empty();
  MPI_Finalize();
  return ok ? 0 : 1;
}
