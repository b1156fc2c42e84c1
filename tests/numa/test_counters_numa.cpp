// The live counters on several nodes (inside the rig): pages that move_to and next-touch moved
// are counted on the node they went to, as a raw move_pages query finds them; tasks a node's
// workers took from another node are counted in on the thief's node, out on the victim's and
// in the matrix, as sched_getcpu saw them run; and numaaff-top --once --json, run against a
// child process, reports its block on the right node and its workers, per the same raw query.
#include <numaaff/numaaff.hpp>

#include "../common/numa_test.hpp"
#include "../common/placement_check.hpp"
#include "../common/process.hpp"
#include "../common/scratch.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

using numaaff::node_id;

std::uint64_t field(const numaaff::counter_snapshot& s, node_id n, std::uint64_t numaaff::node_counters::*f) {
  const numaaff::node_counters* r = s.node(n);
  return r != nullptr ? r->*f : 0;
}

TEST(CountersNuma, PagesAreCountedOnTheNodeTheyMovedTo) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  const std::vector<node_id> nodes = numaaff::topology::system().cpu_nodes();
  const node_id from = nodes[0], to = nodes[1];
  const std::size_t ps = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), pages = 96;
  numaaff_test::scratch mem(pages * ps);
  numaaff::pin_this_thread(from);
  std::memset(mem.p, 1, mem.bytes);  // first touch: on `from`
  ASSERT_EQ(numaaff_test::query_pages(mem.p, mem.bytes).on(from), pages);

  const numaaff::counter_snapshot a = numaaff::snapshot();
  const numaaff::move_result r = numaaff::move_to(mem.p, mem.bytes, to);
  const numaaff::counter_snapshot b = numaaff::snapshot();
  const auto q = numaaff_test::query_pages(mem.p, mem.bytes);
  EXPECT_EQ(q.on(to), r.moved) << q.to_string();
  EXPECT_EQ(field(b, to, &numaaff::node_counters::pages_moved) - field(a, to, &numaaff::node_counters::pages_moved), r.moved);
  EXPECT_EQ(field(b, to, &numaaff::node_counters::pages_not_moved) - field(a, to, &numaaff::node_counters::pages_not_moved), r.failed);
  EXPECT_EQ(field(b, from, &numaaff::node_counters::pages_moved), field(a, from, &numaaff::node_counters::pages_moved));

  // Next touch from a thread on `from`: the chunks and pages come back, counted there.
  numaaff::next_touch_options o;
  o.chunk_bytes = 16 * ps;
  numaaff::affinity_on_next_touch(mem.p, mem.bytes, o);
  std::thread([&] {
    numaaff::pin_this_thread(from);
    for (std::size_t i = 0; i < pages; ++i) mem.p[i * ps] = 2;
  }).join();
  const numaaff::counter_snapshot c = numaaff::snapshot();
  const auto back = numaaff_test::query_pages(mem.p, mem.bytes);
  EXPECT_EQ(field(c, from, &numaaff::node_counters::next_touch_chunks) - field(b, from, &numaaff::node_counters::next_touch_chunks),
            pages / 16);
  EXPECT_EQ(field(c, from, &numaaff::node_counters::next_touch_pages_moved) -
                field(b, from, &numaaff::node_counters::next_touch_pages_moved),
            back.on(from) - (pages - r.moved))
      << back.to_string();
  EXPECT_EQ(field(c, to, &numaaff::node_counters::next_touch_pages_moved),
            field(b, to, &numaaff::node_counters::next_touch_pages_moved));
}

