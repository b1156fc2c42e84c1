// The dependence tracker alone, driven by hand: which task a registration waits for and which
// a release frees, in release orders a pool only produces by chance (readers leaving from the
// middle of their list, lists that grow and move while their tasks wait, a task naming
// overlapping ranges, trackers made one after another on a thread).
#include <numaaff/task_group.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace numaaff::detail;

// A task for the tracker: its ranges and its node.
struct hand_task {
  std::vector<dep_range> ranges;
  dep_node node;
  explicit hand_task(std::vector<dep_range> r) : ranges(std::move(r)) {
    node.accesses = ranges.data();
    node.count = ranges.size();
  }
};

struct hand_tracker {
  // The tasks outlive the tracker: it may still hold finished ones when it goes.
  std::vector<std::unique_ptr<hand_task>> tasks;
  dependence_tracker tracker;
  std::vector<const dep_node*> ready;

  hand_task& add(std::vector<dep_range> r, bool expect_ready) {
    tasks.push_back(std::make_unique<hand_task>(std::move(r)));
    hand_task& t = *tasks.back();
    EXPECT_EQ(tracker.add(t.node), expect_ready) << "task " << tasks.size() - 1;
    return t;
  }
  /// Releases t; returns the nodes it made ready.
  std::vector<const dep_node*> release(hand_task& t) {
    std::vector<const dep_node*> r;
    tracker.release(t.node, false, [&](dep_node* n) { r.push_back(n); });
    return r;
  }
};

dep_range range(std::uintptr_t b, std::uintptr_t e, dep_mode m) { return dep_range{b, e, m}; }

// Many readers of one tile, released in an order that takes them from the middle of their
// list (the list grows and moves to larger arrays while they wait): the writer after them
// becomes ready with the last, not before, and the tile's segment goes when the writer does.
TEST(DependenceTracker, ReadersLeavingInAnyOrderFreeTheNextWriterOnlyAtTheLast) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    hand_tracker h;
    hand_task& w0 = h.add({range(4096, 4160, dep_mode::write)}, true);
    std::vector<hand_task*> readers;
    for (int i = 0; i < 37; ++i) readers.push_back(&h.add({range(4096, 4160, dep_mode::read)}, false));
    hand_task& w1 = h.add({range(4096, 4160, dep_mode::write)}, false);
    ASSERT_EQ(h.release(w0).size(), readers.size()) << "the writer frees every reader at once";
    std::mt19937 rng(seed);
    std::shuffle(readers.begin(), readers.end(), rng);
    for (std::size_t i = 0; i < readers.size(); ++i) {
      const auto freed = h.release(*readers[i]);
      if (i + 1 < readers.size()) {
        ASSERT_TRUE(freed.empty()) << "seed " << seed << ": the writer ran with " << readers.size() - i - 1
                                   << " readers still running";
      } else {
        ASSERT_EQ(freed, std::vector<const dep_node*>{&w1.node}) << "seed " << seed;
      }
    }
    EXPECT_EQ(h.tracker.segments(), 1u);
    EXPECT_TRUE(h.release(w1).empty());
    EXPECT_EQ(h.tracker.segments(), 0u) << "a finished tile stays in the tracker";
  }
}

