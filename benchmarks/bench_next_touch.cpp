// Per-page cost of redistributing pages to the threads that touch them, all in one run:
//   (a) naive user level: one page per fault, one move_pages per page (numaaff with 1-page chunks)
//   (b) numaaff's affinity_on_next_touch at default settings
//   (c) one raw batched move_pages of the same pages (no faults: the kernel-side floor)
//   (d) mbind(MPOL_MF_MOVE) of the same pages
//   (e) numaaff with adaptive granularity (16-page base chunks)
//   (f) a minimal hand-written next-touch: (b)'s faults and chunks, one move_pages and one
//       mprotect per chunk, nothing else
//   (g) re-protection alone: protect, unprotect and touch every page (no fault, no migration)
// Each iteration moves every page twice: to node B touched by a thread on B, then back to A.
// Targets: (b) <= 1.1x (f) in wall and in process CPU time is what judges numaaff's own cost
// (issue 13), since (f) pays the same platform costs as (b); (a) >= 10x (b), beating the 2009
// kernel patch's 6.9x (issue 5). (b) against (c) is context: it also counts what the machine
// charges for protection changes, which (g) isolates per page (on a virtualised host it can
// dwarf the migration itself). On a one-node host A == B: only the fault and call overheads
// are measured; run it in the emulated VM for real migrations (its timings are emulated:
// ratios only).
#include <numaaff/memory.hpp>
#include <numaaff/next_touch.hpp>

#include "ratio_report.hpp"
#include "../tests/common/scratch.hpp"

#include <benchmark/benchmark.h>
#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {

const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

using numaaff_test::pin_to_node;

struct region : numaaff_test::scratch {
  explicit region(std::size_t size) : scratch(size) {}
  void touch() const {
    for (std::size_t i = 0; i < bytes; i += page) p[i] = static_cast<char>(p[i] + 1);
  }
};

int node_a() { return numaaff::topology::system().nodes().front(); }
int node_b() { return numaaff::topology::system().nodes().back(); }

