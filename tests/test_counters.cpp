// The live counters (counters.hpp): what a process counts per node, read in the process and
// from another one through its segment; the segment's life (published, removed at exit, a dead
// process's removed by the next reader, a forked child's own); and hostile segments, which a
// reader must refuse without crashing or reporting figures that are not there.
#include <numaaff/numaaff.hpp>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

const numaaff::node_counters& row_of(const numaaff::counter_snapshot& s, numaaff::node_id n) {
  const numaaff::node_counters* r = s.node(n);
  if (r == nullptr) throw std::runtime_error("no row for node " + std::to_string(n));
  return *r;
}

/// Polls snapshot(pid) until `done` holds (the publisher copies every 100 ms), 10 s at most.
numaaff::counter_snapshot wait_for(long pid, const std::function<bool(const numaaff::counter_snapshot&)>& done) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  numaaff::counter_snapshot s;
  std::error_code ec;
  while (std::chrono::steady_clock::now() < until) {
    s = numaaff::snapshot(pid, ec);
    if (!ec && done(s)) return s;
    std::this_thread::sleep_for(20ms);
  }
  ADD_FAILURE() << "pid " << pid << ": the condition did not hold within 10 s (last error: " << ec.message() << ")";
  return s;
}

/// Returns once this process's counter publisher, if it runs, has published from its own
/// thread. Until then that thread may still be starting inside the allocator, and clang 14's
/// ASan allocator, unlike glibc's malloc, takes no lock around fork(): a child forked then
/// hangs at its first allocation (CI's ASan stage, every time). Once started, the publisher
/// allocates only under the lock its fork handler holds.
void wait_for_own_publisher() {
  std::error_code ec;
  const numaaff::counter_snapshot first = numaaff::snapshot(::getpid(), ec);
  if (ec) return;  // no segment: this process does not publish, no such thread exists
  (void)wait_for(::getpid(), [&first](const numaaff::counter_snapshot& s) { return s.taken_at > first.taken_at; });
}

/// A forked child that runs `body(to_parent)` and then waits for a byte from the parent before
/// it leaves with exit(), or stays until killed.
struct child_process {
  pid_t pid = -1;
  int from_child = -1, to_child = -1;

  explicit child_process(const std::function<void()>& body) {
    wait_for_own_publisher();
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) throw std::runtime_error("pipe");
    std::fflush(nullptr);
    pid = ::fork();
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      ::alarm(60);
      int status = 0;
      try {
        body();
      } catch (...) {
        status = 3;
      }
      char c = 'r';
      (void)!::write(up[1], &c, 1);
      (void)!::read(down[0], &c, 1);
      std::exit(status);  // exit(), not _exit(): the segment is removed by the atexit handler
    }
    ::close(up[1]);
    ::close(down[0]);
    from_child = up[0];
    to_child = down[1];
  }
  /// Waits until the body has run.
  void ready() const {
    char c;
    ASSERT_EQ(::read(from_child, &c, 1), 1) << "the child died before it was ready";
  }
  /// Lets it leave with exit(); returns its status.
  int finish() {
    char c = 'x';
    (void)!::write(to_child, &c, 1);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void kill_hard() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  ~child_process() {
    if (pid > 0) kill_hard();
    ::close(from_child);
    ::close(to_child);
  }
};

std::string segment_path(long pid) { return numaaff::detail::counter_file_of(numaaff::detail::counters_directory(), pid); }
bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(Counters, TasksOfAPoolAreCountedOnTheirWorkersNodesAndStayAfterThePoolEnds) {
  const numaaff::counter_snapshot before = numaaff::snapshot();
  std::size_t workers = 0;
  {
    numaaff::thread_pool pool;
    for (int i = 0; i < 1000; ++i) pool.submit([] {});
    pool.wait();
    const numaaff::counter_snapshot during = numaaff::snapshot();
    std::uint64_t tasks = 0, live_workers = 0;
    for (const auto& n : during.nodes) {
      tasks += n.tasks_run - row_of(before, n.node).tasks_run;
      live_workers += n.workers - row_of(before, n.node).workers;
    }
    EXPECT_EQ(tasks, 1000u);
    workers = pool.worker_count();
    EXPECT_EQ(live_workers, workers);
    EXPECT_EQ(during.pools, before.pools + 1);
  }
  const numaaff::counter_snapshot after = numaaff::snapshot();
  std::uint64_t tasks = 0;
  for (const auto& n : after.nodes) {
    tasks += n.tasks_run - row_of(before, n.node).tasks_run;
    EXPECT_EQ(n.workers, row_of(before, n.node).workers) << "node " << n.node << ": the pool's workers are gone";
  }
  EXPECT_EQ(tasks, 1000u) << "an ended pool's tasks stay counted";
  EXPECT_EQ(after.pools, before.pools);
}

