// numaaff's thread pool against oneTBB and OpenMP in the same run (issue 6):
//   tasks/*      100,000 empty tasks spawned from one thread, then waited for:
//                numaaff task_group (from outside the pool and from inside a task) vs
//                tbb::task_group. Target: numaaff >= oneTBB's throughput.
//   fork_join/*  latency of one small parallel loop (16 indices per thread, a few ns each):
//                numaaff parallel_for vs `omp parallel for schedule(static)` and
//                tbb::parallel_for with a static partitioner. Target: <= 1.2x OpenMP. So
//                small that the waiting thread may run every block before a worker wakes:
//                it measures tiny-loop latency.
//   fork_join_20us/*  the same loop with one block per thread of about 20 us each (a
//                calibrated spin), so that every worker must take part: the fork-join cost
//                of a loop that needs the team. Target: <= 1.2x OpenMP.
// The task benchmarks also measure the process's CPU time (all threads, getrusage): on a
// shared 2-CPU host wall-clock ratios swing widely, CPU time per task much less; both are
// reported. Run with --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// for the medians of five interleaved repetitions (benchmarks/README.md).
//   dynamic/*    an irregular loop (every 7th iteration 5x as long): numaaff's dynamic NUMA
//                schedule vs `schedule(dynamic, 64)` and tbb::parallel_for's auto partitioner.
//                Target: <= 1.2x OpenMP dynamic.
//   fib/*        recursive fib(N) with one task per call above a cutoff: numaaff task_group
//                vs tbb::task_group (no target in the issue; reported).
// Every runtime gets one thread per allowed CPU. Reports the topology it ran on.
#include <numaaff/thread_pool.hpp>

#include "ratio_report.hpp"
#include "runtimes.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

constexpr int task_count = 100000;

using numaaff_bench::pool;
using numaaff_bench::threads;

// ---- 100,000 empty tasks ------------------------------------------------------------------

void tasks_numaaff_outside(benchmark::State& state) {
  for (auto _ : state) {
    numaaff::task_group g(pool());
    for (int i = 0; i < task_count; ++i) g.run([] {});
    g.wait();
  }
  state.SetItemsProcessed(state.iterations() * task_count);
}

void tasks_numaaff_inside(benchmark::State& state) {
  for (auto _ : state) {
    pool().submit([] {
          numaaff::task_group g(pool());
          for (int i = 0; i < task_count; ++i) g.run([] {});
          g.wait();
        }).get();
  }
  state.SetItemsProcessed(state.iterations() * task_count);
}

void tasks_numaaff_post(benchmark::State& state) {
  for (auto _ : state) {
    for (int i = 0; i < task_count; ++i) pool().post([] {});
    pool().wait();
  }
  state.SetItemsProcessed(state.iterations() * task_count);
}

// The same posts with a data hint: each task names one of the 32 blocks of 64 KiB of a 2 MiB
// array, round-robin (a page query per block, then the per-thread cache while nothing
// migrates). Target: <= 1.3x the unhinted post.
void tasks_numaaff_post_near(benchmark::State& state) {
  constexpr std::size_t block = 64 << 10;
  static std::vector<char> data(32 * block, 1);
  for (auto _ : state) {
    for (int i = 0; i < task_count; ++i)
      pool().post_near(data.data() + (static_cast<std::size_t>(i) % 32) * block, block, [] {});
    pool().wait();
  }
  state.SetItemsProcessed(state.iterations() * task_count);
}

void tasks_tbb(benchmark::State& state) {
  for (auto _ : state) {
    tbb::task_group g;
    for (int i = 0; i < task_count; ++i) g.run([] {});
    g.wait();
  }
  state.SetItemsProcessed(state.iterations() * task_count);
}

// ---- fork-join latency of a small parallel loop -------------------------------------------

std::vector<double>& data() {
  static std::vector<double> d(static_cast<std::size_t>(16 * threads()), 1.0);
  return d;
}

