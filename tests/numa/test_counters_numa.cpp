// The live counters on several nodes (inside the rig): pages that move_to and next-touch moved
// are counted on the node they went to, as a raw move_pages query finds them; tasks a node's
// workers took from another node are counted in on the thief's node, out on the victim's and
// in the matrix, as sched_getcpu saw them run; numaaff-top --once --json, run against a child
// process, reports its block on the right node and its workers, per the same raw query, and
// against the AMR example what the kernel's numa_maps holds; numaaff-run --report of a program
// whose tasks cross nodes has the program's steals in its matrix; numaaff-bench runs.
#include <numaaff/numaaff.hpp>

#include "../common/numa_test.hpp"
#include "../common/placement_check.hpp"
#include "../common/process.hpp"
#include "../common/scratch.hpp"

#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <sstream>
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
  // Every other node's workers are kept busy until the home node's tasks are queued: awake,
  // they look for work as soon as theirs ends, and find those (asleep, nothing would wake them
  // for another node's work).
  std::atomic<bool> queued{false};
  std::vector<std::future<void>> others;
  for (node_id n : pool_nodes)
    if (n != home)
      others.push_back(pool->submit(n, [&queued, until] {
        while (!queued.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      }));
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
    queued = true;
    g.wait();
  }
  for (auto& other : others) other.get();
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
  // How many were stolen is the scheduler's business (seen here: a third to all but one, on 6.1
  // and 6.12); that each steal is counted once on both sides and in the matrix is what this
  // test asserts.
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
    ::alarm(600);  // beyond every bound of the parent's below: the child outlives its queries
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

#if defined(NUMAAFF_TOP) && defined(NUMAAFF_AMR)
/// The text after "key": in the JSON object of node `n` of numaaff-top's output, up to the next
/// ',' or '}' ("true", "null", a number), or "" when absent.
std::string json_token(const std::string& json, node_id n, const std::string& key) {
  const std::size_t at = json.find("{\"node\":" + std::to_string(n) + ",");
  if (at == std::string::npos) return "";
  const std::size_t k = json.find("\"" + key + "\":", at);
  if (k == std::string::npos || k > json.find('}', at)) return "";
  const std::size_t from = k + key.size() + 3;
  return json.substr(from, json.find_first_of(",}", from) - from);
}

/// The process's resident bytes per node, as its numa_maps says: N<node>=<pages> on each line,
/// in pages of that line's kernelpagesize_kB.
std::map<node_id, double> numa_maps_bytes(pid_t pid) {
  std::map<node_id, double> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/numa_maps");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word;
    std::map<node_id, double> pages;
    double page_kib = 4;
    while (words >> word) {
      int node = -1;
      unsigned long n = 0;
      if (std::sscanf(word.c_str(), "N%d=%lu", &node, &n) == 2) pages[node] += static_cast<double>(n);
      if (std::sscanf(word.c_str(), "kernelpagesize_kB=%lu", &n) == 1) page_kib = static_cast<double>(n);
    }
    for (const auto& [node, count] : pages) out[node] += count * page_kib * 1024;
  }
  return out;
}

/// The kernel's memory tier of `node` (the N of /sys/devices/virtual/memory_tiering/memory_tierN
/// whose nodelist holds it), or -1: read here with no numaaff code.
int kernel_tier_of(node_id node) {
  const std::string dir = "/sys/devices/virtual/memory_tiering";
  std::vector<int> tiers;  // the kernel numbers them by abstract distance: 4, 67, ...
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, "memory_tier", 11) == 0) tiers.push_back(std::atoi(e->d_name + 11));
    ::closedir(d);
  }
  for (int tier : tiers) {
    std::ifstream in(dir + "/memory_tier" + std::to_string(tier) + "/nodelist");
    std::string list;
    if (!(in >> list)) continue;
    for (std::size_t at = 0; at < list.size();) {
      const std::size_t comma = list.find(',', at);
      const std::string part = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      const std::size_t dash = part.find('-');
      const int a = std::atoi(part.c_str()), b = dash == std::string::npos ? a : std::atoi(part.c_str() + dash + 1);
      if (node >= a && node <= b) return tier;
      at = comma == std::string::npos ? list.size() : comma + 1;
    }
  }
  return -1;
}