TEST(Counters, IdleWorkersCountTheirIdleTime) {
  numaaff::thread_pool pool;
  pool.submit([] {}).get();
  const numaaff::counter_snapshot a = numaaff::snapshot();
  std::this_thread::sleep_for(300ms);  // nothing to run: every worker searches, then sleeps
  const numaaff::counter_snapshot b = numaaff::snapshot();
  std::chrono::nanoseconds idle{0}, life{0};
  std::uint64_t workers = 0;
  for (const auto& n : b.nodes) {
    idle += n.idle_time - row_of(a, n.node).idle_time;
    life += n.worker_time - row_of(a, n.node).worker_time;
    workers += n.workers;
  }
  ASSERT_GT(workers, 0u);
  // Each worker lived the whole 300 ms and was idle for all but its first microseconds.
  EXPECT_GE(life, 300ms * static_cast<int>(workers));
  EXPECT_GE(idle, 250ms * static_cast<int>(workers)) << "idle " << idle.count() << " ns of " << life.count();
  EXPECT_LE(idle, life + 1ms);
}

TEST(Counters, NextTouchPagesAreCountedForTheirNode) {
  const std::size_t ps = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), pages = 64;
  void* m = ::mmap(nullptr, pages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  std::memset(m, 1, pages * ps);
  const numaaff::node_id here = numaaff::current_node();
  const numaaff::counter_snapshot a = numaaff::snapshot();
  numaaff::next_touch_options o;
  o.chunk_bytes = 16 * ps;
  numaaff::affinity_on_next_touch(m, pages * ps, o);
  numaaff::pin_this_thread(here);
  for (std::size_t i = 0; i < pages; ++i) static_cast<volatile char*>(m)[i * ps] = 2;
  const numaaff::counter_snapshot b = numaaff::snapshot();
  const auto& ra = row_of(a, here);
  const auto& rb = row_of(b, here);
  EXPECT_EQ(rb.next_touch_chunks - ra.next_touch_chunks, pages / 16);
  // One thread touched each chunk first, once: one handled fault per chunk, on its node.
  EXPECT_EQ(rb.next_touch_faults - ra.next_touch_faults, pages / 16);
  // On one node every page is already where it goes; on several, moved or already there.
  EXPECT_EQ(rb.next_touch_pages_moved + rb.next_touch_pages_already_there + rb.next_touch_pages_failed -
                ra.next_touch_pages_moved - ra.next_touch_pages_already_there - ra.next_touch_pages_failed,
            numaaff::system_report().numa_calls_forbidden() ? rb.next_touch_pages_failed - ra.next_touch_pages_failed : pages);
  ::munmap(m, pages * ps);
}

TEST(Counters, HeapBytesFollowLargeBlocksOfANode) {
  const numaaff::node_id n = numaaff::topology::system().nodes().front();
  const numaaff::counter_snapshot a = numaaff::snapshot();
  constexpr std::size_t bytes = std::size_t{16} << 20;  // kept pages or a mapping: it counts while it lives
  void* p = numaaff::allocate(numaaff::kind::on_node(n), bytes);
  const numaaff::counter_snapshot b = numaaff::snapshot();
  EXPECT_EQ(row_of(b, n).heap_bound_bytes - row_of(a, n).heap_bound_bytes, bytes);
  numaaff::deallocate(p);
  const numaaff::counter_snapshot c = numaaff::snapshot();
  EXPECT_EQ(row_of(c, n).heap_bound_bytes, row_of(a, n).heap_bound_bytes);
}

