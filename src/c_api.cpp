// The C API (numaaff.h) over the header-only library. Each entry point catches everything:
// a caller mistake becomes EINVAL, a std::system_error its errno, running out of memory
// ENOMEM; nothing else can escape into C (or Fortran) frames.
#include <numaaff/numaaff.h>

#include <numaaff/allocator.hpp>
#include <numaaff/counters.hpp>
#include <numaaff/homenode.hpp>
#include <numaaff/kind.hpp>
#include <numaaff/memory.hpp>
#include <numaaff/next_touch.hpp>
#include <numaaff/partition.hpp>
#include <numaaff/system_report.hpp>
#include <numaaff/topology.hpp>

#include "c_errors.hpp"

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace {

using numaaff_c::allocated;
using numaaff_c::from_code;
using numaaff_c::guarded;


bool valid(int node) noexcept {
  bool ok = false;
  return guarded([&] { ok = numaaff::detail::valid_node(node); }) == 0 && ok;
}

/// promote or demote, with the move_result copied out.
template <class Move>
int move_tier(Move&& move, numaaff_move_result* result) noexcept {
  if (result != nullptr) *result = numaaff_move_result{};
  numaaff::move_result r;
  const int e = guarded([&] { r = move(); });
  if (result != nullptr)
    *result = numaaff_move_result{r.total, r.moved, r.already_there, r.unpopulated, r.failed, r.carried, r.first_error};
  return e;
}

int copy_out(const std::vector<int>& values, int* out, std::size_t capacity, std::size_t* count) noexcept {
  if (count == nullptr || (out == nullptr && capacity != 0)) return EINVAL;
  *count = values.size();
  for (std::size_t i = 0; i < values.size() && i < capacity; ++i) out[i] = values[i];
  return 0;
}


/// The owners of every block, copied once their count is known to cover the range (0), or an errno.
int copy_owners(std::size_t bytes, std::size_t block_bytes, const int* owners, std::size_t owner_count,
                std::vector<int>& v) noexcept {
  if (block_bytes == 0 || (owners == nullptr && owner_count != 0)) return EINVAL;
  const std::size_t blocks = bytes / block_bytes + (bytes % block_bytes != 0 ? 1 : 0);
  if (owner_count < blocks) return EINVAL;
  return guarded([&] { v.assign(owners, owners + blocks); });
}


/// The options for a NUMAAFF_HUGE_* value; false for another.
bool huge_options(int huge_pages, numaaff::alloc_options& o) noexcept {
  static_assert(NUMAAFF_HUGE_PER_BLOCK == static_cast<int>(numaaff::huge_page_mode::per_block) &&
                    NUMAAFF_HUGE_NEVER == static_cast<int>(numaaff::huge_page_mode::never) &&
                    NUMAAFF_HUGE_ALWAYS == static_cast<int>(numaaff::huge_page_mode::always),
                "numaaff.h's huge-page values are huge_page_mode's");
  if (huge_pages < NUMAAFF_HUGE_PER_BLOCK || huge_pages > NUMAAFF_HUGE_ALWAYS) return false;
  o.huge_pages = static_cast<numaaff::huge_page_mode>(huge_pages);
  return true;
}


constexpr unsigned kind_pages_mask = 0xf0u;

/// The C++ kind of a C one; false for a kind no call of this API makes.
bool to_kind(const numaaff_kind& c, numaaff::kind& k) noexcept {
  const unsigned pages = c.options & kind_pages_mask;
  // One page choice at most: each is a bit of its own, so two of them ORed are refused.
  if ((c.options & ~(NUMAAFF_KIND_PREFERRED | kind_pages_mask)) != 0 || (pages & (pages - 1)) != 0) return false;
  switch (c.target) {
    case NUMAAFF_KIND_TARGET_NODE:
      if (!valid(c.node)) return false;
      if (guarded([&] { k = numaaff::kind::on_node(c.node); }) != 0) return false;
      break;
    case NUMAAFF_KIND_TARGET_LOCAL: k = numaaff::kind::local(); break;
    case NUMAAFF_KIND_TARGET_INTERLEAVE: k = numaaff::kind::interleave(); break;
    case NUMAAFF_KIND_TARGET_FASTEST: k = numaaff::kind::fastest(); break;
    case NUMAAFF_KIND_TARGET_CAPACITY: k = numaaff::kind::capacity(); break;
    default: return false;
  }
  if (c.target != NUMAAFF_KIND_TARGET_NODE && c.node != -1) return false;
  if ((c.options & NUMAAFF_KIND_PREFERRED) != 0) k = k.preferred();
  if (pages == NUMAAFF_KIND_PAGES_NO_HUGE) k = k.with_pages(numaaff::huge_page_mode::never);
  if (pages == NUMAAFF_KIND_PAGES_THP) k = k.with_pages(numaaff::huge_page_mode::always);
  if (pages == NUMAAFF_KIND_PAGES_HUGE_2MB) k = k.with_pages(numaaff::huge_page_mode::reserved_2mib);
  if (pages == NUMAAFF_KIND_PAGES_HUGE_1GB) k = k.with_pages(numaaff::huge_page_mode::reserved_1gib);
  return true;
}

/// A block of C kind `c`: the pointer, or NULL with errno.
void* kind_block(const numaaff_kind& c, std::size_t bytes, std::size_t align) noexcept {
  // The fast path, as numaaff::allocate's: a node or local kind with no page choice, from the
  // thread's cache. A node kind's node is checked first, as the slow path does: bins may hold
  // blocks of other nodes (a tier's, under a synthetic topology).
  const bool node_kind = c.target == NUMAAFF_KIND_TARGET_NODE && valid(c.node);
  const bool local_kind = c.target == NUMAAFF_KIND_TARGET_LOCAL && c.node == -1;
  if ((c.options & ~unsigned{NUMAAFF_KIND_PREFERRED}) == 0 && (node_kind || local_kind)) {
    void* p = numaaff::detail::cached_block_for(node_kind ? numaaff::kind::target::node : numaaff::kind::target::local,
                                                c.node, (c.options & NUMAAFF_KIND_PREFERRED) == 0, bytes, align);
    if (p != nullptr) return p;
  }
  numaaff::kind k = numaaff::kind::local();
  if (!to_kind(c, k)) return allocated(EINVAL, nullptr);
  std::error_code ec;
  void* p = numaaff::allocate(k, bytes, align, ec);
  return allocated(from_code(ec), p);
}

}  // namespace