TEST(CountersNuma, StealsAreCountedInOutAndBetweenTheNodesThatRanThem) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  numaaff::thread_pool_options o;
  o.steal = numaaff::steal_mode::free;  // no delay: the point is counting, not when
  auto pool = std::make_unique<numaaff::thread_pool>(o);
  const std::vector<node_id> pool_nodes = pool->nodes();
  const node_id home = pool_nodes.front();
  numaaff::pin_this_thread(home);
  const numaaff::counter_snapshot a = numaaff::snapshot();
  constexpr int tasks = 64;
  std::vector<int> ran_on(tasks, -1);
  std::atomic<int> elsewhere{0};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);  // for all of them together
  {
    numaaff::task_group g(*pool);
    for (int i = 0; i < tasks; ++i)
      g.run([&, i] {
        ran_on[static_cast<std::size_t>(i)] = numaaff_test::sysfs_node_of_cpu(sched_getcpu());
        if (ran_on[static_cast<std::size_t>(i)] != home) {
          elsewhere.fetch_add(1);
        } else {
          // Every task on the home node waits (5 s in all at most) until another node has run
          // one: with the home node's workers held, the rest run where they are stolen.
          while (elsewhere.load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        }
      });
    g.wait();
  }
  const numaaff::counter_snapshot b = numaaff::snapshot();
  std::uint64_t ran_elsewhere = 0;
  for (int n : ran_on) ran_elsewhere += n != home;
  std::uint64_t in = 0;
  for (node_id n : pool_nodes) {
    if (n == home) continue;
    std::uint64_t ran_here = 0;
    for (int x : ran_on) ran_here += x == n;
    const std::uint64_t stolen_in = field(b, n, &numaaff::node_counters::stolen_in) - field(a, n, &numaaff::node_counters::stolen_in);
    EXPECT_EQ(stolen_in, ran_here) << "node " << n;
    EXPECT_EQ(b.stolen_between(n, home) - a.stolen_between(n, home), ran_here) << "node " << n;
    in += stolen_in;
  }
  // How many were stolen is the scheduler's business (on 6.12 a third to a half; on 6.1 after
  // the test above, none within the 5 s: see the closing note of issue 28); that each steal is
  // counted once on both sides and in the matrix is what this test asserts.
  // The pool ends: its steals stay counted, in the totals and in the matrix.
  pool.reset();
  const numaaff::counter_snapshot c = numaaff::snapshot();
  for (node_id n : pool_nodes) {
    EXPECT_EQ(c.stolen_between(n, home), b.stolen_between(n, home)) << "node " << n << " after the pool ended";
    EXPECT_EQ(field(c, n, &numaaff::node_counters::stolen_in), field(b, n, &numaaff::node_counters::stolen_in)) << n;
    EXPECT_EQ(field(c, n, &numaaff::node_counters::stolen_out), field(b, n, &numaaff::node_counters::stolen_out)) << n;
  }
  EXPECT_EQ(in, ran_elsewhere);
  EXPECT_EQ(field(b, home, &numaaff::node_counters::stolen_out) - field(a, home, &numaaff::node_counters::stolen_out), ran_elsewhere);
  std::printf("%llu of %d tasks stolen from node %d\n", static_cast<unsigned long long>(ran_elsewhere), tasks, home);
}

/// The number after "key": in the JSON object of node `n` of numaaff-top's output, or -1.
double json_field(const std::string& json, node_id n, const std::string& key) {
  const std::size_t at = json.find("{\"node\":" + std::to_string(n) + ",");
  if (at == std::string::npos) return -1;
  const std::size_t end = json.find('}', at);
  const std::size_t k = json.find("\"" + key + "\":", at);
  if (k == std::string::npos || k > end) return -1;
  return std::atof(json.c_str() + k + key.size() + 3);
}

