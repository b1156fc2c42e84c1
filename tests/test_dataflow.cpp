// Dataflow tasks: in/out/inout/commutative accesses order tasks by the bytes they declare.
// Ordering is checked as a property (random programs against their sequential execution),
// and each rule on its own: readers together, partial overlaps, nesting, commutative updates,
// cancel, exceptions, bad input, and the tracker's memory over a million tasks.
#include <numaaff/numaaff.hpp>

#include "common/exceptions.hpp"
#include "common/pool_helpers.hpp"
#include "common/process.hpp"
#include "common/sanitizers.hpp"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using numaaff::commutative;
using numaaff::data_access;
using numaaff::elements;
using numaaff::in;
using numaaff::inout;
using numaaff::out;
using numaaff::task_group;
using numaaff::thread_pool;
using numaaff::thread_pool_options;
using numaaff_test::gate;
using numaaff_test::what_of;
using numaaff_test::hang_guard;
using namespace std::chrono_literals;

thread_pool_options workers(int n) {
  thread_pool_options o;
  o.threads_per_node = n;
  return o;
}

// Waits until `flag` is set or `limit` passes; true if it was set.
bool await_flag(const std::atomic<bool>& flag, std::chrono::seconds limit = 20s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

TEST(DataAccess, BadInputNamesTheParameter) {
  int x = 0;
  EXPECT_NE(what_of<std::invalid_argument>([] { in(nullptr, 8); }).find("addr"), std::string::npos);
  EXPECT_NE(what_of<std::invalid_argument>([] { out(nullptr, 1); }).find("numaaff::out: addr"), std::string::npos);
  void* high = reinterpret_cast<void*>(~std::uintptr_t{0} - 16);
  EXPECT_NE(what_of<std::invalid_argument>([&] { inout(high, 64); }).find("bytes"), std::string::npos);
  EXPECT_NE(what_of<std::invalid_argument>([&] { commutative(high, 17); }).find("wraps"), std::string::npos);
  EXPECT_NO_THROW(inout(high, 16));  // ends exactly at the top: no wrap
  const std::size_t too_many = ~std::size_t{0} / sizeof(double) + 1;
  double* d = reinterpret_cast<double*>(&x);
  EXPECT_NE(what_of<std::invalid_argument>([&] { in(d, elements(too_many)); }).find("count"), std::string::npos);
  // Zero bytes is no access, whatever the address.
  EXPECT_NO_THROW(in(nullptr, 0));
  EXPECT_EQ(in(nullptr, 0).bytes(), 0u);
}

TEST(DataAccess, TypedAndContainerFormsCoverTheirStorage) {
  std::vector<double> v(10);
  std::array<int, 4> a{};
  float c[3];
  EXPECT_EQ(in(v).bytes(), 80u);
  EXPECT_EQ(in(v).addr(), v.data());
  EXPECT_EQ(out(a).bytes(), 16u);
  EXPECT_EQ(inout(c).bytes(), 12u);
  EXPECT_EQ(commutative(v.data() + 2, elements(3)).bytes(), 24u);
  EXPECT_EQ(commutative(v.data() + 2, elements(3)).addr(), v.data() + 2);
  // The byte form stays a byte form for a typed pointer (no silent element count).
  EXPECT_EQ(in(v.data(), 8).bytes(), 8u);
  EXPECT_EQ(in(v).mode(), numaaff::access_mode::in);
  EXPECT_TRUE(inout(c).writes());
  EXPECT_FALSE(in(c).writes());
}

// ---- ordering as a property -------------------------------------------------------------

// A random program: tasks with random accesses (partial overlaps included) over a small
// buffer. Each task hashes what it reads (in, inout), adds its constant to its commutative
// bytes (additions commute: any order of the commutative set gives the same bytes), then
// writes a function of the hash over its out and inout bytes. Run in declared order on one
// thread, this gives the expected hash of every task and the final buffer; any ordering the
// tracker gets wrong changes a hash or a byte (and is a data race for TSan).
struct program_task {
  std::vector<data_access> accesses;
  std::uint32_t salt = 0;
};

constexpr std::size_t buffer_bytes = 192;

std::vector<program_task> random_program(std::mt19937& rng, unsigned char* base, std::size_t tasks, bool with_commutative) {
  std::vector<program_task> p(tasks);
  for (std::size_t t = 0; t < tasks; ++t) {
    p[t].salt = static_cast<std::uint32_t>(rng());
    const std::size_t k = 1 + rng() % 3;
    for (std::size_t i = 0; i < k; ++i) {
      const std::size_t off = rng() % buffer_bytes;
      const std::size_t len = 1 + rng() % std::min<std::size_t>(48, buffer_bytes - off);
      const unsigned m = static_cast<unsigned>(rng() % (with_commutative ? 5 : 4));
      unsigned char* at = base + off;
      p[t].accesses.push_back(m == 0 || m == 1 ? in(at, len) : m == 2 ? out(at, len) : m == 3 ? inout(at, len) : commutative(at, len));
    }
  }
  return p;
}

// Runs task t of the program on `base` and returns its hash.
std::uint32_t run_program_task(const program_task& t, unsigned char* base, const unsigned char* origin) {
  std::uint32_t h = t.salt;
  for (const data_access& a : t.accesses) {
    if (a.mode() != numaaff::access_mode::in && a.mode() != numaaff::access_mode::inout) continue;
    const auto* p = base + (static_cast<const unsigned char*>(a.addr()) - origin);
    for (std::size_t i = 0; i < a.bytes(); ++i) h = (h ^ p[i]) * 16777619u;
  }
  for (const data_access& a : t.accesses) {
    if (a.mode() != numaaff::access_mode::commutative) continue;
    auto* p = base + (static_cast<const unsigned char*>(a.addr()) - origin);
    for (std::size_t i = 0; i < a.bytes(); ++i) p[i] = static_cast<unsigned char>(p[i] + (t.salt | 1));
  }
  for (const data_access& a : t.accesses) {
    if (a.mode() != numaaff::access_mode::out && a.mode() != numaaff::access_mode::inout) continue;
    auto* p = base + (static_cast<const unsigned char*>(a.addr()) - origin);
    for (std::size_t i = 0; i < a.bytes(); ++i) p[i] = static_cast<unsigned char>(h >> (i % 4 * 8));
  }
  return h;
}

void check_random_programs(bool through_pool, bool with_commutative, std::size_t programs) {
  hang_guard guard(240s, "random dataflow programs");
  thread_pool pool(workers(4));
  std::mt19937 rng(12345u + (through_pool ? 1u : 0u) + (with_commutative ? 2u : 0u));
  for (std::size_t round = 0; round < programs; ++round) {
    std::vector<unsigned char> buffer(buffer_bytes), expected(buffer_bytes);
    for (std::size_t i = 0; i < buffer_bytes; ++i) buffer[i] = expected[i] = static_cast<unsigned char>(rng());
    const auto program = random_program(rng, buffer.data(), 40, with_commutative);
    std::vector<std::uint32_t> want(program.size()), got(program.size());
    for (std::size_t t = 0; t < program.size(); ++t) want[t] = run_program_task(program[t], expected.data(), buffer.data());
    if (through_pool) {
      std::vector<std::future<void>> futures;
      for (std::size_t t = 0; t < program.size(); ++t)
        futures.push_back(pool.submit(program[t].accesses, [&, t] {
          got[t] = run_program_task(program[t], buffer.data(), buffer.data());
        }));
      for (auto& f : futures) f.get();
    } else {
      task_group g(pool);
      for (std::size_t t = 0; t < program.size(); ++t)
        g.run(program[t].accesses, [&, t] { got[t] = run_program_task(program[t], buffer.data(), buffer.data()); });
      g.wait();
    }
    for (std::size_t t = 0; t < program.size(); ++t) {
      if (program[t].accesses.size() == 0) continue;
      // A task with only commutative accesses reads nothing: its hash is its salt either way.
      ASSERT_EQ(got[t], want[t]) << "program " << round << ", task " << t;
    }
    ASSERT_EQ(buffer, expected) << "program " << round;
  }
}

TEST(DataflowOrder, RandomProgramsMatchTheirSequentialRun) { check_random_programs(false, false, 300); }
TEST(DataflowOrder, RandomProgramsWithCommutativeUpdatesMatch) { check_random_programs(false, true, 300); }
TEST(DataflowOrder, PoolSubmitsFollowTheSameRules) { check_random_programs(true, true, 150); }

// ---- each rule ------------------------------------------------------------------------

// Two readers of the same bytes run at the same time: each waits until the other has started.
TEST(DataflowOrder, ReadersOfTheSameBytesRunTogether) {
  thread_pool pool(workers(2));
  std::vector<double> tile(64, 1.0);
  std::atomic<bool> first{false}, second{false};
  std::atomic<bool> wrote{false}, writer_saw_readers_done{false};
  std::atomic<int> readers_done{0};
  task_group g(pool);
  g.run({out(tile)}, [&] { wrote = true; });
  g.run({in(tile)}, [&] {
    first = true;
    EXPECT_TRUE(await_flag(second)) << "the second reader did not start while the first ran";
    readers_done.fetch_add(1);
  });
  g.run({in(tile)}, [&] {
    second = true;
    EXPECT_TRUE(await_flag(first)) << "the first reader did not start while the second ran";
    readers_done.fetch_add(1);
  });
  g.run({inout(tile)}, [&] { writer_saw_readers_done = readers_done.load() == 2; });
  g.wait();
  EXPECT_TRUE(wrote.load());
  EXPECT_TRUE(writer_saw_readers_done.load()) << "the writer after two readers started before they finished";
}

// Overlap is by bytes: a task that shares one byte with a writer waits; an adjacent range
// does not (it runs while the writer is still running).
TEST(DataflowOrder, PartialOverlapsOrderAndAdjacentRangesDoNot) {
  thread_pool pool(workers(2));
  std::vector<unsigned char> buf(300);
  std::atomic<bool> adjacent_ran{false}, writer_done{false}, overlap_after_writer{false};
  task_group g(pool);
  g.run({out(buf.data(), 100)}, [&] {
    EXPECT_TRUE(await_flag(adjacent_ran)) << "a task on the adjacent bytes [100, 150) waited for the writer of [0, 100)";
    writer_done = true;
  });
  g.run({in(buf.data() + 100, 50)}, [&] { adjacent_ran = true; });
  g.run({in(buf.data() + 99, 50)}, [&] { overlap_after_writer = writer_done.load(); });
  g.wait();
  EXPECT_TRUE(overlap_after_writer.load()) << "a reader of byte 99 ran before the writer of [0, 100) finished";
}

// A chain through partially overlapping writes keeps every step in order.
TEST(DataflowOrder, AChainOfOverlappingWritesRunsInOrder) {
  thread_pool pool(workers(2));
  std::vector<int> order;
  std::mutex m;
  std::vector<unsigned char> buf(1024);
  task_group g(pool);
  for (int i = 0; i < 200; ++i)
    g.run({inout(buf.data() + (i * 3) % 900, 64)}, [&, i] {
      std::lock_guard<std::mutex> l(m);
      order.push_back(i);
    });
  g.wait();
  // Tasks i and j (j > i) overlap when their starts are less than 64 apart; those pairs must
  // appear in order.
  ASSERT_EQ(order.size(), 200u);
  std::vector<std::size_t> pos(200);
  for (std::size_t k = 0; k < 200; ++k) pos[static_cast<std::size_t>(order[k])] = k;
  for (std::size_t i = 0; i < 200; ++i)
    for (std::size_t j = i + 1; j < 200; ++j) {
      const std::size_t a = (i * 3) % 900, b = (j * 3) % 900;
      if (a < b + 64 && b < a + 64) {
        ASSERT_LT(pos[i], pos[j]) << i << " and " << j;
      }
    }
}

// Once all of a chain is registered behind its first task, each task runs, unqueued, on the
// thread that ran the one before (task bypass): nothing may steal it, and a chain longer
// than a stack can hold frames for runs in a loop, not a call per task.
TEST(DataflowOrder, ARegisteredChainRunsOnTheThreadOfItsFirstTask) {
  hang_guard guard(120s, "a chain of 200,000 tasks");
  thread_pool_options o = workers(2);
  o.nodes = {numaaff::current_node()};  // bypass keeps a task on its homenode's threads
  thread_pool pool(o);
  constexpr std::size_t tasks = 200000;
  std::vector<std::thread::id> ran_on(tasks);
  long value = 0;
  gate registered;
  task_group g(pool);
  g.run({inout(&value, 1)}, [&] {
    registered.pass();
    ran_on[0] = std::this_thread::get_id();
  });
  for (std::size_t i = 1; i < tasks; ++i)
    g.run({inout(&value, 1)}, [&, i] {
      ran_on[i] = std::this_thread::get_id();
      ++value;
    });
  registered.open();
  g.wait();
  EXPECT_EQ(value, static_cast<long>(tasks - 1));
  std::size_t elsewhere = 0;
  for (std::size_t i = 1; i < tasks; ++i) elsewhere += ran_on[i] != ran_on[0] ? 1u : 0u;
  EXPECT_EQ(elsewhere, 0u) << "tasks of the chain that ran on another thread than its first";
}

// A ready task that a thread outside the pool registers may be held back while that thread
// registers more: it still starts with no wait() (once the thread registers nothing for a
// while), and a pool-wide wait() starts it too.
TEST(DataflowProgress, AReadyTaskStartsWithoutAWait) {
  thread_pool pool(workers(2));
  int value = 0;
  std::atomic<bool> ran{false};
  task_group g(pool);
  g.run({out(&value, sizeof value)}, [&] {
    value = 1;
    ran.store(true);
  });
  EXPECT_TRUE(await_flag(ran)) << "a held task did not start within 20 s without a wait";
  g.wait();
  EXPECT_EQ(value, 1);
}

// A thread that keeps registering tasks more often than the workers look (a server loop)
// still sees its first task start: a held task is due ten hold periods after it was held.
TEST(DataflowProgress, AHeldTaskStartsWhileItsThreadKeepsRegistering) {
  thread_pool pool(workers(2));
  long value = 0;
  std::atomic<bool> first_ran{false};
  task_group g(pool);
  g.run({inout(&value, sizeof value)}, [&] { first_ran.store(true); });
  // A registration every 30 us (a busy gap: a sleep may last longer than a hold period).
  const auto end = std::chrono::steady_clock::now() + 3s;
  while (!first_ran.load() && std::chrono::steady_clock::now() < end) {
    g.run({inout(&value, sizeof value)}, [&value] { ++value; });
    const auto next = std::chrono::steady_clock::now() + 30us;
    while (std::chrono::steady_clock::now() < next) {
    }
  }
  EXPECT_TRUE(first_ran.load()) << "the first task did not start in 3 s of registrations";
  g.wait();
}

TEST(DataflowProgress, APoolWideWaitStartsHeldTasks) {
  hang_guard guard(60s, "thread_pool::wait with held dataflow tasks");
  thread_pool pool(workers(2));
  std::vector<int> tiles(5);  // fewer than a holder holds: none is queued for being full
  std::atomic<int> ran{0};
  task_group g(pool);
  for (int& t : tiles)
    g.run({inout(&t, sizeof t)}, [&ran, &t] {
      t = 1;
      ran.fetch_add(1);
    });
  pool.wait();
  EXPECT_EQ(ran.load(), 5);
  g.wait();
}

// Nesting: children are ordered inside their own group; the parent's siblings are not.
TEST(DataflowOrder, ChildrenAreOrderedInTheirOwnGroupOnly) {
  thread_pool pool(workers(2));
  std::vector<int> x(16), y(16);
  std::atomic<bool> sibling_ran{false};
  std::vector<int> child_order;
  task_group g(pool);
  g.run({inout(x)}, [&] {
    task_group children(pool);
    children.run({out(y)}, [&] {
      // The parent's sibling below declares in(y): it is not ordered after this child.
      EXPECT_TRUE(await_flag(sibling_ran)) << "the parent's sibling waited for the parent's children";
      child_order.push_back(1);
    });
    children.run({inout(y)}, [&] { child_order.push_back(2); });
    children.run({in(y)}, [&] { child_order.push_back(3); });
    children.wait();
  });
  g.run({in(y)}, [&] { sibling_ran = true; });
  g.run({in(x)}, [&] { EXPECT_EQ(child_order.size(), 3u) << "the parent ended before its children"; });
  g.wait();
  EXPECT_EQ(child_order, (std::vector<int>{1, 2, 3}));
}

// Commutative updates: never two at once on the same bytes, all after the writer before them
// and before the reader after them; in any order among themselves.
TEST(DataflowOrder, CommutativeUpdatesExcludeEachOtherAndStayBetweenTheirNeighbours) {
  thread_pool pool(workers(4));
  long counter = -1;  // deliberately not atomic
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  long seen_by_reader = 0;
  task_group g(pool);
  g.run({out(&counter, sizeof counter)}, [&] { counter = 0; });
  for (int t = 0; t < 40; ++t)
    g.run({commutative(&counter, sizeof counter)}, [&] {
      if (inside.fetch_add(1) != 0) overlapped = true;
      for (int i = 0; i < 1000; ++i) {
        long v = counter;
        if (i % 100 == 0) std::this_thread::yield();
        counter = v + 1;
      }
      inside.fetch_sub(1);
    });
  g.run({in(&counter, sizeof counter)}, [&] { seen_by_reader = counter; });
  g.wait();
  EXPECT_FALSE(overlapped.load()) << "two commutative updates of the same bytes ran at once";
  EXPECT_EQ(seen_by_reader, 40000);
}

// Commutative updates of different bytes do run at once.
TEST(DataflowOrder, CommutativeUpdatesOfDifferentBytesRunTogether) {
  thread_pool pool(workers(2));
  long a = 0, b = 0;
  std::atomic<bool> in_a{false}, in_b{false};
  task_group g(pool);
  g.run({commutative(&a, sizeof a)}, [&] {
    in_a = true;
    EXPECT_TRUE(await_flag(in_b));
  });
  g.run({commutative(&b, sizeof b)}, [&] {
    in_b = true;
    EXPECT_TRUE(await_flag(in_a));
  });
  g.wait();
}

// ---- cancel, exceptions ------------------------------------------------------------------

TEST(DataflowCancel, TheGroupsWaitingTasksAndTheirDependentsAreDiscarded) {
  hang_guard guard(60s, "task_group::cancel with dataflow");
  thread_pool pool(workers(2));
  gate open;
  std::atomic<bool> started{false};
  std::atomic<int> ran{0};
  std::vector<int> tile(8);
  task_group g(pool);
  g.run({inout(tile)}, [&] {
    started = true;
    open.pass();
  });
  for (int i = 0; i < 10; ++i) g.run({inout(tile)}, [&] { ran.fetch_add(1); });
  ASSERT_TRUE(await_flag(started));
  g.cancel();
  open.open();
  try {
    g.wait();
    ADD_FAILURE() << "wait() returned as if the cancelled tasks had run";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::operation_canceled);
  }
  EXPECT_EQ(ran.load(), 0);
  // The group starts afresh.
  g.run({inout(tile)}, [&] { ran.fetch_add(1); });
  g.wait();
  EXPECT_EQ(ran.load(), 1);
}

