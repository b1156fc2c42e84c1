// troubleshooting: the checks behind "why is my data not where I asked?", each on a case that
// reproduces a usual cause. (1) Nobody has touched the pages yet: where() counts them as
// unpopulated and data_node() says -1; writing them, or asking the allocator to populate,
// places them. (2) The wrong thread touched them first: a std::vector's constructor writes
// every element, so its pages are placed before a parallel loop ever runs. (3) The kernel will
// not place anything here: one node, or a sandbox; system_report() says which. (4) What numaaff
// itself did, per node: the live counters that numaaff-top and numaaff-run --report show.
// Asserted on any machine: each case reads as described, and the counters have a row for
// every node, with this program's bound heap memory on the node it asked for.
// Prints a placement table, the verdict of the report, and "troubleshooting: ok".
#include <numaaff/numaaff.hpp>

#include <sys/mman.h>
#include <unistd.h>

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
    std::fprintf(stderr, "troubleshooting: FAILED: %s\n", what);
    std::exit(1);
  }
}

}  // namespace

int main() {
  const numaaff::topology& topo = numaaff::topology::system();
  const numaaff::node_id node = topo.nodes().front();
  const std::size_t n = 1 << 19;  // 4 MiB of doubles
  const std::size_t bytes = n * sizeof(double);
  std::vector<std::pair<std::string, numaaff::placement>> rows;

  //! [untouched]
  // (1) Memory is placed when it is first written, not when it is allocated.
  void* raw = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  require(raw != MAP_FAILED, "mmap");
  auto* fresh = static_cast<double*>(raw);
  const numaaff::placement before = numaaff::where(fresh, bytes);
  const numaaff::node_id hint = numaaff::data_node(fresh, bytes);  // what submit_near would see
  for (std::size_t i = 0; i < n; ++i) fresh[i] = 1.0;
  rows.emplace_back("before writing", before);
  rows.emplace_back("after writing", numaaff::where(fresh, bytes));
  // An allocator can place the pages at once instead (they are still bound to the node).
  numaaff::alloc_options now;
  now.populate = true;
  void* populated = numaaff::allocate_on_node(bytes, node, now);
  rows.emplace_back("populate = true", numaaff::where(populated, bytes));
  //! [untouched]
  require(before.unpopulated() == before.total() && before.resident() == 0, "untouched pages are unpopulated");
  require(hint == -1, "data_node says -1 for untouched data");
  require(rows[1].second.unpopulated() == 0, "written pages are placed");
  require(rows[2].second.unpopulated() == 0, "populate places the pages during the allocation");

  //! [wrong_thread]
  // (2) The constructor wrote every element on this thread: every page is placed already, and
  // a parallel loop after it places nothing. Allocate with a node or local allocator, first
  // touch in parallel (thread_pool::parallel_for, openmp::first_touch), or move it now.
  std::vector<double> serial(n, 0.0);
  rows.emplace_back("std::vector", numaaff::where(serial.data(), bytes));
  //! [wrong_thread]
  require(rows[3].second.unpopulated() == 0, "a vector's constructor places every page");
  std::fputs(numaaff::placement_table(rows).c_str(), stdout);

  //! [report]
  // (3) Whether placement calls can act at all here, and what may move pages afterwards.
  const numaaff::capability_report& report = numaaff::system_report();
  std::printf("placement effective: %s; sandbox: %s; automatic NUMA balancing: %s\n",
              report.placement_effective() ? "yes" : "no", report.numa_calls_forbidden() ? "yes" : "no",
              report.numa_balancing > 0 ? "on (the kernel may move pages later)" : "off");
  //! [report]
  require(!report.placement_effective() || topo.node_count() > 1, "one node: placement calls are no-ops");

  //! [counters]
  // (4) What numaaff did per node: heap memory held there, pages moved there or not,
  // next-touch chunks, tasks run and stolen. numaaff-top shows the same from outside.
  const numaaff::counter_snapshot counters = numaaff::snapshot();
  for (const numaaff::node_counters& c : counters.nodes)
    std::printf("node %d: heap %llu MiB bound, %llu pages moved here, %llu not moved\n", c.node,
                static_cast<unsigned long long>(c.heap_bound_bytes >> 20),
                static_cast<unsigned long long>(c.pages_moved), static_cast<unsigned long long>(c.pages_not_moved));
  const numaaff::counters_publication published = numaaff::counters_status();
  if (published.published)
    std::printf("numaaff-top --pid %ld reads %s\n", static_cast<long>(getpid()), published.path.c_str());
  //! [counters]
  for (numaaff::node_id m : topo.nodes()) require(counters.node(m) != nullptr, "a row for every node");
  require(counters.node(node)->heap_bound_bytes >= bytes, "the populated block is counted on its node");

  numaaff::deallocate(populated, bytes);
  munmap(raw, bytes);
  std::puts("troubleshooting: ok");
  return 0;
}
