// cholesky: a tiled Cholesky factorisation (A = L L^T, lower) with real BLAS/LAPACK kernels on
// each tile (LAPACKE_dpotrf, cblas_dtrsm, cblas_dsyrk, cblas_dgemm), written twice: with
// numaaff dataflow tasks (in/inout on each tile, no placement hint) and, side by side, with
// OpenMP tasks and `depend`. The tiles are separate page-aligned blocks placed 2-D
// block-cyclically over the CPU nodes (move_to), as a distributed-memory code would lay them
// out. Prints each version's time and GFLOP/s, and the share of its tasks that ran on the node
// holding most of their tiles (raw move_pages query and sched_getcpu); with --check, compares
// both results with LAPACKE_dpotrf on the whole matrix. Ends with the figures as ratios of the
// same run, in the form benchmarks/report.py reads: numaaff's best time over OpenMP's, and on
// several nodes the share of numaaff's tasks on the node of most of their tiles.
//
//   cholesky [--n N] [--tile B] [--repeat R] [--check]
//
// Each BLAS call runs on one thread (the tasks are the parallelism). On one node every task is
// on node 0; run it in the NUMA VM to see placement.
#include <numaaff/numaaff.hpp>

#include "../benchmarks/ratio_line.hpp"
#include "cli.hpp"

#include <cblas.h>
#include <lapacke.h>
#include <numaif.h>
#include <omp.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

// OpenBLAS's own call, where the BLAS is OpenBLAS (weak: reference BLAS has none).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace {

struct tiled {
  std::size_t n, b, t;  // matrix size, tile size, tiles per side
  std::vector<double*> tiles;
  tiled(std::size_t n_, std::size_t b_) : n(n_), b(b_), t(n_ / b_), tiles(t * t, nullptr) {
    for (auto& p : tiles) {
      void* m = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      p = static_cast<double*>(m);
    }
  }
  ~tiled() {
    for (double* p : tiles) munmap(p, bytes());
  }
  tiled(const tiled&) = delete;
  tiled& operator=(const tiled&) = delete;
  std::size_t bytes() const { return b * b * sizeof(double); }
  double* at(std::size_t i, std::size_t j) const { return tiles[i * t + j]; }
  /// Element (r, c) of the whole matrix (column-major inside each tile).
  double& el(std::size_t r, std::size_t c) const { return at(r / b, c / b)[(c % b) * b + r % b]; }
};

// A symmetric, diagonally dominant (so positive definite) matrix.
double value(std::size_t r, std::size_t c, std::size_t n) {
  const double off = 1.0 / (1.0 + static_cast<double>(r > c ? r - c : c - r));
  return r == c ? static_cast<double>(n) + off : off;
}

void fill(tiled& a, const std::vector<numaaff::node_id>& nodes) {
  const std::size_t rows = nodes.size() >= 4 ? 2 : 1, cols = std::max<std::size_t>(1, nodes.size() / rows);
  for (std::size_t i = 0; i < a.t; ++i)
    for (std::size_t j = 0; j < a.t; ++j) {
      double* p = a.at(i, j);
      for (std::size_t c = 0; c < a.b; ++c)
        for (std::size_t r = 0; r < a.b; ++r) p[c * a.b + r] = value(i * a.b + r, j * a.b + c, a.n);
      if (nodes.size() > 1) numaaff::move_to(p, a.bytes(), nodes[((i % rows) * cols + j % cols) % nodes.size()]);
    }
}

// Kernels on tiles (column-major, lower).
void potrf(double* kk, int b) { LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', b, kk, b); }
void trsm(const double* kk, double* ik, int b) {
  cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b, b, 1.0, kk, b, ik, b);
}
void syrk(const double* ik, double* ii, int b) { cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0, ik, b, 1.0, ii, b); }
void gemm(const double* ik, const double* jk, double* ij, int b) {
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0, ik, b, jk, b, 1.0, ij, b);
}

/// Where each task ran against where most of its tiles are.
struct placement_count {
  std::vector<int> ran;                     // per task, the node of its CPU
  std::vector<std::vector<double*>> tiles;  // per task, its tiles (the last one written)
};

int node_here() {
  const int cpu = sched_getcpu();
  return cpu < 0 ? -1 : numaaff::topology::system().node_of_cpu(cpu);
}