TEST(DataflowCancel, PoolCancelDiscardsWaitingDependentsToo) {
  hang_guard guard(60s, "thread_pool::cancel with dataflow");
  thread_pool pool(workers(2));
  gate open;
  std::atomic<bool> started{false};
  std::vector<int> tile(8);
  auto first = pool.submit({inout(tile)}, [&] {
    started = true;
    open.pass();
    return 1;
  });
  std::vector<std::future<int>> later;
  for (int i = 0; i < 5; ++i) later.push_back(pool.submit({in(tile)}, [] { return 2; }));
  ASSERT_TRUE(await_flag(started));
  pool.cancel();
  open.open();
  EXPECT_EQ(first.get(), 1);
  for (auto& f : later) {
    try {
      f.get();
      ADD_FAILURE() << "a task waiting for a predecessor ran after thread_pool::cancel()";
    } catch (const std::future_error& e) {
      EXPECT_EQ(e.code(), std::future_errc::broken_promise);
    }
  }
  // Submits after the cancel run.
  EXPECT_EQ(pool.submit({in(tile)}, [] { return 3; }).get(), 3);
}

// Tasks an outside thread found ready at registration are held back (up to 32) until its
// wait or a hold period; some may have been let go to the queues meanwhile. Either way they
// have not started: with every worker busy, both cancels discard them all, and the group's
// wait says so.
TEST(DataflowCancel, ReadyTasksHeldAtRegistrationAreDiscarded) {
  hang_guard guard(60s, "cancel with held dataflow tasks");
  for (const bool pool_wide : {false, true}) {
    thread_pool pool(workers(2));
    gate open;
    std::atomic<int> busy{0}, ran{0};
    std::vector<std::future<void>> blockers;
    for (std::size_t w = 0; w < pool.worker_count(); ++w)
      blockers.push_back(pool.submit([&] {
        busy.fetch_add(1);
        open.pass();
      }));
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (busy.load() < static_cast<int>(pool.worker_count()) && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(100us);
    ASSERT_EQ(busy.load(), static_cast<int>(pool.worker_count())) << "the workers were not all busy";
    std::vector<int> tiles(8);  // independent: each ready at its registration
    task_group g(pool);
    for (int& t : tiles) g.run({inout(&t, sizeof t)}, [&ran] { ran.fetch_add(1); });
    if (pool_wide) pool.cancel();
    else g.cancel();
    open.open();
    for (auto& b : blockers) b.get();
    try {
      g.wait();
      ADD_FAILURE() << (pool_wide ? "thread_pool" : "task_group") << "::cancel: wait() returned as if the held tasks had run";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::operation_canceled);
    }
    EXPECT_EQ(ran.load(), 0) << (pool_wide ? "thread_pool" : "task_group") << "::cancel";
  }
}

