// numaaff-bench: a machine report a user runs on a real NUMA machine and sends back. It
// measures, with numaaff's public calls only:
// - the node-to-node latency matrix (dependent loads over a randomly linked buffer bound to
//   the memory node, from a thread on the CPU node);
// - the bandwidth matrices (streaming read, write and copy) for 1, 2, 4 ... threads of the CPU
//   node, with the fewest threads that reach 95% of the best (what saturates the node);
// - move_pages throughput by batch size;
// - next-touch cost per page by chunk size, against a minimal mechanism measured in the same
//   run (mprotect, a SIGSEGV handler that opens the chunk and makes one move_pages call);
// - the thread pool's submit round trip, fork-join and spawn costs and its steal latency,
//   beside oneTBB's and OpenMP's where the tool was built with them;
// with the topology and kernel, as a table, as JSON (--json FILE) and as PNG plots (--plot
// DIR, with gnuplot). On a virtual machine the timings are the hypervisor's: it says so.
#include <numaaff/numaaff.hpp>

#include "../benchmarks/ratio_line.hpp"
#include "json_text.hpp"

#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#if defined(NUMAAFF_BENCH_TBB)
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#endif
#if defined(NUMAAFF_BENCH_OPENMP)
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <exception>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using numaaff::node_id;

struct settings {
  bool quick = false;
  std::string json, plot;
  std::size_t latency_bytes() const { return quick ? std::size_t{8} << 20 : std::size_t{128} << 20; }
  std::size_t bandwidth_bytes() const { return quick ? std::size_t{8} << 20 : std::size_t{256} << 20; }
  std::size_t pages() const { return quick ? 1024 : 16384; }
  int repeats() const { return quick ? 2 : 5; }
};

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Runs f on a thread pinned to node `n` and waits for it; what f throws is rethrown here.
void on_node(node_id n, const std::function<void()>& f) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      numaaff::pin_this_thread(n);
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

/// Memory bound to node `n`, touched by a thread of `toucher` (or of the node's own CPUs).
struct node_buffer {
  char* p = nullptr;
  std::size_t bytes = 0;
  node_buffer(node_id n, std::size_t b) : bytes(b) {
    p = static_cast<char*>(numaaff::allocate(numaaff::kind::on_node(n), b, 4096));
    std::memset(p, 1, b);
  }
  ~node_buffer() { numaaff::deallocate(p); }
  node_buffer(const node_buffer&) = delete;
  node_buffer& operator=(const node_buffer&) = delete;
};

// ---- latency -----------------------------------------------------------------------------

/// ns per dependent load from a thread on `cpu_node` over `bytes` on `mem_node`.
double latency_ns(node_id cpu_node, node_id mem_node, const settings& s) {
  node_buffer b(mem_node, s.latency_bytes());
  const std::size_t line = 64, lines = b.bytes / line;
  std::vector<std::size_t> order(lines);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin() + 1, order.end(), std::mt19937_64(42));
  for (std::size_t k = 0; k < lines; ++k)
    *reinterpret_cast<char**>(b.p + order[k] * line) = b.p + order[(k + 1) % lines] * line;
  double best = 1e30;
  on_node(cpu_node, [&] {
    const std::size_t steps = s.quick ? 200000 : 4000000;
    for (int r = 0; r < s.repeats(); ++r) {
      char* at = b.p;
      const auto t0 = clock_type::now();
      for (std::size_t i = 0; i < steps; ++i) at = *reinterpret_cast<char* volatile*>(at);
      const double ns = seconds_since(t0) * 1e9 / static_cast<double>(steps);
      if (at == nullptr) std::abort();  // keeps the chase
      best = std::min(best, ns);
    }
  });
  return best;
}

// ---- bandwidth ---------------------------------------------------------------------------

enum class stream_kind { read, write, copy };
const char* name_of(stream_kind k) { return k == stream_kind::read ? "read" : k == stream_kind::write ? "write" : "copy"; }

