// The MPI bridge inside ranks started by mpirun (ctest label `mpi`): on the host (one node, two
// ranks) and in the 4-node VM (one rank per node, and the other bindings). Every expectation is
// checked against the kernel's own answers (sched_getaffinity, sysfs, raw move_pages, the MPI
// library's own split), never against numaaff's view of itself. NUMAAFF_TEST_MPI_BINDING says
// what the launcher was asked for: core, numa or none.
#include <numaaff/mpi.hpp>
#include <numaaff/numaaff.hpp>

#include "../common/placement_check.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

using numaaff_test::query_pages;

std::string binding() {
  const char* b = std::getenv("NUMAAFF_TEST_MPI_BINDING");
  return b != nullptr ? b : "";
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// The process's CPUs as the kernel reports them, read once in main() before any thread exists.
std::vector<int> process_cpus;

std::vector<int> nodes_of(const std::vector<int>& cpus) {
  std::set<int> s;
  for (int c : cpus) s.insert(numaaff_test::sysfs_node_of_cpu(c));
  return {s.begin(), s.end()};
}

// Every rank's string, gathered with plain MPI (independent of the bridge's own gather).
std::vector<std::string> gather(const std::string& mine) {
  const int n = world_size();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < n; ++r) offs[static_cast<std::size_t>(r)] = total, total += lens[static_cast<std::size_t>(r)];
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(static_cast<std::size_t>(offs[static_cast<std::size_t>(r)]), static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
  return out;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + ",";
  return s;
}

std::string hostname() {
  char h[256] = {};
  gethostname(h, sizeof h - 1);
  return h;
}

TEST(MpiBridge, TheRanksViewIsWhatTheLauncherGaveIt) {
  const numaaff::mpi::rank_view v = numaaff::mpi::this_rank();
  EXPECT_EQ(v.rank, world_rank());
  EXPECT_EQ(v.host, hostname());
  EXPECT_EQ(v.cpus, process_cpus);
  EXPECT_EQ(v.cpu_nodes, nodes_of(process_cpus));
  for (int n : v.cpu_nodes) EXPECT_NE(std::find(v.memory_nodes.begin(), v.memory_nodes.end(), n), v.memory_nodes.end()) << n;
  const std::vector<int> all = numaaff_test::parse_cpulist([] {
    std::ifstream in("/sys/devices/system/cpu/online");
    std::string s;
    std::getline(in, s);
    return s;
  }());
  if (binding() == "core" || binding() == "hwthread") {  // core: the guests have one thread per core
    EXPECT_EQ(v.cpus.size(), 1u);
    EXPECT_TRUE(all.size() == 1 || !v.restriction.empty()) << "a rank bound to a core is restricted";
  } else if (binding() == "numa") {
    ASSERT_EQ(v.cpu_nodes.size(), 1u);
    EXPECT_EQ(v.cpus, numaaff_test::sysfs_cpus_of(v.cpu_nodes.front()));
  } else if (binding() == "none") {
    EXPECT_EQ(v.cpus, all);
    EXPECT_EQ(v.spans_nodes(), numaaff_test::sysfs_cpu_nodes().size() > 1);
  }
}

TEST(MpiBridge, TheLayoutHasEveryRankAndNamesSharedCpusAndNodes) {
  const numaaff::mpi::job_layout layout = numaaff::mpi::gather_layout();
  ASSERT_EQ(layout.ranks().size(), static_cast<std::size_t>(world_size()));
  const std::vector<std::string> cpus = gather(join(process_cpus));
  const std::vector<std::string> hosts = gather(hostname());
  for (std::size_t r = 0; r < layout.ranks().size(); ++r) {
    EXPECT_EQ(layout.ranks()[r].rank, static_cast<int>(r));
    EXPECT_EQ(join(layout.ranks()[r].cpus), cpus[r]) << "rank " << r;
    EXPECT_EQ(layout.ranks()[r].host, hosts[r]) << "rank " << r;
  }
  const std::vector<std::string> problems = layout.problems();
  const std::string text = layout.to_string();
  const auto said = [&](const std::string& what) {
    return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.find(what) != std::string::npos; });
  };
  for (std::size_t a = 0; a < cpus.size(); ++a) {
    EXPECT_EQ(said("rank " + std::to_string(a) + " on " + hosts[a] + " spans nodes"), layout.ranks()[a].cpu_nodes.size() > 1) << text;
    for (std::size_t b = a + 1; b < cpus.size(); ++b) {
      if (hosts[a] != hosts[b]) continue;
      const auto& ca = layout.ranks()[a].cpus;
      const auto& cb = layout.ranks()[b].cpus;
      const bool share_cpus = std::any_of(ca.begin(), ca.end(), [&](int c) { return std::find(cb.begin(), cb.end(), c) != cb.end(); });
      const std::string pair = "ranks " + std::to_string(a) + " and " + std::to_string(b) + " on " + hosts[a];
      EXPECT_EQ(said(pair + " share cpus"), share_cpus) << text;
    }
  }
  if (binding() == "numa" && static_cast<std::size_t>(world_size()) == numaaff_test::sysfs_cpu_nodes().size()) {
    EXPECT_TRUE(problems.empty()) << "one rank per node, each bound to it:\n" << text;
  }
  if (world_rank() == 0) std::printf("%s", text.c_str());
  EXPECT_NE(text.find("host " + hostname()), std::string::npos) << text;
}

