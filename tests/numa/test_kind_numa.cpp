// The heap by kind on several nodes (VM), every page checked with a raw move_pages query:
// node kinds put every page of every block on their node at every size; local follows the
// thread; interleave spreads a large block evenly; in the tiered guest fastest lands on its
// HBM-like node 2 and hbwmalloc's default policy does too (tests/vm/README.md gives the layout).
#include <numaaff/hbwmalloc.h>
#include <numaaff/kind.hpp>
#include <numaaff/migration.hpp>
#include <numaaff/system_report.hpp>

#include "../common/numa_test.hpp"
#include "../common/process.hpp"
#include "../common/placement_check.hpp"
#include "../common/scratch.hpp"

#include <gtest/gtest.h>

#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <map>
#include <thread>
#include <vector>

using numaaff::kind;
using numaaff_test::query_pages;
using numaaff_test::sysfs_nodes;

namespace {
const std::size_t sizes[] = {16, 48, 64, 1000, 4096, 32 * 1024, 32 * 1024 + 1, 1 << 20, (4 << 20) + 4096};
}

TEST(KindNuma, ANodeKindPutsEveryPageOfEveryBlockOnItsNode) {
  NUMAAFF_REQUIRE_NODES(2);
  for (int n : sysfs_nodes())
    for (std::size_t bytes : sizes) {
      std::vector<void*> blocks;
      const int count = bytes > 32 * 1024 ? 4 : 64;  // small: more than one slab page; large: within 256 MiB
      for (int i = 0; i < count; ++i) {
        void* p = numaaff::allocate(kind::on_node(n), bytes);
        std::memset(p, 1, bytes);
        blocks.push_back(p);
      }
      for (void* p : blocks) {
        const auto raw = query_pages(p, bytes);
        ASSERT_EQ(raw.on(n), raw.total) << bytes << " bytes on node " << n;
      }
      for (void* p : blocks) numaaff::deallocate(p);
    }
}

// A large block that grows moves its mapping (mremap): its placement goes with it, and the
// pages it gains are placed as the block's first pages were.
TEST(KindNuma, AGrownBlockKeepsEveryPageOnItsNode) {
  NUMAAFF_REQUIRE_NODES(2);
  constexpr std::size_t mib = std::size_t{1} << 20;
  for (int n : sysfs_nodes()) {
    auto* p = static_cast<char*>(numaaff::allocate(kind::on_node(n), mib));
    std::memset(p, 1, mib);
    p = static_cast<char*>(numaaff::reallocate(kind::on_node(n), p, 8 * mib));
    std::memset(p + mib, 2, 7 * mib);
    const auto raw = query_pages(p, 8 * mib);
    EXPECT_EQ(raw.on(n), raw.total) << "node " << n;
    EXPECT_EQ(p[0], 1);
    numaaff::deallocate(p);
  }
}

// Freed large blocks keep their pages for reuse: only by a block of their own node and
// strictness, and not once numaaff moved their pages (a node kind then still gets every page
// on its node).
TEST(KindNuma, KeptLargeBlocksServeOnlyTheirOwnPlacement) {
  NUMAAFF_REQUIRE_NODES(2);
  constexpr std::size_t bytes = std::size_t{1} << 20;
  const std::vector<int> nodes = sysfs_nodes();
  for (int n : nodes) {
    void* p = numaaff::allocate(kind::on_node(n), bytes);
    std::memset(p, 1, bytes);
    numaaff::deallocate(p);
  }
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    void* p = numaaff::allocate(kind::on_node(*it), bytes);
    std::memset(p, 2, bytes);
    const auto raw = query_pages(p, bytes);
    EXPECT_EQ(raw.on(*it), raw.total) << "node " << *it;
    numaaff::deallocate(p);
  }
  void* moved = numaaff::allocate(kind::on_node(nodes[0]), bytes);
  std::memset(moved, 3, bytes);
  (void)numaaff::move_to(moved, bytes, nodes[1]);
  ASSERT_EQ(query_pages(moved, bytes).on(nodes[1]), bytes / 4096) << "the rig moved the block";
  numaaff::deallocate(moved);
  void* p = numaaff::allocate(kind::on_node(nodes[0]), bytes);
  std::memset(p, 4, bytes);
  const auto raw = query_pages(p, bytes);
  EXPECT_EQ(raw.on(nodes[0]), raw.total) << "after a moved block was freed";
  numaaff::deallocate(p);
}