/// GB/s of `threads` threads on `cpu_node` streaming over `mem_node`'s memory.
double bandwidth_gbs(node_id cpu_node, node_id mem_node, int threads, stream_kind kind, const settings& s) {
  node_buffer b(mem_node, s.bandwidth_bytes());
  const std::size_t slice = b.bytes / static_cast<std::size_t>(threads) / 64 * 64;
  double best = 0;
  for (int r = 0; r < s.repeats(); ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> team;
    std::vector<double> sums(static_cast<std::size_t>(threads), 0);
    for (int t = 0; t < threads; ++t)
      team.emplace_back([&, t] {
        numaaff::pin_this_thread(cpu_node);
        char* part = b.p + static_cast<std::size_t>(t) * slice;
        ready.fetch_add(1);
        while (!go.load()) {
        }
        auto* w = reinterpret_cast<std::uint64_t*>(part);
        const std::size_t n = slice / 8;
        if (kind == stream_kind::read) {
          std::uint64_t sum = 0;
          for (std::size_t i = 0; i < n; ++i) sum += w[i];
          sums[static_cast<std::size_t>(t)] = static_cast<double>(sum);
        } else if (kind == stream_kind::write) {
          for (std::size_t i = 0; i < n; ++i) w[i] = i;
        } else {
          std::memcpy(part + slice / 2, part, slice / 2);
        }
      });
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = clock_type::now();
    go = true;
    for (auto& t : team) t.join();
    const double sec = seconds_since(t0);
    // copy: the bytes read plus the bytes written, as STREAM counts them
    const double bytes = static_cast<double>(slice) * threads;
    best = std::max(best, bytes / sec / 1e9);
  }
  return best;
}

// ---- move_pages ----------------------------------------------------------------------------

struct move_figure {
  std::size_t batch;
  double pages_per_s;
  int error;  // of a refused call (a sandbox: EPERM), 0 when every call went through
};

