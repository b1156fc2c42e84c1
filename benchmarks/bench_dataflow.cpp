// Dataflow overhead per task, numaaff against OpenMP tasks with `depend` (the compiler's
// runtime: libgomp with g++, libomp with clang++) and oneTBB's flow_graph with the same edges,
// in the same run (issue 26). Empty task bodies, so the figures are the runtimes' cost of
// ordering and running tasks. Shapes:
//   chain      N tasks, each inout on one value (each after the previous)
//   fan        one writer, N readers each writing its own slot, one reader of all the slots
//   wavefront  T x T tiles, tile (i, j) after (i-1, j) and (i, j-1)
//   cholesky   the tiled Cholesky DAG over T x T tiles (potrf, trsm, syrk, gemm)
// `plain` runs the same number of tasks in a numaaff task_group without accesses: the
// difference is what dependence tracking adds per task (target: <= 1 us).
// oneTBB's graph is built inside the timed loop: declaring the edges is part of its cost, as
// the tracker's work is part of numaaff's. Every runtime gets one thread per allowed CPU.
// Run with --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true (README).
#include <numaaff/task_group.hpp>
#include <numaaff/thread_pool.hpp>

#include "ratio_report.hpp"
#include "runtimes.hpp"

#include <benchmark/benchmark.h>
#include <omp.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace {

using numaaff::in;
using numaaff::inout;
using numaaff::out;

constexpr std::size_t chain_tasks = 10000;
constexpr std::size_t fan_readers = 10000;
constexpr std::size_t wave_tiles = 100;   // 10,000 tasks
constexpr std::size_t chol_tiles = 24;    // 2,600 tasks

struct alignas(64) tile {
  double v[8];
};

using numaaff_bench::pool;
using numaaff_bench::threads;

std::size_t cholesky_tasks(std::size_t t) { return t + t * (t - 1) / 2 * 2 + t * (t - 1) * (t - 2) / 6; }

void done(benchmark::State& state, std::size_t tasks) {
  state.SetItemsProcessed(state.iterations() * static_cast<benchmark::IterationCount>(tasks));
}

// Keeps a task body from being optimised away without costing more than a store.
inline void touch(tile& x) { benchmark::DoNotOptimize(x.v[0]); }

// ---- chain ------------------------------------------------------------------------------

void chain_numaaff(benchmark::State& state) {
  tile x{};
  for (auto _ : state) {
    numaaff::task_group g(pool());
    for (std::size_t i = 0; i < chain_tasks; ++i) g.run({inout(&x, sizeof x)}, [&x] { touch(x); });
    g.wait();
  }
  done(state, chain_tasks);
}
void chain_omp(benchmark::State& state) {
  tile x{};
  for (auto _ : state) {
#pragma omp parallel
#pragma omp single
    for (std::size_t i = 0; i < chain_tasks; ++i) {
#pragma omp task depend(inout : x) shared(x)
      touch(x);
    }
  }
  done(state, chain_tasks);
}
void chain_tbb(benchmark::State& state) {
  tile x{};
  using node = tbb::flow::continue_node<tbb::flow::continue_msg>;
  for (auto _ : state) {
    tbb::flow::graph g;
    std::vector<std::unique_ptr<node>> nodes;
    nodes.reserve(chain_tasks);
    for (std::size_t i = 0; i < chain_tasks; ++i) {
      nodes.push_back(std::make_unique<node>(g, [&x](const tbb::flow::continue_msg&) { touch(x); }));
      if (i > 0) tbb::flow::make_edge(*nodes[i - 1], *nodes[i]);
    }
    nodes[0]->try_put(tbb::flow::continue_msg());
    g.wait_for_all();
  }
  done(state, chain_tasks);
}

// ---- fan-out / fan-in ---------------------------------------------------------------------