#ifdef NUMAAFF_TOP
TEST(CountersNuma, NumaaffTopReportsAChildsBlockAndWorkersWhereARawQueryFindsThem) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  const node_id target = numaaff::topology::system().cpu_nodes().back();
  constexpr std::size_t bytes = std::size_t{8} << 20;
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(120);
    void* p = numaaff::allocate(numaaff::kind::on_node(target), bytes);
    std::memset(p, 3, bytes);
    numaaff::thread_pool pool;
    pool.submit([] {}).get();
    const std::size_t workers = pool.worker_count();
    (void)!::write(ready[1], &p, sizeof p);
    (void)!::write(ready[1], &workers, sizeof workers);
    char c;
    (void)!::read(done[0], &c, 1);
    std::exit(0);
  }
  void* block = nullptr;
  std::size_t workers = 0;
  ASSERT_EQ(::read(ready[0], &block, sizeof block), static_cast<ssize_t>(sizeof block));
  ASSERT_EQ(::read(ready[0], &workers, sizeof workers), static_cast<ssize_t>(sizeof workers));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a publication after the pool started
  const std::string out =
      numaaff_test::run_command("timeout 120 " + std::string(NUMAAFF_TOP) + " --once --json --interval 0.5 --pid " + std::to_string(child));
  // The raw query, from outside, of the child's block.
  const std::size_t ps = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<void*> pages;
  for (std::size_t off = 0; off < bytes; off += ps) pages.push_back(static_cast<char*>(block) + off);
  std::vector<int> status(pages.size(), -1);
  ASSERT_EQ(::move_pages(child, pages.size(), pages.data(), nullptr, status.data(), 0), 0);
  std::size_t on_target = 0;
  for (int s : status) on_target += s == target;
  char c = 'x';
  (void)!::write(done[1], &c, 1);
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_EQ(on_target, pages.size()) << "the child's block is not all on node " << target;
  EXPECT_GE(json_field(out, target, "process_bytes"), static_cast<double>(on_target * ps)) << out;
  double all_workers = 0;
  for (node_id n : numaaff_test::sysfs_nodes()) {
    EXPECT_NE(out.find("{\"node\":" + std::to_string(n) + ","), std::string::npos) << "no row for node " << n << ": " << out;
    // every CPU of the node, though this test's thread (and so numaaff-top) is pinned to one node
    EXPECT_EQ(json_field(out, n, "cpus"), static_cast<double>(numaaff_test::sysfs_cpus_of(n).size())) << "node " << n;
    all_workers += std::max(0.0, json_field(out, n, "workers"));
  }
  EXPECT_EQ(all_workers, static_cast<double>(workers)) << out;
  std::printf("%s", out.c_str());
}
#endif

#ifdef NUMAAFF_BENCH
/// How often `needle` occurs in `hay`.
std::size_t occurrences(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// numaaff-bench in the emulated machine: it runs, says its timings are a hypervisor's, and its
// report has a cell for every CPU node and memory node (sysfs's), and real page moves.
TEST(CountersNuma, NumaaffBenchReportsEveryPairOfNodesAndSaysTheTimingsAreEmulated) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  const std::string file = "/tmp/numaaff-bench-" + std::to_string(::getpid()) + ".json";
  const std::string table = numaaff_test::run_command("timeout 300 " + std::string(NUMAAFF_BENCH) + " --quick --json " + file);
  ASSERT_EQ(table.find("(exit status"), std::string::npos) << table;
  std::ifstream in(file);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(file.c_str());
  const std::size_t nodes = numaaff_test::sysfs_nodes().size(), cpu_nodes = numaaff_test::sysfs_cpu_nodes().size();
  EXPECT_NE(json.find("\"virtual\":true"), std::string::npos) << "a QEMU guest that does not say so";
  EXPECT_NE(table.find("every timing below is the hypervisor's"), std::string::npos) << table;
  for (const char* kind : {"read", "write", "copy"})
    EXPECT_EQ(occurrences(json, std::string("\"kind\":\"") + kind + "\""), cpu_nodes * nodes) << kind;
  EXPECT_EQ(occurrences(json, "\"memory_bytes\":"), nodes);
  EXPECT_EQ(occurrences(json, "\"refused\""), 0u) << "move_pages refused in the guest";
  EXPECT_EQ(occurrences(json, "\"chunk_pages\":"), 3u);
  std::printf("%s", table.c_str());
}
#endif

}  // namespace
