// openmp_bridge: an OpenMP loop whose threads find their data on their own node. plan_team()
// says where each thread of the team belongs (the pool's partition: CPUs in node order),
// first_touch() writes and so places each thread's schedule(static) block from that thread's
// CPU, bind_team() pins the team, and every later `omp for schedule(static)` of the same size
// gives thread i the block that is on its node. After the data moves (a phase change),
// blocks_by_data() hands each thread the indices whose data is on its node instead.
// Asserted on any machine: each thread of the bound team runs on its planned CPU, the loop
// computes the right values, where() finds every page written, and blocks_by_data() hands out
// every index exactly once (on one node, exactly each thread's static block).
// Prints the plan and "openmp_bridge: ok".
#include <numaaff/numaaff.hpp>
#include <numaaff/openmp.hpp>

#include <omp.h>
#include <sched.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "openmp_bridge: FAILED: %s\n", what);
    std::exit(1);
  }
}

}  // namespace

int main() {
  const std::size_t n = 1 << 20;  // 8 MiB of doubles
  const std::size_t bytes = n * sizeof(double);
  // Fresh pages: nobody has touched them, so the first write places each one.
  void* raw = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  require(raw != MAP_FAILED, "mmap");
  auto* a = static_cast<double*>(raw);

  //! [plan]
  // Where each of omp_get_max_threads() threads belongs, then each thread's block written
  // from its CPU (first touch places it on that CPU's node), then the team pinned.
  const numaaff::openmp::team_plan plan = numaaff::openmp::plan_team();
  numaaff::openmp::first_touch(plan, a, n, [](std::size_t i) { return static_cast<double>(i); });
  const int pinned = numaaff::openmp::bind_team(plan);
  //! [plan]
  std::printf("team of %d threads, %d pinned\n", plan.size(), pinned);
  for (std::size_t t = 0; t < plan.node.size(); ++t)
    std::printf("  thread %zu: cpu %d, node %d\n", t, plan.cpu[t], plan.node[t]);
  require(pinned == plan.size(), "bind_team pins every thread of the plan");

  //! [loop]
  // The team of plan.size() threads is the one bind_team pinned (OpenMP runtimes keep the
  // threads of a team size), and schedule(static) cuts the loop as first_touch did.
  int off_cpu = 0;
  double sum = 0;
#pragma omp parallel num_threads(plan.size()) reduction(+ : off_cpu, sum)
  {
    const int cpu = plan.cpu[static_cast<std::size_t>(omp_get_thread_num())];
    if (cpu >= 0 && sched_getcpu() != cpu) ++off_cpu;
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = 2 * a[i];
      sum += a[i];
    }
  }
  //! [loop]
  require(off_cpu == 0, "each thread of the bound team runs on its planned CPU");
  require(sum == static_cast<double>(n) * static_cast<double>(n - 1), "the loop saw every element once");

  // Where each thread's block is (on one node: all of it on node 0).
  for (int t = 0; t < plan.size(); ++t) {
    const auto [first, last] = plan.block(0, n, t);
    const numaaff::placement p = numaaff::where(a + first, (last - first) * sizeof(double));
    std::printf("thread %d, indices [%zu, %zu): %s\n", t, first, last, p.to_string().c_str());
    require(p.unpopulated() == 0, "first_touch wrote every page");
    if (numaaff::topology::system().node_count() == 1)
      require(p.pages_on(plan.node[static_cast<std::size_t>(t)]) == p.total(), "one node: the block is on it");
  }

  //! [blocks_by_data]
  // After a phase change moved data, schedule(static) no longer matches where it is: give
  // each thread the indices whose pages are on its node (one batched page query).
  const std::vector<std::vector<numaaff::index_block>> work =
      numaaff::openmp::blocks_by_data(plan, a, sizeof *a, 0, n);
  std::vector<unsigned char> visits(n, 0);
#pragma omp parallel num_threads(plan.size())
  for (const numaaff::index_block& b : work[static_cast<std::size_t>(omp_get_thread_num())])
    for (std::size_t i = b.first; i < b.last; ++i) {
      a[i] += 1;
      ++visits[i];  // each index belongs to one thread: no race
    }
  //! [blocks_by_data]
  for (std::size_t i = 0; i < n; ++i)
    require(visits[i] == 1 && a[i] == 2.0 * static_cast<double>(i) + 1, "blocks_by_data gives out every index once");
  if (numaaff::topology::system().node_count() == 1) {
    for (int t = 0; t < plan.size(); ++t) {  // all data on one node: the static blocks again
      const auto [first, last] = plan.block(0, n, t);
      std::size_t mine = 0;
      for (const numaaff::index_block& b : work[static_cast<std::size_t>(t)]) {
        require(b.first >= first && b.last <= last, "one node: blocks_by_data gives each thread its static block");
        mine += b.last - b.first;
      }
      require(mine == last - first, "one node: blocks_by_data gives each thread its whole static block");
    }
  }

  munmap(raw, bytes);
  std::puts("openmp_bridge: ok");
  return 0;
}