// Readers join while others leave from the middle, the list moving to its front between them
// (its slots must stay each task's own): a writer registered at the end waits for exactly the
// readers still running.
TEST(DependenceTracker, ReadersJoiningAndLeavingKeepTheirPlaces) {
  hand_tracker h;
  std::vector<hand_task*> live;
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    live.push_back(&h.add({range(100, 200, dep_mode::read)}, true));
    if (live.size() > 3 && rng() % 2 == 0) {
      const std::size_t k = rng() % live.size();
      ASSERT_TRUE(h.release(*live[k]).empty());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  hand_task& w = h.add({range(150, 160, dep_mode::write)}, false);
  while (!live.empty()) {
    const std::size_t k = rng() % live.size();
    const auto freed = h.release(*live[k]);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    if (live.empty()) {
      ASSERT_EQ(freed, std::vector<const dep_node*>{&w.node});
    } else {
      ASSERT_TRUE(freed.empty()) << live.size() << " readers of its bytes still ran";
    }
  }
  h.release(w);
  EXPECT_EQ(h.tracker.segments(), 0u);
}

// A task whose own ranges overlap (a read of [0, 100) and a write of [50, 150)): leaving one
// range may erase a segment the other began in; the next reader of [60, 70) waits for it, and
// the tracker is empty afterwards.
TEST(DependenceTracker, ATaskWithOverlappingRangesOrdersAndLeavesCleanly) {
  hand_tracker h;
  hand_task& a = h.add({range(1000, 1100, dep_mode::read), range(1050, 1150, dep_mode::write)}, true);
  hand_task& b = h.add({range(1060, 1070, dep_mode::read)}, false);
  hand_task& c = h.add({range(1000, 1010, dep_mode::write)}, false);
  auto freed = h.release(a);
  std::sort(freed.begin(), freed.end());
  std::vector<const dep_node*> want{&b.node, &c.node};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(freed, want);
  h.release(b);
  h.release(c);
  EXPECT_EQ(h.tracker.segments(), 0u);
}

// A range that covers the ends of two tiles and the gap between them, and tiles cut by later
// ranges: each later task waits for exactly the earlier tasks that share a byte with it.
TEST(DependenceTracker, PartialOverlapsAcrossSegmentsWaitForTheRightTasks) {
  hand_tracker h;
  hand_task& t0 = h.add({range(0, 100, dep_mode::write)}, true);
  hand_task& t1 = h.add({range(200, 300, dep_mode::write)}, true);
  hand_task& big = h.add({range(50, 250, dep_mode::read)}, false);  // both tiles' ends and the gap
  hand_task& mid = h.add({range(120, 180, dep_mode::write)}, false);  // only after `big`
  hand_task& head = h.add({range(0, 10, dep_mode::read)}, false);     // only after t0
  EXPECT_EQ(h.release(t1), std::vector<const dep_node*>{});
  auto freed = h.release(t0);
  std::sort(freed.begin(), freed.end());
  std::vector<const dep_node*> want{&big.node, &head.node};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(freed, want);
  EXPECT_EQ(h.release(big), std::vector<const dep_node*>{&mid.node});
  h.release(head);
  h.release(mid);
  EXPECT_EQ(h.tracker.segments(), 0u);
}

// Trackers made and ended one after another on a thread (a group per phase) reuse the map's
// nodes, and one ended with live segments' nodes given back leaves nothing behind (ASan).
TEST(DependenceTracker, TrackersOneAfterAnotherStartFromTheLastOnesNodes) {
  for (int round = 0; round < 50; ++round) {
    hand_tracker h;
    std::vector<hand_task*> ts;
    for (std::uintptr_t i = 0; i < 64; ++i)
      ts.push_back(&h.add({range(64 * i + 64, 64 * i + 128, dep_mode::write)}, true));
    EXPECT_EQ(h.tracker.segments(), 64u);
    for (hand_task* t : ts) h.release(*t);
    EXPECT_EQ(h.tracker.segments(), 0u);
  }
}

// One reader that lives long and a stream of short readers of the same bytes, two at a time,
// the older leaving first: every removal leaves a hole behind the long reader. The list stays
// within twice the tasks it holds, and each leaves exactly once.
TEST(DependenceTracker, HolesBehindALongReaderDoNotGrowTheList) {
  std::vector<dep_node> nodes(10002);
  task_list list;
  std::vector<std::uint32_t> slot(nodes.size());
  list.make_room(1);
  slot[0] = list.push_back(&nodes[0]);  // the long reader
  std::size_t oldest = 1;
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    list.make_room(1);
    slot[i] = list.push_back(&nodes[i]);
    if (i - oldest == 2) {  // three short readers in: the oldest leaves
      list.remove(&nodes[oldest], slot[oldest]);
      ++oldest;
    }
    ASSERT_LE(list.size(), 2 * (1 + i + 1 - oldest) + 2) << "after " << i << " readers";
  }
  std::size_t left = 0;
  list.each([&](dep_node*) { ++left; });
  EXPECT_EQ(left, 1 + nodes.size() - oldest);
  for (std::size_t i = oldest; i < nodes.size(); ++i) list.remove(&nodes[i], slot[i]);
  list.remove(&nodes[0], slot[0]);
  EXPECT_TRUE(list.empty());
}