std::vector<move_figure> move_pages_throughput(node_id a, node_id b, const settings& s) {
  const std::size_t ps = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), pages = s.pages();
  std::vector<move_figure> out;
  char* m = static_cast<char*>(::mmap(nullptr, pages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (m == MAP_FAILED) return out;
  ::madvise(m, pages * ps, MADV_NOHUGEPAGE);
  on_node(a, [&] { std::memset(m, 1, pages * ps); });
  for (std::size_t batch : {std::size_t{1}, std::size_t{16}, std::size_t{256}, std::size_t{4096}}) {
    if (batch > pages) break;
    std::vector<void*> addr(batch);
    std::vector<int> nodes(batch), status(batch);
    const auto t0 = clock_type::now();
    std::size_t moved = 0;
    int error = 0;
    for (node_id to : {b, a}) {  // there and back: both directions count
      for (std::size_t first = 0; first + batch <= pages && error == 0; first += batch) {
        for (std::size_t k = 0; k < batch; ++k) {
          addr[k] = m + (first + k) * ps;
          nodes[k] = to;
        }
        if (::move_pages(0, batch, addr.data(), nodes.data(), status.data(), MPOL_MF_MOVE) < 0) {
          error = errno;
        } else {
          moved += batch;
        }
      }
    }
    const double sec = seconds_since(t0);
    out.push_back({batch, error == 0 && sec > 0 ? static_cast<double>(moved) / sec : 0, error});
  }
  ::munmap(m, pages * ps);
  return out;
}

// ---- next touch against the minimal mechanism ------------------------------------------------

// The minimal mechanism: PROT_NONE over the range, a handler that opens the faulting chunk and
// moves it with one move_pages call. No registry, no chaining, no accounting: the floor.
struct minimal_state {
  char* base = nullptr;
  std::size_t bytes = 0, chunk = 0;
  int node = 0;
  void* pages[512];
  int nodes[512];
  int status[512];
};
minimal_state minimal;

void minimal_handler(int, siginfo_t* info, void*) {
  char* at = static_cast<char*>(info->si_addr);
  const std::size_t ps = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (at < minimal.base || at >= minimal.base + minimal.bytes) std::abort();
  char* c = minimal.base + static_cast<std::size_t>(at - minimal.base) / minimal.chunk * minimal.chunk;
  ::mprotect(c, minimal.chunk, PROT_READ | PROT_WRITE);
  const std::size_t n = minimal.chunk / ps;
  for (std::size_t k = 0; k < n; ++k) {
    minimal.pages[k] = c + k * ps;
    minimal.nodes[k] = minimal.node;
  }
  ::move_pages(0, n, minimal.pages, minimal.nodes, minimal.status, MPOL_MF_MOVE);
}

struct touch_figure {
  std::size_t chunk_pages;
  double numaaff_us_per_page, minimal_us_per_page;
};

std::vector<touch_figure> next_touch_cost(node_id from, node_id to, const settings& s) {
  const std::size_t ps = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), pages = s.pages();
  const std::vector<std::size_t> chunks = {1, 16, 128};
  std::vector<touch_figure> out;
  char* m = static_cast<char*>(::mmap(nullptr, pages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (m == MAP_FAILED) return out;
  ::madvise(m, pages * ps, MADV_NOHUGEPAGE);
  auto touch_all = [&] {
    numaaff::pin_this_thread(to);
    const auto t0 = clock_type::now();
    for (std::size_t i = 0; i < pages; ++i) m[i * ps] = 2;
    return seconds_since(t0) * 1e6 / static_cast<double>(pages);
  };
  // Each chunk size: the minimal mechanism and numaaff in turn, twice, the best of each (the
  // minimal handler replaces numaaff's for its runs and gives it back after).
  auto minimal_run = [&](std::size_t c) {
    struct sigaction sa {}, old {};
    sa.sa_sigaction = minimal_handler;
    sa.sa_flags = SA_SIGINFO;
    on_node(from, [&] { std::memset(m, 1, pages * ps); });
    minimal.base = m;
    minimal.bytes = pages * ps;
    minimal.chunk = c * ps;
    minimal.node = to;
    ::sigaction(SIGSEGV, &sa, &old);
    ::mprotect(m, pages * ps, PROT_NONE);
    double us = 0;
    on_node(to, [&] { us = touch_all(); });
    ::sigaction(SIGSEGV, &old, nullptr);
    return us;
  };
  auto numaaff_run = [&](std::size_t c) {
    on_node(from, [&] { std::memset(m, 1, pages * ps); });
    numaaff::next_touch_options o;
    o.chunk_bytes = c * ps;
    numaaff::affinity_on_next_touch(m, pages * ps, o);
    double us = 0;
    on_node(to, [&] { us = touch_all(); });
    return us;
  };
  for (std::size_t c : chunks) {
    touch_figure f{c, 1e30, 1e30};
    for (int round = 0; round < 2; ++round) {
      f.minimal_us_per_page = std::min(f.minimal_us_per_page, minimal_run(c));
      f.numaaff_us_per_page = std::min(f.numaaff_us_per_page, numaaff_run(c));
    }
    out.push_back(f);
  }
  ::munmap(m, pages * ps);
  return out;
}

// ---- the pool against oneTBB and OpenMP ------------------------------------------------------

struct pool_figure {
  std::string what, runtime;
  double ns;
};

/// Steal latency, the same shape in every runtime: `run(mark, child, spin)` makes a group,
/// calls mark(), spawns child into the group, calls spin() and waits for the group. spin()
/// returns once another thread started the child; the time from mark() to that start is pushed
/// to `v`. A child nobody else took in 5 s (no other thread free) gives no figure.
template <class Run>
void steal_once(std::vector<double>& v, Run run) {
  std::atomic<std::int64_t> started{0};
  std::int64_t spawned = 0;
  std::thread::id spawner, thief;
  run([&] {
        spawner = std::this_thread::get_id();
        spawned = clock_type::now().time_since_epoch().count();
      },
      [&] {
        thief = std::this_thread::get_id();
        started = clock_type::now().time_since_epoch().count();
      },
      [&] {
        const auto until = clock_type::now() + std::chrono::seconds(5);
        while (started.load() == 0 && clock_type::now() < until) {
        }
      });
  // A child run by its spawner (a runtime that ran it undeferred) was not stolen: no figure.
  if (started.load() != 0 && thief != spawner) v.push_back(static_cast<double>(started.load() - spawned));
}

std::vector<pool_figure> pool_costs(const settings& s) {
  std::vector<pool_figure> out;
  const int reps = s.quick ? 200 : 5000, tasks = s.quick ? 2000 : 100000;
  numaaff::thread_pool pool;
  auto per = [&](double sec, int n) { return sec * 1e9 / n; };
  {
    std::vector<double> v;
    for (int r = 0; r < s.repeats(); ++r) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < reps; ++i) pool.submit([] {}).get();
      v.push_back(per(seconds_since(t0), reps));
    }
    out.push_back({"submit round trip", "numaaff", median(v)});
  }
  {
    std::vector<double> v;
    const std::size_t w = pool.worker_count();
    for (int r = 0; r < s.repeats(); ++r) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < reps; ++i) pool.parallel_for(0, w, [](std::size_t) {});
      v.push_back(per(seconds_since(t0), reps));
    }
    out.push_back({"fork-join over all workers", "numaaff", median(v)});
  }
  {
    std::vector<double> v;
    for (int r = 0; r < s.repeats(); ++r) {
      numaaff::task_group g(pool);
      const auto t0 = clock_type::now();
      for (int i = 0; i < tasks; ++i) g.run([] {});
      g.wait();
      v.push_back(per(seconds_since(t0), tasks));
    }
    out.push_back({"spawn (per task)", "numaaff", median(v)});
  }
  const int steals = s.quick ? 20 : 200;
  if (pool.worker_count() > 1) {
    std::vector<double> v;
    for (int r = 0; r < steals; ++r)
      pool.submit([&] {
            steal_once(v, [&](auto mark, auto child, auto spin) {
              numaaff::task_group g(pool);
              mark();
              g.run(child);
              spin();
              g.wait();
            });
          })
          .get();
    if (!v.empty()) out.push_back({"steal latency (first thief)", "numaaff", median(v)});
  }