// Each kind's bytes count apart, and every byte for exactly one kind: a large block of each
// kind adds its length to its own kind's count and to no other kind's, and the kinds add up to
// the bound and preferred bytes on every node.
TEST(Counters, HeapBytesAreCountedByTheKindTheBlockWasAskedForAs) {
  using kinds = numaaff::node_counters::heap_kinds;
  const std::vector<std::uint64_t kinds::*> fields = {&kinds::node, &kinds::local, &kinds::interleave, &kinds::fastest,
                                                      &kinds::capacity};
  // Each kind's bytes over all nodes (where local or capacity resolves may change between calls).
  const auto totals = [&](const numaaff::counter_snapshot& s) {
    std::vector<std::uint64_t> t(fields.size(), 0);
    for (const numaaff::node_counters& r : s.nodes) {
      for (std::size_t f = 0; f < fields.size(); ++f) t[f] += r.heap_by_kind.*fields[f];
      const kinds& h = r.heap_by_kind;
      EXPECT_EQ(h.node + h.local + h.interleave + h.fastest + h.capacity, r.heap_bound_bytes + r.heap_preferred_bytes)
          << "node " << r.node << ": every byte counts for one kind";
    }
    return t;
  };
  constexpr std::size_t bytes = std::size_t{16} << 20;  // kept pages or a mapping: it counts while it lives
  const std::vector<std::pair<numaaff::kind, std::size_t>> cases = {
      {numaaff::kind::on_node(numaaff::current_node()), 0}, {numaaff::kind::local(), 1}, {numaaff::kind::interleave(), 2},
      {numaaff::kind::fastest(), 3}, {numaaff::kind::capacity(), 4}};
  for (const auto& c : cases) {
    const std::vector<std::uint64_t> before = totals(numaaff::snapshot());
    void* p = numaaff::allocate(c.first, bytes);
    const std::vector<std::uint64_t> after = totals(numaaff::snapshot());
    for (std::size_t f = 0; f < fields.size(); ++f)
      EXPECT_EQ(after[f] - before[f], f == c.second ? bytes : 0) << "a block of kind " << c.second << ", count " << f;
    numaaff::deallocate(p);
    EXPECT_EQ(totals(numaaff::snapshot()), before) << "its free gives back what it counted";
  }
}

// Small blocks of two kinds never share a slab, and so a page, even when both kinds resolve
// to the same node (a local block and an on_node block of the caller's node): otherwise a
// slab's bytes could not count for one kind, and one kind's page would hold another's data.
TEST(Counters, SmallBlocksOfDifferentKindsNeverShareASlab) {
  std::thread([] {
    const numaaff::node_id n = numaaff::current_node();
    numaaff::pin_this_thread(n);  // local resolves to n too
    const std::vector<numaaff::kind> all = {numaaff::kind::on_node(n), numaaff::kind::local(), numaaff::kind::interleave(),
                                            numaaff::kind::fastest(), numaaff::kind::capacity(),
                                            numaaff::kind::on_node(n).preferred(), numaaff::kind::local().preferred()};
    std::vector<std::uintptr_t> slabs;
    std::vector<void*> blocks;
    for (const numaaff::kind& k : all) {
      void* p = numaaff::allocate(k, 64);
      blocks.push_back(p);
      slabs.push_back(reinterpret_cast<std::uintptr_t>(p) / numaaff::detail::slab_size);
    }
    for (std::size_t i = 0; i < all.size(); ++i)
      for (std::size_t j = i + 1; j < all.size(); ++j)
        EXPECT_NE(slabs[i], slabs[j]) << "kinds " << i << " and " << j << " share a slab";
    for (void* p : blocks) numaaff::deallocate(p);
  }).join();
}

// A large interleaved block counts for the nodes its pages go to once its policy is set, and
// only then (spread_large), so no figure of a live block is ever taken back: while the test
// only allocates, a reader polling all along must never see any node's heap bytes go down. A
// count that moved between nodes would show for the few instructions between two adds, which
// a snapshot rarely falls in: hence thousands of phases, for 5 s.
TEST(Counters, AnInterleavedBlockIsCountedOnceNeverTakenAwayWhileLive) {
  auto held = [](const numaaff::counter_snapshot& s) {
    std::vector<std::uint64_t> bytes;
    for (const numaaff::node_counters& r : s.nodes) bytes.push_back(r.heap_bound_bytes + r.heap_preferred_bytes);
    return bytes;
  };
  const numaaff::kind spread = numaaff::kind::interleave();
  constexpr std::size_t bytes = std::size_t{64} << 10;  // large: a mapping of its own, interleaved
  constexpr int per_phase = 256;
  std::atomic<unsigned> phase{0};  // even: blocks are only allocated; odd: only freed
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> drops{0}, compared{0};
  std::thread reader([&] {
    unsigned last_phase = 1;
    std::vector<std::uint64_t> last;
    while (!stop.load()) {
      const unsigned before = phase.load();
      const std::vector<std::uint64_t> h = held(numaaff::snapshot());
      // The snapshot's relaxed loads must not drift past the second look at the phase (as in a
      // seqlock's reader): else a free of the next phase could be read as this phase's.
      std::atomic_thread_fence(std::memory_order_acquire);
      const bool within = before % 2 == 0 && phase.load() == before;  // wholly inside one allocating phase
      if (within && last_phase == before && h.size() == last.size()) {
        compared.fetch_add(1, std::memory_order_relaxed);
        for (std::size_t k = 0; k < h.size(); ++k)
          if (h[k] < last[k]) drops.fetch_add(1, std::memory_order_relaxed);
      }
      last_phase = within ? before : 1;
      last = h;
    }
  });
  struct joined {  // however the loop below ends
    std::atomic<bool>& stop;
    std::thread& t;
    ~joined() {
      stop = true;
      t.join();
    }
  };
  {
    const joined reader_stops{stop, reader};
    std::vector<void*> blocks;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < until) {
      for (int i = 0; i < per_phase; ++i) blocks.push_back(numaaff::allocate(spread, bytes));
      phase.fetch_add(1);
      for (void* p : blocks) numaaff::deallocate(p);
      blocks.clear();
      phase.fetch_add(1);
    }
  }
  EXPECT_GT(compared.load(), 0u);
  EXPECT_EQ(drops.load(), 0u) << "a node's heap bytes went down while blocks were only allocated, " << drops.load()
                              << " times in " << compared.load() << " snapshot pairs";
}