TEST(DataflowCancel, DependentsOfADiscardedQueuedTaskAreDiscarded) {
  hang_guard guard(60s, "discarded dataflow dependents");
  thread_pool pool(workers(1));
  gate open;
  std::atomic<bool> started{false};
  std::vector<int> a(4), b(4);
  auto blocker = pool.submit([&] {  // the only worker, busy
    started = true;
    open.pass();
  });
  ASSERT_TRUE(await_flag(started));
  auto queued = pool.submit({out(a)}, [] {});    // ready: in a queue when cancel() comes
  auto dependent = pool.submit({in(a), out(b)}, [] {});
  auto second = pool.submit({in(b)}, [] {});
  EXPECT_GE(pool.cancel(), 1u);
  open.open();
  blocker.get();
  for (auto* f : {&queued, &dependent, &second}) {
    try {
      f->get();
      ADD_FAILURE() << "a discarded task, or a dependent of one, ran";
    } catch (const std::future_error& e) {
      EXPECT_EQ(e.code(), std::future_errc::broken_promise);
    }
  }
}

TEST(DataflowErrors, DependentsOfAFailedTaskStillRunAndTheFirstErrorIsRethrown) {
  thread_pool pool(workers(2));
  std::vector<int> tile(8);
  std::atomic<int> after{0};
  task_group g(pool);
  g.run({out(tile)}, [] { throw std::runtime_error("first"); });
  g.run({inout(tile)}, [&] {
    after.fetch_add(1);
    throw std::runtime_error("second");
  });
  g.run({in(tile)}, [&] { after.fetch_add(1); });
  try {
    g.wait();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  EXPECT_EQ(after.load(), 2);
  auto f = pool.submit({inout(tile)}, []() -> int { throw std::logic_error("pool"); });
  auto g2 = pool.submit({in(tile)}, [] { return 5; });
  EXPECT_THROW(f.get(), std::logic_error);
  EXPECT_EQ(g2.get(), 5);
}

TEST(DataflowErrors, DestroyingAGroupWaitsForItsDataflowTasks) {
  thread_pool pool(workers(2));
  std::vector<int> tile(8);
  std::atomic<int> ran{0};
  {
    task_group g(pool);
    for (int i = 0; i < 50; ++i)
      g.run({inout(tile)}, [&] {
        std::this_thread::sleep_for(100us);
        ran.fetch_add(1);
      });
  }
  EXPECT_EQ(ran.load(), 50);
}

// Placement on this host: the task's homenode is the node of its data (one node here: that
// node), and this_homenode() says so inside it.
TEST(DataflowPlacement, ATaskKnowsItsHomenode) {
  thread_pool pool(workers(2));
  std::vector<double> tile(4096, 1.0);
  task_group g(pool);
  numaaff::node_id home = -2;
  g.run({inout(tile)}, [&] { home = numaaff::this_homenode(); });
  g.wait();
  EXPECT_EQ(home, pool.nodes().front());
}

// run() from several threads at once on a fresh group: the tasks are still ordered.
TEST(DataflowOrder, ConcurrentRunsOnAFreshGroupAreOrdered) {
  thread_pool pool(workers(2));
  long x = 0;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  auto body = [&] {
    if (inside.fetch_add(1) != 0) overlapped = true;
    for (int i = 0; i < 100; ++i) x = x + 1;
    inside.fetch_sub(1);
  };
  for (int round = 0; round < 300; ++round) {
    task_group g(pool);
    std::thread other([&] { g.run({inout(&x, sizeof x)}, body); });
    g.run({inout(&x, sizeof x)}, body);
    other.join();
    g.wait();
  }
  EXPECT_FALSE(overlapped.load());
  EXPECT_EQ(x, 300 * 2 * 100);
}

// ---- memory ---------------------------------------------------------------------------

// The process's peak resident size since reset_peak_resident() (VmHWM): each round's peak,
// not the size after it, which depends on whether malloc gave freed memory back.
std::size_t peak_resident_kib() { return numaaff_test::status_kib("VmHWM:"); }
bool reset_peak_resident() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";  // resets VmHWM to the current resident size (Linux 4.0 and later)
  f.flush();
  return static_cast<bool>(f);
}