TEST(KindNuma, TheLocalKindFollowsTheAllocatingThread) {
  NUMAAFF_REQUIRE_NODES(2);
  for (int n : numaaff::topology::system().cpu_nodes())
    std::thread([&] {
      numaaff::pin_this_thread(n);
      for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20}) {
        void* p = numaaff::allocate(kind::local(), bytes);
        std::memset(p, 1, bytes);
        const auto raw = query_pages(p, bytes);
        EXPECT_EQ(raw.on(n), raw.total) << bytes << " bytes from node " << n;
        numaaff::deallocate(p);
      }
    }).join();
}

namespace {
/// Whether the running kernel is at least `major`.`minor` (uname's release).
bool kernel_at_least(int major, int minor) {
  utsname u{};
  int a = 0, b = 0;
  return uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &a, &b) == 2 && (a > major || (a == major && b >= minor));
}
}  // namespace

TEST(KindNuma, TheRunningNodeComesFromTheRseqAreaWhereTheKernelKeepsIt) {
  // Linux 6.3 on writes each thread's node in its rseq area (glibc 2.35 on registers one per
  // thread, unless its glibc.pthread.rseq tunable says not to): the local kind reads it there,
  // with no getcpu, and it is the node getcpu gives.
  NUMAAFF_REQUIRE_NODES(2);
#if defined(RSEQ_SIG) && defined(__x86_64__)
  const bool registered = __rseq_size != 0;
#else
  const bool registered = false;  // no area numaaff reads
#endif
  EXPECT_EQ(numaaff::detail::rseq_node_field() != nullptr, registered && kernel_at_least(6, 3))
      << "an rseq area on a kernel from 6.3 on keeps node_id";
  for (int n : numaaff::topology::system().cpu_nodes())
    std::thread([&] {
      ASSERT_TRUE(numaaff_test::pin_to_node(n));
      EXPECT_EQ(numaaff::current_node(), n);
      if (const std::uint32_t* field = numaaff::detail::rseq_node_field()) {
        EXPECT_EQ(static_cast<int>(*field), n);
      }
      EXPECT_EQ(numaaff::detail::local_node_cached(), n);
    }).join();
}

TEST(KindNuma, LocalBlocksFollowAThreadMovedBehindNumaaffsBack) {
  // A thread moved without numaaff (raw sched_setaffinity) gets its small local blocks on the
  // new node: from the next allocation where the kernel keeps the node in the thread's rseq
  // area, else from the 65th on (getcpu, which costs more than the allocation, is read once
  // per 64 of them); one pinned by numaaff at once.
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = numaaff::topology::system().cpu_nodes();
  const int from = nodes.front(), to = nodes.back();
  std::thread([&] {
    ASSERT_TRUE(numaaff_test::pin_to_node(from));
    std::vector<void*> before, after;
    for (int i = 0; i < 100; ++i) before.push_back(numaaff::allocate(kind::local(), 64));
    ASSERT_TRUE(numaaff_test::pin_to_node(to));
    for (int i = 0; i < 200; ++i) after.push_back(numaaff::allocate(kind::local(), 64));
    for (void* p : before) std::memset(p, 1, 64);
    for (void* p : after) std::memset(p, 1, 64);
    for (std::size_t i = 0; i < before.size(); ++i)
      EXPECT_EQ(query_pages(before[i], 64).on(from), 1u) << "block " << i << " before the move";
    const std::size_t first_on_new = numaaff::detail::rseq_node_field() != nullptr ? 0 : 64;
    for (std::size_t i = first_on_new; i < after.size(); ++i)
      EXPECT_EQ(query_pages(after[i], 64).on(to), 1u) << "block " << i << " after the move";
    std::vector<void*> pinned;
    // numaaff's own pinning without a homenode (as its oneTBB and OpenMP bridges pin): the
    // next block already follows.
    ASSERT_TRUE(numaaff::detail::pin_to_cpu(numaaff_test::sysfs_cpus_of(from).front()));
    for (int i = 0; i < 3; ++i) pinned.push_back(numaaff::allocate(kind::local(), 64));
    for (void* p : pinned) std::memset(p, 1, 64);
    for (void* p : pinned) EXPECT_EQ(query_pages(p, 64).on(from), 1u) << "after numaaff pinned the thread";
    for (auto* v : {&before, &after, &pinned})
      for (void* p : *v) numaaff::deallocate(p);
  }).join();
}

