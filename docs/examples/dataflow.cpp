// dataflow: tasks that say which bytes they read and write, and run in the order those bytes
// require. Per tile of an array: a producer writes it (out), two readers read it at the same
// time (in), an update rewrites it after both have read (inout), and every tile's sum is added
// to one total by commutative updates (any order, one at a time). A reader that straddles two
// tiles waits for both producers: overlap is by bytes, not by base address as in OpenMP's
// depend clause. The pool's own submit takes the same accesses and returns a future.
// Asserted on any machine: every task starts after the tasks it depends on have finished,
// commutative updates never run at once, each task runs on one of the pool's nodes, and the
// results are exact. On several nodes each task also runs on the node of most of its bytes.
// Prints "dataflow: ok" at the end.
#include <numaaff/numaaff.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace {

// Every check is something numaaff promises; a broken promise ends the program with status 1.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "dataflow: FAILED: %s\n", what);
    std::exit(1);
  }
}

// When a task started and finished, on one clock shared by all tasks.
struct span {
  long start = -1;
  long end = -1;
};

}  // namespace

int main() {
  using numaaff::commutative;
  using numaaff::elements;
  using numaaff::in;
  using numaaff::inout;
  using numaaff::out;

  numaaff::thread_pool pool;
  const std::size_t tiles = 16, tile = 4096;  // 32 KiB of doubles per tile
  std::vector<double> a(tiles * tile);
  std::vector<double> sum_a(tiles), sum_b(tiles), straddle(tiles - 1);
  double total = 0;
  std::vector<span> produce(tiles), read_a(tiles), read_b(tiles), update(tiles), across(tiles - 1);
  std::atomic<long> clock{0};
  std::atomic<int> in_total{0};
  std::atomic<bool> overlapped{false};
  std::atomic<int> off_pool{0};
  const std::vector<numaaff::node_id>& nodes = pool.nodes();
  // Each task records when it ran, and whether it ran on one of the pool's nodes.
  auto timed = [&](span& s, auto&& body) {
    s.start = clock.fetch_add(1);
    if (std::find(nodes.begin(), nodes.end(), numaaff::this_homenode()) == nodes.end()) off_pool.fetch_add(1);
    body();
    s.end = clock.fetch_add(1);
  };

  //! [tasks]
  numaaff::task_group g(pool);
  for (std::size_t k = 0; k < tiles; ++k) {  // a producer writes tile k
    double* t = a.data() + k * tile;
    g.run({out(t, elements(tile))}, [&, t, k] {
      timed(produce[k], [&] { std::iota(t, t + tile, static_cast<double>(k * tile)); });
    });
  }
  for (std::size_t k = 0; k + 1 < tiles; ++k) {  // half of tile k and half of tile k + 1
    const double* half = a.data() + k * tile + tile / 2;
    g.run({in(half, elements(tile)), out(&straddle[k], elements(1))}, [&, half, k] {
      timed(across[k], [&] { straddle[k] = half[0] + half[tile - 1]; });
    });
  }
  for (std::size_t k = 0; k < tiles; ++k) {
    double* t = a.data() + k * tile;
    g.run({in(t, elements(tile)), out(&sum_a[k], elements(1))}, [&, t, k] {  // two readers:
      timed(read_a[k], [&] { sum_a[k] = std::accumulate(t, t + tile, 0.0); });  // they may run together
    });
    g.run({in(t, elements(tile)), out(&sum_b[k], elements(1))}, [&, t, k] {
      timed(read_b[k], [&] { sum_b[k] = std::accumulate(t, t + tile, 0.0); });
    });
    g.run({inout(t, elements(tile))}, [&, t, k] {  // after every reader of its bytes
      timed(update[k], [&] { std::transform(t, t + tile, t, [](double x) { return -x; }); });
    });
    g.run({in(&sum_a[k], elements(1)), commutative(&total, sizeof total)}, [&, k] {  // one at a time
      if (in_total.fetch_add(1) != 0) overlapped = true;
      total += sum_a[k];
      in_total.fetch_sub(1);
    });
  }
  g.wait();
  //! [tasks]

  for (std::size_t k = 0; k < tiles; ++k) {
    require(produce[k].end < read_a[k].start && produce[k].end < read_b[k].start, "readers start after the producer");
    require(read_a[k].end < update[k].start && read_b[k].end < update[k].start, "the update waits for both readers");
    const double first = static_cast<double>(k * tile), last = first + static_cast<double>(tile - 1);
    require(sum_a[k] == (first + last) * static_cast<double>(tile) / 2 && sum_b[k] == sum_a[k],
            "each reader saw the producer's tile");
  }
  for (std::size_t k = 0; k + 1 < tiles; ++k) {
    require(produce[k].end < across[k].start && produce[k + 1].end < across[k].start,
            "a read across two tiles waits for both producers");
    require(across[k].end < update[k].start && across[k].end < update[k + 1].start,
            "and both tiles' updates wait for it");
    require(straddle[k] == static_cast<double>(2 * (k + 1) * tile - 1), "the read across two tiles saw both");
  }
  const double n = static_cast<double>(tiles * tile);
  require(total == n * (n - 1) / 2, "the commutative updates added every tile once");
  require(!overlapped.load(), "commutative updates never ran at once");
  require(off_pool.load() == 0, "every task ran on one of the pool's nodes");

  //! [submit]
  // The same rules among the pool's own submits: the reader waits for the writer.
  std::vector<double> v(1 << 16);
  auto written = pool.submit({out(v)}, [&v] { std::fill(v.begin(), v.end(), 0.5); });
  auto sum = pool.submit({in(v)}, [&v] { return std::accumulate(v.begin(), v.end(), 0.0); });
  //! [submit]
  written.get();
  require(sum.get() == 0.5 * static_cast<double>(v.size()), "the reader ran after the writer");

  std::puts("dataflow: ok");
  return 0;
}