TEST(MpiBridge, HostAndNodeCommunicatorsHoldTheRightRanks) {
  const std::vector<std::string> hosts = gather(hostname());
  const std::vector<std::string> node_sets = gather(join(nodes_of(process_cpus)));
  const int me = world_rank();
  int same_host = 0, same_nodes = 0;
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    same_host += hosts[r] == hosts[static_cast<std::size_t>(me)];
    same_nodes += hosts[r] == hosts[static_cast<std::size_t>(me)] && node_sets[r] == node_sets[static_cast<std::size_t>(me)];
  }
  MPI_Comm host = numaaff::mpi::split_by_host();
  MPI_Comm node = numaaff::mpi::split_by_node();
  int host_size = 0, node_size = 0;
  MPI_Comm_size(host, &host_size);
  MPI_Comm_size(node, &node_size);
  EXPECT_EQ(host_size, same_host);
  EXPECT_EQ(node_size, same_nodes);
#if defined(OPEN_MPI)
  if (binding() == "numa") {  // bound ranks: Open MPI's own NUMA split agrees
    MPI_Comm ompi = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, OMPI_COMM_TYPE_NUMA, me, MPI_INFO_NULL, &ompi);
    int ompi_size = -1;
    if (ompi != MPI_COMM_NULL) MPI_Comm_size(ompi, &ompi_size), MPI_Comm_free(&ompi);
    EXPECT_EQ(node_size, ompi_size);
  }
#endif
  MPI_Comm_free(&host);
  MPI_Comm_free(&node);
}

TEST(MpiBridge, ThePoolAndLocalMemoryStayInsideTheRank) {
  numaaff::thread_pool pool;
  std::mutex m;
  std::set<int> ran_on;
  std::vector<char*> blocks(64);
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), bytes = 16 * ps;
  pool.parallel_for(0, blocks.size(), [&](std::size_t i) {
    blocks[i] = numaaff::local_allocator<char>().allocate(bytes);
    std::memset(blocks[i], 1, bytes);
    std::lock_guard<std::mutex> lock(m);
    ran_on.insert(sched_getcpu());
  });
  for (int c : ran_on) EXPECT_NE(std::find(process_cpus.begin(), process_cpus.end(), c), process_cpus.end()) << "cpu " << c;
  const std::vector<int> nodes = nodes_of(process_cpus);
  std::size_t on_mine = 0, total = 0;
  for (char* b : blocks) {
    const auto q = query_pages(b, bytes);
    for (int n : nodes) on_mine += q.on(n);
    total += q.total;
    numaaff::local_allocator<char>().deallocate(b, bytes);
  }
  EXPECT_EQ(on_mine, total) << "pages outside the rank's nodes";
}