// As a user would: the AMR example (pool, next touch) running in the guest, numaaff-top --once
// beside it, following it by name. Its memory per node is what the kernel's numa_maps holds
// (read just before and just after, the same both times), its pool's tasks show, every node
// has a row with its CPUs, memory-only nodes are marked with the kernel's tier, and --sort
// pages orders the rows by the process's memory. Its grid is small, so that its steps (a task
// per owner each, all ending together) take milliseconds even in a loaded emulator: a reading
// of a second then spans many. The bounds are deadlines a loaded emulator meets, not counts.
TEST(CountersNuma, NumaaffTopOnceFollowsTheAmrExampleByName) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  std::fflush(nullptr);
  const pid_t amr = ::fork();
  if (amr == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    ::alarm(600);
    ::execl(NUMAAFF_AMR, "amr", "--runtime", "pool", "--strategy", "next_touch", "--blocks", "8", "--cells", "32",
            "--phases", "1000", "--steps", "100000", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ASSERT_GT(amr, 0);
  struct reaper {
    pid_t pid;
    ~reaper() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{amr};
  const std::string segment = numaaff::detail::counter_file_of(numaaff::detail::counters_directory(), amr);
  using clock = std::chrono::steady_clock;
  const auto published_by = clock::now() + std::chrono::seconds(120);
  while (::access(segment.c_str(), F_OK) != 0 && clock::now() < published_by) {
    ASSERT_EQ(::waitpid(amr, nullptr, WNOHANG), 0) << "amr ended before it published";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(::access(segment.c_str(), F_OK), 0) << "amr published no counters in 120 s";
  const std::string top = "timeout 120 " + std::string(NUMAAFF_TOP) + " --once --json --interval 1 ";
  auto tasks_per_s = [](const std::string& json) {
    double tasks = 0;
    for (node_id n : numaaff_test::sysfs_nodes()) tasks += std::max(0.0, json_field(json, n, "tasks_per_s"));
    return tasks;
  };
  // amr moves its blocks at its phase change, then steps: a reading whose numa_maps did not
  // change around it is a reading of that state. Its pool's tasks show in a reading that
  // spans steps that ended.
  std::string out;
  std::map<node_id, double> before, after;
  bool still = false, listed = false;
  for (const auto give_up = clock::now() + std::chrono::seconds(180); clock::now() < give_up;) {
    ASSERT_EQ(::waitpid(amr, nullptr, WNOHANG), 0) << "amr ended";
    before = numa_maps_bytes(amr);
    out = numaaff_test::run_command(top + "--name amr");
    after = numa_maps_bytes(amr);
    still = before == after;
    listed = out.find("\"pids\":[" + std::to_string(amr) + "]") != std::string::npos;
    if (still && listed && tasks_per_s(out) > 0) break;
  }
  ASSERT_TRUE(still) << "amr's memory never held still for a reading in 180 s";
  EXPECT_TRUE(listed) << out;
  EXPECT_GT(tasks_per_s(out), 0.0) << "amr's pool ran no task in any reading of 180 s: " << out;
  for (node_id n : numaaff_test::sysfs_nodes()) {
    const bool memory_only = numaaff_test::sysfs_cpus_of(n).empty();
    EXPECT_EQ(json_field(out, n, "cpus"), static_cast<double>(numaaff_test::sysfs_cpus_of(n).size())) << "node " << n;
    EXPECT_EQ(json_token(out, n, "memory_only"), memory_only ? "true" : "false") << "node " << n << ": " << out;
    const int tier = kernel_tier_of(n);
    EXPECT_EQ(json_token(out, n, "tier"), tier >= 0 ? std::to_string(tier) : "null") << "node " << n;
    EXPECT_EQ(json_field(out, n, "process_bytes"), after.count(n) != 0 ? after.at(n) : 0.0) << "node " << n << ": " << out;
  }
  const std::string sorted = numaaff_test::run_command(top + "--sort pages --pid " + std::to_string(amr));
  double last = -1;
  for (std::size_t at = sorted.find("{\"node\":"); at != std::string::npos; at = sorted.find("{\"node\":", at + 1)) {
    const node_id n = std::atoi(sorted.c_str() + at + 8);
    const double bytes = json_field(sorted, n, "process_bytes");
    if (last >= 0) {
      EXPECT_LE(bytes, last) << "--sort pages: node " << n << " after a node with less: " << sorted;
    }
    last = bytes;
  }
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
  // Its measurements are sized for hardware: in a loaded emulator they take minutes. Running
  // out of time is told apart from a wrong result (by the time: the guest's busybox timeout
  // ends it with SIGTERM, not with coreutils' status 124).
  constexpr int limit_s = 600;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string table =
      numaaff_test::run_command("timeout " + std::to_string(limit_s) + " " + std::string(NUMAAFF_BENCH) + " --quick --json " + file);
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_LT(took, limit_s) << "numaaff-bench --quick ran out of time:\n" << table;
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

// A large interleaved block counts for every node its pages are interleaved over, as much as
// a raw query finds there, and its free gives each node back what it counted (before, all of
// it counted for the node the block was first mapped on).
// A block of a size whose freed pages are kept may get the pages a block of the first node
// left, already there: they are interleaved too.
class CountersInterleaved : public ::testing::TestWithParam<std::size_t> {};

TEST_P(CountersInterleaved, ABlockCountsOnEachNodeWhatTheKernelPutThere) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  if (std::getenv("NUMAAFF_INTERLEAVE_NODES") != nullptr) GTEST_SKIP() << "NUMAAFF_INTERLEAVE_NODES names the nodes";
  const std::size_t bytes = GetParam();
  auto heap = [](const numaaff::counter_snapshot& s, node_id n) {
    return field(s, n, &numaaff::node_counters::heap_bound_bytes) + field(s, n, &numaaff::node_counters::heap_preferred_bytes);
  };
  // Pages of the first node, freed and kept: what the interleaved block may be given.
  void* before = numaaff::allocate(numaaff::kind::on_node(numaaff_test::sysfs_nodes().front()).preferred().with_pages(
                                       numaaff::huge_page_mode::never),
                                   bytes);
  std::memset(before, 2, bytes);
  numaaff::deallocate(before);
  const numaaff::counter_snapshot a = numaaff::snapshot();
  void* p = numaaff::allocate(numaaff::kind::interleave(), bytes);
  std::memset(p, 1, bytes);
  const numaaff::counter_snapshot b = numaaff::snapshot();
  const numaaff_test::raw_placement r = numaaff_test::query_pages(p, bytes);
  numaaff::deallocate(p);
  const numaaff::counter_snapshot c = numaaff::snapshot();
  const std::uint64_t ps = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t counted = 0;
  std::size_t nodes_used = 0;
  for (node_id n : numaaff_test::sysfs_nodes()) {
    const std::uint64_t held = heap(b, n) - heap(a, n);
    const std::uint64_t there = static_cast<std::uint64_t>(r.on(n)) * ps;
    counted += held;
    nodes_used += there > 0;
    // The kernel interleaves by page, numaaff counts by share: a page or two apart at most.
    EXPECT_LE(held > there ? held - there : there - held, 2 * ps) << "node " << n << ": counted " << held << ", raw " << r.to_string();
    EXPECT_EQ(heap(c, n), heap(a, n)) << "node " << n << " after the free";
  }
  EXPECT_GE(counted, bytes);
  EXPECT_GE(nodes_used, 2u) << r.to_string();
}
INSTANTIATE_TEST_SUITE_P(CountersNuma, CountersInterleaved,
                         ::testing::Values(std::size_t{1} << 20, std::size_t{32} << 20));

#ifdef NUMAAFF_RUN
/// The whole numbers of the first JSON array of arrays after `key` in `json` from `from` on.
std::vector<std::vector<long>> json_matrix(const std::string& json, std::size_t from, const std::string& key) {
  std::vector<std::vector<long>> m;
  std::size_t at = json.find("\"" + key + "\":[", from);
  if (at == std::string::npos) return m;
  at += key.size() + 4;
  while (at < json.size() && json[at] == '[') {
    std::vector<long> row;
    ++at;
    while (at < json.size() && json[at] != ']') {
      char* end = nullptr;
      row.push_back(std::strtol(json.c_str() + at, &end, 10));
      at = static_cast<std::size_t>(end - json.c_str());
      if (json[at] == ',') ++at;
    }
    m.push_back(row);
    at += 1;                                    // ']'
    if (at < json.size() && json[at] == ',') ++at;
  }
  return m;
}

// numaaff-run --report of a program whose tasks cross nodes (the steals test above, run as a
// child): its final counters in the JSON say how many each node stole, from which node, as the
// program saw its tasks run (sched_getcpu), and the summary prints the matrix.
TEST(CountersNuma, NumaaffRunReportsTheStealsOfAProgramBetweenTheNodesThatRanThem) {
  NUMAAFF_REQUIRE_CPU_NODES(2);
  // The program inherits this thread's CPUs, which a test before may have pinned to one node:
  // every node's CPUs, so that its pool has workers on all of them.
  cpu_set_t all;
  CPU_ZERO(&all);
  for (node_id n : numaaff_test::sysfs_nodes())
    for (int cpu : numaaff_test::sysfs_cpus_of(n)) CPU_SET(static_cast<std::size_t>(cpu), &all);
  ASSERT_EQ(::sched_setaffinity(0, sizeof all, &all), 0);
  char self[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof self - 1), 0);
  char path[] = "/tmp/numaaff-report-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string out = numaaff_test::run_command("timeout 120 " + std::string(NUMAAFF_RUN) + " --report=" + path + " -- " + self +
                                                    " --gtest_filter=CountersNuma.StealsAreCountedInOutAndBetweenTheNodesThatRanThem");
  std::ifstream f(path);
  const std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ::unlink(path);
  ASSERT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
  unsigned long stolen = 0;
  int home = -1;
  const std::size_t said = out.find(" of 64 tasks stolen from node ");
  ASSERT_NE(said, std::string::npos) << out;
  const std::size_t line = out.rfind('\n', said);
  ASSERT_EQ(std::sscanf(out.c_str() + (line == std::string::npos ? 0 : line + 1), "%lu of 64 tasks stolen from node %d", &stolen, &home), 2)
      << out;
  const std::size_t final_at = json.find("\"final\":");
  ASSERT_NE(final_at, std::string::npos) << json;
  const std::string final_part = json.substr(final_at);
  std::vector<node_id> order;  // the report's node order: the rows and columns of its matrix
  for (std::size_t at = final_part.find("{\"node\":"); at != std::string::npos; at = final_part.find("{\"node\":", at + 1))
    order.push_back(std::atoi(final_part.c_str() + at + 8));
  EXPECT_EQ(order, numaaff::online_nodes());
  const std::vector<std::vector<long>> steals = json_matrix(json, final_at, "steals");
  ASSERT_EQ(steals.size(), order.size()) << final_part;
  double in_total = 0;
  for (std::size_t t = 0; t < order.size(); ++t) {
    ASSERT_EQ(steals[t].size(), order.size()) << final_part;
    long row = 0, column = 0;
    for (std::size_t v = 0; v < order.size(); ++v) {
      row += steals[t][v];
      column += steals[v][t];
    }
    EXPECT_EQ(static_cast<double>(row), json_field(final_part, order[t], "stolen_in")) << "node " << order[t] << ": " << final_part;
    EXPECT_EQ(static_cast<double>(column), json_field(final_part, order[t], "stolen_out")) << "node " << order[t] << ": " << final_part;
    in_total += json_field(final_part, order[t], "stolen_in");
    if (order[t] == home) {
      EXPECT_EQ(static_cast<unsigned long>(column), stolen) << "the program saw " << stolen << " of its tasks run away from node " << home;
    }
  }
  EXPECT_EQ(in_total, static_cast<double>(stolen)) << final_part;
  EXPECT_EQ(out.find("tasks stolen between nodes") != std::string::npos, stolen > 0) << out;
  const std::size_t summary = out.find("numaaff-run: report of pid");
  std::printf("%lu of 64 tasks stolen from node %d, as the report says:\n%s\n", stolen, home,
              summary != std::string::npos ? out.c_str() + summary : "");
}
#endif

}  // namespace