void fan_numaaff(benchmark::State& state) {
  tile src{};
  std::vector<tile> slots(fan_readers);
  for (auto _ : state) {
    numaaff::task_group g(pool());
    g.run({out(&src, sizeof src)}, [&src] { touch(src); });
    for (std::size_t i = 0; i < fan_readers; ++i)
      g.run({in(&src, sizeof src), out(&slots[i], sizeof(tile))}, [&slots, i] { touch(slots[i]); });
    g.run({in(slots)}, [&slots] { touch(slots[0]); });
    g.wait();
  }
  done(state, (fan_readers + 2));
}
void fan_omp(benchmark::State& state) {
  tile src{};
  std::vector<tile> slots(fan_readers);
  tile* s = slots.data();
  for (auto _ : state) {
#pragma omp parallel
#pragma omp single
    {
#pragma omp task depend(out : src) shared(src)
      touch(src);
      for (std::size_t i = 0; i < fan_readers; ++i) {
#pragma omp task depend(in : src) depend(out : s[i]) firstprivate(i)
        touch(s[i]);
      }
#pragma omp task depend(iterator(std::size_t k = 0 : fan_readers), in : s[k])
      touch(s[0]);
    }
  }
  done(state, (fan_readers + 2));
}
void fan_tbb(benchmark::State& state) {
  tile src{};
  std::vector<tile> slots(fan_readers);
  using node = tbb::flow::continue_node<tbb::flow::continue_msg>;
  for (auto _ : state) {
    tbb::flow::graph g;
    node first(g, [&src](const tbb::flow::continue_msg&) { touch(src); });
    node last(g, [&slots](const tbb::flow::continue_msg&) { touch(slots[0]); });
    std::vector<std::unique_ptr<node>> mid;
    mid.reserve(fan_readers);
    for (std::size_t i = 0; i < fan_readers; ++i) {
      mid.push_back(std::make_unique<node>(g, [&slots, i](const tbb::flow::continue_msg&) { touch(slots[i]); }));
      tbb::flow::make_edge(first, *mid.back());
      tbb::flow::make_edge(*mid.back(), last);
    }
    first.try_put(tbb::flow::continue_msg());
    g.wait_for_all();
  }
  done(state, (fan_readers + 2));
}

// ---- wavefront ----------------------------------------------------------------------------

void wave_numaaff(benchmark::State& state) {
  const std::size_t t = wave_tiles;
  std::vector<tile> a(t * t);
  for (auto _ : state) {
    numaaff::task_group g(pool());
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t j = 0; j < t; ++j) {
        tile* c = &a[i * t + j];
        tile* up = i > 0 ? &a[(i - 1) * t + j] : nullptr;
        tile* left = j > 0 ? &a[i * t + j - 1] : nullptr;
        g.run({inout(c, sizeof(tile)), in(up, up ? sizeof(tile) : 0), in(left, left ? sizeof(tile) : 0)}, [c] { touch(*c); });
      }
    g.wait();
  }
  done(state, t * t);
}
void wave_omp(benchmark::State& state) {
  const std::size_t t = wave_tiles;
  std::vector<tile> a(t * t);
  tile* p = a.data();
  for (auto _ : state) {
#pragma omp parallel
#pragma omp single
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t j = 0; j < t; ++j) {
        // The first row and column name their own tile twice instead of a missing neighbour.
        const std::size_t up = i > 0 ? (i - 1) * t + j : i * t + j;
        const std::size_t left = j > 0 ? i * t + j - 1 : i * t + j;
#pragma omp task depend(inout : p[i * t + j]) depend(in : p[up], p[left]) firstprivate(i, j)
        touch(p[i * t + j]);
      }
  }
  done(state, t * t);
}
void wave_tbb(benchmark::State& state) {
  const std::size_t t = wave_tiles;
  std::vector<tile> a(t * t);
  using node = tbb::flow::continue_node<tbb::flow::continue_msg>;
  for (auto _ : state) {
    tbb::flow::graph g;
    std::vector<std::unique_ptr<node>> n;
    n.reserve(t * t);
    for (std::size_t i = 0; i < t; ++i)
      for (std::size_t j = 0; j < t; ++j) {
        tile* c = &a[i * t + j];
        n.push_back(std::make_unique<node>(g, [c](const tbb::flow::continue_msg&) { touch(*c); }));
        if (i > 0) tbb::flow::make_edge(*n[(i - 1) * t + j], *n.back());
        if (j > 0) tbb::flow::make_edge(*n[i * t + j - 1], *n.back());
      }
    n[0]->try_put(tbb::flow::continue_msg());
    g.wait_for_all();
  }
  done(state, t * t);
}

