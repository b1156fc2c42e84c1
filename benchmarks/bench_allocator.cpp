// Small-object allocate+free rate of numaaff's node_resource / node_allocator and of the heap
// by kind (allocate(kind::local()) + deallocate(p), no size) against malloc and libnuma's
// numa_alloc_onnode, single- and multi-threaded. malloc is glibc's, or whichever allocator
// LD_PRELOAD puts first (benchmarks/README.md runs it under mimalloc, jemalloc and tcmalloc:
// the heap by kind must reach 1.0x of the best of them).
// Targets (issue 4): >= 0.8x malloc's rate and >= 50x numa_alloc_onnode's.
#include <numaaff/allocator.hpp>
#include <numaaff/kind.hpp>

#include "ratio_report.hpp"

#include <benchmark/benchmark.h>
#include <numa.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int batch = 64;  // allocations alive at once: exercises caches, not just one slot

void bm_malloc(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  void* p[batch];
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) p[i] = std::malloc(size);
    benchmark::DoNotOptimize(p);
    for (int i = 0; i < batch; ++i) std::free(p[i]);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void bm_node_resource(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  static numaaff::node_resource resource(numaaff::topology::system().nodes().front());
  void* p[batch];
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) p[i] = resource.allocate(size, alignof(std::max_align_t));
    benchmark::DoNotOptimize(p);
    for (int i = 0; i < batch; ++i) resource.deallocate(p[i], size, alignof(std::max_align_t));
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void bm_node_allocator(benchmark::State& state) {
  const auto count = static_cast<std::size_t>(state.range(0)) / sizeof(double);
  numaaff::node_allocator<double> a(numaaff::topology::system().nodes().front());
  double* p[batch];
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) p[i] = a.allocate(count);
    benchmark::DoNotOptimize(p);
    for (int i = 0; i < batch; ++i) a.deallocate(p[i], count);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void bm_kind_local(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const numaaff::kind local = numaaff::kind::local();
  void* p[batch];
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) p[i] = numaaff::allocate(local, size);
    benchmark::DoNotOptimize(p);
    for (int i = 0; i < batch; ++i) numaaff::deallocate(p[i]);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

void bm_numa_alloc_onnode(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const int node = numaaff::topology::system().nodes().front();
  if (numa_available() < 0) {
    state.SkipWithError("libnuma: numa_available() < 0");
    return;
  }
  void* p[batch];
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) p[i] = numa_alloc_onnode(size, node);
    benchmark::DoNotOptimize(p);
    for (int i = 0; i < batch; ++i) numa_free(p[i], size);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}

BENCHMARK(bm_malloc)->Arg(16)->Arg(64)->Arg(1024)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(bm_kind_local)->Arg(16)->Arg(64)->Arg(1024)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(bm_node_resource)->Arg(64)->Arg(1024)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(bm_node_allocator)->Arg(64)->Arg(1024)->ThreadRange(1, 2)->UseRealTime();
BENCHMARK(bm_numa_alloc_onnode)->Arg(64)->Arg(1024)->ThreadRange(1, 2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  using numaaff_bench::ratio;
  std::vector<ratio> ratios;
  const char* preloaded = std::getenv("LD_PRELOAD");
  const std::string malloc_name = preloaded != nullptr && *preloaded != '\0' ? std::string("malloc of ") + preloaded : "glibc malloc";
  for (const char* size : {"16", "64", "1024"})
    for (const char* threads : {"threads:1", "threads:2"}) {
      const std::string suffix = std::string("/") + size + "/real_time/" + threads;
      ratios.push_back({"bm_kind_local" + suffix, "bm_malloc" + suffix, ratio::measure::rate, 1.0,
                        "kind::local() vs " + malloc_name + ", " + size + " B, " + threads});
    }
  for (const char* size : {"64", "1024"}) {
    for (const char* threads : {"threads:1", "threads:2"}) {
      const std::string suffix = std::string("/") + size + "/real_time/" + threads;
      ratios.push_back({"bm_node_resource" + suffix, "bm_malloc" + suffix, ratio::measure::rate, 0.8,
                        std::string("node_resource vs malloc, ") + size + " B, " + threads});
      ratios.push_back({"bm_node_allocator" + suffix, "bm_malloc" + suffix, ratio::measure::rate, 0.8,
                        std::string("node_allocator vs malloc, ") + size + " B, " + threads});
      ratios.push_back({"bm_node_resource" + suffix, "bm_numa_alloc_onnode" + suffix, ratio::measure::rate, 50.0,
                        std::string("node_resource vs numa_alloc_onnode, ") + size + " B, " + threads});
    }
  }
  return numaaff_bench::run(argc, argv, ratios);
}