#if defined(NUMAAFF_BENCH_TBB)
  {
    tbb::task_arena arena;
    std::vector<double> fj, sp;
    arena.execute([&] {
      for (int r = 0; r < s.repeats(); ++r) {
        const auto t0 = clock_type::now();
        for (int i = 0; i < reps; ++i)
          tbb::parallel_for(std::size_t{0}, static_cast<std::size_t>(arena.max_concurrency()), [](std::size_t) {},
                            tbb::simple_partitioner());
        fj.push_back(per(seconds_since(t0), reps));
        tbb::task_group g;
        const auto t1 = clock_type::now();
        for (int i = 0; i < tasks; ++i) g.run([] {});
        g.wait();
        sp.push_back(per(seconds_since(t1), tasks));
      }
    });
    out.push_back({"fork-join over all workers", "oneTBB", median(fj)});
    out.push_back({"spawn (per task)", "oneTBB", median(sp)});
    // A task handed to the arena's workers and waited for from outside, as submit().get().
    std::vector<double> rt;
    for (int r = 0; r < s.repeats(); ++r) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < reps; ++i) {
        std::promise<void> done;
        arena.enqueue([&] { done.set_value(); });
        done.get_future().wait();
      }
      rt.push_back(per(seconds_since(t0), reps));
    }
    out.push_back({"submit round trip", "oneTBB", median(rt)});
    if (arena.max_concurrency() > 1) {
      std::vector<double> st;
      arena.execute([&] {
        tbb::task_group outer;
        for (int r = 0; r < steals; ++r) {
          outer.run([&] {
            steal_once(st, [](auto mark, auto child, auto spin) {
              tbb::task_group g;
              mark();
              g.run(child);
              spin();
              g.wait();
            });
          });
          outer.wait();
        }
      });
      if (!st.empty()) out.push_back({"steal latency (first thief)", "oneTBB", median(st)});
    }
  }
#endif
#if defined(NUMAAFF_BENCH_OPENMP)
  {
    std::vector<double> fj, sp;
    for (int r = 0; r < s.repeats(); ++r) {
      const auto t0 = clock_type::now();
      for (int i = 0; i < reps; ++i) {
#pragma omp parallel
        {
          volatile int who = omp_get_thread_num();  // a body the compiler keeps
          (void)who;
        }
      }
      fj.push_back(per(seconds_since(t0), reps));
      const auto t1 = clock_type::now();
#pragma omp parallel
#pragma omp single
      for (int i = 0; i < tasks; ++i) {
#pragma omp task
        {
          volatile int who = omp_get_thread_num();
          (void)who;
        }
      }
      sp.push_back(per(seconds_since(t1), tasks));
    }
    out.push_back({"fork-join over all workers", "OpenMP", median(fj)});
    out.push_back({"spawn (per task)", "OpenMP", median(sp)});
    // The spawning thread spins in its task; the team's other threads wait at the end of the
    // single construct, where they run queued tasks.
    std::vector<double> st;
    if (omp_get_max_threads() > 1)
      for (int r = 0; r < steals; ++r) {
#pragma omp parallel
#pragma omp single
        steal_once(st, [](auto mark, auto child, auto spin) {
          mark();
#pragma omp task untied
          child();
          spin();
#pragma omp taskwait
        });
      }
    if (!st.empty()) out.push_back({"steal latency (first thief)", "OpenMP", median(st)});
  }