namespace {

/// Sets node `n`'s pool of 2 MiB pages to `pages`; false when the guest refuses.
bool reserve_2mib_pages(int n, long pages) {
  FILE* f = std::fopen(("/sys/devices/system/node/node" + std::to_string(n) + "/hugepages/hugepages-2048kB/nr_hugepages").c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fprintf(f, "%ld\n", pages) > 0;
  return std::fclose(f) == 0 && ok && numaaff::detail::hugetlb_pool_of(n, std::size_t{2} << 20).total == pages;
}

/// The kernel page size of the mapping that holds `p`, from /proc/self/smaps (0: not found).
std::size_t kernel_page_kib(const void* p) {
  const auto at = reinterpret_cast<unsigned long>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long start = 0, end = 0;
    char dash = 0;
    if (std::sscanf(line.c_str(), "%lx%c%lx ", &start, &dash, &end) == 3 && dash == '-')  // a mapping's first line
      in = start <= at && at < end;
    else if (in && line.rfind("KernelPageSize:", 0) == 0)
      return std::stoul(line.substr(15));
  }
  return 0;
}

}  // namespace

TEST(KindNuma, ExplicitHugePagesComeFromTheNodesReservedPool) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_nodes();
  const int empty = nodes.front(), full = nodes.back();
  ASSERT_TRUE(reserve_2mib_pages(empty, 0));
  ASSERT_TRUE(reserve_2mib_pages(full, 3)) << "the guest would not reserve 3 huge pages on node " << full;
  const kind on_full = kind::on_node(full).with_pages(numaaff::huge_page_mode::reserved_2mib);
  const kind on_empty = kind::on_node(empty).with_pages(numaaff::huge_page_mode::reserved_2mib);
  // Strict on the node with a pool: whole 2 MiB pages, every one on that node.
  void* a = numaaff::allocate(on_full, (3 << 20) + 100);  // two pages
  std::memset(a, 1, 4 << 20);
  EXPECT_EQ(kernel_page_kib(a), 2048u);
  const auto raw = query_pages(a, 4 << 20);
  EXPECT_EQ(raw.on(full), raw.total) << "pages of the strict block on node " << full;
  EXPECT_EQ(numaaff::detail::hugetlb_pool_of(full, std::size_t{2} << 20).free, 1);
  // The pool has one page left: a strict block of two fails, on the node without a pool too.
  std::error_code ec;
  EXPECT_EQ(numaaff::allocate(on_full, 4 << 20, 64, ec), nullptr);
  EXPECT_EQ(ec, std::errc::not_enough_memory);
  EXPECT_EQ(numaaff::allocate(on_empty, 100, 64, ec), nullptr);
  EXPECT_EQ(ec, std::errc::not_enough_memory);
  // Preferred on the empty node: the kernel takes the other pool's last page.
  const std::uint64_t fallbacks = numaaff::refusal_stats().huge_page_fallbacks;
  void* b = numaaff::allocate(on_empty.preferred(), 100);
  std::memset(b, 1, 2 << 20);
  EXPECT_EQ(kernel_page_kib(b), 2048u);
  EXPECT_EQ(query_pages(b, 2 << 20).on(full), query_pages(b, 2 << 20).total);
  EXPECT_EQ(numaaff::refusal_stats().huge_page_fallbacks, fallbacks);
  // No pool has a page left: preferred gets ordinary pages on its node, counted.
  void* c = numaaff::allocate(on_empty.preferred(), 100);
  std::memset(c, 1, 2 << 20);
  EXPECT_EQ(kernel_page_kib(c), 4u);
  EXPECT_EQ(numaaff::refusal_stats().huge_page_fallbacks, fallbacks + 1);
  for (void* p : {a, b, c}) numaaff::deallocate(p);
  EXPECT_EQ(numaaff::detail::hugetlb_pool_of(full, std::size_t{2} << 20).free, 3) << "freed pages go back to the pool";
  bool listed = false;
  for (const auto& item : numaaff::probe_capabilities(numaaff::topology::system()).items)
    if (item.name == "explicit huge pages")
      listed = item.detail.find("node " + std::to_string(full) + " 2 MiB: 3 reserved, 3 free") != std::string::npos;
  EXPECT_TRUE(listed) << "system report lists the pools";
  EXPECT_TRUE(reserve_2mib_pages(full, 0));
}