TEST(Counters, AnotherProcessReadsThemLiveAndTheSegmentGoesAtExit) {
  const numaaff::counter_snapshot mine = numaaff::snapshot();
  child_process c([] {
    numaaff::thread_pool pool;
    for (int i = 0; i < 500; ++i) pool.submit([] {});
    pool.wait();
    static numaaff::thread_pool* keep = new numaaff::thread_pool(numaaff::thread_pool_options{});
    (void)keep;  // a live pool while the parent reads
  });
  c.ready();
  // An image taken after the body ended: one taken earlier may show the first pool still
  // alive beside the kept one, or neither (CI saw pools == 2).
  const std::chrono::nanoseconds body_done = std::chrono::steady_clock::now().time_since_epoch();
  const numaaff::counter_snapshot s = wait_for(c.pid, [body_done](const numaaff::counter_snapshot& x) {
    return x.taken_at > body_done;
  });
  std::uint64_t tasks = 0;
  for (const auto& n : s.nodes) tasks += n.tasks_run;
  EXPECT_EQ(tasks, 500u) << "the child counts its own tasks only, from zero";
  EXPECT_EQ(s.pid, c.pid);
  EXPECT_EQ(s.pools, 1u);
  EXPECT_FALSE(s.command.empty());
  EXPECT_EQ(s.nodes.size(), mine.nodes.size());
  EXPECT_TRUE(exists(segment_path(c.pid)));
  const long pid = c.pid;
  EXPECT_EQ(c.finish(), 0);
  EXPECT_FALSE(exists(segment_path(pid))) << "exit() leaves the segment behind";
  std::error_code ec;
  (void)numaaff::snapshot(pid, ec);
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  // The parent's own counters are its own: nothing of the child's.
  const numaaff::counter_snapshot again = numaaff::snapshot();
  std::uint64_t added = 0;
  for (const auto& n : again.nodes) added += n.tasks_run - row_of(mine, n.node).tasks_run;
  EXPECT_EQ(added, 0u);
}

TEST(Counters, AKilledProcessesSegmentIsRemovedByTheNextReader) {
  (void)numaaff::snapshot();  // this process publishes too: counter_processes() lists it
  child_process c([] { numaaff::thread_pool pool; });
  c.ready();
  const long pid = c.pid;
  (void)wait_for(pid, [](const numaaff::counter_snapshot&) { return true; });
  c.kill_hard();
  ASSERT_TRUE(exists(segment_path(pid))) << "SIGKILL ran the atexit handler?";
  std::error_code ec;
  (void)numaaff::snapshot(pid, ec);
  EXPECT_EQ(ec, std::errc::no_such_process);
  EXPECT_FALSE(exists(segment_path(pid)));
  // counter_processes() cleans them too, and lists this process.
  child_process d([] { numaaff::thread_pool pool; });
  d.ready();
  const long pid2 = d.pid;
  (void)wait_for(pid2, [](const numaaff::counter_snapshot&) { return true; });
  d.kill_hard();
  const std::vector<long> live = numaaff::counter_processes();
  EXPECT_FALSE(exists(segment_path(pid2)));
  EXPECT_EQ(std::count(live.begin(), live.end(), pid2), 0);
  EXPECT_EQ(std::count(live.begin(), live.end(), static_cast<long>(::getpid())), 1);
}

