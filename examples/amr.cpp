// amr: an AMR-like solver whose data must follow its owners at every phase change.
//
// A 2-D heat equation on a grid of blocks (each two pages-aligned arrays, current and next).
// A refined region (a disc) moves across the grid; refined blocks cost 4x (the sub-cycling of
// their finer levels, modelled by repeating their update). Every K steps the blocks are
// re-partitioned among the threads by weight along the row order, so blocks change owner and
// often node. Per phase and for each placement strategy the table shows the share of block
// pages on their owner's node at the phase change (before) and at its end (after), and the
// phase's time (including the migration calls):
//   first_touch  pages stay where the first owner touched them
//   interleave   pages spread over all nodes from the start (mbind interleave)
//   move_to      the main thread moves the blocks whose owner changed node (numaaff::move_to)
//   next_touch   the blocks whose owner changed node are armed (affinity_on_next_touch) with
//                chunks of one array; each owner touches its blocks first, which moves them to
//                it (--no-owner-touch: no such loop, the solver's first step, which reads the
//                neighbours' edges, touches them first, as a halo exchange would)
//   place_blocks the main thread puts every block with its new owner in one call
//                (numaaff::place_blocks): no owner-touch loop needed
//   place_on_touch the same lazily (numaaff::place_blocks_on_next_touch): the grid is armed
//                and whoever touches a chunk first (an owner, or a neighbour reading its
//                edge) moves each of its pages to its block's owner
//   follow_data  next_touch's phase change, then the solver's steps need no owner list: a
//                loop that follows the data runs each block on the node holding it (pool:
//                parallel_for with dynamic_schedule{1}.following(grid), which also balances
//                the 4x blocks; OpenMP: numaaff::openmp::blocks_by_data)
// The `ran` column is the share of block pages on the node of the CPU that last updated them
// (sched_getcpu at each update): what the loop made of the placement.
// --thp on|off|system: transparent huge pages for the grid (madvise), or the system's default.
// --nt-chunk array|default|adaptive|PAGES: next_touch arms the changed blocks with one array per
// chunk (array, the default), or the whole grid in one call with the library's default chunk,
// adaptive claims, or chunks of PAGES pages (the chunk sweep in benchmarks/README.md).
// Runtimes: OpenMP (a team bound by numaaff::openmp) and the numaaff pool, one owner per thread.
// --csv prints `amr,runtime,strategy,phase,moved,before,after,seconds,ran` rows instead (for
// benchmarks/plot.sh). --check exits 1 if move_to, next_touch or follow_data (with the
// owner-touch loop), place_blocks or place_on_touch end a phase below 99% local on a multi-node
// machine.
// On one node everything is local: run it in the VM, tests/vm/numaaff-vm -- build/.../amr.
#include "../benchmarks/ratio_line.hpp"
#include "amr_model.hpp"
#include "cli.hpp"