TEST(KindNuma, InterleaveSpreadsALargeBlockWithinOnePercentPerNode) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::size_t bytes = std::size_t{32} << 20;
  auto* p = static_cast<char*>(numaaff::allocate(kind::interleave(), bytes));
  std::memset(p, 1, bytes);
  const auto raw = query_pages(p, bytes);
  const std::vector<int> nodes = sysfs_nodes();
  const double share = static_cast<double>(raw.total) / static_cast<double>(nodes.size());
  for (int n : nodes)
    EXPECT_NEAR(static_cast<double>(raw.on(n)), share, share * 0.01) << "node " << n << " of " << raw.total << " pages";
  numaaff::deallocate(p);
}

// Small interleaved blocks take turns over the nodes whatever the kind's options (each option
// set once had a cursor of its own that started over at every allocation: all on node 0).
TEST(KindNuma, SmallInterleavedBlocksOfEveryOptionTakeTurnsOverTheNodes) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int> nodes = sysfs_nodes();
  for (const kind& k : {kind::interleave(), kind::interleave().preferred(),
                        kind::interleave().with_pages(numaaff::huge_page_mode::never)}) {
    std::vector<void*> blocks;
    std::map<int, int> per_node;
    for (std::size_t i = 0; i < 40 * nodes.size(); ++i) {
      void* p = numaaff::allocate(k, 256);
      std::memset(p, 1, 256);
      const auto raw = query_pages(p, 256);
      for (const auto& [node, pages] : raw.per_node) per_node[node] += static_cast<int>(pages);
      blocks.push_back(p);
    }
    for (int n : nodes) EXPECT_GE(per_node[n], 10) << "node " << n << " got " << per_node[n] << " of " << blocks.size() << " blocks";
    for (void* p : blocks) numaaff::deallocate(p);
  }
}

TEST(KindNuma, FastestAndHbwMallocLandOnTheHbmNodeOfTheTieredGuest) {
  NUMAAFF_REQUIRE_MEMORY_TIERS();
  std::thread([] {
    numaaff::pin_this_thread(0);
    const int hbm = 2;  // the tiered guest: node 2, 40 GB/s from node 0 against 20 GB/s locally
    for (std::size_t bytes : {std::size_t{64}, std::size_t{1} << 20}) {
      void* p = numaaff::allocate(kind::fastest(), bytes);
      std::memset(p, 1, bytes);
      EXPECT_EQ(query_pages(p, bytes).on(hbm), query_pages(p, bytes).total) << "fastest, " << bytes << " bytes";
      numaaff::deallocate(p);
    }
    EXPECT_EQ(hbw_check_available(), 0);
    for (std::size_t bytes : {std::size_t{64}, std::size_t{3} << 20}) {
      void* h = hbw_malloc(bytes);
      ASSERT_NE(h, nullptr);
      std::memset(h, 1, bytes);
      EXPECT_EQ(query_pages(h, bytes).on(hbm), query_pages(h, bytes).total) << "hbw_malloc, " << bytes << " bytes";
      EXPECT_EQ(hbw_verify_memory_region(h, bytes, 0), 0);
      hbw_free(h);
    }
    void* c = numaaff::allocate(kind::capacity(), std::size_t{1} << 20);
    std::memset(c, 1, std::size_t{1} << 20);
    EXPECT_EQ(query_pages(c, std::size_t{1} << 20).per_node.size(), 1u) << "capacity: one node for the block";
    numaaff::deallocate(c);
  }).join();
}