TEST(Counters, OffByEnvironmentPublishesNothingAndABadValueIsNamed) {
  child_process off([] {
    ::setenv("NUMAAFF_COUNTERS", "off", 1);
    numaaff::thread_pool pool;
    pool.submit([] {}).get();
    const numaaff::counters_publication p = numaaff::counters_status();
    if (p.published || p.why_not.find("NUMAAFF_COUNTERS=off") == std::string::npos) std::exit(4);
    if (numaaff::snapshot().nodes.empty()) std::exit(5);  // still counted in the process
  });
  off.ready();
  EXPECT_FALSE(exists(segment_path(off.pid)));
  EXPECT_EQ(off.finish(), 0);
  child_process bad([] {
    ::setenv("NUMAAFF_COUNTERS", "maybe", 1);
    numaaff::thread_pool pool;
    const numaaff::counters_publication p = numaaff::counters_status();
    if (p.published || p.why_not.find("NUMAAFF_COUNTERS") == std::string::npos) std::exit(4);
  });
  bad.ready();
  EXPECT_FALSE(exists(segment_path(bad.pid)));
  EXPECT_EQ(bad.finish(), 0);
}

// ---- hostile segments ----------------------------------------------------------------------

class HostileSegment : public ::testing::Test {
 protected:
  void SetUp() override {
    // A live process that publishes nothing of its own: the file under its name is ours to forge.
    victim_ = std::make_unique<child_process>([] { ::setenv("NUMAAFF_COUNTERS", "off", 1); });
    victim_->ready();
    path_ = segment_path(victim_->pid);
    numaaff::detail::collect_image(image_, victim_->pid, numaaff::detail::process_start_time(victim_->pid), 1, "forged", 1);
    image_[numaaff::detail::image::h_published_ns] = numaaff::detail::monotonic_ns();  // a live publisher's
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    victim_.reset();
  }
  void write_bytes(const void* data, std::size_t n) {
    ::unlink(path_.c_str());
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, data, n), static_cast<ssize_t>(n));
    ::close(fd);
  }
  void write_image() { write_bytes(image_.data(), image_.size() * 8); }
  /// The reader's verdict on the file: the error, and no figures.
  std::error_code read() {
    std::error_code ec;
    const numaaff::counter_snapshot s = numaaff::snapshot(victim_->pid, ec);
    if (ec) {
      EXPECT_TRUE(s.nodes.empty());
    }
    return ec;
  }
  std::unique_ptr<child_process> victim_;
  std::string path_;
  std::vector<std::uint64_t> image_;
};

TEST_F(HostileSegment, TheForgedImageIsReadWhenItIsWellFormed) {
  write_image();  // the baseline: every case below changes one thing of this
  EXPECT_FALSE(read());
}

// A publisher descheduled in the middle of its copy (a loaded machine, a vCPU the host holds
// back) leaves the sequence odd for as long: the reader waits for it, and does not call a live
// process's segment broken for an update that took a tenth of a second.
TEST_F(HostileSegment, AnUpdateHeldUpForATenthOfASecondIsWaitedFor) {
  using namespace numaaff::detail::image;
  const std::vector<std::uint64_t> good = image_;
  ASSERT_EQ(good[h_sequence] % 2, 0u);
  image_[h_sequence] = good[h_sequence] + 1;  // a copy under way
  write_image();
  std::thread finish([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::vector<std::uint64_t> done = good;
    done[h_sequence] = good[h_sequence] + 2;
    const int fd = ::open(path_.c_str(), O_WRONLY);  // the same file, as the publisher writes it
    const std::size_t n = done.size() * 8;
    EXPECT_EQ(::pwrite(fd, done.data(), n, 0), static_cast<ssize_t>(n));
    ::close(fd);
  });
  const std::error_code ec = read();
  finish.join();
  EXPECT_FALSE(ec) << ec.message();
}

TEST_F(HostileSegment, AWellFormedFileAnotherUserMadeIsRefused) {
  // /dev/shm is every user's: another user can make a file under the victim's name before or
  // while it runs. Its figures must not be read as the victim's.
  if (::geteuid() != 0) GTEST_SKIP() << "making a file owned by another user needs root (CI runs as root)";
  write_image();
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);  // nobody's, world-readable
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  EXPECT_EQ(read(), numaaff::errc::bad_counter_segment);
  const std::vector<long> listed = numaaff::counter_processes();
  EXPECT_EQ(std::count(listed.begin(), listed.end(), victim_->pid), 0);
  EXPECT_TRUE(exists(path_));  // not this reader's to remove
}

