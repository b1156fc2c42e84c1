// A numaaff process for the tools' tests: a block of MIB MiB on NODE, touched, and a thread
// pool running short tasks until its standard input closes, or exactly TASKS of them. Prints,
// once both are there, "ready ADDRESS BYTES WORKERS".
#include <numaaff/numaaff.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: top_target MIB NODE [TASKS]\n");
    return 2;
  }
  const long exact = argc == 4 ? std::atol(argv[3]) : -1;
  const std::size_t bytes = std::strtoul(argv[1], nullptr, 10) << 20;
  const numaaff::node_id node = std::atoi(argv[2]);
  void* block = numaaff::allocate(numaaff::kind::on_node(node), bytes);
  std::memset(block, 1, bytes);
  numaaff::thread_pool pool;
  std::atomic<bool> stop{false};
  std::thread watcher([&stop] {
    char c;
    while (::read(STDIN_FILENO, &c, 1) > 0) {
    }
    stop = true;
  });
  std::printf("ready %p %zu %zu\n", block, bytes, pool.worker_count());
  std::fflush(stdout);
  if (exact >= 0) {
    for (long i = 0; i < exact; ++i) pool.submit([] {});
    pool.wait();
    watcher.detach();  // its read never ends: the process does
    numaaff::deallocate(block);
    return 0;
  }
  while (!stop) {
    for (int i = 0; i < 64; ++i)
      pool.submit([] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
      });
    pool.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  watcher.join();
  numaaff::deallocate(block);
  return 0;
}