#endif
  return out;
}

// ---- the machine ---------------------------------------------------------------------------

bool virtual_machine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line.find(" hypervisor") != std::string::npos;
  return false;
}

std::string kernel_release() {
  utsname u{};
  return ::uname(&u) == 0 ? std::string(u.sysname) + " " + u.release + " " + u.machine : "unknown";
}

int report(const settings& s);

/// The runtimes this build measures the pool against, as JSON strings.
std::string baselines() {
  std::string out;
#if defined(NUMAAFF_BENCH_TBB)
  out += "\"oneTBB\"";
#endif
#if defined(NUMAAFF_BENCH_OPENMP)
  out += std::string(out.empty() ? "" : ",") + "\"OpenMP\"";
#endif
  return out;
}

int usage(FILE* to, int status) {
  std::fprintf(to,
               "usage: numaaff-bench [--quick] [--json FILE] [--plot DIR]\n"
               "  measures this machine's NUMA latencies, bandwidths, page migration, next-touch and\n"
               "  thread-pool costs; prints a table (and writes JSON and PNG plots)\n"
               "  --quick      small buffers and few repetitions (a check that it runs, not figures)\n"
               "  --json FILE  write everything as JSON\n"
               "  --plot DIR   draw every section into DIR/numaaff-bench.png (needs gnuplot)\n"
               "  --help, --version\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return usage(stdout, 0);
    if (a == "--version") {
      std::printf("numaaff-bench %s\n", numaaff::version());
      return 0;
    }
    if (a == "--quick") {
      s.quick = true;
    } else if ((a == "--json" || a == "--plot") && i + 1 < argc && argv[i + 1][0] != '\0') {
      (a == "--json" ? s.json : s.plot) = argv[++i];
    } else {
      std::fprintf(stderr, "numaaff-bench: %s\n", (a == "--json" || a == "--plot") ? (a + " needs a value").c_str()
                                                                                   : ("unknown option " + a).c_str());
      return usage(stderr, 2);
    }
  }
  // The whole machine, not the CPUs of a shell that happened to be pinned: every CPU of every
  // node (the kernel keeps the process inside its cpuset all the same). numaaff read the
  // process's CPUs when it started, so the program starts again with all of them, once.
  {
    cpu_set_t all, now;
    CPU_ZERO(&all);
    for (node_id n : numaaff::online_nodes())
      for (int c : numaaff::node_cpus(n))
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(static_cast<std::size_t>(c), &all);
    const bool narrower = ::sched_getaffinity(0, sizeof now, &now) == 0 && !CPU_EQUAL(&now, &all);
    if (narrower && std::getenv("NUMAAFF_BENCH_WIDENED") == nullptr) {
      if (::sched_setaffinity(0, sizeof all, &all) == 0) {
        ::setenv("NUMAAFF_BENCH_WIDENED", "1", 1);
        ::execv("/proc/self/exe", argv);
      }
      std::fprintf(stderr, "numaaff-bench: could not widen its CPUs to the machine's (%s): measuring the CPUs it has\n",
                   std::strerror(errno));
    }
  }
  try {
    return report(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numaaff-bench: %s\n", e.what());
    return 1;
  }
}

namespace {

/// The summary: what numaaff costs against the mechanism or runtime a user would use instead,
/// measured in this run, in the form every numaaff benchmark ends with (benchmarks/report.py
/// reads it). Next touch against the minimal mechanism (at most 1.1x, as bench_next_touch
/// asks); each pool figure against oneTBB's and OpenMP's (at most theirs).
void print_ratios(const std::vector<touch_figure>& nt, const std::vector<pool_figure>& pf) {
  std::printf("\n");
  numaaff_report::print_context();
  numaaff_report::print_ratio_heading();
  for (const touch_figure& f : nt)
    if (f.minimal_us_per_page > 0)
      numaaff_report::print_ratio_line("next touch, chunk " + std::to_string(f.chunk_pages) + " pages: numaaff / the minimal mechanism",
                                       f.numaaff_us_per_page / f.minimal_us_per_page, "x", "<=", 1.1, 2);
  for (const pool_figure& mine : pf) {
    if (mine.runtime != "numaaff") continue;
    for (const pool_figure& theirs : pf)
      if (theirs.what == mine.what && theirs.runtime != "numaaff" && theirs.ns > 0)
        numaaff_report::print_ratio_line(mine.what + ": ns, numaaff (target: " + theirs.runtime + "'s)", mine.ns, "ns", "<=", theirs.ns, 0);
  }
}

int report(const settings& s) {
  const numaaff::topology& topo = numaaff::topology::system();
  const std::vector<node_id> cpu_nodes = topo.cpu_nodes(), mem_nodes = topo.nodes();
  const bool vm = virtual_machine();
  std::printf("numaaff-bench %s on %s, %zu nodes (%zu with CPUs), %zu CPUs%s\n", numaaff::version(), kernel_release().c_str(),
              mem_nodes.size(), cpu_nodes.size(), topo.cpus().size(),
              vm ? "\nthis is a virtual machine: every timing below is the hypervisor's, not the hardware's" : "");
  std::printf("%s\n", topo.to_string().c_str());
  std::string j = "{\"format\":1,\"version\":" + numaaff_tools::json_string(numaaff::version()) +
                  ",\"kernel\":" + numaaff_tools::json_string(kernel_release()) + ",\"virtual\":" + (vm ? "true" : "false") +
                  ",\"quick\":" + (s.quick ? "true" : "false") + ",\"baselines\":[" + baselines() + "],\"topology\":{\"nodes\":[";
  for (std::size_t k = 0; k < mem_nodes.size(); ++k) {
    const node_id n = mem_nodes[k];
    j += std::string(k ? "," : "") + "{\"node\":" + std::to_string(n) + ",\"cpus\":" + std::to_string(topo.cpus_of(n).size()) +
         ",\"memory_bytes\":" + std::to_string(topo.memory_of(n)) + ",\"distances\":[";
    for (std::size_t m = 0; m < mem_nodes.size(); ++m) j += std::string(m ? "," : "") + std::to_string(topo.distance(n, mem_nodes[m]));
    j += "]}";
  }
  j += "]}";

  // latency
  std::printf("\nlatency, ns per dependent load (rows: CPU node, columns: memory node)\n%8s", "");
  for (node_id m : mem_nodes) std::printf(" %8d", m);
  std::printf("\n");
  j += ",\"latency_ns\":[";
  std::map<std::pair<node_id, node_id>, double> lat;
  for (std::size_t a = 0; a < cpu_nodes.size(); ++a) {
    std::printf("%8d", cpu_nodes[a]);
    j += std::string(a ? "," : "") + "[";
    for (std::size_t b = 0; b < mem_nodes.size(); ++b) {
      const double ns = latency_ns(cpu_nodes[a], mem_nodes[b], s);
      lat[{cpu_nodes[a], mem_nodes[b]}] = ns;
      std::printf(" %8.1f", ns);
      j += std::string(b ? "," : "") + std::to_string(ns);
    }
    j += "]";
    std::printf("\n");
  }
  j += "]";

  // bandwidth
  j += ",\"bandwidth\":[";
  std::map<stream_kind, std::map<std::pair<node_id, node_id>, double>> best_of;  // for the plots
  bool first_bw = true;
  for (stream_kind k : {stream_kind::read, stream_kind::write, stream_kind::copy}) {
    std::printf("\nbandwidth, %s, GB/s at the best thread count (threads that reach 95%% of it)\n%8s", name_of(k), "");
    for (node_id m : mem_nodes) std::printf(" %12d", m);
    std::printf("\n");
    for (node_id a : cpu_nodes) {
      std::printf("%8d", a);
      const int cpus = static_cast<int>(topo.cpus_of(a).size());
      std::vector<int> counts;
      for (int t = 1; t < cpus; t *= 2) counts.push_back(t);
      counts.push_back(std::max(cpus, 1));
      for (node_id m : mem_nodes) {
        std::vector<double> by_count;
        for (int t : counts) by_count.push_back(bandwidth_gbs(a, m, t, k, s));
        const double best = *std::max_element(by_count.begin(), by_count.end());
        int saturating = counts.back();
        for (std::size_t c = 0; c < counts.size(); ++c)
          if (by_count[c] >= 0.95 * best) {
            saturating = counts[c];
            break;
          }
        best_of[k][{a, m}] = best;
        std::printf(" %8.2f (%d)", best, saturating);
        j += std::string(first_bw ? "" : ",") + "{\"kind\":\"" + name_of(k) + "\",\"cpu_node\":" + std::to_string(a) +
             ",\"memory_node\":" + std::to_string(m) + ",\"gbs\":" + std::to_string(best) +
             ",\"saturating_threads\":" + std::to_string(saturating) + ",\"by_threads\":[";
        for (std::size_t c = 0; c < counts.size(); ++c)
          j += std::string(c ? "," : "") + "{\"threads\":" + std::to_string(counts[c]) + ",\"gbs\":" + std::to_string(by_count[c]) + "}";
        j += "]}";
        first_bw = false;
      }
      std::printf("\n");
    }
  }
  j += "]";

  // move_pages
  const node_id from = cpu_nodes.front(), to = cpu_nodes.size() > 1 ? cpu_nodes[1] : cpu_nodes.front();
  std::printf("\nmove_pages, node %d <-> node %d, %zu pages there and back%s\n", from, to, s.pages(),
              from == to ? " (one CPU node: every page is in place; this is the cost of a call that finds that)" : "");
  j += ",\"move_pages\":{\"from\":" + std::to_string(from) + ",\"to\":" + std::to_string(to) + ",\"batches\":[";
  const std::vector<move_figure> mp = move_pages_throughput(from, to, s);
  for (std::size_t k = 0; k < mp.size(); ++k) {
    if (mp[k].error != 0) {
      std::printf("  batch %5zu pages: refused (%s): no figure\n", mp[k].batch, std::strerror(mp[k].error));
    } else {
      std::printf("  batch %5zu pages: %12.0f pages/s\n", mp[k].batch, mp[k].pages_per_s);
    }
    j += std::string(k ? "," : "") + "{\"batch\":" + std::to_string(mp[k].batch) + ",\"pages_per_s\":" +
         (mp[k].error != 0 ? std::string("null,\"refused\":") + numaaff_tools::json_string(std::strerror(mp[k].error))
                           : std::to_string(mp[k].pages_per_s)) + "}";
  }
  j += "]}";

  // next touch
  std::printf("\nnext touch, data on node %d touched from node %d, us per page: numaaff / the minimal mechanism\n"
              "  (minimal: PROT_NONE, a handler that opens the chunk and moves it with one move_pages call; numaaff's\n"
              "  handler also finds the chunk in its registry, asks where the pages are and moves only those elsewhere)\n",
              from, to);
  j += ",\"next_touch\":[";
  const std::vector<touch_figure> nt = next_touch_cost(from, to, s);
  for (std::size_t k = 0; k < nt.size(); ++k) {
    std::printf("  chunk %4zu pages: %8.2f / %8.2f  (%.2fx)\n", nt[k].chunk_pages, nt[k].numaaff_us_per_page, nt[k].minimal_us_per_page,
                nt[k].minimal_us_per_page > 0 ? nt[k].numaaff_us_per_page / nt[k].minimal_us_per_page : 0);
    j += std::string(k ? "," : "") + "{\"chunk_pages\":" + std::to_string(nt[k].chunk_pages) + ",\"numaaff_us_per_page\":" +
         std::to_string(nt[k].numaaff_us_per_page) + ",\"minimal_us_per_page\":" + std::to_string(nt[k].minimal_us_per_page) + "}";
  }
  j += "]";

  // pool
  std::printf("\nthread pool, ns per operation (median of %d)\n", s.repeats());
  j += ",\"pool\":[";
  const std::vector<pool_figure> pf = pool_costs(s);
  for (std::size_t k = 0; k < pf.size(); ++k) {
    std::printf("  %-28s %-8s %12.0f\n", pf[k].what.c_str(), pf[k].runtime.c_str(), pf[k].ns);
    j += std::string(k ? "," : "") + "{\"what\":" + numaaff_tools::json_string(pf[k].what) +
         ",\"runtime\":" + numaaff_tools::json_string(pf[k].runtime) + ",\"ns\":" + std::to_string(pf[k].ns) + "}";
  }
  j += "]}\n";

  print_ratios(nt, pf);

  if (!s.json.empty()) {
    std::FILE* f = std::fopen(s.json.c_str(), "w");
    if (f == nullptr || std::fputs(j.c_str(), f) < 0) {
      std::fprintf(stderr, "numaaff-bench: %s: %s\n", s.json.c_str(), std::strerror(errno));
      return 1;
    }
    std::fclose(f);
  }
  if (!s.plot.empty()) {
    // Every section: the four matrices as heat maps (CPU node against memory node), then
    // move_pages by batch, next touch by chunk and the pool's costs by runtime.
    std::string failed;
    auto write_data = [&](const std::string& name, const std::string& text) {
      const std::string path = s.plot + "/" + name;
      std::FILE* f = std::fopen(path.c_str(), "w");
      if (f == nullptr || std::fputs(text.c_str(), f) < 0) failed = path + ": " + std::strerror(errno);
      if (f != nullptr) std::fclose(f);
      return path;
    };
    std::string m, mv, tc, pl;
    char line[256];
    for (const auto& [key, ns] : lat) {
      std::snprintf(line, sizeof line, "%d %d %.3f %.3f %.3f %.3f\n", key.first, key.second, ns, best_of[stream_kind::read][key],
                    best_of[stream_kind::write][key], best_of[stream_kind::copy][key]);
      m += line;
    }
    for (const move_figure& f : mp)
      if (f.error == 0) mv += std::to_string(f.batch) + " " + std::to_string(f.pages_per_s) + "\n";
    for (const touch_figure& f : nt)
      tc += std::to_string(f.chunk_pages) + " " + std::to_string(f.numaaff_us_per_page) + " " + std::to_string(f.minimal_us_per_page) + "\n";
    for (const pool_figure& f : pf) pl += "\"" + f.what + ", " + f.runtime + "\" " + std::to_string(f.ns) + "\n";
    const std::string data = write_data("matrices.dat", m), moves = write_data("move_pages.dat", mv.empty() ? "1 0\n" : mv),
                      touch = write_data("next_touch.dat", tc), pool_data = write_data("pool.dat", pl);
    if (!failed.empty()) {
      std::fprintf(stderr, "numaaff-bench: %s\n", failed.c_str());
      return 1;
    }
    auto heat = [&](const char* title, int column, const char* fmt) {
      return std::string("set title '") + title + "'\nplot '" + data + "' using 2:1:(0.5):(0.5):" + std::to_string(column) +
             " with boxxyerror palette, '' using 2:1:(sprintf('" + fmt + "',$" + std::to_string(column) + ")) with labels\n";
    };
    const std::string script =
        "set terminal pngcairo size 1600,900 noenhanced\nset output '" + s.plot + "/numaaff-bench.png'\n"
        "set multiplot layout 2,4 title 'numaaff-bench: " + kernel_release() + (vm ? " (virtual machine: emulated timings)" : "") +
        "'\nset xlabel 'memory node'\nset ylabel 'CPU node'\nset xtics 1\nset ytics 1\nunset key\n"
        "set offsets 0.5, 0.5, 0.5, 0.5\nset style fill solid\n" +
        heat("latency (ns)", 3, "%.0f") + heat("read bandwidth (GB/s)", 4, "%.1f") + heat("write bandwidth (GB/s)", 5, "%.1f") +
        heat("copy bandwidth (GB/s)", 6, "%.1f") +
        "set offsets 0, 0, 0, 0\nset logscale x 2\nset xtics auto\nset ytics auto\nset key top left\n"
        "set title 'move_pages'\nset xlabel 'pages per call'\nset ylabel 'pages/s'\n"
        "plot '" + moves + "' using 1:2 with linespoints title 'pages/s'\n"
        "set title 'next touch'\nset xlabel 'chunk (pages)'\nset ylabel 'us per page'\n"
        "plot '" + touch + "' using 1:2 with linespoints title 'numaaff', '' using 1:3 with linespoints title 'minimal'\n"
        "unset logscale x\nset logscale y\nunset key\nset title 'thread pool (ns per operation)'\nset xlabel ''\nset ylabel 'ns'\n"
        "set style data histograms\nset boxwidth 0.8\nset xtics rotate by -40 font ',8'\n"
        "plot '" + pool_data + "' using 2:xtic(1)\n"
        "unset multiplot\n";
    std::FILE* g = ::popen("gnuplot", "w");
    if (g == nullptr || std::fputs(script.c_str(), g) < 0 || ::pclose(g) != 0) {
      std::fprintf(stderr, "numaaff-bench: gnuplot failed (is it installed?)\n");
      return 1;
    }
    std::printf("\nplots: %s/numaaff-bench.png\n", s.plot.c_str());
  }
  return 0;
}

}  // namespace