// Another user's process that publishes a segment of its own, world-readable and well formed,
// with whatever figures it likes: asked for by its pid it is read (it is that process's), but
// counter_processes(), which numaaff-top's default view sums and --name follows, lists this
// user's processes only.
TEST(Counters, AnotherUsersPublishingProcessIsNotListed) {
  if (::geteuid() != 0) GTEST_SKIP() << "a process of another user needs root (CI runs as root)";
  (void)numaaff::snapshot();  // this process publishes: the listing is not empty for nothing
  child_process other([] {
    ::setenv("NUMAAFF_COUNTERS", "off", 1);  // its file is written below, by the test
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) throw std::runtime_error("setuid");
    ::prctl(PR_SET_DUMPABLE, 1);  // its /proc files are its own again (a uid change made them root's)
  });
  other.ready();
  struct stat proc {};
  if (::stat(("/proc/" + std::to_string(other.pid)).c_str(), &proc) != 0 || proc.st_uid != 65534)
    GTEST_SKIP() << "the child could not become nobody (a user namespace without that uid?)";
  const std::string path = segment_path(other.pid);
  // Removed however the test ends: a file of nobody's under a pid would keep the next process
  // given that pid from publishing.
  struct unlink_at_end {
    const std::string& path;
    ~unlink_at_end() { ::unlink(path.c_str()); }
  } cleanup{path};
  std::vector<std::uint64_t> image;
  numaaff::detail::collect_image(image, other.pid, numaaff::detail::process_start_time(other.pid), 1, "mislead", 1);
  image[numaaff::detail::image::h_published_ns] = numaaff::detail::monotonic_ns();
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, image.data(), image.size() * 8), static_cast<ssize_t>(image.size() * 8));
    ::close(fd);
  }
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  std::error_code ec;
  const numaaff::counter_snapshot s = numaaff::snapshot(other.pid, ec);
  EXPECT_FALSE(ec) << "the precondition: its own segment, readable by its pid (" << ec.message() << ")";
  EXPECT_EQ(s.command, "mislead");
  const std::vector<long> listed = numaaff::counter_processes();
  EXPECT_EQ(std::count(listed.begin(), listed.end(), static_cast<long>(other.pid)), 0) << "another user's process listed";
  EXPECT_EQ(std::count(listed.begin(), listed.end(), static_cast<long>(::getpid())), 1);
}

/// `known` (an image collected here) laid out again as another writer of format 1 would:
/// `extra_header` and `extra_process` words more in those parts, node rows of `nw` words (the
/// unknown ones holding junk, each known figure of row i set to 1000 * (i + 1) + its word),
/// the node rows first, then the steal matrix (7, 8, ...), then the process section.
std::vector<std::uint64_t> relaid_image(const std::vector<std::uint64_t>& known, std::uint64_t extra_header,
                                        std::uint64_t extra_process, std::uint64_t nw) {
  using namespace numaaff::detail::image;
  const std::uint64_t nodes = known[h_node_count];
  const std::uint64_t hw = header_words + extra_header, pw = process_words + extra_process;
  const std::uint64_t nodes_at = hw, steals_at = known[h_steals_offset] != 0 ? nodes_at + nodes * nw : 0;
  const std::uint64_t process_at = nodes_at + nodes * nw + (steals_at != 0 ? nodes * nodes : 0);
  std::vector<std::uint64_t> out(process_at + pw, 0xdeadbeef);
  std::copy(known.begin(), known.begin() + header_words, out.begin());
  out[h_header_words] = hw;
  out[h_total_words] = out.size();
  out[h_process_words] = pw;
  out[h_node_words] = nw;
  out[h_process_offset] = process_at;
  out[h_nodes_offset] = nodes_at;
  out[h_steals_offset] = steals_at;
  out[h_sequence] = 0;
  std::copy_n(known.begin() + static_cast<long>(known[h_process_offset]), process_words, out.begin() + static_cast<long>(process_at));
  for (std::uint64_t i = 0; i < nodes; ++i) {
    std::uint64_t* row = out.data() + nodes_at + i * nw;
    row[n_node] = known[known[h_nodes_offset] + i * node_words + n_node];
    for (std::uint64_t w = n_workers; w < nw && w < node_words; ++w) row[w] = 1000 * (i + 1) + w;
  }
  if (steals_at != 0)
    for (std::uint64_t c = 0; c < nodes * nodes; ++c) out[steals_at + c] = 7 + c;
  return out;
}