// A C program of hbwmalloc's API with `args`, in a process of its own (the policy is set once
// per process, before its first allocation) on a CPU of node 0, with MEMKIND_HBW_NODES set to
// `named` when it is not null: "" when it exits with 0, else how it ended (run_in_child).
std::string run_hbw_program(const char* program, const std::vector<std::string>& args, const char* named = nullptr) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "MEMKIND_HBW_NODES=", 18) != 0) env_text.emplace_back(*e);
  if (named != nullptr) env_text.push_back(std::string("MEMKIND_HBW_NODES=") + named);
  std::vector<char*> argv{const_cast<char*>(program)}, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  for (std::string& e : env_text) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  return numaaff_test::run_in_child(120, [&] {
    numaaff::pin_this_thread(0);
    execve(program, argv.data(), envp.data());
    return 127;
  });
}

// hbwmalloc(3) when the high-bandwidth node is full: BIND returns NULL with ENOMEM, PREFERRED
// falls back to other memory. This process holds all of node 2's room (a strict block, written)
// while a C program of hbwmalloc's API, in a process of its own (the policy is set once, before
// the first allocation), asks for more: tests/c/hbw_when_full.c says what it checks.
TEST(KindNuma, HbwBindFailsAndPreferredFallsBackWhenTheHbmNodeIsFull) {
  NUMAAFF_REQUIRE_MEMORY_TIERS();
  const int hbm = 2;
  std::size_t room = 0;
  ASSERT_TRUE(numaaff::detail::node_available_bytes(hbm, room));
  ASSERT_GT(room, std::size_t{16} << 20);
  const std::size_t fill = room - (std::size_t{4} << 20);
  void* filler = numaaff::allocate(kind::on_node(hbm), fill);
  std::memset(filler, 1, fill);
  const std::string node = std::to_string(hbm);  // node 2 is node 0's high-bandwidth memory
  EXPECT_EQ(run_hbw_program(NUMAAFF_HBW_WHEN_FULL, {"bind", node}), "")
      << "BIND with node 2 full (tests/c/hbw_when_full.c numbers its checks)";
  EXPECT_EQ(run_hbw_program(NUMAAFF_HBW_WHEN_FULL, {"preferred", node}), "") << "PREFERRED with node 2 full";
  numaaff::deallocate(filler);
}

