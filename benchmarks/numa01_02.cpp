// numa01_02: the 2012 automatic-NUMA-balancing tests, reproduced to compare four ways of getting
// memory next to the threads that write it. Locality over time is the result, not a single time.
//
// numa01: two processes; all threads of a process write the whole of that process's buffer.
//   The ideal is each process, threads and buffer, on its own node.
// numa02: one process; each thread writes its own slice of one buffer that the main thread
//   initialised serially (so it all starts on the main thread's node).
//
// Strategies, each from a fresh buffer:
//   first_touch     nothing: the kernel's first-touch placement, threads placed by the scheduler
//   numa_balancing  the same with the kernel's automatic NUMA balancing switched on
//                   (/proc/sys/kernel/numa_balancing; needs root, restored afterwards)
//   next_touch      numaaff::affinity_on_next_touch on the buffer after the serial initialisation;
//                   its threads are bound (numa02: spread over the nodes; numa01: each process's
//                   threads on one node), since next-touch moves data to threads that stay
//   pool            numaaff thread pool: numa02 initialises and writes each slice from its
//                   node's workers; numa01 gives each process a pool on its own node (homenode)
//
// After every pass the program reads where each thread's pages are (numaaff::where) and which
// node each thread ran on (sched_getcpu) and prints, per pass (the first ones, then each change):
// its time and the share of the written pages that were on the writer's node. The summary gives the passes each strategy
// needed to reach 90% and 99%. --csv prints `test,strategy,pass,elapsed_s,pass_s,local` rows
// (benchmarks/plot.sh draws them). On one node every page is local: run it in the VM.
#include "../examples/cli.hpp"
#include "ratio_line.hpp"

#include <numaaff/numaaff.hpp>

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct settings {
  std::size_t mib = 128;
  std::size_t threads = 0;  // numa01: per process; numa02: in all (0: from the CPU count)
  std::size_t passes = 30;
  bool csv = false;
};

struct pass_record {
  double elapsed_s = 0;  // since the start of the first pass
  double pass_s = 0;
  std::uint64_t local = 0;     // written pages on the writer's node, summed over writers
  std::uint64_t resident = 0;  // written pages, summed over writers
};

// One pass of a writer: one 8-byte write per cache line, the whole region.
void sweep(double* p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 8) p[i] += 1.0;
}

