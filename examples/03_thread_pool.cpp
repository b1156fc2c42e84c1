// 03_thread_pool: work runs on its homenode, and the memory it allocates lands there.
//
// Prints the pool (nodes, workers, CPUs, steal delays); runs one task per node with
// submit(node, f), each reporting the CPU and node it ran on and where the memory it allocated
// with local_allocator went; then initialises one array with parallel_for (first touch by the
// owning node's workers) and shows, per node block, where its pages are (where()).
// On a one-node machine everything is on node 0: run it in the emulated VM
// (tests/vm/numaaff-vm -- build/.../03_thread_pool) to see several nodes.
//
// Usage: 03_thread_pool [MiB for the array, default 32]
#include <numaaff/numaaff.hpp>

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

int main(int argc, char** argv) {
  std::size_t mib = 32;
  if (argc > 2 || (argc == 2 && (std::atoi(argv[1]) <= 0 || std::atoi(argv[1]) > 4096))) {
    std::fprintf(stderr, "usage: %s [MiB for the array, 1..4096]\n", argv[0]);
    return 2;
  }
  if (argc == 2) mib = static_cast<std::size_t>(std::atoi(argv[1]));
  try {
    numaaff::thread_pool pool;
    std::printf("%s\n", pool.to_string().c_str());

    std::printf("one task per node (submit(node, f)): where it ran, where its 4 MiB went\n");
    std::vector<std::pair<std::string, numaaff::placement>> rows;
    for (numaaff::node_id n : pool.nodes()) {
      auto f = pool.submit(n, [] {
        std::vector<char, numaaff::local_allocator<char>> v(4u << 20, 1);
        return std::make_pair(numaaff::current_cpu(), numaaff::where(v.data(), v.size()));
      });
      const auto [cpu, where] = f.get();
      std::printf("  homenode %d: ran on cpu %d (node %d)\n", n, cpu, numaaff::topology::system().node_of_cpu(cpu));
      rows.emplace_back("task of node " + std::to_string(n), where);
    }
    std::printf("%s\n", numaaff::placement_table(rows).c_str());

    // Fresh pages, no transparent huge pages: each page is placed by its first toucher.
    const std::size_t bytes = mib << 20;
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) throw std::bad_alloc();
    madvise(mem, bytes, MADV_NOHUGEPAGE);
    auto* a = static_cast<double*>(mem);
    const std::size_t count = bytes / sizeof(double);
    pool.parallel_for(0, count, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) a[i] = 1.0;
    });
    std::printf("parallel_for first touch of %zu MiB: pages of each node's block\n", mib);
    rows.clear();
    for (const numaaff::index_block& b : pool.node_blocks(0, count))
      rows.emplace_back("block of node " + std::to_string(b.node), numaaff::where(a + b.first, (b.last - b.first) * sizeof(double)));
    std::printf("%s", numaaff::placement_table(rows).c_str());
    munmap(mem, bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "03_thread_pool: %s\n", e.what());
    return 1;
  }
  return 0;
}
