// Helper for test_topology and the multi-node suite: prints what topology::system() sees, one
// key=value per line, so a test can start it under taskset, numactl or an environment.
// `topology_probe pool` prints what a default thread_pool would use instead; `topology_probe
// threaded` first starts a thread, as an MPI library does before the program looks.
#include <numaaff/thread_pool.hpp>
#include <numaaff/topology.hpp>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace {

void print_pool() {
  numaaff::thread_pool pool;
  std::printf("workers=%zu\n", pool.worker_count());
  std::printf("pool_nodes=%s\n", numaaff::detail::format_list(pool.nodes()).c_str());
  std::printf("policy=%s\n", numaaff::to_string(pool.policy()).c_str());
  std::printf("steal=%s\n", numaaff::to_string(pool.steal()).c_str());
  std::printf("bound=%d\n", pool.workers_bound() ? 1 : 0);
  std::printf("homenode=%d\n", numaaff::this_homenode());
  for (std::size_t i = 0; i < pool.worker_count(); ++i)
    std::printf("worker%zu=%d@%d\n", i, pool.worker_node(i), pool.worker_cpu(i));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "pool") == 0) {
      print_pool();
      return 0;
    }
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::thread other;
    if (argc > 1 && std::strcmp(argv[1], "threaded") == 0)
      other = std::thread([&] {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return done; });
      });
    const numaaff::topology& t = numaaff::topology::system();
    if (other.joinable()) {
      {
        std::lock_guard<std::mutex> lock(m);
        done = true;
      }
      cv.notify_one();
      other.join();
    }
    std::printf("unusable=%d\n", t.restriction_is_unusable() ? 1 : 0);
    std::printf("nodes=%s\n", numaaff::detail::format_list(t.nodes()).c_str());
    std::printf("cpus=%s\n", numaaff::detail::format_list(t.cpus()).c_str());
    std::printf("restricted=%d\n", t.is_restricted() ? 1 : 0);
    std::printf("restriction=%s\n", t.restriction().c_str());
    std::printf("this_system=%d\n", t.is_this_system() ? 1 : 0);
    if (t.node_count() > 1) std::printf("distance01=%d\n", t.distance(t.nodes()[0], t.nodes()[1]));
    for (numaaff::node_id n : t.nodes())
      std::printf("node%d=%s\n", n, numaaff::detail::format_list(t.cpus_of(n)).c_str());
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