// A range with no bytes is no access (the public forms drop it; a hand-made task may not).
TEST(DependenceTracker, ARangeWithoutBytesIsNoAccess) {
  hand_tracker h;
  hand_task& w = h.add({range(500, 600, dep_mode::write)}, true);
  hand_task& e = h.add({range(550, 550, dep_mode::write)}, true);
  EXPECT_EQ(h.tracker.segments(), 1u);
  h.release(e);
  h.release(w);
  EXPECT_EQ(h.tracker.segments(), 0u);
}

// A finishing task does not take the stack of finished tasks at every release (the lock's
// line would cross CPUs at every task), but a tracker nobody registers with any more still
// forgets them as they finish: all but fewer than a batch of them (64 pushes), without a
// registration, segments() or the destructor.
TEST(DependenceTracker, FinishedTasksAreForgottenWithoutALaterRegistration) {
  struct counted_task : dep_node {
    dep_range r;
    bool forgotten = false;
  };
  constexpr std::size_t tasks_count = 1000;
  std::vector<counted_task> tasks(tasks_count);
  dependence_tracker tracker([](dep_node& n) noexcept { static_cast<counted_task&>(n).forgotten = true; });
  for (std::size_t i = 0; i < tasks_count; ++i) {
    tasks[i].r = range(64 * i, 64 * i + 64, dep_mode::write);
    tasks[i].accesses = &tasks[i].r;
    tasks[i].count = 1;
    ASSERT_TRUE(tracker.add(tasks[i]));
  }
  for (counted_task& t : tasks) tracker.release(t, false, [](dep_node*) { ADD_FAILURE() << "no task waits"; });
  std::size_t left = 0;
  for (const counted_task& t : tasks) left += t.forgotten ? 0 : 1;
  EXPECT_LT(left, 64u) << "finished tasks wait for a registration to be forgotten";
  EXPECT_EQ(tracker.segments(), 0u);
}