void fork_join_numaaff(benchmark::State& state) {
  std::vector<double>& d = data();
  for (auto _ : state) {
    pool().parallel_for(0, d.size(), [&](std::size_t lo, std::size_t hi) {
      for (std::size_t i = lo; i < hi; ++i) d[i] = d[i] * 0.5 + 1.0;
    });
    benchmark::DoNotOptimize(d.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void fork_join_omp(benchmark::State& state) {
  std::vector<double>& d = data();
  const auto n = static_cast<long>(d.size());
  for (auto _ : state) {
#pragma omp parallel for schedule(static) num_threads(threads())
    for (long i = 0; i < n; ++i) d[static_cast<std::size_t>(i)] = d[static_cast<std::size_t>(i)] * 0.5 + 1.0;
    benchmark::DoNotOptimize(d.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void fork_join_tbb(benchmark::State& state) {
  std::vector<double>& d = data();
  for (auto _ : state) {
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, d.size()),
        [&](const tbb::blocked_range<std::size_t>& r) {
          for (std::size_t i = r.begin(); i < r.end(); ++i) d[i] = d[i] * 0.5 + 1.0;
        },
        tbb::static_partitioner());
    benchmark::DoNotOptimize(d.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- fork-join of a loop that needs every thread -------------------------------------------

// Spins for about `iterations` dependent multiply-adds; returns a value so it is not removed.
std::uint64_t spin_work(std::uint64_t iterations, std::uint64_t seed) {
  std::uint64_t x = seed | 1;
  for (std::uint64_t i = 0; i < iterations; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

// Iterations that take about 20 us here, measured once (the median of 9 tries).
std::uint64_t iterations_for_20us() {
  static const std::uint64_t n = [] {
    std::vector<double> per_iteration;
    for (int k = 0; k < 9; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(spin_work(100000, static_cast<std::uint64_t>(k)));
      per_iteration.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 100000);
    }
    std::sort(per_iteration.begin(), per_iteration.end());
    return static_cast<std::uint64_t>(20e-6 / per_iteration[4]);
  }();
  return n;
}

std::vector<std::uint64_t>& sink() {
  static std::vector<std::uint64_t> s(static_cast<std::size_t>(threads()) * 8);  // a cache line each
  return s;
}

// Counter caller_ran_all: the share of iterations whose every block the calling thread ran
// itself, one after the other, while a worker's CPU stayed idle (the pool's one spinning
// worker shared the caller's CPU, and the other slept): where the wall time goes past OpenMP's.
void fork_join_20us_numaaff(benchmark::State& state) {
  const std::uint64_t n = iterations_for_20us();
  std::vector<std::uint64_t>& s = sink();
  const auto blocks = static_cast<std::size_t>(threads());
  struct alignas(64) flag {  // a cache line each, as the sink's slots: blocks write them at once
    std::atomic<bool> by_caller{false};
  };
  std::vector<flag> ran(blocks);
  std::int64_t caller_ran_all = 0;
  for (auto _ : state) {
    pool().parallel_for(0, blocks, [&](std::size_t i) {
      s[i * 8] = spin_work(n, i);
      // No pool of its own: the benchmark thread, running a block while it waits.
      ran[i].by_caller.store(numaaff::thread_pool::current() == nullptr, std::memory_order_relaxed);
    });
    benchmark::DoNotOptimize(s.data());
    caller_ran_all += std::all_of(ran.begin(), ran.end(), [](const flag& f) { return f.by_caller.load(); });
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["caller_ran_all"] = benchmark::Counter(static_cast<double>(caller_ran_all) / static_cast<double>(state.iterations()));
}

void fork_join_20us_omp(benchmark::State& state) {
  const std::uint64_t n = iterations_for_20us();
  std::vector<std::uint64_t>& s = sink();
  const int t = threads();
  for (auto _ : state) {
#pragma omp parallel for schedule(static) num_threads(t)
    for (int i = 0; i < t; ++i) s[static_cast<std::size_t>(i) * 8] = spin_work(n, static_cast<std::uint64_t>(i));
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void fork_join_20us_tbb(benchmark::State& state) {
  const std::uint64_t n = iterations_for_20us();
  std::vector<std::uint64_t>& s = sink();
  for (auto _ : state) {
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, static_cast<std::size_t>(threads()), 1),
        [&](const tbb::blocked_range<std::size_t>& r) {
          for (std::size_t i = r.begin(); i < r.end(); ++i) s[i * 8] = spin_work(n, i);
        },
        tbb::static_partitioner());
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- an irregular loop, dynamically scheduled ----------------------------------------------

// 100,000 iterations of about 0.2 us, every 7th 5x as long, in chunks of at least 64: numaaff's
// dynamic NUMA schedule against `schedule(dynamic, 64)` and oneTBB's auto partitioner (grain
// 64). Target: numaaff <= 1.2x OpenMP dynamic.
constexpr std::size_t irregular_n = 100000, irregular_grain = 64;
std::uint64_t irregular_cost(std::size_t i) {
  const std::uint64_t unit = std::max<std::uint64_t>(1, iterations_for_20us() / 100);
  return i % 7 == 0 ? 5 * unit : unit;
}

void dynamic_numaaff(benchmark::State& state) {
  std::vector<std::uint64_t>& s = sink();
  for (auto _ : state) {
    pool().parallel_for(0, irregular_n, [&](std::size_t lo, std::size_t hi) {
      std::uint64_t acc = 0;
      for (std::size_t i = lo; i < hi; ++i) acc += spin_work(irregular_cost(i), i);
      s[(lo / irregular_grain % static_cast<std::size_t>(threads())) * 8] += acc;
    }, numaaff::dynamic_schedule{irregular_grain});
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(irregular_n));
}

void dynamic_omp(benchmark::State& state) {
  std::vector<std::uint64_t>& s = sink();
  const int t = threads();
  for (auto _ : state) {
#pragma omp parallel num_threads(t)
    {
      std::uint64_t acc = 0;
#pragma omp for schedule(dynamic, 64)
      for (std::size_t i = 0; i < irregular_n; ++i) acc += spin_work(irregular_cost(i), i);
      s[static_cast<std::size_t>(omp_get_thread_num()) * 8] += acc;
    }
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(irregular_n));
}

void dynamic_tbb(benchmark::State& state) {
  std::vector<std::uint64_t>& s = sink();
  for (auto _ : state) {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, irregular_n, irregular_grain), [&](const tbb::blocked_range<std::size_t>& r) {
      std::uint64_t acc = 0;
      for (std::size_t i = r.begin(); i < r.end(); ++i) acc += spin_work(irregular_cost(i), i);
      s[(r.begin() / irregular_grain % static_cast<std::size_t>(threads())) * 8] += acc;
    });
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(irregular_n));
}

// ---- recursive fib ------------------------------------------------------------------------

constexpr int fib_cutoff = 12;

long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

long fib_numaaff(int n) {
  if (n < fib_cutoff) return fib_serial(n);
  long a = 0, b = 0;
  numaaff::task_group g(pool());
  g.run([&] { a = fib_numaaff(n - 1); });
  b = fib_numaaff(n - 2);
  g.wait();
  return a + b;
}

long fib_tbb(int n) {
  if (n < fib_cutoff) return fib_serial(n);
  long a = 0, b = 0;
  tbb::task_group g;
  g.run([&] { a = fib_tbb(n - 1); });
  b = fib_tbb(n - 2);
  g.wait();
  return a + b;
}

void fib_bench_numaaff(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(pool().submit([n] { return fib_numaaff(n); }).get());
  state.SetItemsProcessed(state.iterations());
}

void fib_bench_tbb(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(fib_tbb(n));
  state.SetItemsProcessed(state.iterations());
}

void fib_bench_serial(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(fib_serial(n));
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(tasks_numaaff_outside)->Name("tasks/numaaff_task_group")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(tasks_numaaff_inside)->Name("tasks/numaaff_task_group_in_task")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(tasks_numaaff_post)->Name("tasks/numaaff_post")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(tasks_numaaff_post_near)->Name("tasks/numaaff_post_near")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(tasks_tbb)->Name("tasks/tbb_task_group")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(fork_join_numaaff)->Name("fork_join/numaaff_parallel_for")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(fork_join_omp)->Name("fork_join/omp_static")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(fork_join_tbb)->Name("fork_join/tbb_static")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(fork_join_20us_numaaff)->Name("fork_join_20us/numaaff_parallel_for")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(fork_join_20us_omp)->Name("fork_join_20us/omp_static")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(fork_join_20us_tbb)->Name("fork_join_20us/tbb_static")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(dynamic_numaaff)->Name("dynamic/numaaff_dynamic_schedule")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(dynamic_omp)->Name("dynamic/omp_dynamic_64")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(dynamic_tbb)->Name("dynamic/tbb_auto")->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(fib_bench_numaaff)->Name("fib/numaaff")->Arg(30)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(fib_bench_tbb)->Name("fib/tbb")->Arg(30)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(fib_bench_serial)->Name("fib/serial")->Arg(30)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  const numaaff_bench::same_threads runtimes;
  using numaaff_bench::ratio;
  return numaaff_bench::run(
      argc, argv,
      {{"tasks/numaaff_task_group/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::rate, 1.0,
        "100k empty tasks: numaaff task_group / oneTBB task_group"},
       {"tasks/numaaff_task_group/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::cpu_time, 1.0,
        "  the same, process CPU time per task (numaaff / oneTBB)"},
       {"tasks/numaaff_task_group_in_task/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::rate, 1.0,
        "100k empty tasks, spawned in a task: numaaff / oneTBB"},
       {"tasks/numaaff_task_group_in_task/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::cpu_time, 1.0,
        "  the same, process CPU time per task (numaaff / oneTBB)"},
       {"tasks/numaaff_post/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::rate, 1.0, "100k posted tasks: numaaff / oneTBB"},
       {"tasks/numaaff_post/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::cpu_time, 1.0,
        "  the same, process CPU time per task (numaaff / oneTBB)"},
       // What a data hint costs a post (each post hinted at one of 32 blocks of 64 KiB).
       {"tasks/numaaff_post_near/process_time/real_time", "tasks/numaaff_post/process_time/real_time", ratio::measure::time, 1.3,
        "data-affine posts: post_near / post, time"},
       {"tasks/numaaff_post_near/process_time/real_time", "tasks/numaaff_post/process_time/real_time", ratio::measure::cpu_time, 1.3,
        "  the same, process CPU time"},
       // The same three as costs per task, beside oneTBB's (issue 26 asks for both).
       {"tasks/numaaff_task_group/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::ns_per_item, 1.0,
        "100k empty tasks: ns per task, numaaff (target: oneTBB's)"},
       {"tasks/numaaff_task_group/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::cpu_ns_per_item,
        1.0, "  the same, process CPU ns per task (target: oneTBB's)"},
       {"tasks/numaaff_task_group_in_task/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::ns_per_item,
        1.0, "spawned in a task: ns per task, numaaff (target: oneTBB's)"},
       {"tasks/numaaff_task_group_in_task/process_time/real_time", "tasks/tbb_task_group/process_time/real_time",
        ratio::measure::cpu_ns_per_item, 1.0, "  the same, process CPU ns per task (target: oneTBB's)"},
       {"tasks/numaaff_post/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::ns_per_item, 1.0,
        "posted: ns per task, numaaff (target: oneTBB's)"},
       {"tasks/numaaff_post/process_time/real_time", "tasks/tbb_task_group/process_time/real_time", ratio::measure::cpu_ns_per_item, 1.0,
        "  the same, process CPU ns per task (target: oneTBB's)"},
       {"fork_join_20us/numaaff_parallel_for/process_time/real_time", "fork_join_20us/omp_static/process_time/real_time", ratio::measure::time, 1.2,
        "parallel_for of 20 us per thread: numaaff / OpenMP static"},
       {"fork_join_20us/numaaff_parallel_for/process_time/real_time", "fork_join_20us/omp_static/process_time/real_time", ratio::measure::cpu_time, 1.2,
        "  the same, process CPU time (numaaff / OpenMP static)"},
       {"fork_join_20us/tbb_static/process_time/real_time", "fork_join_20us/omp_static/process_time/real_time", ratio::measure::time, 1.2,
        "parallel_for of 20 us per thread: oneTBB static / OpenMP (reference)"},
       {"dynamic/numaaff_dynamic_schedule/process_time/real_time", "dynamic/omp_dynamic_64/process_time/real_time", ratio::measure::time, 1.2,
        "irregular loop, dynamic: numaaff / OpenMP schedule(dynamic, 64)"},
       {"dynamic/numaaff_dynamic_schedule/process_time/real_time", "dynamic/omp_dynamic_64/process_time/real_time", ratio::measure::cpu_time, 1.2,
        "  the same, process CPU time (numaaff / OpenMP dynamic)"},
       {"dynamic/tbb_auto/process_time/real_time", "dynamic/omp_dynamic_64/process_time/real_time", ratio::measure::time, 1.2,
        "irregular loop: oneTBB auto / OpenMP dynamic (reference)"},
       {"fork_join/numaaff_parallel_for/real_time", "fork_join/omp_static/real_time", ratio::measure::time, 1.2,
        "small parallel_for latency: numaaff / OpenMP static"},
       {"fork_join/tbb_static/real_time", "fork_join/omp_static/real_time", ratio::measure::time, 1.2,
        "small parallel_for latency: oneTBB static / OpenMP (reference)"},
       {"fib/numaaff/30/real_time", "fib/tbb/30/real_time", ratio::measure::rate, 1.0, "fib(30), cutoff 12: numaaff / oneTBB"}});
}
