// A randomized harness for next-touch: long random sequences of arm / disarm / read / write /
// free-and-reallocate / fork over a few buffers, checked against a plain model of what every
// page must contain. Any lost write, stale read, crash or hang fails it. Seeds are fixed, so a
// failure reproduces; NUMAAFF_RANDOM_SEEDS=N runs more of them.
#include <numaaff/allocator.hpp>
#include <numaaff/next_touch.hpp>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
constexpr std::size_t buffer_pages = 96;

struct buffer {
  char* p = nullptr;
  std::vector<std::uint8_t> model;  // the byte every page must hold at offset 0 and at the end
};

void allocate(buffer& b, int node) {
  b.p = static_cast<char*>(numaaff::allocate_on_node(buffer_pages * ps, node));
  b.model.assign(buffer_pages, 0);
  for (std::size_t k = 0; k < buffer_pages; ++k) {
    b.p[k * ps] = 0;
    b.p[k * ps + ps - 1] = 0;
  }
}

bool matches(const buffer& b) {
  for (std::size_t k = 0; k < buffer_pages; ++k) {
    if (static_cast<std::uint8_t>(b.p[k * ps]) != b.model[k] || static_cast<std::uint8_t>(b.p[k * ps + ps - 1]) != b.model[k])
      return false;
  }
  return true;
}

void run_sequence(unsigned seed, int steps) {
  std::mt19937 rng(seed);
  const int node = numaaff::current_node();
  std::vector<buffer> buffers(3);
  for (buffer& b : buffers) allocate(b, node);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int step = 0; step < steps; ++step) {
    buffer& b = buffers[pick(buffers.size())];
    const std::size_t first = pick(buffer_pages);
    const std::size_t count = 1 + pick(buffer_pages - first);
    char* at = b.p + first * ps + pick(ps);  // unaligned starts are rounded outward
    switch (pick(10)) {
      case 0:
      case 1: {
        numaaff::next_touch_options o;
        o.chunk_bytes = (1 + pick(8)) * ps;
        o.adaptive = pick(2) == 0;
        numaaff::affinity_on_next_touch(at, (count - 1) * ps + 1, o);
        break;
      }
      case 2:
        numaaff::disarm(at, (count - 1) * ps + 1);
        break;
      case 3:
      case 4:
      case 5: {  // write a run of pages
        const auto v = static_cast<std::uint8_t>(rng());
        for (std::size_t k = first; k < first + count; ++k) {
          b.p[k * ps] = static_cast<char>(v);
          b.p[k * ps + ps - 1] = static_cast<char>(v);
          b.model[k] = v;
        }
        break;
      }
      case 6:
      case 7:  // read a run of pages
        for (std::size_t k = first; k < first + count; ++k)
          ASSERT_EQ(static_cast<std::uint8_t>(b.p[k * ps]), b.model[k]) << "seed " << seed << " step " << step;
        break;
      case 8:  // free (disarms) and allocate again
        numaaff::deallocate(b.p, buffer_pages * ps);
        allocate(b, node);
        break;
      case 9: {  // fork: the child checks everything (its own first touches), the parent goes on
        const pid_t child = fork();
        ASSERT_GE(child, 0);
        if (child == 0) {
          for (const buffer& c : buffers)
            if (!matches(c)) _exit(1);
          _exit(0);
        }
        int status = 0;
        ASSERT_EQ(waitpid(child, &status, 0), child);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "seed " << seed << " step " << step;
        break;
      }
    }
  }
  for (buffer& b : buffers) {
    ASSERT_TRUE(matches(b)) << "seed " << seed;
    numaaff::deallocate(b.p, buffer_pages * ps);
  }
}

TEST(NextTouchRandom, ArmDisarmTouchFreeForkSequencesKeepEveryByte) {
  const char* env = std::getenv("NUMAAFF_RANDOM_SEEDS");
  const unsigned seeds = env != nullptr ? static_cast<unsigned>(std::atoi(env)) : 8u;
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    run_sequence(seed, 400);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
