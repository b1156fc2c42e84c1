#include <numaaff/thread_pool.hpp>
#include <numaaff/numaaff.hpp>

#include <atomic>

int group_sum_from_b(numaaff::thread_pool& pool) {
  std::atomic<int> sum{0};
  numaaff::task_group g(pool);
  for (int i = 1; i <= 4; ++i) g.run([&sum, i] { sum += i; });
  g.wait();
  return sum.load();
}

const void* topology_address_from_b() { return &numaaff::topology::system(); }
const void* category_address_from_b() { return &numaaff::error_category(); }
const void* report_address_from_b() { return &numaaff::system_report(); }