// A 1 MiB message (Open MPI's single-copy path on one host) and a 2 KiB one (copied through
// shared memory), into and out of buffers armed for next touch: prepare_buffer opens them, so
// the transfer needs no fallback (ctest fails on Open MPI's "errno = 14" line), the data
// arrives whole and the receive buffer ends on the receiver's node(s).
TEST(MpiBridge, ArmedBuffersCrossMpiIntactAfterPrepareBuffer) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (const std::size_t bytes : {std::size_t{1} << 20, std::size_t{2048}}) {
    const std::size_t mapped = (bytes + ps - 1) / ps * ps;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    auto* buf = static_cast<unsigned char*>(p);
    const int me = world_rank();
    if (me == 0) {
      for (std::size_t i = 0; i < bytes; ++i) buf[i] = static_cast<unsigned char>(i * 7 + 3);
      numaaff::affinity_on_next_touch(buf, mapped);
      if (std::getenv("NUMAAFF_TEST_MPI_NO_PREPARE") == nullptr) numaaff::mpi::prepare_buffer(buf, static_cast<int>(bytes), MPI_BYTE);
      ASSERT_EQ(MPI_Send(buf, static_cast<int>(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD), MPI_SUCCESS);
    } else if (me == 1) {
      std::memset(buf, 0xee, mapped);
      numaaff::affinity_on_next_touch(buf, mapped);
      if (std::getenv("NUMAAFF_TEST_MPI_NO_PREPARE") == nullptr) numaaff::mpi::prepare_buffer(buf, static_cast<int>(bytes), MPI_BYTE);
      ASSERT_EQ(MPI_Recv(buf, static_cast<int>(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < bytes; ++i) wrong += buf[i] != static_cast<unsigned char>(i * 7 + 3);
      EXPECT_EQ(wrong, 0u) << bytes << " bytes";
      const auto q = query_pages(buf, mapped);
      std::size_t mine = 0;
      for (int n : nodes_of(process_cpus)) mine += q.on(n);
      if (q.other_errors == 0) {  // a sandbox that refuses the query tells nothing
        EXPECT_EQ(mine, q.total) << "receive buffer off the receiver's nodes";
      }
      EXPECT_FALSE(numaaff::is_armed(buf, mapped));
    }
    munmap(p, mapped);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// The collectives size their arrays by the local group: over an intercommunicator, the remote
// group's ranks would be gathered past their end. They refuse one, on every rank, before any
// collective starts (so no rank is left waiting either).
TEST(MpiBridge, IntercommunicatorsAreRefusedNotOverflowed) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
  const int me = world_rank();
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half), MPI_SUCCESS);
  ASSERT_EQ(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, me % 2 == 0 ? 1 : 0, 11, &inter), MPI_SUCCESS);
  const auto refused = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).find("intercommunicator") != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(refused([&] { (void)numaaff::mpi::gather_layout(inter); }));
  EXPECT_TRUE(refused([&] { (void)numaaff::mpi::split_by_node(inter); }));
  EXPECT_TRUE(refused([&] { (void)numaaff::mpi::split_by_host(inter); }));
  EXPECT_THROW((void)numaaff::mpi::gather_layout(MPI_COMM_NULL), std::invalid_argument);
  // The merged communicator works, with every rank of both groups.
  MPI_Comm merged = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Intercomm_merge(inter, me % 2, &merged), MPI_SUCCESS);
  EXPECT_EQ(numaaff::mpi::gather_layout(merged).ranks().size(), static_cast<std::size_t>(world_size()));
  MPI_Comm_free(&merged);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

// Run under a binding that leaves no usable node (the VM's cgroup whose cpuset.mems is a
// memory-only node): this_rank is an error naming the binding, and the collective calls
// report it on every rank instead of leaving the others waiting.
TEST(MpiBridge, AnUnusableBindingIsAnErrorNamingItOnEveryRank) {
  if (std::getenv("NUMAAFF_TEST_MPI_UNUSABLE") == nullptr) {
    EXPECT_FALSE(numaaff::topology::system().restriction_is_unusable()) << numaaff::topology::system().restriction();
    return;
  }
  const auto error_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), numaaff::errc::unusable_binding) << e.what();
      return e.what();
    }
    return "";
  };
  const std::string mine = error_of([] { (void)numaaff::mpi::this_rank(); });
  EXPECT_NE(mine.find("cgroup mems"), std::string::npos) << mine;
  EXPECT_NE(mine.find("memory nodes"), std::string::npos) << mine;
  const std::string all = error_of([] { (void)numaaff::mpi::gather_layout(); });
  for (int r = 0; r < world_size(); ++r) EXPECT_NE(all.find("rank " + std::to_string(r) + " on "), std::string::npos) << all;
  const std::string split = error_of([] { (void)numaaff::mpi::split_by_node(); });
  EXPECT_NE(split.find("unusable binding"), std::string::npos) << split;
  if (world_rank() == 0) std::printf("%s\n", all.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  process_cpus = numaaff_test::thread_cpus();
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