// The format's promise to tools: a later writer of version 1 adds words at the end of each
// part, and a reader uses the sizes the header gives, not its own. An image with a longer
// header, process section and node rows, its sections in another order, reads the same
// figures; one from before the last word was added reads it as zero.
TEST_F(HostileSegment, OtherWritersOfTheSameVersionAreReadByTheSizesTheyGive) {
  using namespace numaaff::detail::image;
  const std::uint64_t nodes = image_[h_node_count];
  ASSERT_GT(nodes, 0u);
  // Longer rows; the first rows (18 words); rows of 19, from before the heap's kinds.
  for (const std::uint64_t nw : {std::uint64_t{node_words} + 2, std::uint64_t{first_node_words}, std::uint64_t{n_heap_kind_bytes}}) {
    SCOPED_TRACE("node rows of " + std::to_string(nw) + " words");
    const std::vector<std::uint64_t> other = relaid_image(image_, nw > node_words ? 3 : 0, nw > node_words ? 5 : 0, nw);
    write_bytes(other.data(), other.size() * 8);
    std::error_code ec;
    const numaaff::counter_snapshot s = numaaff::snapshot(victim_->pid, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(s.command, "forged");
    ASSERT_EQ(s.nodes.size(), nodes);
    for (std::uint64_t i = 0; i < nodes; ++i) {
      const numaaff::node_counters& n = s.nodes[i];
      const std::uint64_t base = 1000 * (i + 1);
      EXPECT_EQ(n.node, static_cast<numaaff::node_id>(image_[image_[h_nodes_offset] + i * node_words + n_node]));
      EXPECT_EQ(n.workers, base + n_workers);
      EXPECT_EQ(n.tasks_run, base + n_tasks_run);
      EXPECT_EQ(n.queued, base + n_queued);
      EXPECT_EQ(n.next_touch_chunks, base + n_nt_chunks);
      EXPECT_EQ(n.heap_preferred_bytes, base + n_heap_preferred_bytes);
      EXPECT_EQ(n.next_touch_faults, nw > n_nt_faults ? base + n_nt_faults : 0);
      const std::uint64_t kinds = n_heap_kind_bytes;
      EXPECT_EQ(n.heap_by_kind.node, nw > kinds ? base + kinds : 0);
      EXPECT_EQ(n.heap_by_kind.interleave, nw > kinds + 2 ? base + kinds + 2 : 0);
      EXPECT_EQ(n.heap_by_kind.capacity, nw > kinds + 4 ? base + kinds + 4 : 0);
    }
    if (other[h_steals_offset] != 0) {
      ASSERT_EQ(s.steals.size(), nodes * nodes);
      for (std::uint64_t c = 0; c < nodes * nodes; ++c) EXPECT_EQ(s.steals[c], 7 + c);
    }
  }
  // Shorter than the first rows of the format is no version 1 image.
  const std::vector<std::uint64_t> short_rows = relaid_image(image_, 0, 0, first_node_words - 1);
  write_bytes(short_rows.data(), short_rows.size() * 8);
  EXPECT_EQ(read(), numaaff::errc::bad_counter_segment);
}

TEST_F(HostileSegment, TruncatedOrEmpty) {
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{64}, image_.size() * 8 - 8}) {
    write_bytes(image_.data(), n);
    EXPECT_EQ(read(), numaaff::errc::bad_counter_segment) << n << " bytes";
  }
}

TEST_F(HostileSegment, WrongMagicOrVersion) {
  using namespace numaaff::detail::image;
  image_[h_magic] ^= 1;
  write_image();
  EXPECT_EQ(read(), numaaff::errc::bad_counter_segment);
  image_[h_magic] ^= 1;
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{2}, ~std::uint64_t{0}}) {
    image_[h_version] = v;
    write_image();
    std::error_code ec;
    (void)numaaff::snapshot(victim_->pid, ec);
    EXPECT_EQ(ec, numaaff::errc::bad_counter_segment) << "version " << v;
    try {
      (void)numaaff::snapshot(victim_->pid);
      ADD_FAILURE() << "no exception for version " << v;
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find(v > version ? "newer" : "older"), std::string::npos) << e.what();
    }
  }
}

