// containers: what numaaff does inside a container or a batch job. A cgroup cpuset (or
// taskset, numactl -N, an MPI launcher's binding) limits the CPUs and nodes; a memory cgroup
// limits the room; a seccomp profile may deny the NUMA system calls (Docker's default without
// CAP_SYS_NICE). numaaff reads all of it once, runs inside it, and says what it found in
// system_report(): placement calls in a sandbox are counted no-ops, never errors.
// Asserted on any machine, inside a sandbox or not: the topology holds exactly the CPUs this
// process may run on, and the pool's workers stay on them; the report's "sandbox" line agrees
// with numa_calls_forbidden(); a policy, an allocation and a move all succeed, and each
// refused call is counted in refusal_stats() exactly when the sandbox denies the calls; the
// data is intact. Run it as `./containers`, `taskset -c 0 ./containers`, or in a container.
// Prints the report and "containers: ok".
#include <numaaff/numaaff.hpp>

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "containers: FAILED: %s\n", what);
    std::exit(1);
  }
}

// The CPUs the kernel lets this process run on (cpuset and affinity), counted independently.
std::size_t allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  require(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
  return static_cast<std::size_t>(CPU_COUNT(&set));
}

}  // namespace

int main() {
  //! [report]
  // What this process may use and what the kernel lets numaaff do here, probed once.
  const numaaff::topology& topo = numaaff::topology::system();
  const numaaff::capability_report& report = numaaff::system_report();
  std::fputs(report.to_string().c_str(), stdout);
  std::printf("restricted: %s\n", topo.is_restricted() ? topo.restriction().c_str() : "no");
  std::printf("cpus: %zu of the machine's %zu; nodes: %zu of %zu\n", topo.cpus().size(), topo.machine_cpu_count(),
              topo.node_count(), topo.machine_node_count());
  if (report.cgroup_memory_limit != 0)  // 0: no memory cgroup limit
    std::printf("memory cgroup: %llu MiB allowed, %llu MiB left\n",
                static_cast<unsigned long long>(report.cgroup_memory_limit >> 20),
                static_cast<unsigned long long>(report.cgroup_memory_room >> 20));
  //! [report]
  require(topo.cpus().size() == allowed_cpus(), "the topology holds exactly the CPUs this process may use");
  const bool forbidden = report.numa_calls_forbidden();
  for (const numaaff::capability& c : report.items)
    if (c.name == "sandbox")
      require((c.state == numaaff::probe_state::forbidden) == forbidden, "the sandbox line agrees with the probe");
  require(!(forbidden && report.placement_effective()), "a sandbox makes placement a no-op");
  require(report.cgroup_memory_room <= report.cgroup_memory_limit, "the cgroup's room is within its limit");

  //! [degrade]
  // The same calls as on a NUMA machine. In a sandbox each is a counted no-op: the allocation
  // is placed by first touch, the policy changes nothing, the move moves nothing.
  const numaaff::refusal_statistics before = numaaff::refusal_stats();
  const numaaff::node_id node = topo.nodes().front();
  const std::size_t bytes = 4 << 20;
  numaaff::node_vector<char> data(bytes, 7, numaaff::node_allocator<char>(node));
  void* scratch = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  require(scratch != MAP_FAILED, "mmap");
  numaaff::interleave(scratch, bytes, topo.nodes());
  std::memset(scratch, 1, bytes);
  const numaaff::move_result r = numaaff::move_to(data.data(), bytes, topo.nodes().back());
  const numaaff::refusal_statistics after = numaaff::refusal_stats();
  std::printf("left undone: %llu policies, %llu allocations unbound, %llu pages unmoved\n",
              static_cast<unsigned long long>(after.policies_skipped - before.policies_skipped),
              static_cast<unsigned long long>(after.mappings_unbound - before.mappings_unbound),
              static_cast<unsigned long long>(after.pages_unmoved - before.pages_unmoved));
  //! [degrade]
  require((after.policies_skipped > before.policies_skipped) == forbidden, "a refused policy is counted, only then");
  require((after.mappings_unbound > before.mappings_unbound) == forbidden,
          "an allocation left to first touch is counted, only then");
  require(r.moved + r.already_there + r.unpopulated + r.failed == r.total, "the move counts every page once");
  require(std::all_of(data.begin(), data.end(), [](char c) { return c == 7; }), "the data is intact");
  munmap(scratch, bytes);

  //! [pool]
  // The pool: one worker per allowed CPU, on that CPU; none outside the cpuset.
  numaaff::thread_pool pool;
  std::printf("%s\n", pool.to_string().c_str());
  //! [pool]
  for (std::size_t w = 0; w < pool.worker_count(); ++w) {
    const int cpu = pool.worker_cpu(w);
    require(cpu < 0 || std::count(topo.cpus().begin(), topo.cpus().end(), cpu) == 1, "workers stay in the cpuset");
  }
  std::puts("containers: ok");
  return 0;
}