void factor_numaaff(numaaff::thread_pool& pool, tiled& a, placement_count& pc) {
  using numaaff::in;
  using numaaff::inout;
  const int b = static_cast<int>(a.b);
  const std::size_t bytes = a.bytes();
  numaaff::task_group g(pool);
  auto record = [&](std::vector<double*> tiles) {
    pc.tiles.push_back(std::move(tiles));
    pc.ran.push_back(-1);
    return &pc.ran.back();
  };
  for (std::size_t k = 0; k < a.t; ++k) {
    double* kk = a.at(k, k);
    int* r = record({kk});
    g.run({inout(kk, bytes)}, [=] { potrf(kk, b), *r = node_here(); });
    for (std::size_t i = k + 1; i < a.t; ++i) {
      double* ik = a.at(i, k);
      int* q = record({kk, ik});
      g.run({in(kk, bytes), inout(ik, bytes)}, [=] { trsm(kk, ik, b), *q = node_here(); });
    }
    for (std::size_t i = k + 1; i < a.t; ++i) {
      double *ik = a.at(i, k), *ii = a.at(i, i);
      int* q = record({ik, ii});
      g.run({in(ik, bytes), inout(ii, bytes)}, [=] { syrk(ik, ii, b), *q = node_here(); });
      for (std::size_t j = k + 1; j < i; ++j) {
        double *jk = a.at(j, k), *ij = a.at(i, j);
        int* p = record({ik, jk, ij});
        g.run({in(ik, bytes), in(jk, bytes), inout(ij, bytes)}, [=] { gemm(ik, jk, ij, b), *p = node_here(); });
      }
    }
  }
  g.wait();
}

void factor_omp(tiled& a, placement_count& pc) {
  const int b = static_cast<int>(a.b);
  auto record = [&](std::vector<double*> tiles) {
    pc.tiles.push_back(std::move(tiles));
    pc.ran.push_back(-1);
    return &pc.ran.back();
  };
#pragma omp parallel
#pragma omp single
  for (std::size_t k = 0; k < a.t; ++k) {
    double* kk = a.at(k, k);
    int* r = record({kk});
#pragma omp task depend(inout : kk[0]) firstprivate(kk, r)
    potrf(kk, b), *r = node_here();
    for (std::size_t i = k + 1; i < a.t; ++i) {
      double* ik = a.at(i, k);
      int* q = record({kk, ik});
#pragma omp task depend(in : kk[0]) depend(inout : ik[0]) firstprivate(kk, ik, q)
      trsm(kk, ik, b), *q = node_here();
    }
    for (std::size_t i = k + 1; i < a.t; ++i) {
      double *ik = a.at(i, k), *ii = a.at(i, i);
      int* q = record({ik, ii});
#pragma omp task depend(in : ik[0]) depend(inout : ii[0]) firstprivate(ik, ii, q)
      syrk(ik, ii, b), *q = node_here();
      for (std::size_t j = k + 1; j < i; ++j) {
        double *jk = a.at(j, k), *ij = a.at(i, j);
        int* p = record({ik, jk, ij});
#pragma omp task depend(in : ik[0], jk[0]) depend(inout : ij[0]) firstprivate(ik, jk, ij, p)
        gemm(ik, jk, ij, b), *p = node_here();
      }
    }
  }
}

/// The node of each tile, per the kernel (the majority of its pages).
std::map<double*, int> tile_nodes(const tiled& a) {
  std::map<double*, int> out;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), pages = (a.bytes() + page - 1) / page;
  for (double* p : a.tiles) {
    std::vector<void*> addr(pages);
    std::vector<int> status(pages, -1);
    for (std::size_t k = 0; k < pages; ++k) addr[k] = reinterpret_cast<char*>(p) + k * page;
    std::map<int, int> count;
    if (move_pages(0, pages, addr.data(), nullptr, status.data(), 0) == 0)
      for (int s : status) ++count[s];
    int best = -1, most = 0;
    for (const auto& [node, c] : count)
      if (node >= 0 && c > most) best = node, most = c;
    out[p] = best;
  }
  return out;
}

/// Tasks that ran on a node holding the largest share of their tiles.
std::size_t on_their_data(const placement_count& pc, const std::map<double*, int>& where) {
  std::size_t good = 0;
  for (std::size_t k = 0; k < pc.ran.size(); ++k) {
    std::map<int, int> count;
    for (double* p : pc.tiles[k]) ++count[where.at(p)];
    int most = 0;
    for (const auto& [node, c] : count) most = std::max(most, c);
    good += count[pc.ran[k]] == most ? 1u : 0u;
  }
  return good;
}