TEST_F(HostileSegment, SizesAndOffsetsThatPointOutside) {
  using namespace numaaff::detail::image;
  const std::vector<std::uint64_t> good = image_;
  struct edit {
    const char* what;
    std::size_t word;
    std::uint64_t value;
  };
  const std::uint64_t total = good[h_total_words];
  const edit edits[] = {
      {"total words", h_total_words, total + 1},
      {"total words", h_total_words, ~std::uint64_t{0}},
      {"header words", h_header_words, 3},
      {"header words", h_header_words, total + 1},
      {"node count", h_node_count, 1u << 30},
      {"node count", h_node_count, good[h_node_count] + 1},
      {"node words", h_node_words, 1},
      {"node words", h_node_words, ~std::uint64_t{0} / 2},
      {"process words", h_process_words, ~std::uint64_t{0}},
      {"process offset", h_process_offset, total},
      {"process offset", h_process_offset, ~std::uint64_t{0} - 2},
      {"node offset", h_nodes_offset, 0},
      {"node offset", h_nodes_offset, good[h_process_offset]},  // overlaps the process section
      {"steals offset", h_steals_offset, total},
      {"steals offset", h_steals_offset, good[h_nodes_offset]},  // overlaps the node rows
      {"pid", h_pid, good[h_pid] + 1},
      {"sequence", h_sequence, 1},  // odd forever: a writer that never finishes
  };
  for (const edit& e : edits) {
    image_ = good;
    image_[e.word] = e.value;
    write_image();
    const auto t0 = std::chrono::steady_clock::now();
    const std::error_code ec = read();
    EXPECT_EQ(ec, numaaff::errc::bad_counter_segment) << e.what << " = " << e.value;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << e.what;
  }
  image_ = good;
  image_[good[h_nodes_offset] + n_node] = 5000;  // a node number no kernel has
  write_image();
  EXPECT_EQ(read(), numaaff::errc::bad_counter_segment);
}

TEST_F(HostileSegment, AStaleStartTimeIsAnotherProcessAndNotAFile) {
  using namespace numaaff::detail::image;
  image_[h_start_time] += 1;  // the pid's earlier owner
  write_image();
  EXPECT_EQ(read(), std::errc::no_such_process);
  EXPECT_FALSE(exists(path_)) << "the stale segment was not removed";
  // A link, a FIFO and a huge sparse file are refused without being followed, read or mapped.
  ASSERT_EQ(::symlink("/proc/self/mem", path_.c_str()), 0);
  EXPECT_TRUE(read());
  ::unlink(path_.c_str());
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
  EXPECT_EQ(read(), numaaff::errc::bad_counter_segment);
  ::unlink(path_.c_str());
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 40), 0);
  ::close(fd);
  EXPECT_EQ(read(), numaaff::errc::bad_counter_segment);
}

TEST_F(HostileSegment, ALivePublisherThatStoppedPublishingIsNotListedAndItsFileStays) {
  using namespace numaaff::detail::image;
  image_[h_published_ns] = 1;  // its last copy was long ago: it exec'd a program without numaaff
  write_image();
  EXPECT_EQ(read(), std::errc::no_such_process);
  EXPECT_TRUE(exists(path_)) << "the file of a live process was removed";
  const std::vector<long> live = numaaff::counter_processes();
  EXPECT_EQ(std::count(live.begin(), live.end(), static_cast<long>(victim_->pid)), 0);
}

// What a process that died while it created or copied its segment leaves (a file too short,
// or caught with an odd sequence) is removed by the next reader too, not read over and over.
TEST(Counters, ABrokenSegmentOfADeadProcessIsRemoved) {
  child_process c([] {});
  c.ready();
  const long pid = c.pid;
  std::vector<std::uint64_t> image;
  numaaff::detail::collect_image(image, pid, numaaff::detail::process_start_time(pid), 1, "dead", 1);
  EXPECT_EQ(c.finish(), 0);  // gone now; its pid is not reused this soon
  const std::string path = segment_path(pid);
  for (int variant = 0; variant < 2; ++variant) {
    image[numaaff::detail::image::h_sequence] = 7;  // a copy never finished
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    const std::size_t bytes = variant == 0 ? image.size() * 8 : 16;
    ASSERT_EQ(::write(fd, image.data(), bytes), static_cast<ssize_t>(bytes));
    ::close(fd);
    std::error_code ec;
    (void)numaaff::snapshot(pid, ec);
    EXPECT_EQ(ec, numaaff::errc::bad_counter_segment) << variant;
    EXPECT_FALSE(exists(path)) << (variant == 0 ? "an odd sequence" : "16 bytes") << ": the dead process's file stays";
    ::unlink(path.c_str());
  }
}

}  // namespace