// ---- the tiled Cholesky DAG -----------------------------------------------------------------
// Right-looking: for k: potrf(A[k][k]); for i > k: trsm(A[k][k] -> A[i][k]); for i > k:
// syrk(A[i][k] -> A[i][i]); for k < j < i: gemm(A[i][k], A[j][k] -> A[i][j]).

void chol_numaaff(benchmark::State& state) {
  const std::size_t t = chol_tiles;
  std::vector<tile> a(t * t);
  auto at = [&](std::size_t i, std::size_t j) { return &a[i * t + j]; };
  constexpr std::size_t b = sizeof(tile);
  for (auto _ : state) {
    numaaff::task_group g(pool());
    for (std::size_t k = 0; k < t; ++k) {
      tile* kk = at(k, k);
      g.run({inout(kk, b)}, [kk] { touch(*kk); });
      for (std::size_t i = k + 1; i < t; ++i) {
        tile* ik = at(i, k);
        g.run({in(kk, b), inout(ik, b)}, [ik] { touch(*ik); });
      }
      for (std::size_t i = k + 1; i < t; ++i) {
        tile *ik = at(i, k), *ii = at(i, i);
        g.run({in(ik, b), inout(ii, b)}, [ii] { touch(*ii); });
        for (std::size_t j = k + 1; j < i; ++j) {
          tile *jk = at(j, k), *ij = at(i, j);
          g.run({in(ik, b), in(jk, b), inout(ij, b)}, [ij] { touch(*ij); });
        }
      }
    }
    g.wait();
  }
  done(state, cholesky_tasks(t));
}
void chol_omp(benchmark::State& state) {
  const std::size_t t = chol_tiles;
  std::vector<tile> a(t * t);
  tile* p = a.data();
  for (auto _ : state) {
#pragma omp parallel
#pragma omp single
    for (std::size_t k = 0; k < t; ++k) {
#pragma omp task depend(inout : p[k * t + k]) firstprivate(k)
      touch(p[k * t + k]);
      for (std::size_t i = k + 1; i < t; ++i) {
#pragma omp task depend(in : p[k * t + k]) depend(inout : p[i * t + k]) firstprivate(i, k)
        touch(p[i * t + k]);
      }
      for (std::size_t i = k + 1; i < t; ++i) {
#pragma omp task depend(in : p[i * t + k]) depend(inout : p[i * t + i]) firstprivate(i, k)
        touch(p[i * t + i]);
        for (std::size_t j = k + 1; j < i; ++j) {
#pragma omp task depend(in : p[i * t + k], p[j * t + k]) depend(inout : p[i * t + j]) firstprivate(i, j, k)
          touch(p[i * t + j]);
        }
      }
    }
  }
  done(state, cholesky_tasks(t));
}
void chol_tbb(benchmark::State& state) {
  // The same edges, found as the tracker finds them: each task after the last writer of each
  // tile it reads or writes (every task here writes exactly one tile and reads tiles whose
  // last writer is unique), and a writer after the readers since the last write.
  const std::size_t t = chol_tiles;
  std::vector<tile> a(t * t);
  using node = tbb::flow::continue_node<tbb::flow::continue_msg>;
  for (auto _ : state) {
    tbb::flow::graph g;
    std::vector<std::unique_ptr<node>> nodes;
    nodes.reserve(cholesky_tasks(t));
    std::vector<node*> writer(t * t, nullptr);
    std::vector<std::vector<node*>> readers(t * t);
    std::vector<node*> roots;
    auto add = [&](std::initializer_list<std::size_t> reads, std::size_t write) {
      tile* c = &a[write];
      nodes.push_back(std::make_unique<node>(g, [c](const tbb::flow::continue_msg&) { touch(*c); }));
      node* n = nodes.back().get();
      bool root = true;
      for (std::size_t r : reads)
        if (writer[r] != nullptr) tbb::flow::make_edge(*writer[r], *n), root = false;
      if (writer[write] != nullptr) tbb::flow::make_edge(*writer[write], *n), root = false;
      for (node* r : readers[write])
        if (r != writer[write]) tbb::flow::make_edge(*r, *n), root = false;
      for (std::size_t r : reads) readers[r].push_back(n);
      readers[write].clear();
      writer[write] = n;
      if (root) roots.push_back(n);
    };
    for (std::size_t k = 0; k < t; ++k) {
      add({}, k * t + k);
      for (std::size_t i = k + 1; i < t; ++i) add({k * t + k}, i * t + k);
      for (std::size_t i = k + 1; i < t; ++i) {
        add({i * t + k}, i * t + i);
        for (std::size_t j = k + 1; j < i; ++j) add({i * t + k, j * t + k}, i * t + j);
      }
    }
    for (node* r : roots) r->try_put(tbb::flow::continue_msg());
    g.wait_for_all();
  }
  done(state, cholesky_tasks(t));
}