// A million dependent tasks leave nothing behind. Each round holds all its 100k tasks in
// flight at once (the first task, which every other one follows, waits on a gate until the
// round is submitted), so every round has the same peak; the peak resident size over ten
// rounds must be within a few MiB of the peak over the first two (a leak of even 16 bytes per
// task would add 12 MiB over the last eight rounds).
TEST(DataflowMemory, AMillionTasksKeepTheResidentSizeFlat) {
  hang_guard guard(280s, "a million dataflow tasks");
  if (numaaff_test::address_sanitizer)
    GTEST_SKIP() << "ASan keeps freed memory in quarantine (up to 256 MiB): no plateau to see; LeakSanitizer checks leaks";
  if (numaaff_test::thread_sanitizer)
    GTEST_SKIP() << "TSan's allocator and its shadow and history memory grow with what ran, not with what is live; the plain build checks the plateau";
  if (!reset_peak_resident()) GTEST_SKIP() << "/proc/self/clear_refs is not writable: the peak cannot be reset";
  thread_pool pool(workers(2));
  constexpr std::size_t tiles = 64, per_round = 100000, rounds = 10;
  std::vector<std::array<double, 8>> data(tiles);
  std::size_t after_second = 0;
  std::atomic<std::size_t> ran{0};
  for (std::size_t r = 0; r < rounds; ++r) {
    gate submitted;
    task_group g(pool);
    g.run({inout(data)}, [&] { submitted.pass(); });
    for (std::size_t i = 1; i < per_round; ++i) {
      const std::size_t a = i % tiles, b = (i * 7 + 3) % tiles;
      g.run({in(data[a]), inout(data[b])}, [&, a, b] {
        data[b][0] += data[a][1];
        ran.fetch_add(1, std::memory_order_relaxed);
      });
    }
    submitted.open();
    g.wait();
    if (r == 1) after_second = peak_resident_kib();
  }
  EXPECT_EQ(ran.load(), (per_round - 1) * rounds);
  const std::size_t at_end = peak_resident_kib();
  EXPECT_GT(after_second, 0u);
  EXPECT_LE(at_end, after_second + 4 * 1024) << "peak resident KiB over rounds 1-2: " << after_second << ", over 1-10: " << at_end;
}

// The tracker erases what finished tasks leave: with random ranges over a large span it
// holds no segment once the tasks are done.
TEST(DataflowMemory, TheTrackerForgetsFinishedTasks) {
  thread_pool pool(workers(2));
  numaaff::detail::scheduler& s = numaaff::detail::scheduler_of(pool);
  numaaff::detail::flow_state flow(s, nullptr);
  std::vector<unsigned char> buf(1 << 16);
  std::mt19937 rng(7);
  std::atomic<int> ran{0};
  for (int i = 0; i < 20000; ++i) {
    numaaff::detail::flow_ranges r(2);
    const std::uintptr_t b = reinterpret_cast<std::uintptr_t>(buf.data()) + rng() % 60000;
    r.push(b, b + 1 + rng() % 5000, i % 3 == 0 ? numaaff::detail::dep_mode::write : numaaff::detail::dep_mode::read);
    flow.run(std::move(r), [&] { ran.fetch_add(1); });
  }
  pool.wait();
  EXPECT_EQ(ran.load(), 20000);
  EXPECT_EQ(flow.tracker().segments(), 0u);
}

}  // namespace
