// Fuzz target: random sequences of the C API's calls on up to 16 live blocks (alloc, free,
// move, place, arm, disarm, touch_now, where, reads and writes through armed memory), each
// checked against a model of what the block must hold: one fill byte per block. Any call may
// refuse (an errno value), none may crash, hang, lose a byte, or report counts that do not
// add up. Built with src/c_api.cpp itself, so the library is instrumented too.
#include <numaaff/numaaff.h>

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct block {
  unsigned char* p = nullptr;
  std::size_t bytes = 0;
  unsigned char fill = 0;
};

/// Input bytes, read in order; zeros once they run out.
struct reader {
  const std::uint8_t* data;
  std::size_t size, at = 0;
  bool more() const { return at < size; }
  unsigned byte() { return at < size ? data[at++] : 0u; }
  std::size_t number(std::size_t limit) { return limit == 0 ? 0 : (byte() << 8 | byte()) % limit; }
};

void check_block(const block& b) {
  for (std::size_t i = 0; i < b.bytes; i += 61)
    if (b.p[i] != b.fill) std::abort();
  if (b.bytes > 0 && b.p[b.bytes - 1] != b.fill) std::abort();
}

void check_result(const numaaff_move_result& r, std::size_t bytes) {
  if (r.moved + r.already_there + r.unpopulated + r.failed != r.total) std::abort();
  if (bytes > 0 && r.total == 0) std::abort();
}

int first_node() {
  int n = 0;
  size_t count = 0;
  return numaaff_nodes(&n, 1, &count) == 0 ? n : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int node = first_node();
  reader in{data, size};
  std::vector<block> live;
  for (int step = 0; step < 64 && in.more(); ++step) {
    const unsigned op = in.byte() % 10;
    block* b = live.empty() ? nullptr : &live[in.number(live.size())];
    switch (op) {
      case 0: {  // allocate: small, medium or large, by node, local or interleaved
        if (live.size() >= 16) break;
        static const std::size_t sizes[] = {1, 24, 100, 4096, 40000, 300000, 1 << 20};
        block n;
        n.bytes = sizes[in.byte() % 7] + in.number(512);
        const unsigned how = in.byte() % 3;
        n.p = static_cast<unsigned char*>(how == 0 ? numaaff_alloc_onnode(n.bytes, node)
                                          : how == 1 ? numaaff_alloc_local(n.bytes)
                                                     : numaaff_alloc_interleaved(n.bytes));
        if (n.p == nullptr) {
          if (errno != ENOMEM && errno != EINVAL) std::abort();
          break;
        }
        n.fill = static_cast<unsigned char>(in.byte());
        std::memset(n.p, n.fill, n.bytes);
        live.push_back(n);
        break;
      }
      case 1:  // free, after checking every byte survived
        if (b == nullptr) break;
        check_block(*b);
        numaaff_free(b->p, b->bytes);
        *b = live.back();
        live.pop_back();
        break;
      case 2: {  // move part of a block
        if (b == nullptr) break;
        const std::size_t off = in.number(b->bytes), len = in.number(b->bytes - off + 1);
        numaaff_move_result r;
        const int e = numaaff_move_to(b->p + off, len, node, &r);
        if (e == 0) check_result(r, len);
        break;
      }
      case 3: {  // place blocks, some kept
        if (b == nullptr) break;
        const std::size_t block_bytes = 1 + in.number(b->bytes);
        const std::size_t count = b->bytes / block_bytes + 1;
        std::vector<int> owners(count);
        for (int& o : owners) o = (in.byte() & 1) ? node : NUMAAFF_KEEP;
        numaaff_move_result r;
        const int e = numaaff_place_blocks(b->p, b->bytes, block_bytes, owners.data(), owners.size(), &r);
        if (e == 0) check_result(r, b->bytes);
        break;
      }
      case 4: {  // arm all or part of it: plainly, by blocks, or for owners
        if (b == nullptr) break;
        const std::size_t off = in.number(b->bytes), len = in.number(b->bytes - off + 1);
        const unsigned how = in.byte() % 3;
        int e = 0;
        if (how == 0) {
          e = numaaff_next_touch(b->p + off, len);
        } else if (how == 1) {
          e = numaaff_next_touch_blocks(b->p + off, len, 1 + in.number(1 << 16));
        } else {
          const std::size_t block_bytes = 1 + in.number(1 << 16), count = len / block_bytes + 1;
          std::vector<int> owners(count, node);
          e = numaaff_place_blocks_on_next_touch(b->p + off, len, block_bytes, owners.data(), owners.size());
        }
        // Numaaff's own blocks are ordinary read-write memory: only a full registry may refuse.
        if (e != 0 && e != ENOSPC && e != ENOMEM && e != EAGAIN) std::abort();
        break;
      }
      case 5:
        if (b != nullptr) (void)numaaff_disarm(b->p, b->bytes);
        break;
      case 6:
        if (b != nullptr && numaaff_touch_now(b->p, b->bytes) != 0) std::abort();
        break;
      case 7: {  // where: the counts of a raw query stay within the range
        if (b == nullptr) break;
        size_t on = 0, never = 0;
        if (numaaff_pages_on(b->p, b->bytes, node, &on) == 0 && numaaff_pages_unpopulated(b->p, b->bytes, &never) == 0) {
          const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
          const std::size_t pages = (reinterpret_cast<std::uintptr_t>(b->p) % ps + b->bytes + ps - 1) / ps;
          if (on + never > pages) std::abort();
        }
        break;
      }
      case 8:  // read through whatever is armed
        if (b != nullptr) check_block(*b);
        break;
      case 9:  // rewrite through whatever is armed
        if (b != nullptr) {
          b->fill = static_cast<unsigned char>(in.byte());
          std::memset(b->p, b->fill, b->bytes);
        }
        break;
    }
  }
  for (block& b : live) {
    check_block(b);
    numaaff_free(b.p, b.bytes);
  }
  return 0;
}
