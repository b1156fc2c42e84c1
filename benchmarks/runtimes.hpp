// The runtimes a benchmark compares, given the same threads: numaaff's default pool (one
// worker per allowed CPU), and oneTBB and OpenMP limited to as many threads.
#pragma once

#include <numaaff/thread_pool.hpp>

#include <omp.h>
#include <oneapi/tbb/global_control.h>

#include <cstddef>
#include <cstdio>

namespace numaaff_bench {

inline numaaff::thread_pool& pool() {
  static numaaff::thread_pool p;
  return p;
}

inline int threads() { return static_cast<int>(numaaff::topology::system().cpus().size()); }

/// While it lives, oneTBB and OpenMP run one thread per allowed CPU, as the pool does (both
/// default to that as well; saying it keeps the comparison explicit). Prints the pool.
class same_threads {
 public:
  same_threads() : tbb_(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads())) {
    omp_set_num_threads(threads());
    std::printf("%s", pool().to_string().c_str());
  }

 private:
  tbb::global_control tbb_;
};

}  // namespace numaaff_bench