// MEMKIND_HBW_NODES names the high-bandwidth nodes instead of the firmware (hbwmalloc(3),
// ENVIRONMENT), in every guest, with or without an HMAT, from a CPU of node 0: with the last
// node with memory named, BIND and PREFERRED blocks are there page by page; with two nodes
// named at different distances from node 0 (tiered, asym), on the nearer; with the last two
// named, INTERLEAVE
// spreads a block half and half within 1%. tests/c/hbw_named_nodes.c numbers its checks.
TEST(KindNuma, MemkindHbwNodesNamesTheHighBandwidthNodes) {
  NUMAAFF_REQUIRE_NODES(2);
  const std::vector<int>& memory = numaaff::detail::memory_nodes();
  ASSERT_GE(memory.size(), 2u);
  const std::string last = std::to_string(memory.back()), before = std::to_string(memory[memory.size() - 2]);
  EXPECT_EQ(run_hbw_program(NUMAAFF_HBW_NAMED_NODES, {last, "bind"}, last.c_str()), "") << "BIND, named " << last;
  EXPECT_EQ(run_hbw_program(NUMAAFF_HBW_NAMED_NODES, {last, "preferred"}, last.c_str()), "") << "PREFERRED, named " << last;
  const std::string both = before + "," + last;
  EXPECT_EQ(run_hbw_program(NUMAAFF_HBW_NAMED_NODES, {"interleave", before, last}, both.c_str()), "") << "INTERLEAVE, named " << both;
  // The distances as the kernel gives them (node0/distance, one per online node in order).
  std::ifstream row_file("/sys/devices/system/node/node0/distance");
  std::vector<int> row;
  for (int d = 0; row_file >> d;) row.push_back(d);
  const std::vector<int>& online = numaaff::detail::kernel_nodes();
  ASSERT_EQ(row.size(), online.size());
  const auto distance = [&](int n) { return row[static_cast<std::size_t>(std::find(online.begin(), online.end(), n) - online.begin())]; };
  // Every pair of other nodes at different distances (tiered: 1,2 -> 2; 1,3 -> 1; 2,3 -> 2).
  // Node 1 has CPUs outside the child's binding, so its topology leaves node 1 out: the nearest
  // must come from the kernel's distances.
  for (int a : memory)
    for (int b : memory)
      if (a != 0 && a < b && distance(a) != distance(b)) {
        const std::string named = std::to_string(a) + "," + std::to_string(b);
        const int near = distance(a) < distance(b) ? a : b;
        EXPECT_EQ(run_hbw_program(NUMAAFF_HBW_NAMED_NODES, {std::to_string(near), "bind"}, named.c_str()), "")
            << "BIND, named " << named << ": node " << near << " is the nearer to node 0";
      }
}

// memkind's own example (hello_hbw_example.c from Debian's libmemkind-dev), built with only its
// include changed to <numaaff/hbwmalloc.h> and linked to numaaff's C library, runs in the tiered
// guest from node 0 with one 2 MiB page reserved on node 2: it prints its three lines, and both
// of its high-bandwidth blocks (hbw_malloc's, and hbw_posix_memalign_psize's 2 MiB page) are on
// node 2 by a raw query when it frees them (tests/c/hbw_free_probe.c, preloaded).
TEST(KindNuma, MemkindsHelloHbwExampleRunsWithItsBlocksOnTheHbmNode) {
  NUMAAFF_REQUIRE_MEMORY_TIERS();
#if defined(NUMAAFF_MEMKIND_HELLO_HBW)
  const int hbm = 2;
  ASSERT_TRUE(reserve_2mib_pages(hbm, 1)) << "the guest kept no 2 MiB page on node 2";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    numaaff::pin_this_thread(0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    setenv("LD_PRELOAD", NUMAAFF_HBW_FREE_PROBE, 1);
    execl(NUMAAFF_MEMKIND_HELLO_HBW, NUMAAFF_MEMKIND_HELLO_HBW, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  EXPECT_NE(text.find("Hello world from high bandwidth memory"), std::string::npos) << text;
  EXPECT_NE(text.find("Hello world from high bandwidth 2 MB paged memory"), std::string::npos) << text;
  std::size_t probes = 0, on_hbm = 0;
  for (std::size_t at = text.find("hbw_free probe: node "); at != std::string::npos;
       at = text.find("hbw_free probe: node ", at + 1)) {
    ++probes;
    on_hbm += std::atoi(text.c_str() + at + 21) == hbm;
  }
  EXPECT_EQ(probes, 2u) << text;
  EXPECT_EQ(on_hbm, probes) << text;
  EXPECT_EQ(numaaff::detail::hugetlb_pool_of(hbm, std::size_t{2} << 20).free, 1) << "the 2 MiB page went back";
  reserve_2mib_pages(hbm, 0);
#else
  FAIL() << "built without memkind's example (install libmemkind-dev: scripts/setup.sh does)";
#endif
}