extern "C" {

int numaaff_node_count(void) noexcept {
  int n = 1;
  if (guarded([&] { n = static_cast<int>(numaaff::topology::system().node_count()); }) != 0) return 1;
  return n;
}

int numaaff_nodes(int* nodes, size_t capacity, size_t* count) noexcept {
  std::vector<int> v;
  const int e = guarded([&] { v = numaaff::topology::system().nodes(); });
  return e != 0 ? e : copy_out(v, nodes, capacity, count);
}

int numaaff_cpu_nodes(int* nodes, size_t capacity, size_t* count) noexcept {
  std::vector<int> v;
  const int e = guarded([&] { v = numaaff::topology::system().cpu_nodes(); });
  return e != 0 ? e : copy_out(v, nodes, capacity, count);
}

int numaaff_current_node(void) noexcept {
  std::error_code ec;
  const int n = numaaff::current_node(ec);
  if (ec) {
    errno = from_code(ec);
    return -1;
  }
  return n;
}

int numaaff_distance(int from, int to, int* distance) noexcept {
  if (distance == nullptr) return EINVAL;
  return guarded([&] { *distance = numaaff::topology::system().distance(from, to); });
}

int numaaff_cpus_of(int node, int* cpus, size_t capacity, size_t* count) noexcept {
  std::vector<int> v;
  const int e = guarded([&] { v = numaaff::topology::system().cpus_of(node); });
  return e != 0 ? e : copy_out(v, cpus, capacity, count);
}

int numaaff_pin_thread(int node) noexcept {
  std::error_code ec;
  numaaff::pin_this_thread(node, ec);
  return from_code(ec);
}

int numaaff_set_homenode(int node) noexcept {
  return guarded([&] { numaaff::set_homenode(node); });
}

int numaaff_homenode(void) noexcept {
  int n = -1;
  if (const int e = guarded([&] { n = numaaff::this_homenode(); }); e != 0) errno = e;
  return n;
}

int numaaff_static_thread(size_t index, size_t count, int team_size) noexcept {
  if (team_size <= 0 || index >= count) return -1;
  return static_cast<int>(numaaff::static_part_of(count, static_cast<std::size_t>(team_size), index));
}

int numaaff_static_node(size_t index, size_t count, int team_size) noexcept {
  const int thread = numaaff_static_thread(index, count, team_size);
  return thread < 0 ? -1 : numaaff_team_node(thread, team_size);
}

int numaaff_team_node(int thread, int team_size) noexcept {
  if (team_size <= 0 || thread < 0 || thread >= team_size) return -1;
  int node = -1;
  guarded([&] {
    std::vector<int> slots;  // the node of each usable CPU, in node order
    for (numaaff::node_id n : numaaff::detail::kernel_nodes())
      for (std::size_t k = numaaff::detail::usable_cpus_of(n).size(); k > 0; --k) slots.push_back(n);
    if (slots.empty()) return;
    node = slots[numaaff::detail::team_slot(static_cast<std::size_t>(thread), static_cast<std::size_t>(team_size),
                                            slots.size())];
  });
  return node;
}

void* numaaff_alloc_onnode(size_t bytes, int node) noexcept {
  std::error_code ec;
  void* p = numaaff::allocate_on_node(bytes, node, numaaff::alloc_options{}, ec);
  return allocated(from_code(ec), p);
}

void* numaaff_alloc_local(size_t bytes) noexcept {
  void* p = nullptr;
  const int e = guarded([&] {
    p = numaaff::detail::allocate_or_throw(bytes, alignof(std::max_align_t), numaaff::detail::local_node(),
                                           numaaff::detail::placement_of(numaaff::alloc_options{}, numaaff::detail::heap_kind::local));
  });
  return allocated(e, p);
}

void* numaaff_alloc_interleaved(size_t bytes) noexcept {
  void* p = nullptr;
  const int e = guarded([&] { p = numaaff::allocate_interleaved(bytes); });
  return allocated(e, p);
}

void* numaaff_alloc_onnode_huge(size_t bytes, int node, int huge_pages) noexcept {
  numaaff::alloc_options o;
  if (!huge_options(huge_pages, o)) return allocated(EINVAL, nullptr);
  std::error_code ec;
  void* p = numaaff::allocate_on_node(bytes, node, o, ec);
  return allocated(from_code(ec), p);
}

void* numaaff_alloc_local_huge(size_t bytes, int huge_pages) noexcept {
  numaaff::alloc_options o;
  if (!huge_options(huge_pages, o)) return allocated(EINVAL, nullptr);
  void* p = nullptr;
  const int e = guarded([&] {
    p = numaaff::detail::allocate_or_throw(bytes, alignof(std::max_align_t), numaaff::detail::local_node(),
                                           numaaff::detail::placement_of(o, numaaff::detail::heap_kind::local));
  });
  return allocated(e, p);
}

void numaaff_free(void* p, size_t bytes) noexcept { numaaff::deallocate(p, bytes); }

const numaaff_kind NUMAAFF_KIND_LOCAL = {NUMAAFF_KIND_TARGET_LOCAL, -1, 0};
const numaaff_kind NUMAAFF_KIND_INTERLEAVE = {NUMAAFF_KIND_TARGET_INTERLEAVE, -1, 0};
const numaaff_kind NUMAAFF_KIND_FASTEST = {NUMAAFF_KIND_TARGET_FASTEST, -1, 0};
const numaaff_kind NUMAAFF_KIND_CAPACITY = {NUMAAFF_KIND_TARGET_CAPACITY, -1, 0};

numaaff_kind numaaff_kind_onnode(int node) noexcept { return numaaff_kind{NUMAAFF_KIND_TARGET_NODE, node, 0}; }

int numaaff_kind_with(numaaff_kind base, unsigned options, numaaff_kind* out) noexcept {
  numaaff::kind k = numaaff::kind::local();
  if (out == nullptr || !to_kind(base, k)) return EINVAL;
  numaaff_kind made = base;
  made.options = options;
  if (!to_kind(made, k)) return EINVAL;
  *out = made;
  return 0;
}

int numaaff_kind_equal(numaaff_kind a, numaaff_kind b) noexcept {
  return a.target == b.target && a.node == b.node && a.options == b.options ? 1 : 0;
}

void* numaaff_kind_malloc(numaaff_kind k, size_t bytes) noexcept { return kind_block(k, bytes, alignof(std::max_align_t)); }

void* numaaff_kind_calloc(numaaff_kind k, size_t count, size_t bytes) noexcept {
  if (bytes != 0 && count > static_cast<std::size_t>(-1) / bytes) return allocated(ENOMEM, nullptr);
  void* p = kind_block(k, count * bytes, alignof(std::max_align_t));
  numaaff::detail::clear_fresh_block(p, count * bytes);
  return p;
}

void* numaaff_kind_realloc(numaaff_kind k, void* p, size_t bytes) noexcept {
  numaaff::kind kk = numaaff::kind::local();
  if (!to_kind(k, kk)) return allocated(EINVAL, nullptr);
  void* q = nullptr;
  const int e = guarded([&] { q = numaaff::reallocate(kk, p, bytes); });
  if (e != 0) return allocated(e, nullptr);
  return q;  // NULL only for bytes == 0, which freed p
}

int numaaff_kind_posix_memalign(numaaff_kind k, void** out, size_t align, size_t bytes) noexcept {
  if (out == nullptr || align == 0 || (align & (align - 1)) != 0 || align % sizeof(void*) != 0) return EINVAL;
  const int saved = errno;
  void* p = kind_block(k, bytes, align);
  const int e = p == nullptr ? errno : 0;
  errno = saved;  // posix_memalign reports through its result only
  if (p != nullptr) *out = p;
  return e;
}

void numaaff_kind_free(void* p) noexcept { numaaff::deallocate(p); }

size_t numaaff_kind_usable_size(void* p) noexcept { return p == nullptr ? 0 : numaaff::usable_size(p); }

int numaaff_move_to(void* addr, size_t bytes, int node, numaaff_move_result* result) noexcept {
  if (result != nullptr) *result = numaaff_move_result{};
  if (!valid(node)) return EINVAL;
  std::error_code ec;
  const numaaff::move_result r = numaaff::move_to(addr, bytes, node, ec);
  if (result != nullptr)
    *result = numaaff_move_result{r.total, r.moved, r.already_there, r.unpopulated, r.failed, r.carried, r.first_error};
  return from_code(ec);
}


int numaaff_place_blocks(void* addr, size_t bytes, size_t block_bytes, const int* owners, size_t owner_count,
                         numaaff_move_result* result) noexcept {
  if (result != nullptr) *result = numaaff_move_result{};
  std::vector<int> v;
  if (const int e = copy_owners(bytes, block_bytes, owners, owner_count, v); e != 0) return e;
  std::error_code ec;
  const numaaff::move_result r = numaaff::place_blocks(addr, bytes, block_bytes, v, ec);
  if (result != nullptr)
    *result = numaaff_move_result{r.total, r.moved, r.already_there, r.unpopulated, r.failed, r.carried, r.first_error};
  return from_code(ec);
}

int numaaff_weighted_interleave(void* addr, size_t bytes, const int* nodes, const unsigned* weights,
                                size_t count) noexcept {
  if (count == 0 || nodes == nullptr || weights == nullptr) return EINVAL;
  std::vector<numaaff::node_weight> w;
  if (const int e = guarded([&] {
        for (size_t i = 0; i < count; ++i) w.push_back({nodes[i], weights[i]});
      });
      e != 0)
    return e;
  std::error_code ec;
  numaaff::weighted_interleave(addr, bytes, w, {}, ec);
  return from_code(ec);
}

int numaaff_bandwidth_weights(int* nodes, unsigned* weights, size_t capacity, size_t* count) noexcept {
  if (count == nullptr || ((nodes == nullptr || weights == nullptr) && capacity != 0)) return EINVAL;
  std::vector<numaaff::node_weight> w;
  if (const int e = guarded([&] { w = numaaff::bandwidth_weights(); }); e != 0) return e;
  *count = w.size();
  for (size_t i = 0; i < w.size() && i < capacity; ++i) {
    nodes[i] = w[i].node;
    weights[i] = w[i].weight;
  }
  return 0;
}

int numaaff_promote(void* addr, size_t bytes, numaaff_move_result* result) noexcept {
  return move_tier([&] { return numaaff::promote(addr, bytes); }, result);
}
int numaaff_demote(void* addr, size_t bytes, numaaff_move_result* result) noexcept {
  return move_tier([&] { return numaaff::demote(addr, bytes); }, result);
}

int numaaff_pages_on(const void* addr, size_t bytes, int node, size_t* pages) noexcept {
  if (pages == nullptr || !valid(node)) return EINVAL;
  std::error_code ec;
  const numaaff::placement p = numaaff::where(addr, bytes, ec);
  *pages = ec ? 0 : p.pages_on(node);
  return from_code(ec);
}

int numaaff_pages_unpopulated(const void* addr, size_t bytes, size_t* pages) noexcept {
  if (pages == nullptr) return EINVAL;
  std::error_code ec;
  const numaaff::placement p = numaaff::where(addr, bytes, ec);
  *pages = ec ? 0 : p.unpopulated();
  return from_code(ec);
}

int numaaff_next_touch(void* addr, size_t bytes) noexcept {
  std::error_code ec;
  numaaff::affinity_on_next_touch(addr, bytes, ec);
  return from_code(ec);
}

int numaaff_next_touch_blocks(void* addr, size_t bytes, size_t block_bytes) noexcept {
  numaaff::next_touch_options o;
  if (const int e = guarded([&] { o = numaaff::next_touch_options::for_blocks(block_bytes); }); e != 0) return e;
  std::error_code ec;
  numaaff::affinity_on_next_touch(addr, bytes, o, ec);
  return from_code(ec);
}

int numaaff_place_blocks_on_next_touch(void* addr, size_t bytes, size_t block_bytes, const int* owners,
                                       size_t owner_count) noexcept {
  std::vector<int> v;
  if (const int e = copy_owners(bytes, block_bytes, owners, owner_count, v); e != 0) return e;
  std::error_code ec;
  numaaff::place_blocks_on_next_touch(addr, bytes, block_bytes, v, numaaff::next_touch_options{}, ec);
  return from_code(ec);
}

int numaaff_disarm(void* addr, size_t bytes) noexcept {
  std::error_code ec;
  numaaff::disarm(addr, bytes, ec);
  return from_code(ec);
}

int numaaff_touch_now(void* addr, size_t bytes) noexcept {
  std::error_code ec;
  numaaff::touch_now(addr, bytes, ec);
  return from_code(ec);
}

int numaaff_get_next_touch_stats(numaaff_next_touch_stats* stats) noexcept {
  if (stats == nullptr) return EINVAL;
  const numaaff::next_touch_statistics s = numaaff::next_touch_stats();
  *stats = numaaff_next_touch_stats{s.faults,           s.chunks_migrated,   s.pages_moved,
                                    s.pages_failed,     s.pages_unpopulated, s.chunks_released,
                                    static_cast<unsigned long long>(s.handler_time.count()),
                                    s.pages_already_there};
  return 0;
}

int numaaff_reset_next_touch_stats(void) noexcept {
  numaaff::reset_next_touch_stats();
  return 0;
}

namespace {
/// Reads the counters of `pid` (0: this process) into `s`; an error value, or 0.
int read_snapshot(long long pid, numaaff::counter_snapshot& s) {
  std::error_code ec;
  s = pid == 0 ? numaaff::snapshot() : numaaff::snapshot(static_cast<long>(pid), ec);
  return from_code(ec);
}
}  // namespace

int numaaff_snapshot(long long pid, numaaff_node_counters* nodes, size_t max_nodes, size_t* node_count) noexcept {
  if (node_count == nullptr || (nodes == nullptr && max_nodes != 0) || pid < 0) return EINVAL;
  int error = 0;  // of reading another process's segment (EBADMSG for an unreadable one)
  const int thrown = guarded([&] {
    numaaff::counter_snapshot s;
    if ((error = read_snapshot(pid, s)) != 0) return;
    *node_count = s.nodes.size();
    for (std::size_t i = 0; i < s.nodes.size() && i < max_nodes; ++i) {
      const numaaff::node_counters& n = s.nodes[i];
      nodes[i] = numaaff_node_counters{n.node,
                                       n.workers,
                                       n.tasks_run,
                                       n.stolen_local,
                                       n.stolen_in,
                                       n.stolen_out,
                                       n.sleeps,
                                       static_cast<unsigned long long>(n.worker_time.count()),
                                       static_cast<unsigned long long>(n.idle_time.count()),
                                       n.queued,
                                       n.next_touch_chunks,
                                       n.next_touch_pages_moved,
                                       n.next_touch_pages_already_there,
                                       n.next_touch_pages_failed,
                                       n.pages_moved,
                                       n.pages_not_moved,
                                       n.heap_bound_bytes,
                                       n.heap_preferred_bytes,
                                       n.next_touch_faults};
    }
  });
  return thrown != 0 ? thrown : error;
}

int numaaff_snapshot_process(long long pid, numaaff_process_counters* counters) noexcept {
  if (counters == nullptr || pid < 0) return EINVAL;
  int error = 0;
  const int thrown = guarded([&] {
    numaaff::counter_snapshot s;
    if ((error = read_snapshot(pid, s)) != 0) return;
    const numaaff::refusal_statistics& r = s.refusals;
    *counters = numaaff_process_counters{s.pools, s.workers, r.policies_skipped, r.mappings_unbound, r.pages_unmoved,
                                         r.threads_unpinned, r.weighted_fallbacks, r.huge_page_fallbacks};
  });
  return thrown != 0 ? thrown : error;
}

int numaaff_snapshot_steals(long long pid, unsigned long long* steals, size_t max_cells, size_t* node_count) noexcept {
  if (node_count == nullptr || (steals == nullptr && max_cells != 0) || pid < 0) return EINVAL;
  int error = 0;
  const int thrown = guarded([&] {
    numaaff::counter_snapshot s;
    if ((error = read_snapshot(pid, s)) != 0) return;
    *node_count = s.steals.empty() ? 0 : s.nodes.size();
    for (std::size_t i = 0; i < s.steals.size() && i < max_cells; ++i) steals[i] = s.steals[i];
  });
  return thrown != 0 ? thrown : error;
}

int numaaff_snapshot_heap(long long pid, unsigned long long* bytes, size_t max_cells, size_t* node_count) noexcept {
  if (node_count == nullptr || (bytes == nullptr && max_cells != 0) || pid < 0) return EINVAL;
  static_assert(NUMAAFF_HEAP_KINDS == numaaff::detail::heap_kind_count && NUMAAFF_KIND_TARGET_NODE == 0 &&
                    NUMAAFF_KIND_TARGET_LOCAL == 1 && NUMAAFF_KIND_TARGET_INTERLEAVE == 2 && NUMAAFF_KIND_TARGET_FASTEST == 3 &&
                    NUMAAFF_KIND_TARGET_CAPACITY == 4,
                "a row is heap_by_kind in the C kind targets' order");
  int error = 0;
  const int thrown = guarded([&] {
    numaaff::counter_snapshot s;
    if ((error = read_snapshot(pid, s)) != 0) return;
    *node_count = s.nodes.size();
    std::size_t cell = 0;
    for (const numaaff::node_counters& n : s.nodes) {
      const numaaff::node_counters::heap_kinds& k = n.heap_by_kind;
      for (const std::uint64_t b : {k.node, k.local, k.interleave, k.fastest, k.capacity})
        if (cell < max_cells) bytes[cell++] = b;
    }
  });
  return thrown != 0 ? thrown : error;
}

int numaaff_system_report(char* text, size_t capacity, size_t* length) noexcept {
  if (text == nullptr && capacity != 0) return EINVAL;
  return guarded([&] {
    const std::string s = numaaff::system_report().to_string();
    if (length != nullptr) *length = s.size();
    if (capacity == 0) return;
    const std::size_t n = s.size() < capacity - 1 ? s.size() : capacity - 1;
    std::memcpy(text, s.data(), n);
    text[n] = '\0';
  });
}

const char* numaaff_strerror(int error) noexcept {
  // glibc (2.32 and later) formats unknown values in a per-thread buffer; known ones are
  // static text: thread-safe either way.
  return std::strerror(error);
}

}  // extern "C"