void report(benchmark::State& state, std::size_t pages) {
  // items_per_second is pages per second; sec_per_page is its inverse, the per-page cost.
  const std::int64_t items = state.iterations() * static_cast<std::int64_t>(2 * pages);
  state.SetItemsProcessed(items);
  state.counters["sec_per_page"] =
      benchmark::Counter(static_cast<double>(items), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void next_touch(benchmark::State& state, numaaff::next_touch_options options) {
  region r(static_cast<std::size_t>(state.range(0)) << 20);
  pin_to_node(node_a());
  std::memset(r.p, 1, r.bytes);
  numaaff::reset_next_touch_stats();
  for (auto _ : state) {
    for (int to : {node_b(), node_a()}) {
      pin_to_node(to);
      numaaff::affinity_on_next_touch(r.p, r.bytes, options);
      r.touch();
    }
  }
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  if (s.pages_failed != 0) state.SkipWithError("some pages failed to migrate");
  state.counters["faults_per_phase"] = static_cast<double>(s.faults) / static_cast<double>(2 * state.iterations());
  report(state, r.bytes / page);
}

void bm_naive_per_page(benchmark::State& state) {
  numaaff::next_touch_options o;
  o.chunk_bytes = page;
  next_touch(state, o);
}
void bm_next_touch(benchmark::State& state) { next_touch(state, {}); }
void bm_next_touch_adaptive(benchmark::State& state) {
  numaaff::next_touch_options o;
  o.chunk_bytes = 16 * page;
  o.adaptive = true;
  next_touch(state, o);
}
// Chunk-size sweep: how the default was chosen.
void bm_next_touch_chunk(benchmark::State& state) {
  numaaff::next_touch_options o;
  o.chunk_bytes = static_cast<std::size_t>(state.range(1)) * page;
  next_touch(state, o);
}

// ---- (f) the minimal hand-written next-touch ----------------------------------------------
// What any user-level next-touch must do, and nothing more: protect the range; on a fault,
// one move_pages of the faulting chunk's pages to the toucher's node, then open the chunk.
// numaaff's registry, claims, ownership checks, chaining and counters are what (b) adds to
// it. One range and one touching thread, so plain globals, set before the range is
// protected, are all the handler needs.

constexpr std::size_t minimal_chunk_pages = numaaff::default_next_touch_pages;
std::uintptr_t minimal_begin = 0;
std::uintptr_t minimal_end = 0;
std::atomic<std::uint64_t> minimal_faults{0};
std::atomic<std::uint64_t> minimal_failures{0};

void minimal_handler(int, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (info->si_code != SEGV_ACCERR || addr < minimal_begin || addr >= minimal_end) {
    // Not the armed range: a real crash. Returning under the default action repeats the
    // fault, which then kills the process as it would have without this handler.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, nullptr);
    return;
  }
  const std::size_t chunk_bytes = minimal_chunk_pages * page;
  const std::uintptr_t chunk = minimal_begin + (addr - minimal_begin) / chunk_bytes * chunk_bytes;
  const std::size_t n = (std::min(chunk + chunk_bytes, minimal_end) - chunk) / page;
  unsigned cpu = 0, node = 0;
  getcpu(&cpu, &node);
  void* pages[minimal_chunk_pages];
  int nodes[minimal_chunk_pages];
  int status[minimal_chunk_pages];
  for (std::size_t i = 0; i < n; ++i) {
    pages[i] = reinterpret_cast<void*>(chunk + i * page);
    nodes[i] = static_cast<int>(node);
  }
  if (move_pages(0, n, pages, nodes, status, MPOL_MF_MOVE) != 0) minimal_failures.fetch_add(1, std::memory_order_relaxed);
  mprotect(reinterpret_cast<void*>(chunk), n * page, PROT_READ | PROT_WRITE);
  minimal_faults.fetch_add(1, std::memory_order_relaxed);
  errno = saved_errno;
}

void minimal_arm(const region& r) {
  minimal_begin = reinterpret_cast<std::uintptr_t>(r.p);
  minimal_end = minimal_begin + r.bytes;
  mprotect(r.p, r.bytes, PROT_NONE);
}

// Same region, population, phases and touching thread as next_touch() above.
void bm_minimal_next_touch(benchmark::State& state) {
  region r(static_cast<std::size_t>(state.range(0)) << 20);
  pin_to_node(node_a());
  std::memset(r.p, 1, r.bytes);
  // Installed for this benchmark only, in place of whatever is there (numaaff's handler once
  // another benchmark has armed): numaaff must not see, and so not add its lookup to, these
  // faults. The previous action comes back afterwards.
  struct sigaction bare = {};
  bare.sa_sigaction = minimal_handler;
  bare.sa_flags = SA_SIGINFO;
  sigemptyset(&bare.sa_mask);
  struct sigaction previous = {};
  sigaction(SIGSEGV, &bare, &previous);
  minimal_faults = 0;
  minimal_failures = 0;
  for (auto _ : state) {
    for (int to : {node_b(), node_a()}) {
      pin_to_node(to);
      minimal_arm(r);
      r.touch();
    }
  }
  sigaction(SIGSEGV, &previous, nullptr);
  if (minimal_failures != 0) state.SkipWithError("some pages failed to migrate");
  state.counters["faults_per_phase"] =
      static_cast<double>(minimal_faults.load()) / static_cast<double>(2 * state.iterations());
  report(state, r.bytes / page);
}

// ---- (g) re-protection alone ---------------------------------------------------------------
// The platform's share of (b) and (f): the same protection changes and first touches of every
// page, with no fault and no migration.
void bm_reprotect(benchmark::State& state) {
  region r(static_cast<std::size_t>(state.range(0)) << 20);
  pin_to_node(node_a());
  std::memset(r.p, 1, r.bytes);
  for (auto _ : state) {
    for (int to : {node_b(), node_a()}) {
      pin_to_node(to);
      mprotect(r.p, r.bytes, PROT_NONE);
      mprotect(r.p, r.bytes, PROT_READ | PROT_WRITE);
      r.touch();
    }
  }
  report(state, r.bytes / page);
}

void bm_raw_move_pages(benchmark::State& state) {
  region r(static_cast<std::size_t>(state.range(0)) << 20);
  std::memset(r.p, 1, r.bytes);
  const std::size_t n = r.bytes / page;
  std::vector<void*> pages(n);
  std::vector<int> dest(n), status(n);
  for (std::size_t i = 0; i < n; ++i) pages[i] = r.p + i * page;
  for (auto _ : state) {
    for (int to : {node_b(), node_a()}) {
      std::fill(dest.begin(), dest.end(), to);
      move_pages(0, n, pages.data(), dest.data(), status.data(), MPOL_MF_MOVE);
    }
  }
  report(state, n);
}

void bm_mbind_move(benchmark::State& state) {
  region r(static_cast<std::size_t>(state.range(0)) << 20);
  std::memset(r.p, 1, r.bytes);
  for (auto _ : state) {
    for (int to : {node_b(), node_a()}) {
      unsigned long mask[16] = {};
      mask[static_cast<unsigned>(to) / 64] = 1UL << (static_cast<unsigned>(to) % 64);
      mbind(r.p, r.bytes, MPOL_BIND, mask, sizeof(mask) * 8 + 1, MPOL_MF_MOVE);
    }
  }
  numaaff::reset_policy(r.p, r.bytes);
  report(state, r.bytes / page);
}

// Process CPU time, not the main thread's: it also charges work done in other threads.
#define NUMAAFF_SIZES \
  ->Arg(1)->Arg(16)->Arg(256)->Arg(1024)->MeasureProcessCPUTime()->UseRealTime()->Unit(benchmark::kMillisecond)
BENCHMARK(bm_naive_per_page) NUMAAFF_SIZES;
BENCHMARK(bm_next_touch) NUMAAFF_SIZES;
BENCHMARK(bm_minimal_next_touch) NUMAAFF_SIZES;
BENCHMARK(bm_reprotect) NUMAAFF_SIZES;
BENCHMARK(bm_next_touch_adaptive) NUMAAFF_SIZES;
BENCHMARK(bm_raw_move_pages) NUMAAFF_SIZES;
BENCHMARK(bm_mbind_move) NUMAAFF_SIZES;
BENCHMARK(bm_next_touch_chunk)
    ->Args({16, 1})->Args({16, 8})->Args({16, 32})->Args({16, 128})->Args({16, 512})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  using numaaff_bench::ratio;
  std::vector<ratio> ratios;
  for (const char* mib : {"1", "16", "256", "1024"}) {
    const std::string s = std::string("/") + mib + "/process_time/real_time";
    const std::string in = std::string(", ") + mib + " MiB";
    ratios.push_back({"bm_next_touch" + s, "bm_minimal_next_touch" + s, ratio::measure::time, 1.1,
                      "(b) next-touch vs (f) minimal, wall" + in});
    ratios.push_back({"bm_next_touch" + s, "bm_minimal_next_touch" + s, ratio::measure::cpu_time, 1.1,
                      "(b) next-touch vs (f) minimal, process CPU" + in});
    ratios.push_back({"bm_next_touch" + s, "bm_naive_per_page" + s, ratio::measure::rate, 10.0,
                      "(b) next-touch rate vs (a) naive per-page" + in});
    ratios.push_back({"bm_next_touch_adaptive" + s, "bm_next_touch" + s, ratio::measure::rate, 1.0,
                      "(e) adaptive rate vs (b) default" + in});
    ratios.push_back({"bm_next_touch" + s, "bm_raw_move_pages" + s, ratio::measure::time, 1.3,
                      "(b) next-touch vs (c) raw move_pages" + in + " (context)"});
    ratios.push_back({"bm_minimal_next_touch" + s, "bm_raw_move_pages" + s, ratio::measure::time, 1.3,
                      "(f) minimal vs (c) raw move_pages" + in + " (context)"});
    ratios.push_back({"bm_mbind_move" + s, "bm_raw_move_pages" + s, ratio::measure::time, 100.0,
                      "(d) mbind(MPOL_MF_MOVE) vs (c) raw move_pages" + in + " (info)"});
  }
  // The chunk sweep (16 MiB there and back): the default's 128 pages are at least as fast as
  // any smaller chunk, and within 20% of four times as many (the cost is flat beyond).
  const auto chunk = [](int pages) { return "bm_next_touch_chunk/16/" + std::to_string(pages) + "/real_time"; };
  for (int pages : {1, 8, 32})
    ratios.push_back({chunk(128), chunk(pages), ratio::measure::rate, 1.0,
                      "chunks of 128 pages (the default) vs " + std::to_string(pages) + ", rate, 16 MiB"});
  ratios.push_back({chunk(128), chunk(512), ratio::measure::time, 1.2, "chunks of 128 pages (the default) vs 512, time, 16 MiB"});
  return numaaff_bench::run(argc, argv, ratios);
}
