// move_to() throughput against one raw move_pages(2) call over the same pages (target: within
// 1.1x), raw move_pages in batches of different sizes (how numaaff's batch size was chosen),
// and where() against a raw placement query, per page. Migration needs two nodes: on a
// one-node machine those rows are skipped; run them in the emulated VM
// (tests/vm/numaaff-vm -- build/.../bench_memory).
#include <numaaff/memory.hpp>

#include "ratio_report.hpp"
#include "../tests/common/scratch.hpp"

#include <benchmark/benchmark.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {

const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

struct region : numaaff_test::scratch {
  explicit region(std::size_t pages) : scratch(pages * page), addrs(pages) {
    std::memset(p, 1, bytes);
    for (std::size_t i = 0; i < pages; ++i) addrs[i] = p + i * page;
  }
  std::vector<void*> addrs;
};

bool two_nodes(benchmark::State& state, int& a, int& b) {
  const auto& nodes = numaaff::topology::system().nodes();
  if (nodes.size() < 2) {
    state.SkipWithError("needs 2 NUMA nodes (run it in the emulated VM)");
    return false;
  }
  a = nodes.front();
  b = nodes.back();
  return true;
}

void bm_move_to(benchmark::State& state) {
  int a = 0, b = 0;
  if (!two_nodes(state, a, b)) return;
  region r(static_cast<std::size_t>(state.range(0)));
  (void)numaaff::move_to(r.p, r.bytes, a);  // start from a known node: every iteration moves all
  int target = b;
  for (auto _ : state) {
    const numaaff::move_result m = numaaff::move_to(r.p, r.bytes, target);
    if (m.moved != r.addrs.size()) state.SkipWithError("not every page moved");
    target = target == a ? b : a;
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// One raw call per `batch` pages (batch 0: the whole range at once).
void raw_move(benchmark::State& state, std::size_t batch) {
  int a = 0, b = 0;
  if (!two_nodes(state, a, b)) return;
  region r(static_cast<std::size_t>(state.range(0)));
  const std::size_t n = r.addrs.size();
  if (batch == 0) batch = n;
  std::vector<int> dest(n, a), status(n);
  move_pages(0, n, r.addrs.data(), dest.data(), status.data(), MPOL_MF_MOVE);  // start on a
  int target = b;
  for (auto _ : state) {
    std::fill(dest.begin(), dest.end(), target);
    for (std::size_t i = 0; i < n; i += batch) {
      const std::size_t k = std::min(batch, n - i);
      if (move_pages(0, k, r.addrs.data() + i, dest.data() + i, status.data() + i, MPOL_MF_MOVE) < 0)
        state.SkipWithError("move_pages failed");
    }
    target = target == a ? b : a;
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
void bm_raw_move_pages(benchmark::State& state) { raw_move(state, 0); }
void bm_raw_move_pages_batch(benchmark::State& state) { raw_move(state, static_cast<std::size_t>(state.range(1))); }

void bm_where(benchmark::State& state) {
  region r(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(numaaff::where(r.p, r.bytes).total());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void bm_raw_query(benchmark::State& state) {
  region r(static_cast<std::size_t>(state.range(0)));
  std::vector<int> status(r.addrs.size());
  for (auto _ : state) {
    move_pages(0, r.addrs.size(), r.addrs.data(), nullptr, status.data(), 0);
    benchmark::DoNotOptimize(status.data());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

BENCHMARK(bm_move_to)->Arg(4096)->Arg(16384)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_raw_move_pages)->Arg(4096)->Arg(16384)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_raw_move_pages_batch)
    ->Args({16384, 64})->Args({16384, 256})->Args({16384, 1024})->Args({16384, 4096})
    ->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_where)->Arg(16384)->Arg(32768)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_raw_query)->Arg(16384)->Arg(32768)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  using numaaff_bench::ratio;
  return numaaff_bench::run(
      argc, argv,
      {{"bm_move_to/4096/real_time", "bm_raw_move_pages/4096/real_time", ratio::measure::time, 1.1,
        "move_to vs one raw move_pages, 4096 pages"},
       {"bm_move_to/16384/real_time", "bm_raw_move_pages/16384/real_time", ratio::measure::time, 1.1,
        "move_to vs one raw move_pages, 16384 pages"},
       {"bm_where/16384/real_time", "bm_raw_query/16384/real_time", ratio::measure::time, 1.5,
        "where() vs one raw query, 16384 pages"},
       {"bm_where/32768/real_time", "bm_raw_query/32768/real_time", ratio::measure::time, 1.5,
        "where() vs one raw query, 32768 pages"}});
}
