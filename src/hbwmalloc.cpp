// The hbwmalloc API (numaaff/hbwmalloc.h) over the heap by kind: each policy is a kind, the
// high-bandwidth nodes come from MEMKIND_HBW_NODES when it is set, else from the topology's
// bandwidth ranking (the HMAT).
#include <numaaff/hbwmalloc.h>

#include <numaaff/allocator.hpp>
#include <numaaff/homenode.hpp>
#include <numaaff/kind.hpp>
#include <numaaff/placement.hpp>
#include <numaaff/topology.hpp>
#include <numaaff/detail/kernel_nodes.hpp>
#include <numaaff/detail/text.hpp>

#include "c_errors.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <system_error>
#include <vector>

namespace {

/// The nodes MEMKIND_HBW_NODES names (hbwmalloc(3), ENVIRONMENT): a node list such as "1-3,5"
/// that says which nodes are high-bandwidth, on a machine whose firmware does not say (no
/// HMAT) or says otherwise.
struct named_nodes {
  std::vector<numaaff::node_id> nodes;    // those of them with memory, ascending
  std::vector<numaaff::node_id> nearest;  // for each of kernel_nodes(): the nearest of them, -1: none
};

/// The nearest of `nodes` to each kernel node by the kernel's distances, which know every node
/// where this process's topology keeps only those it may run on (the lowest number of equals,
/// and of nodes the kernel gives no distance for).
std::vector<numaaff::node_id> nearest_of(const std::vector<numaaff::node_id>& nodes) {
  const std::vector<int>& kernel = numaaff::detail::kernel_nodes();
  std::vector<numaaff::node_id> out(kernel.size(), -1);
  for (std::size_t i = 0; i < kernel.size(); ++i) {
    const std::vector<int> row = numaaff::detail::kernel_distances_from(kernel[i]);
    unsigned best = 0;
    for (numaaff::node_id n : nodes) {
      const auto at = static_cast<std::size_t>(std::find(kernel.begin(), kernel.end(), n) - kernel.begin());
      const unsigned d = at < row.size() ? static_cast<unsigned>(row[at]) : ~0u;  // unknown: the farthest
      if (out[i] < 0 || d < best) out[i] = n, best = d;
    }
  }
  return out;
}

/// MEMKIND_HBW_NODES read once, at the first hbw call: nullopt when it is unset or empty. A list
/// that does not parse, or that names no node with memory, names none: then there is no
/// high-bandwidth memory.
const std::optional<named_nodes>& named_hbw_nodes() {
  static const std::optional<named_nodes> named = []() -> std::optional<named_nodes> {
    const char* value = std::getenv("MEMKIND_HBW_NODES");
    if (value == nullptr || *value == '\0') return std::nullopt;
    std::vector<int> listed;
    named_nodes out;
    if (!numaaff::detail::parse_list(value, listed)) return out;
    for (int n : numaaff::detail::memory_nodes())
      if (std::find(listed.begin(), listed.end(), n) != listed.end()) out.nodes.push_back(n);
    if (!out.nodes.empty()) out.nearest = nearest_of(out.nodes);
    return out;
  }();
  return named;
}

/// The high-bandwidth node for initiator `from`: with MEMKIND_HBW_NODES, the nearest of the
/// nodes it names (named_nodes); else the first of `from`'s bandwidth order when the firmware
/// gives it more bandwidth than `from`'s own memory; -1 when there is none.
numaaff::node_id hbw_node_for(const numaaff::topology& t, numaaff::node_id from) {
  if (const auto& named = named_hbw_nodes()) {
    if (named->nodes.empty()) return -1;
    const std::vector<int>& kernel = numaaff::detail::kernel_nodes();
    const auto at = static_cast<std::size_t>(std::find(kernel.begin(), kernel.end(), from) - kernel.begin());
    return at < named->nearest.size() ? named->nearest[at] : named->nodes.front();
  }
  const std::vector<numaaff::node_id> order = t.targets_by(numaaff::memory_attribute::bandwidth, from);
  if (order.empty()) return -1;
  const std::uint64_t best = t.bandwidth(from, order.front());
  return best != 0 && best > t.bandwidth(from, from) ? order.front() : -1;
}

/// Every high-bandwidth node, ascending: those MEMKIND_HBW_NODES names, else every node that
/// is the high-bandwidth node of some CPU node.
std::vector<numaaff::node_id> hbw_nodes() {
  if (const auto& named = named_hbw_nodes()) return named->nodes;
  const numaaff::topology& t = numaaff::topology::system();
  std::vector<numaaff::node_id> out;
  for (numaaff::node_id n : t.cpu_nodes()) {
    const numaaff::node_id h = hbw_node_for(t, n);
    if (h >= 0 && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::atomic<int> policy{HBW_POLICY_PREFERRED};
std::atomic<bool> policy_set{false};
std::atomic<bool> allocated_once{false};

/// The interleave state over the high-bandwidth nodes, made once and never destroyed (a
/// thread or an atexit handler may still allocate during exit); null when there are none.
numaaff::detail::interleave_state* hbw_interleave() {
  static numaaff::detail::interleave_state* const state = []() -> numaaff::detail::interleave_state* {
    std::vector<numaaff::node_id> nodes = hbw_nodes();
    if (nodes.empty()) return nullptr;
    auto* s = new numaaff::detail::interleave_state();
    s->nodes = std::move(nodes);
    s->options.huge_pages = numaaff::huge_page_mode::never;  // the manual: THP off
    return s;
  }();
  return state;
}

/// The int a C caller passed as an hbwmalloc enum: any int is valid C, while in C++ a value
/// outside the enumerators' range is undefined, so it is read as an int.
template <class E>
int c_enum_value(const E* e) noexcept {
  static_assert(sizeof(E) == sizeof(int), "hbwmalloc's enums are ints");
  int v = 0;
  std::memcpy(&v, e, sizeof v);  // the bytes, not a load of the enum
  return v;
}

/// A block by the current policy, or NULL with errno.
void* hbw_block(std::size_t size, std::size_t align, numaaff::huge_page_mode pages) noexcept {
  allocated_once.store(true, std::memory_order_relaxed);
  void* p = nullptr;
  int error = numaaff_c::guarded([&] {
    const int mode = policy.load(std::memory_order_relaxed);
    if (mode == HBW_POLICY_INTERLEAVE) {
      numaaff::detail::interleave_state* s = hbw_interleave();
      if (s == nullptr) throw std::bad_alloc();
      p = numaaff::detail::interleave_allocate(*s, size, align);
    } else if (mode == HBW_POLICY_PREFERRED) {
      numaaff::kind k = numaaff::kind::fastest().preferred();
      if (named_hbw_nodes()) {  // the named node nearest the caller, then the kernel's fallback order
        const numaaff::node_id h = hbw_node_for(numaaff::topology::system(), numaaff::detail::local_node());
        k = (h >= 0 ? numaaff::kind::on_node(h) : numaaff::kind::local()).preferred();
      }
      p = numaaff::allocate(k.with_pages(pages), size, align);
    } else {  // BIND, BIND_ALL: the caller's high-bandwidth node or nothing
      const numaaff::node_id h = hbw_node_for(numaaff::topology::system(), numaaff::detail::local_node());
      if (h < 0) throw std::bad_alloc();
      p = numaaff::allocate(numaaff::kind::on_node(h).with_pages(pages), size, align);
    }
  });
  // hbwmalloc(3) reports a failed allocation as ENOMEM, whatever the cause.
  if (error != 0) error = ENOMEM;
  return numaaff_c::allocated(error, p);
}

int aligned_block(void** memptr, std::size_t alignment, std::size_t size, numaaff::huge_page_mode pages) noexcept {
  if (memptr == nullptr || alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment % sizeof(void*) != 0)
    return EINVAL;
  if (size == 0) {
    *memptr = nullptr;
    return 0;
  }
  const int saved = errno;
  void* p = hbw_block(size, alignment, pages);
  const int e = p == nullptr ? errno : 0;
  errno = saved;
  if (p != nullptr) *memptr = p;
  return e;
}

}  // namespace

extern "C" {

int hbw_check_available(void) noexcept {
  try {
    return hbw_nodes().empty() ? ENODEV : 0;
  } catch (...) {
    return ENODEV;
  }
}

void* hbw_malloc(size_t size) noexcept {
  if (size == 0) return nullptr;
  return hbw_block(size, alignof(std::max_align_t), numaaff::huge_page_mode::per_block);
}

void* hbw_calloc(size_t nmemb, size_t size) noexcept {
  if (nmemb == 0 || size == 0) return nullptr;
  if (nmemb > static_cast<std::size_t>(-1) / size) {
    errno = ENOMEM;
    return nullptr;
  }
  void* p = hbw_malloc(nmemb * size);
  numaaff::detail::clear_fresh_block(p, nmemb * size);
  return p;
}

void* hbw_realloc(void* ptr, size_t size) noexcept {
  if (ptr == nullptr) return hbw_malloc(size);
  // A block that grows goes the allocation's way: BIND refuses what the node cannot hold,
  // PREFERRED spills as its allocation does (grown in place, the kernel's fallback would place
  // the new pages), INTERLEAVE spreads the new block. Shrinking keeps it where it is.
  return numaaff::detail::reallocate_with(
      ptr, size, [](std::size_t n) { return hbw_malloc(n); },
      [](numaaff::detail::placed_block, std::size_t have, std::size_t n) { return n <= have; });
}

void hbw_free(void* ptr) noexcept { numaaff::deallocate(ptr); }

size_t hbw_malloc_usable_size(void* ptr) noexcept { return ptr == nullptr ? 0 : numaaff::usable_size(ptr); }

int hbw_posix_memalign(void** memptr, size_t alignment, size_t size) noexcept {
  return aligned_block(memptr, alignment, size, numaaff::huge_page_mode::per_block);
}

int hbw_posix_memalign_psize(void** memptr, size_t alignment, size_t size, hbw_pagesize_t pagesize) noexcept {
  numaaff::huge_page_mode pages = numaaff::huge_page_mode::never;
  switch (c_enum_value(&pagesize)) {
    case HBW_PAGESIZE_4KB: break;
    case HBW_PAGESIZE_2MB: pages = numaaff::huge_page_mode::reserved_2mib; break;
    case HBW_PAGESIZE_1GB_STRICT:
      if (size % (std::size_t{1} << 30) != 0) return EINVAL;
      pages = numaaff::huge_page_mode::reserved_1gib;
      break;
    case HBW_PAGESIZE_1GB: pages = numaaff::huge_page_mode::reserved_1gib; break;
    default: return EINVAL;
  }
  if (pages != numaaff::huge_page_mode::never && policy.load(std::memory_order_relaxed) == HBW_POLICY_INTERLEAVE)
    return EINVAL;
  return aligned_block(memptr, alignment, size, pages);
}

hbw_policy_t hbw_get_policy(void) noexcept { return static_cast<hbw_policy_t>(policy.load(std::memory_order_relaxed)); }

int hbw_set_policy(hbw_policy_t chosen) noexcept {
  const int mode = c_enum_value(&chosen);
  if (mode != HBW_POLICY_BIND && mode != HBW_POLICY_PREFERRED && mode != HBW_POLICY_INTERLEAVE &&
      mode != HBW_POLICY_BIND_ALL)
    return EINVAL;
  if (allocated_once.load(std::memory_order_relaxed) || policy_set.exchange(true)) return EPERM;
  policy.store(mode, std::memory_order_relaxed);
  return 0;
}

int hbw_verify_memory_region(void* addr, size_t size, int flags) noexcept {
  if (addr == nullptr || size == 0 || (flags & ~HBW_TOUCH_PAGES) != 0) return EINVAL;
  try {
    if ((flags & HBW_TOUCH_PAGES) != 0) {
      const std::size_t ps = numaaff::detail::page_size();
      auto* bytes = static_cast<volatile char*>(addr);
      const std::uintptr_t first = numaaff::detail::align_down(reinterpret_cast<std::uintptr_t>(addr), ps);
      for (std::uintptr_t at = first; at < reinterpret_cast<std::uintptr_t>(addr) + size; at += ps) {
        volatile char* c = at < reinterpret_cast<std::uintptr_t>(addr) ? bytes : reinterpret_cast<volatile char*>(at);
        *c = *c;
      }
    }
    std::error_code ec;
    const numaaff::placement p = numaaff::where(addr, size, ec);
    if (ec) return EFAULT;
    std::size_t on_hbw = 0;
    for (numaaff::node_id n : hbw_nodes()) on_hbw += p.pages_on(n);
    return on_hbw == p.total() ? 0 : -1;
  } catch (...) {
    return EFAULT;
  }
}

}  // extern "C"