double max_error(const tiled& a, const std::vector<double>& ref) {
  double worst = 0;
  for (std::size_t c = 0; c < a.n; ++c)
    for (std::size_t r = c; r < a.n; ++r) worst = std::max(worst, std::fabs(a.el(r, c) - ref[c * a.n + r]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  example_cli::args args(argc, argv, "[--n N] [--tile B] [--repeat R] [--check]");
  const std::size_t b = args.size("tile", 256, 8, 4096);
  const std::size_t n = args.size("n", 2048, static_cast<long>(b), 65536);
  const std::size_t repeat = args.size("repeat", 3, 1, 1000);
  const bool check = args.flag("check");
  args.done();
  if (n % b != 0) args.fail("--n must be a multiple of --tile");
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(1);
  try {
    numaaff::thread_pool pool;
    const std::vector<numaaff::node_id> nodes = pool.nodes();
    omp_set_num_threads(static_cast<int>(numaaff::topology::system().cpus().size()));
    std::printf("cholesky n=%zu tile=%zu (%zu x %zu tiles, %zu tasks) on %zu node(s), %zu worker(s)\n", n, b, n / b, n / b,
                [&] {
                  const std::size_t t = n / b;
                  return t + t * (t - 1) + t * (t - 1) * (t - 2) / 6;
                }(),
                nodes.size(), pool.worker_count());
    std::vector<double> ref;
    if (check) {
      ref.resize(n * n);
      for (std::size_t c = 0; c < n; ++c)
        for (std::size_t r = 0; r < n; ++r) ref[c * n + r] = value(r, c, n);
      if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', static_cast<int>(n), ref.data(), static_cast<int>(n)) != 0) {
        std::fprintf(stderr, "cholesky: LAPACKE_dpotrf on the whole matrix failed\n");
        return 1;
      }
    }
    const double flops = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / 3.0;
    bool ok = true;
    double best_of[2] = {0, 0}, share_of[2] = {0, 0};
    for (const char* version : {"numaaff dataflow", "OpenMP depend"}) {
      double best = 1e300;
      std::size_t local = 0, tasks = 0;
      double err = 0;
      for (std::size_t rep = 0; rep < repeat; ++rep) {
        tiled a(n, b);
        fill(a, nodes);
        const std::map<double*, int> where = tile_nodes(a);
        placement_count pc;
        pc.tiles.reserve(a.t * a.t * a.t);
        pc.ran.reserve(a.t * a.t * a.t);
        const auto t0 = std::chrono::steady_clock::now();
        if (version[0] == 'n') factor_numaaff(pool, a, pc);
        else factor_omp(a, pc);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s);
        local = on_their_data(pc, where);
        tasks = pc.ran.size();
        if (check) err = std::max(err, max_error(a, ref));
      }
      std::printf("%-17s best of %zu: %8.3f s  %7.2f GFLOP/s  tasks on the node of most of their tiles: %zu/%zu (%.0f%%)", version,
                  repeat, best, flops / best / 1e9, local, tasks, 100.0 * static_cast<double>(local) / static_cast<double>(tasks));
      if (check) {
        const bool good = err <= 1e-9 * static_cast<double>(n);
        ok = ok && good;
        std::printf("  max |L - LAPACKE_dpotrf| = %.2e %s", err, good ? "ok" : "WRONG");
      }
      std::printf("\n");
      const int v = version[0] == 'n' ? 0 : 1;
      best_of[v] = best;
      share_of[v] = 100.0 * static_cast<double>(local) / static_cast<double>(tasks);
    }
    std::printf("\n");
    numaaff_report::print_context();
    numaaff_report::print_ratio_heading();
    numaaff_report::print_ratio_line("best time: numaaff dataflow / OpenMP depend", best_of[0] / best_of[1], "x", "<=", 1.0, 2);
    if (nodes.size() > 1) {
      numaaff_report::print_ratio_line("tasks on the node of most of their tiles: numaaff", share_of[0], "%", ">=", 95, 0);
      numaaff_report::print_ratio_line("  the same, OpenMP depend (reference)", share_of[1], "%", ">=", 0, 0);
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cholesky: %s\n", e.what());
    return 1;
  }
}