// ---- the same task counts without dependences ---------------------------------------------

void plain_numaaff(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  tile x{};
  for (auto _ : state) {
    numaaff::task_group g(pool());
    for (std::size_t i = 0; i < n; ++i) g.run([&x] { touch(x); });
    g.wait();
  }
  done(state, n);
}

#define NUMAAFF_DATAFLOW_BENCH(fn, name) \
  BENCHMARK(fn)->Name(name)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond)
NUMAAFF_DATAFLOW_BENCH(chain_numaaff, "chain/numaaff");
NUMAAFF_DATAFLOW_BENCH(chain_omp, "chain/omp_depend");
NUMAAFF_DATAFLOW_BENCH(chain_tbb, "chain/tbb_flow_graph");
NUMAAFF_DATAFLOW_BENCH(fan_numaaff, "fan/numaaff");
NUMAAFF_DATAFLOW_BENCH(fan_omp, "fan/omp_depend");
NUMAAFF_DATAFLOW_BENCH(fan_tbb, "fan/tbb_flow_graph");
NUMAAFF_DATAFLOW_BENCH(wave_numaaff, "wavefront/numaaff");
NUMAAFF_DATAFLOW_BENCH(wave_omp, "wavefront/omp_depend");
NUMAAFF_DATAFLOW_BENCH(wave_tbb, "wavefront/tbb_flow_graph");
NUMAAFF_DATAFLOW_BENCH(chol_numaaff, "cholesky/numaaff");
NUMAAFF_DATAFLOW_BENCH(chol_omp, "cholesky/omp_depend");
NUMAAFF_DATAFLOW_BENCH(chol_tbb, "cholesky/tbb_flow_graph");
NUMAAFF_DATAFLOW_BENCH(plain_numaaff, "plain/numaaff")->Arg(10000)->Arg(10002)->Arg(2600);

}  // namespace

int main(int argc, char** argv) {
  const numaaff_bench::same_threads runtimes;
  using numaaff_bench::ratio;
  std::vector<ratio> r;
  const std::string suffix = "/process_time/real_time";
  for (const char* shape : {"chain", "fan", "wavefront", "cholesky"}) {
    const std::string me = std::string(shape) + "/numaaff" + suffix;
    for (const char* base : {"omp_depend", "tbb_flow_graph"}) {
      const std::string other = std::string(shape) + "/" + base + suffix;
      r.push_back({me, other, ratio::measure::time, 1.0, std::string(shape) + ": numaaff / " + base + ", time per task"});
      r.push_back({me, other, ratio::measure::cpu_time, 1.0, std::string("  the same, process CPU time")});
    }
  }
  r.push_back({"chain/numaaff" + suffix, "plain/numaaff/10000" + suffix, ratio::measure::extra_ns_per_item, 1000,
               "chain: ns per task the tracking adds (numaaff - plain)"});
  r.push_back({"fan/numaaff" + suffix, "plain/numaaff/10002" + suffix, ratio::measure::extra_ns_per_item, 1000,
               "fan: ns per task the tracking adds"});
  r.push_back({"wavefront/numaaff" + suffix, "plain/numaaff/10000" + suffix, ratio::measure::extra_ns_per_item, 1000,
               "wavefront: ns per task the tracking adds"});
  r.push_back({"cholesky/numaaff" + suffix, "plain/numaaff/2600" + suffix, ratio::measure::extra_ns_per_item, 1000,
               "cholesky: ns per task the tracking adds"});
  return numaaff_bench::run(argc, argv, r);
}