#include <numaaff/numaaff.hpp>
#if defined(_OPENMP)
#include <numaaff/openmp.hpp>
#include <omp.h>
#endif

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace {

using numaaff::node_id;

struct settings {
  std::size_t blocks = 16;  // per side
  std::size_t cells = 128;  // per block side
  std::size_t steps = 10;   // per phase
  std::size_t phases = 4;
  std::string thp = "off";   // on, off, system
  bool owner_touch = true;  // next_touch: owners touch their blocks before the first step
  // next_touch chunks: "array" (the changed blocks, one array per chunk), or the whole grid in
  // one call with the default chunk, adaptive claims, or chunks of this many pages.
  std::string nt_chunk = "array";
};

// Runs body(owner) for every owner at once and returns when all are done.
using team_run = std::function<void(const std::function<void(std::size_t)>&)>;
class grid;
// Runs body(block) for every block of the grid, each on the node that holds it.
using data_run = std::function<void(const grid&, const std::function<void(std::size_t)>&)>;

class grid {
 public:
  grid(const settings& s) : s_(s) {
    const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    array_bytes_ = (s.cells * s.cells * sizeof(double) + ps - 1) / ps * ps;
    bytes_ = count() * 2 * array_bytes_;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    base_ = static_cast<char*>(p);
    // Blocks are far smaller than a 2 MiB transparent huge page, so one huge page holds the
    // blocks of several owners: numaaff's migrations split them where owners differ.
    if (s.thp != "system") madvise(base_, bytes_, s.thp == "on" ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  }
  ~grid() {
    numaaff::disarm(base_, bytes_);
    munmap(base_, bytes_);
  }
  grid(const grid&) = delete;
  grid& operator=(const grid&) = delete;

  std::size_t count() const { return s_.blocks * s_.blocks; }
  char* block(std::size_t b) const { return base_ + b * 2 * array_bytes_; }
  std::size_t block_bytes() const { return 2 * array_bytes_; }
  std::size_t array_bytes() const { return array_bytes_; }
  char* data() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  double* array(std::size_t b, std::size_t which) const { return reinterpret_cast<double*>(block(b) + which * array_bytes_); }

  void init(std::size_t b) {
    const std::size_t c = s_.cells;
    for (std::size_t which = 0; which < 2; ++which) {
      double* a = array(b, which);
      for (std::size_t i = 0; i < c * c; ++i) a[i] = 0.0;
    }
    if (b == count() / 2 + s_.blocks / 2) array(b, 0)[c * c / 2 + c / 2] = 1e6;  // the heat source
  }

  // One explicit step of block b from array `from` into the other.
  void update(std::size_t b, std::size_t from) const {
    amr_model::update(s_.blocks, s_.cells, b, [&](std::size_t k) { return array(k, from); }, array(b, 1 - from));
  }

 private:
  settings s_;
  std::size_t array_bytes_ = 0, bytes_ = 0;
  char* base_ = nullptr;
};

struct phase_result {
  std::size_t moved = 0;  // blocks whose owner's node changed
  double before = 0, after = 0, seconds = 0;
  double ran = 0;  // share of pages on the node that ran their block's last update
};

double locality(const grid& g, const std::vector<std::size_t>& owner, const std::vector<node_id>& owner_node) {
  std::size_t local = 0, resident = 0;
  for (std::size_t b = 0; b < g.count(); ++b) {
    const numaaff::placement p = numaaff::where(g.block(b), g.block_bytes());
    local += p.pages_on(owner_node[owner[b]]);
    resident += p.resident();
  }
  return resident == 0 ? 0.0 : static_cast<double>(local) / static_cast<double>(resident);
}

double ran_locality(const grid& g, const std::vector<node_id>& ran_on) {
  std::size_t local = 0, resident = 0;
  for (std::size_t b = 0; b < g.count(); ++b) {
    const numaaff::placement p = numaaff::where(g.block(b), g.block_bytes());
    local += ran_on[b] >= 0 ? p.pages_on(ran_on[b]) : 0;
    resident += p.resident();
  }
  return resident == 0 ? 0.0 : static_cast<double>(local) / static_cast<double>(resident);
}

std::vector<phase_result> run_strategy(const std::string& strategy, const settings& s, const team_run& team,
                                       const data_run& follow, const std::vector<node_id>& owner_node) {
  const std::size_t owners = owner_node.size();
  grid g(s);
  if (strategy == "interleave") {
    std::vector<node_id> all = numaaff::topology::system().nodes();
    numaaff::interleave(g.data(), g.bytes(), all);
  }
  std::vector<int> weight;
  std::vector<std::size_t> owner = amr_model::partition(s.blocks, s.phases, 0, owners, weight);
  team([&](std::size_t o) {  // first touch by the first owners
    for (std::size_t b = 0; b < g.count(); ++b)
      if (owner[b] == o) g.init(b);
  });
  std::vector<phase_result> out(s.phases);
  std::size_t from = 0;
  for (std::size_t phase = 0; phase < s.phases; ++phase) {
    phase_result& r = out[phase];
    const auto t0 = std::chrono::steady_clock::now();
    if (phase > 0) {
      std::vector<std::size_t> next = amr_model::partition(s.blocks, s.phases, phase, owners, weight);
      std::vector<std::size_t> changed;
      for (std::size_t b = 0; b < g.count(); ++b)
        if (owner_node[next[b]] != owner_node[owner[b]]) changed.push_back(b);
      owner = std::move(next);
      r.moved = changed.size();
      r.before = locality(g, owner, owner_node);
      if (strategy == "place_blocks") {
        numaaff::place_blocks(g.data(), g.count() * g.block_bytes(), g.block_bytes(),
                              [&](std::size_t b) { return owner_node[owner[b]]; });
      } else if (strategy == "place_on_touch") {
        std::vector<node_id> new_nodes(g.count());
        for (std::size_t b = 0; b < g.count(); ++b) new_nodes[b] = owner_node[owner[b]];
        numaaff::place_blocks_on_next_touch(g.data(), g.count() * g.block_bytes(), g.block_bytes(), new_nodes);
      } else if (strategy == "move_to") {
        for (std::size_t b : changed) numaaff::move_to(g.block(b), g.block_bytes(), owner_node[owner[b]]);
      } else if (strategy == "next_touch" || strategy == "follow_data") {
        numaaff::next_touch_options o;
        if (s.nt_chunk == "array") {
          o.chunk_bytes = g.array_bytes();  // chunks never straddle blocks of different owners
          for (std::size_t b : changed) numaaff::affinity_on_next_touch(g.block(b), g.block_bytes(), o);
        } else {
          o.adaptive = s.nt_chunk == "adaptive";
          if (s.nt_chunk != "default" && !o.adaptive)
            o.chunk_bytes = std::stoul(s.nt_chunk) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
          numaaff::affinity_on_next_touch(g.data(), g.count() * g.block_bytes(), o);
        }
        // Owners touch their own blocks before anyone reads a neighbour's edge.
        if (s.owner_touch) team([&](std::size_t o2) {
          for (std::size_t b = 0; b < g.count(); ++b)
            if (owner[b] == o2) {
              g.array(b, 0)[0] += 0.0;
              g.array(b, 1)[0] += 0.0;
            }
        });
      }
    } else {
      r.before = locality(g, owner, owner_node);
    }
    std::vector<node_id> ran_on(g.count(), -1);
    const auto update = [&](std::size_t b) {
      for (int k = 0; k < weight[b]; ++k) g.update(b, from);
      std::error_code ec;
      ran_on[b] = numaaff::current_node(ec);
    };
    for (std::size_t step = 0; step < s.steps; ++step, from = 1 - from) {
      if (strategy == "follow_data") {
        follow(g, update);
      } else {
        team([&](std::size_t o) {
          for (std::size_t b = 0; b < g.count(); ++b)
            if (owner[b] == o) update(b);
        });
      }
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.after = locality(g, owner, owner_node);
    r.ran = ran_locality(g, ran_on);
  }
  return out;
}

// The strategies --check holds to 99% at the end of every phase change (phase 0 is first
// touch, which huge pages spread over the first toucher's neighbours): next touch only with
// its owner-touch loop (without it the first toucher is whoever reads the halo first, which
// is the point of the comparison). follow_data only without huge pages: a huge page split for
// migration leaves its all-zero subpages on the shared zero page (Linux 6.12), so they go
// wherever they are first written, and a balancing loop lets a helping node write a few
// blocks (the `ran` column says how many; benchmarks/README.md has the figures).
bool judged(const std::string& strategy, const settings& s) {
  return strategy == "move_to" || strategy == "place_blocks" || strategy == "place_on_touch" ||
         (strategy == "next_touch" && s.owner_touch) || (strategy == "follow_data" && s.owner_touch && s.thp != "on");
}

// Runs every strategy on one runtime and prints the table; false if a judged strategy ended a
// phase below 99% local. Adds each strategy's lowest locality at the end of a phase change
// (phases after the first) to `summary`, as the closing ratio lines that benchmarks/report.py
// reads: a judged strategy's against 99%, the others' as references.
bool run_runtime(const std::string& name, const settings& s, const std::string& only, const team_run& team,
                 const data_run& follow, const std::vector<node_id>& owner_node, bool csv,
                 std::vector<numaaff_report::ratio_figure>& summary) {
  std::vector<std::string> names;
  std::vector<std::vector<phase_result>> results;
  for (const char* st : {"first_touch", "interleave", "move_to", "next_touch", "place_blocks", "place_on_touch", "follow_data"}) {
    if (only != "all" && only != st) continue;
    names.push_back(st);
    results.push_back(run_strategy(st, s, team, follow, owner_node));
  }
  // The mean time of the phases after the first (each begins with a phase change).
  const auto changes_time = [&](std::size_t k, std::size_t from_phase) {
    double sum = 0.0;
    for (std::size_t p = from_phase; p < s.phases; ++p) sum += results[k][p].seconds;
    return sum / static_cast<double>(s.phases - from_phase);
  };
  const auto index_of = [&](const char* st) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), st) - names.begin());
  };
  for (std::size_t k = 0; k < names.size() && s.phases > 1; ++k) {
    double lowest = 1.0, lowest_ran = 1.0;
    for (std::size_t p = 1; p < s.phases; ++p) {
      lowest = std::min(lowest, results[k][p].after);
      lowest_ran = std::min(lowest_ran, results[k][p].ran);
    }
    const bool ours = judged(names[k], s);
    summary.push_back({name + ", " + names[k] + ": lowest share local at the end of a phase change" + (ours ? "" : " (reference)"),
                       100.0 * lowest, "%", ">=", ours ? 99.0 : 0.0, 1});
    if (names[k] == "follow_data")
      summary.push_back({name + ", follow_data: lowest share of block pages on the node that ran them (reference)",
                         100.0 * lowest_ran, "%", ">=", 0.0, 1});
    const std::size_t m = index_of("move_to");
    if (m < names.size() && k != m && (names[k] == "next_touch" || names[k] == "place_blocks" || names[k] == "place_on_touch"))
      summary.push_back({name + ", " + names[k] + ": phase time vs move_to's, mean of the phase changes (reference)",
                         changes_time(k, 1) / changes_time(m, 1), "x", ">=", 0.0, 2});
    if (names[k] == "move_to" && s.phases > 2)
      summary.push_back({name + ", move_to: first phase change's time vs the later ones' mean (reference)",
                         results[k][1].seconds / changes_time(k, 2), "x", ">=", 0.0, 2});
  }
  bool ok = true;
  if (csv) {
    for (std::size_t k = 0; k < names.size(); ++k)
      for (std::size_t p = 0; p < s.phases; ++p) {
        const phase_result& r = results[k][p];
        std::printf("amr,%s,%s,%zu,%zu,%.4f,%.4f,%.4f,%.4f\n", name.c_str(), names[k].c_str(), p, r.moved, r.before, r.after,
                    r.seconds, r.ran);
        if (p > 0 && judged(names[k], s) && r.after < 0.99) ok = false;
      }
    return ok;
  }
  std::printf("%s runtime, %zu owner threads; per strategy: local%% at the phase change -> at its end, phase time, ran%%\n",
              name.c_str(), owner_node.size());
  std::printf("phase  moved");
  for (const auto& n : names) std::printf(" | %-32s", n.c_str());
  std::printf("\n");
  for (std::size_t p = 0; p < s.phases; ++p) {
    std::printf("%5zu  %5zu", p, results.front()[p].moved);
    for (std::size_t k = 0; k < names.size(); ++k) {
      const phase_result& r = results[k][p];
      std::printf(" | %5.1f -> %5.1f %7.1f ms %5.1f", 100.0 * r.before, 100.0 * r.after, 1e3 * r.seconds, 100.0 * r.ran);
      if (p > 0 && judged(names[k], s) && r.after < 0.99) ok = false;
    }
    std::printf("\n");
  }
  std::printf("\n");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  example_cli::args a(argc, argv,
                      "[--runtime omp|pool|both] [--strategy first_touch|interleave|move_to|next_touch|place_blocks|"
                      "place_on_touch|follow_data|all] "
                      "[--blocks N] [--cells C] [--steps K] [--phases P] [--thp on|off|system] [--no-owner-touch] "
                      "[--nt-chunk array|default|adaptive|PAGES] "
                      "[--check] [--csv]");
  const std::string runtime = a.choice("runtime", "both", {"omp", "pool", "both"});
  const std::string strategy =
      a.choice("strategy", "all",
               {"first_touch", "interleave", "move_to", "next_touch", "place_blocks", "place_on_touch", "follow_data", "all"});
  settings s;
  s.blocks = a.size("blocks", 16, 2, 256);
  s.cells = a.size("cells", 128, 8, 4096);
  s.steps = a.size("steps", 10, 1, 100000);
  s.phases = a.size("phases", 4, 1, 1000);
  s.thp = a.choice("thp", "off", {"on", "off", "system"});
  s.owner_touch = !a.flag("no-owner-touch");
  s.nt_chunk = a.text("nt-chunk", "array");
  if (s.nt_chunk != "array" && s.nt_chunk != "default" &&
      s.nt_chunk != "adaptive" &&
      (s.nt_chunk.find_first_not_of("0123456789") != std::string::npos || s.nt_chunk.size() > 6 ||
       std::stoul(s.nt_chunk) == 0))
    a.fail("--nt-chunk takes array, default, adaptive or a number of pages (1..999999), not '" + s.nt_chunk + "'");
  const bool check = a.flag("check");
  const bool csv = a.flag("csv");
  a.done();
  try {
    const numaaff::capability_report report = numaaff::system_report();
    const numaaff::topology& topo = numaaff::topology::system();
    if (!csv)
      std::printf("amr on %zu node(s), kernel %s: %zux%zu blocks of %zux%zu cells, %zu phases of %zu steps; refined blocks cost 4x%s\n\n",
                topo.node_count(), report.kernel_release.c_str(), s.blocks, s.blocks, s.cells, s.cells, s.phases, s.steps,
                report.placement_effective() ? "" : "; one node: everything is local, run it in the NUMA VM");
    bool ok = true;
    std::vector<numaaff_report::ratio_figure> summary;
    if (runtime != "omp") {
      numaaff::thread_pool pool;
      std::vector<node_id> owner_node(pool.worker_count());
      const auto blocks = pool.worker_blocks(0, pool.worker_count());
      for (std::size_t w = 0; w < blocks.size(); ++w)
        for (std::size_t o = blocks[w].first; o < blocks[w].last; ++o) owner_node[o] = pool.worker_node(w);
      const team_run team = [&](const std::function<void(std::size_t)>& body) {
        pool.parallel_for(0, owner_node.size(), [&](std::size_t o) { body(o); });
      };
      const data_run follow = [&](const grid& g, const std::function<void(std::size_t)>& body) {
        pool.parallel_for(0, g.count(), body, numaaff::dynamic_schedule{1}.following(g.data(), g.block_bytes()));
      };
      ok = run_runtime(csv ? "pool" : "numaaff pool", s, strategy, team, follow, owner_node, csv, summary) && ok;
    }
    if (runtime != "pool") {
#if defined(_OPENMP)
      const numaaff::openmp::team_plan plan = numaaff::openmp::plan_team();
      numaaff::openmp::bind_team(plan);
      const team_run team = [&](const std::function<void(std::size_t)>& body) {
#pragma omp parallel num_threads(plan.size())
        body(static_cast<std::size_t>(omp_get_thread_num()));
      };
      const data_run follow = [&](const grid& g, const std::function<void(std::size_t)>& body) {
        const auto work = numaaff::openmp::blocks_by_data(plan, g.data(), g.block_bytes(), 0, g.count());
#pragma omp parallel num_threads(plan.size())
        for (const numaaff::index_block& b : work[static_cast<std::size_t>(omp_get_thread_num())])
          for (std::size_t i = b.first; i < b.last; ++i) body(i);
      };
      ok = run_runtime(csv ? "omp" : "OpenMP (team bound by numaaff::openmp)", s, strategy, team, follow, plan.node, csv, summary) && ok;
#else
      std::printf("OpenMP runtime: not built (no OpenMP compiler support found)\n\n");
#endif
    }
    if (!csv && !summary.empty()) numaaff_report::print_ratio_block(summary);
    if (check && report.placement_effective() && !ok) {
      std::printf("check: move_to, next_touch, place_blocks, place_on_touch or follow_data ended a phase below 99%% local\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "amr: %s\n", e.what());
    return 1;
  }
}