class barrier {
 public:
  explicit barrier(std::size_t n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> g(m_);
    const std::size_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(g, [&] { return gen != gen_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::size_t n_, arrived_ = 0, gen_ = 0;
};

struct region {
  double* data;
  std::size_t count;
};

// Adds the locality of one pass: writer k wrote regions[k] from node nodes[k].
void account(pass_record& r, const std::vector<region>& regions, const std::vector<numaaff::node_id>& nodes) {
  for (std::size_t k = 0; k < regions.size(); ++k) {
    const numaaff::placement p = numaaff::where(regions[k].data, regions[k].count * sizeof(double));
    r.local += p.pages_on(nodes[k]);
    r.resident += p.resident();
  }
}

// CPUs for `threads` threads spread evenly over `nodes`' CPUs in node order (what OpenMP's
// proc_bind=spread gives), or an empty list: the kernel places them.
std::vector<int> spread_cpus(const std::vector<numaaff::node_id>& nodes, std::size_t threads) {
  std::vector<int> all, out;
  for (numaaff::node_id n : nodes)
    for (int c : numaaff::topology::system().cpus_of(n)) all.push_back(c);
  for (std::size_t k = 0; k < threads && !all.empty(); ++k) out.push_back(all[k * all.size() / threads % all.size()]);
  return out;
}

// Runs `passes` passes of plain threads, writer k sweeping regions[k]; pinned to cpus[k] if given,
// else placed by the kernel.
std::vector<pass_record> run_threads(const std::vector<region>& regions, std::size_t passes, const std::vector<int>& cpus) {
  const std::size_t t = regions.size();
  std::vector<pass_record> out(passes);
  std::vector<numaaff::node_id> node(t, 0);
  barrier start(t + 1), done(t + 1);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < t; ++k) {
    threads.emplace_back([&, k] {
      if (k < cpus.size()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<std::size_t>(cpus[k]), &set);
        sched_setaffinity(0, sizeof set, &set);
      }
      for (std::size_t p = 0; p < passes; ++p) {
        start.wait();
        sweep(regions[k].data, regions[k].count);
        node[k] = numaaff::current_node();
        done.wait();
      }
    });
  }
  const auto t0 = clock_type::now();
  for (std::size_t p = 0; p < passes; ++p) {
    const auto a = clock_type::now();
    start.wait();
    done.wait();
    const auto b = clock_type::now();
    out[p].pass_s = std::chrono::duration<double>(b - a).count();
    out[p].elapsed_s = std::chrono::duration<double>(b - t0).count();
    account(out[p], regions, node);
  }
  for (auto& th : threads) th.join();
  return out;
}

// The same passes on a numaaff pool: writer k is index k of parallel_for, which runs on the node
// the pool's partition gives it every time.
std::vector<pass_record> run_pool(numaaff::thread_pool& pool, const std::vector<region>& regions, std::size_t passes) {
  std::vector<pass_record> out(passes);
  std::vector<numaaff::node_id> node(regions.size(), 0);
  const auto t0 = clock_type::now();
  for (std::size_t p = 0; p < passes; ++p) {
    const auto a = clock_type::now();
    pool.parallel_for(0, regions.size(), [&](std::size_t k) {
      sweep(regions[k].data, regions[k].count);
      node[k] = numaaff::current_node();
    });
    const auto b = clock_type::now();
    out[p].pass_s = std::chrono::duration<double>(b - a).count();
    out[p].elapsed_s = std::chrono::duration<double>(b - t0).count();
    account(out[p], regions, node);
  }
  return out;
}

// A fresh buffer the main thread initialises serially (as the tests do), so it starts on one node.
// Aligned to 2 MiB so that slices cut on 2 MiB boundaries never share a transparent huge page.
constexpr std::size_t huge = std::size_t(2) << 20;
struct buffer {
  explicit buffer(std::size_t size) : bytes(size) {
    void* p = mmap(nullptr, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    mapping = static_cast<char*>(p);
    data = reinterpret_cast<double*>((reinterpret_cast<std::uintptr_t>(p) + huge - 1) / huge * huge);
  }
  ~buffer() {
    numaaff::disarm(data, bytes);
    munmap(mapping, bytes + huge);
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  void serial_init() { std::memset(data, 0, bytes); }
  std::size_t count() const { return bytes / sizeof(double); }
  char* mapping;
  double* data;
  std::size_t bytes;
};

// Equal slices, cut on 2 MiB boundaries when the slices are that large (else on pages).
std::vector<region> slices(double* data, std::size_t count, std::size_t parts) {
  const std::size_t unit = (count * sizeof(double) / parts >= huge ? huge : static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) / sizeof(double);
  const std::size_t units = (count + unit - 1) / unit;
  std::vector<region> out;
  for (std::size_t k = 0; k < parts; ++k) {
    const std::size_t b = std::min(count, units * k / parts * unit), e = std::min(count, units * (k + 1) / parts * unit);
    out.push_back({data + b, e - b});
  }
  return out;
}

// numa02: one process, a slice per thread.
std::vector<pass_record> numa02(const std::string& strategy, const settings& s) {
  buffer buf(s.mib << 20);
  if (strategy == "pool") {
    numaaff::thread_pool pool;
    const std::vector<region> parts = slices(buf.data, buf.count(), pool.worker_count());
    // Initialised where it is used: each slice's first touch by its own node's worker.
    pool.parallel_for(0, parts.size(), [&](std::size_t k) { std::memset(parts[k].data, 0, parts[k].count * sizeof(double)); });
    return run_pool(pool, parts, s.passes);
  }
  buf.serial_init();
  // Next-touch moves data to threads, so its threads stay put (bound, spread over the nodes).
  std::vector<int> cpus;
  if (strategy == "next_touch") {
    numaaff::affinity_on_next_touch(buf.data, buf.bytes);
    cpus = spread_cpus(numaaff::topology::system().nodes(), s.threads);
  }
  return run_threads(slices(buf.data, buf.count(), s.threads), s.passes, cpus);
}

// numa01 in one of its two processes: every thread writes the whole buffer.
std::vector<pass_record> numa01_process(const std::string& strategy, const settings& s, std::size_t process) {
  buffer buf(s.mib << 20);
  const auto& nodes = numaaff::topology::system().nodes();
  const numaaff::node_id home = nodes[process % nodes.size()];
  if (strategy == "pool") {
    // The process's homenode: its pool has workers on that node only; the buffer lives there.
    numaaff::thread_pool_options o;
    o.nodes = {home};
    o.threads_per_node = static_cast<int>(s.threads);
    numaaff::thread_pool pool(o);
    numaaff::bind(buf.data, buf.bytes, o.nodes.front());
    buf.serial_init();
    return run_pool(pool, std::vector<region>(s.threads, region{buf.data, buf.count()}), s.passes);
  }
  buf.serial_init();
  // Next-touch: the process's threads are bound to its node and the buffer follows them there.
  std::vector<int> cpus;
  if (strategy == "next_touch") {
    numaaff::affinity_on_next_touch(buf.data, buf.bytes);
    cpus = spread_cpus({home}, s.threads);
  }
  return run_threads(std::vector<region>(s.threads, region{buf.data, buf.count()}), s.passes, cpus);
}

// numa01: two processes at once; their records are summed pass by pass (shared memory).
std::vector<pass_record> numa01(const std::string& strategy, const settings& s) {
  const std::size_t bytes = 2 * s.passes * sizeof(pass_record);
  void* shared = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  auto* rec = static_cast<pass_record*>(shared);
  std::fflush(stdout);
  pid_t child[2];
  for (std::size_t p = 0; p < 2; ++p) {
    child[p] = fork();
    if (child[p] < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (child[p] == 0) {
      int status = 0;
      try {
        const std::vector<pass_record> r = numa01_process(strategy, s, p);
        std::copy(r.begin(), r.end(), rec + p * s.passes);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "numa01 process %zu: %s\n", p, e.what());
        status = 1;
      }
      _exit(status);
    }
  }
  bool ok = true;
  for (pid_t c : child) {
    int st = 0;
    waitpid(c, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  std::vector<pass_record> out(s.passes);
  for (std::size_t i = 0; i < s.passes; ++i) {
    const pass_record &a = rec[i], &b = rec[s.passes + i];
    out[i] = {std::max(a.elapsed_s, b.elapsed_s), std::max(a.pass_s, b.pass_s), a.local + b.local, a.resident + b.resident};
  }
  munmap(shared, bytes);
  if (!ok) throw std::runtime_error("a numa01 process failed");
  return out;
}

// Automatic NUMA balancing on or off for one strategy, put back as it was afterwards.
class numa_balancing {
 public:
  static constexpr const char* path = "/proc/sys/kernel/numa_balancing";
  explicit numa_balancing(bool on) {
    std::ifstream in(path);
    if (!(in >> saved_)) return;  // a kernel without it
    available_ = set(on ? "1" : "0");
  }
  ~numa_balancing() {
    if (available_) set(saved_);
  }
  bool available() const noexcept { return available_; }

 private:
  static bool set(const std::string& v) {
    std::ofstream out(path);
    out << v << "\n";
    out.close();
    std::ifstream in(path);
    std::string now;
    return static_cast<bool>(in >> now) && now == v;
  }
  std::string saved_;
  bool available_ = false;
};

double share(const pass_record& r) { return r.resident == 0 ? 0.0 : static_cast<double>(r.local) / static_cast<double>(r.resident); }

std::string passes_to(const std::vector<pass_record>& r, double goal) {
  for (std::size_t i = 0; i < r.size(); ++i)
    if (share(r[i]) >= goal) return std::to_string(i + 1);
  return "never (" + std::to_string(r.size()) + ")";
}

}  // namespace

int main(int argc, char** argv) {
  example_cli::args a(argc, argv,
                      "[--test numa01|numa02|both] [--strategy first_touch|numa_balancing|next_touch|pool|all] "
                      "[--mib M] [--threads T] [--passes P] [--csv]");
  const std::string test = a.choice("test", "both", {"numa01", "numa02", "both"});
  const std::string strategy = a.choice("strategy", "all", {"first_touch", "numa_balancing", "next_touch", "pool", "all"});
  settings s;
  s.mib = a.size("mib", 128, 1, 65536);
  s.threads = a.size("threads", 0, 0, 1024);
  s.passes = a.size("passes", 30, 1, 100000);
  s.csv = a.flag("csv");
  a.done();
  try {
    const numaaff::topology& topo = numaaff::topology::system();
    const std::size_t cpus = std::max<std::size_t>(1, static_cast<std::size_t>(std::thread::hardware_concurrency()));
    const numaaff::capability_report report = numaaff::system_report();
    if (!s.csv)
      std::printf("numa01/numa02 on %zu node(s), %zu CPU(s), kernel %s; %zu MiB buffers, %zu passes%s\n",
                  topo.node_count(), cpus, report.kernel_release.c_str(), s.mib, s.passes,
                  report.placement_effective() ? "" : "; one node: every page is local, run it in the NUMA VM");
    std::vector<std::string> summary;
    // What benchmarks/report.py reads, printed after the summary: the benchmarks' ratio lines.
    // Targets for the strategies that place by numaaff (next_touch, pool): the last 20 passes on
    // the writer's node; the kernel's strategies are references, as are pass times (emulated in
    // the VM).
    std::vector<numaaff_report::ratio_figure> ratios;
    for (const char* t : {"numa01", "numa02"}) {
      if (test != "both" && test != t) continue;
      settings ts = s;
      double first_touch_pass = 0;  // its mean pass time in the 2nd half, for the others' ratio
      if (ts.threads == 0) ts.threads = std::string(t) == "numa01" ? std::max<std::size_t>(1, cpus / 2) : cpus;
      for (const char* st : {"first_touch", "numa_balancing", "next_touch", "pool"}) {
        if (strategy != "all" && strategy != st) continue;
        numa_balancing kernel(std::string(st) == "numa_balancing");
        if (std::string(st) == "numa_balancing" && !kernel.available()) {
          summary.push_back(std::string(t) + "  " + st + ": not available (no " + numa_balancing::path + " or not root)");
          continue;
        }
        const std::vector<pass_record> r = std::string(t) == "numa01" ? numa01(st, ts) : numa02(st, ts);
        if (!s.csv) std::printf("\n%s, %s (%zu threads%s):\n pass  elapsed(s)  pass(s)  local%%\n", t, st, ts.threads,
                                std::string(t) == "numa01" ? " per process, 2 processes" : "");
        double shown = -1;
        for (std::size_t i = 0; i < r.size(); ++i) {
          if (s.csv) {
            std::printf("%s,%s,%zu,%.4f,%.4f,%.4f\n", t, st, i + 1, r[i].elapsed_s, r[i].pass_s, share(r[i]));
            continue;
          }
          // The first passes, every change of a point or more, and the last (the CSV has all).
          if (i >= 3 && i + 1 != r.size() && std::abs(share(r[i]) - shown) < 0.01) continue;
          shown = share(r[i]);
          std::printf("%5zu  %10.3f  %7.3f  %6.1f\n", i + 1, r[i].elapsed_s, r[i].pass_s, 100.0 * share(r[i]));
        }
        double last = 0;
        const std::size_t half = r.size() / 2;
        for (std::size_t i = half; i < r.size(); ++i) last += r[i].pass_s;
        last /= static_cast<double>(r.size() - half);
        const std::size_t tail = std::min<std::size_t>(20, r.size());
        double recent = 0;
        for (std::size_t i = r.size() - tail; i < r.size(); ++i) recent += share(r[i]);
        recent /= static_cast<double>(tail);
        const bool ours = std::string(st) == "next_touch" || std::string(st) == "pool";
        const std::string name = std::string(t) + " " + st;
        ratios.push_back({name + ": pages on the writer's node, last " + std::to_string(tail) + " passes" + (ours ? "" : " (reference)"),
                          100.0 * recent, "%", ">=", ours ? 99.0 : 0.0, 2});
        ratios.push_back({name + ": the same, first pass (reference)", 100.0 * share(r.front()), "%", ">=", 0.0, 2});
        if (std::string(st) == "first_touch") first_touch_pass = last;
        else if (first_touch_pass > 0)
          ratios.push_back({name + ": pass time, 2nd half, / first_touch's (reference)", last / first_touch_pass, "x", "<=", 100.0, 2});
        char line[256];
        std::snprintf(line, sizeof line, "%s  %-15s first pass %6.1f%%  last %6.1f%%  passes to 90%%: %-10s to 99%%: %-10s  pass time (2nd half) %.3f s",
                      t, st, 100.0 * share(r.front()), 100.0 * share(r.back()), passes_to(r, 0.90).c_str(),
                      passes_to(r, 0.99).c_str(), last);
        summary.push_back(line);
      }
    }
    if (!s.csv) {
      std::printf("\nsummary (local%% = written pages on the writer's node):\n");
      for (const auto& l : summary) std::printf("  %s\n", l.c_str());
      std::printf("\n");
      numaaff_report::print_ratio_block(ratios);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numa01_02: %s\n", e.what());
    return 1;
  }
}
