// The experiment programs on a real multi-node kernel (inside the emulated VM), with tiny sizes:
// each must run, and the goals the programs check themselves (--check) must hold: numa_test's
// pool modes keep every job on its node with its pages, the AMR migrating strategies end every
// phase with the blocks on their owners' nodes. numa01_02 must bring numa02's data to its
// writers after one pass with next-touch and with the pool.
#include "../common/numa_test.hpp"
#include "../common/process.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>

namespace {

using numaaff_test::run_command;

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

TEST(ExperimentsNuma, NumaTestPoolModesMeetTheGoal) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::string out = run_command(std::string(NUMAAFF_NUMA_TEST) + " --jobs-per-node 2 --mib 2 --passes 1 --delay-ms 0 --check");
  EXPECT_FALSE(has(out, "exit status")) << out;
  EXPECT_TRUE(has(out, "goal (every job stays on its node with >= 99% of its pages there) for exec: met")) << out;
  EXPECT_TRUE(has(out, "goal (every job stays on its node with >= 99% of its pages there) for fork: met")) << out;
  EXPECT_TRUE(has(out, "mode thread:")) << out;
}

TEST(ExperimentsNuma, AmrMoveToAndNextTouchEndEveryPhaseLocal) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::string out = run_command(std::string(NUMAAFF_AMR) + " --blocks 6 --cells 32 --steps 2 --phases 3 --check --csv");
  EXPECT_FALSE(has(out, "exit status")) << out;
  // amr,runtime,strategy,phase,moved,before,after,seconds,ran: owners changed node at some phase.
  std::istringstream rows(out);
  std::string row;
  int moved = 0, rows_seen = 0;
  while (std::getline(rows, row)) {
    if (row.rfind("amr,", 0) != 0) continue;
    ++rows_seen;
    std::istringstream cells(row);
    std::string cell[8];
    for (auto& c : cell) std::getline(cells, c, ',');
    moved += std::stoi(cell[4]);
  }
  EXPECT_GT(rows_seen, 0) << out;
  EXPECT_GT(moved, 0) << "no block changed node: the experiment did not exercise migration\n" << out;
}

TEST(ExperimentsNuma, Numa02IsLocalAfterOnePassWithNextTouchAndThePool) {
  NUMAAFF_REQUIRE_NODES(2);
  for (const char* strategy : {"next_touch", "pool"}) {
    const std::string out =
        run_command(std::string(NUMAAFF_NUMA01_02) + " --test numa02 --mib 8 --passes 2 --csv --strategy " + strategy);
    EXPECT_FALSE(has(out, "exit status")) << out;
    // numa02,strategy,pass,elapsed,pass_s,local: pass 1 must already be >= 99% local.
    const std::string first = std::string("numa02,") + strategy + ",1,";
    const auto at = out.find(first);
    ASSERT_NE(at, std::string::npos) << out;
    const std::string row = out.substr(at, out.find('\n', at) - at);
    const double local = std::stod(row.substr(row.rfind(',') + 1));
    EXPECT_GE(local, 0.99) << row;
  }
}

#if defined(NUMAAFF_PHASE_CHANGE) && defined(NUMAAFF_PHASE_CHANGE_F)
// The C and Fortran examples: an OpenMP team (one thread per CPU) re-owns an array first
// placed on one node; next touch by blocks must put the blocks on their owners' nodes, as the
// programs' own raw move_pages queries report.
TEST(ExperimentsNuma, CAndFortranPhaseChangesPutEveryBlockWithItsOwner) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::string threads = "OMP_NUM_THREADS=" + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " ";
  const std::string c = run_command(threads + NUMAAFF_PHASE_CHANGE + " --mib 16 --require 0.99");
  EXPECT_FALSE(has(c, "exit status")) << c;
  EXPECT_TRUE(has(c, "data intact")) << c;
  const std::string f = run_command(threads + NUMAAFF_PHASE_CHANGE_F + " 16");
  EXPECT_FALSE(has(f, "exit status")) << f;
  const std::size_t at = f.find("threads: ");
  ASSERT_NE(at, std::string::npos) << f;
  EXPECT_GE(std::stod(f.substr(at + 9)), 0.99) << f;
  EXPECT_TRUE(has(f, "data intact: T")) << f;
}
#endif

}  // namespace