// Tasks released on two threads while a third registers more: a release does not wait for the
// registration, so the tracker sees tasks that finished but have not left their segments yet
// (a later reader must not wait for them, a later writer takes them out of the lists, their
// segments must stay until they leave). Each task reads, writes or adds to cells of a shared
// array (an add is commutative: a plain load and store, so two overlapping adds at once lose
// one): every read must see what the sequential program (registration order) gives, each task
// is forgotten once, only after its release, and by the time segments() has taken the
// finished ones.
TEST(DependenceTracker, ReleasesRacingRegistrationsKeepTheOrderAndForgetEachTaskOnce) {
  // four programs: a wrong interleaving shows in some of them, not in every run of one
  for (unsigned seed = 7; seed < 11; ++seed) {
    constexpr int cells_count = 96, tasks_count = 20000;
    struct conc_task : dep_node {
      dep_range ranges[2];
      int id = 0;
      std::vector<long> expected;  // per cell of its read ranges, the sequential program's value
      std::atomic<bool> released{false};
      std::atomic<int> forgotten{0};
      std::atomic<int> forgotten_early{0};
    };
    constexpr long added = 1L << 32;  // what an add adds; a write stores its task's id
    std::vector<std::atomic<long>> cells(cells_count);
    std::vector<std::unique_ptr<conc_task>> tasks;
    std::mt19937 rng(seed);
    std::vector<long> sequential(cells_count, -1);
    const auto at = [&](int cell) { return reinterpret_cast<std::uintptr_t>(&cells[static_cast<std::size_t>(cell)]); };
    for (int i = 0; i < tasks_count; ++i) {
      auto t = std::make_unique<conc_task>();
      t->id = i;
      for (int k = 0; k < 2; ++k) {
        const int first = static_cast<int>(rng() % cells_count);
        const int n = 1 + static_cast<int>(rng() % 6);
        const int last = std::min(cells_count, first + n);
        const auto pick = rng() % 6;
        const dep_mode mode = pick < 2 ? dep_mode::write : pick == 2 ? dep_mode::commute : dep_mode::read;
        t->ranges[k] = dep_range{at(first), at(last), mode};
      }
      // the sequential program: reads see the writes before, then this task writes its id
      for (const dep_range& r : t->ranges)
        if (r.mode == dep_mode::read)
          for (std::uintptr_t c = r.begin; c < r.end; c += sizeof(std::atomic<long>))
            t->expected.push_back(sequential[(c - at(0)) / sizeof(std::atomic<long>)]);
      for (const dep_range& r : t->ranges)
        for (std::uintptr_t c = r.begin; c < r.end; c += sizeof(std::atomic<long>)) {
          long& v = sequential[(c - at(0)) / sizeof(std::atomic<long>)];
          if (r.mode == dep_mode::write) v = i;
          if (r.mode == dep_mode::commute) v += added;
        }
      t->accesses = t->ranges;
      t->count = 2;
      t->commutative = t->ranges[0].mode == dep_mode::commute || t->ranges[1].mode == dep_mode::commute;
      tasks.push_back(std::move(t));
    }
    for (auto& c : cells) c.store(-1);
    const dependence_tracker::forget_hook forget = [](dep_node& n) noexcept {
      auto& task = static_cast<conc_task&>(n);
      if (!task.released.load()) task.forgotten_early.fetch_add(1);
      task.forgotten.fetch_add(1);
    };

    std::vector<std::string> wrong;
    std::mutex m;
    std::condition_variable cv;
    std::vector<dep_node*> ready;
    int finished = 0;
    bool stuck = false;
    {
      dependence_tracker tracker(forget);
      auto run = [&] {
        for (;;) {
          dep_node* n = nullptr;
          {
            std::unique_lock<std::mutex> lock(m);
            // a task that waits for a finished one never becomes ready: stop, not hang
            if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return !ready.empty() || finished == tasks_count || stuck; }))
              stuck = true;
            if (ready.empty() || stuck) {
              cv.notify_all();
              return;
            }
            n = ready.back();
            ready.pop_back();
          }
          auto& t = static_cast<conc_task&>(*n);
          if (t.commutative && !tracker.acquire(t)) continue;  // parked: a release passes it on
          std::vector<std::string> mine;
          std::size_t e = 0;
          for (const dep_range& r : t.ranges)
            if (r.mode == dep_mode::read)
              for (std::uintptr_t c = r.begin; c < r.end; c += sizeof(std::atomic<long>), ++e) {
                const long seen = reinterpret_cast<std::atomic<long>*>(c)->load();
                if (seen != t.expected[e])
                  mine.push_back("task " + std::to_string(t.id) + " read " + std::to_string(seen) + ", not " +
                                 std::to_string(t.expected[e]));
              }
          for (const dep_range& r : t.ranges)
            for (std::uintptr_t c = r.begin; c < r.end; c += sizeof(std::atomic<long>)) {
              auto& cell = *reinterpret_cast<std::atomic<long>*>(c);
              if (r.mode == dep_mode::write) cell.store(t.id);
              if (r.mode == dep_mode::commute) cell.store(cell.load() + added);
            }
          std::vector<dep_node*> now_ready;
          t.released.store(true);
          tracker.release(t, false, [&](dep_node* s) { now_ready.push_back(s); });
          std::lock_guard<std::mutex> lock(m);
          wrong.insert(wrong.end(), mine.begin(), mine.end());
          ready.insert(ready.end(), now_ready.begin(), now_ready.end());
          ++finished;
          cv.notify_all();
        }
      };
      std::thread a(run), b(run);
      for (auto& t : tasks) {
        if (tracker.add(*t)) {
          std::lock_guard<std::mutex> lock(m);
          ready.push_back(t.get());
          cv.notify_one();
        }
      }
      a.join();
      b.join();
      ASSERT_FALSE(stuck) << finished << " of " << tasks_count << " tasks ran: the others wait for nothing that is left";
      EXPECT_EQ(tracker.segments(), 0u);
      int left = 0;
      for (auto& t : tasks) left += t->forgotten.load() == 0;
      EXPECT_EQ(left, 0) << "tasks not forgotten once segments() had taken the finished ones";
    }
    EXPECT_TRUE(wrong.empty()) << wrong.front();
    int once = 0, early = 0;
    for (auto& t : tasks) {
      once += t->forgotten.load() == 1;
      early += t->forgotten_early.load();
    }
    EXPECT_EQ(once, tasks_count) << "tasks not forgotten exactly once";
    EXPECT_EQ(early, 0) << "tasks forgotten before their release";
  }
}

}  // namespace
