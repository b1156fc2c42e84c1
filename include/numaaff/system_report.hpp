/**
 * @file system_report.hpp
 * @brief What this machine and kernel let numaaff do, and what numaaff does about each gap.
 *
 * numaaff degrades instead of failing. On a one-node machine placement calls are correct
 * no-ops. In a container whose seccomp profile forbids the NUMA calls (`mbind`, `move_pages`,
 * `get_mempolicy`, `set_mempolicy_home_node`: Docker's default without CAP_SYS_NICE):
 * - allocations succeed, placed by first touch instead of bound;
 * - policies (`bind`, `interleave`, `prefer`, `set_home_node`, `reset_policy`) are no-ops;
 * - `move_to` moves nothing: pages not already where asked count as `failed` with EPERM;
 * - `where` reports what mincore can tell: unpopulated pages, and resident ones on the only
 *   node of a one-node machine, `unknown()` on several;
 * - next-touch still opens every armed chunk (its migrations count as failed pages).
 * None of these throws; refusal_stats() counts them. It never pretends, though: this report,
 * probed once per process with harmless calls on a scratch page, says which case applies
 * (the "sandbox" line).
 *
 * Probed:
 * - node count, distances and restriction (from topology::system());
 * - whether the NUMA system calls exist (`get_mempolicy`) and whether this process may migrate
 *   pages (`move_pages`, `mbind`: EPERM under Docker's default seccomp profile);
 * - `set_mempolicy_home_node` (Linux 5.17+) and `MPOL_PREFERRED_MANY` (Linux 5.15+);
 * - whether `move_pages` can see pages of a PROT_NONE range (not on Linux 6.1, yes on 6.12),
 *   and how the kernel reports a never-touched page (-ENOENT or -EFAULT);
 * - automatic NUMA balancing, transparent huge pages and `vm.max_map_count`, which change what
 *   placement a user will observe.
 *
 * @code{.cpp}
 * const numaaff::capability_report& r = numaaff::system_report();
 * if (!r.placement_effective()) std::puts("placement calls will be no-ops here");
 * std::cout << r.to_string();
 * @endcode
 */
#pragma once

#include "detail/cgroup_memory.hpp"
#include "detail/numa_calls.hpp"
#include "detail/page.hpp"
#include "topology.hpp"

#include <sys/mman.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace numaaff {

/// Three answers a probe can give.
enum class probe_state {
  yes,        ///< present and usable
  no,         ///< the kernel lacks it (ENOSYS, EINVAL for an unknown mode)
  forbidden,  ///< present, but this process may not use it (EPERM)
};

/// One line of the report: a fact and what numaaff does about it.
struct capability {
  std::string name;
  probe_state state;
  std::string detail;  ///< what the probe saw
  std::string action;  ///< what numaaff does as a consequence
};

/**
 * The capability report. Plain data; copyable.
 */
struct capability_report {
  std::string kernel_release;
  std::size_t node_count = 1;
  probe_state numa_syscalls = probe_state::no;     ///< get_mempolicy
  probe_state migration = probe_state::no;         ///< move_pages and mbind(MPOL_MF_MOVE)
  probe_state home_node = probe_state::no;         ///< set_mempolicy_home_node
  probe_state preferred_many = probe_state::no;    ///< MPOL_PREFERRED_MANY
  probe_state protnone_visible = probe_state::no;  ///< move_pages sees PROT_NONE pages
  int unpopulated_status = -ENOENT;                ///< move_pages status of a never-touched page (0: unknown)
  int numa_balancing = -1;                         ///< /proc/sys/kernel/numa_balancing, -1 unknown
  std::string transparent_hugepages;               ///< "always", "madvise", "never" or ""
  long max_map_count = -1;                         ///< vm.max_map_count, -1 unknown
  /// The memory policy the process started with (numactl, an OCI runtime's
  /// linux.memoryPolicy), read before main: "default", "bind 0-1", "interleave 0-3", ...;
  /// "unknown" where get_mempolicy is refused. numaaff keeps it wherever it is not asked to
  /// place memory (it never sets a thread's policy).
  std::string start_policy;
  std::uint64_t cgroup_memory_limit = 0;  ///< the tightest memory cgroup limit in bytes, 0 for none
  std::uint64_t cgroup_memory_room = 0;   ///< what that cgroup still allows (limit - usage)
  std::vector<capability> items;                   ///< every fact with numaaff's consequence

  /// True when placement calls can really place and move pages: several nodes, the NUMA
  /// calls exist, and migration is allowed. False means they are documented no-ops.
  bool placement_effective() const noexcept {
    return node_count > 1 && numa_syscalls == probe_state::yes && migration == probe_state::yes;
  }

  /// True when a sandbox (seccomp, a missing capability) denies the NUMA calls.
  bool numa_calls_forbidden() const noexcept {
    return numa_syscalls == probe_state::forbidden || migration == probe_state::forbidden;
  }

  /// The report as text: one line per fact, then the topology (`numactl -H` style).
  std::string to_string() const;
};

/// What numaaff left undone because the kernel refused its NUMA calls (a sandbox): each a
/// counted no-op instead of an error. Process-wide since start.
struct refusal_statistics {
  std::uint64_t policies_skipped = 0;  ///< policy calls that changed nothing
  std::uint64_t mappings_unbound = 0;  ///< allocations left to first-touch placement
  std::uint64_t pages_unmoved = 0;     ///< pages move_to could not move or where() could not locate
  std::uint64_t threads_unpinned = 0;  ///< pin_this_thread calls that could not bind the thread
  /// weighted_interleave calls (and weighted allocator blocks) placed by plain interleave
  /// because the process had too few mappings left for per-node runs (see vm.max_map_count)
  std::uint64_t weighted_fallbacks = 0;
  /// blocks of a preferred kind with explicit huge pages (huge_page_mode::reserved_*) given
  /// ordinary pages because no node's pool had enough free ones
  std::uint64_t huge_page_fallbacks = 0;
};

/// A snapshot of the refusal counters. Thread-safe, lock-free, no allocation.
refusal_statistics refusal_stats() noexcept;

/**
 * The report for this process, probed on first call and cached.
 *
 * Thread-safe; the first call allocates and maps one scratch region (3 pages), later calls
 * neither allocate nor block. Never throws for a missing or forbidden feature (that is what it
 * reports); throws only what topology::system() throws.
 */
const capability_report& system_report();

/// Probes again now, against `topo` (for tests and after changing the environment).
capability_report probe_capabilities(const topology& topo);

// ---- implementation ---------------------------------------------------------------------

namespace detail {

/// A memory policy as text: its mode and nodes.
inline std::string policy_text(int mode, const std::vector<node_id>& nodes) {
  static const char* const names[] = {"default", "preferred", "bind", "interleave", "local", "preferred many",
                                      "weighted interleave"};
  std::string text = mode >= 0 && mode < 7 ? names[mode] : "mode " + std::to_string(mode);
  if (mode != MPOL_DEFAULT && mode != MPOL_LOCAL && !nodes.empty()) text += " " + format_list(nodes);
  return text;
}

/// The main thread's memory policy during static initialisation: what the process started
/// with, before numaaff or the program changed anything.
inline std::string read_start_policy() noexcept {
  try {
    int mode = 0;
    std::vector<node_id> nodes;
    if (!read_thread_policy(mode, nodes)) return "unknown";
    return policy_text(mode, nodes);
  } catch (...) {
    return "unknown";
  }
}
inline const std::string start_policy = read_start_policy();

inline probe_state state_of(int error, int missing_errno = ENOSYS) noexcept {
  if (error == 0) return probe_state::yes;
  if (error == EPERM || error == EACCES) return probe_state::forbidden;
  if (error == missing_errno || error == ENOSYS) return probe_state::no;
  return probe_state::no;
}

inline std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline std::string errno_name(int e) {
  switch (e) {
    case 0: return "ok";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case ENOENT: return "ENOENT";
    case EFAULT: return "EFAULT";
    case ENOMEM: return "ENOMEM";
    case ENODEV: return "ENODEV";
    case EACCES: return "EACCES";
    default: return "errno " + std::to_string(e);
  }
}

/// A field of /proc/self/status ("Seccomp" -> "2"), "" when absent.
inline std::string proc_status_field(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, name.size() + 1, name + ":") == 0) return std::string(trim(line.substr(name.size() + 1)));
  return "";
}

inline const char* state_name(probe_state s) noexcept {
  switch (s) {
    case probe_state::yes: return "yes";
    case probe_state::no: return "no";
    case probe_state::forbidden: return "forbidden";
  }
  return "?";
}

}  // namespace detail

inline capability_report probe_capabilities(const topology& topo) {
  using detail::errno_name;
  capability_report r;
  r.node_count = topo.node_count();
  utsname u{};
  if (::uname(&u) == 0) r.kernel_release = u.release;

  int mode = 0;
  const auto gm = detail::sys_get_mempolicy(&mode, nullptr, 0, nullptr, 0);
  r.numa_syscalls = detail::state_of(gm.error);

  // A scratch region: page 0 is touched (migration probes), page 1 is touched then protected
  // (PROT_NONE visibility), page 2 is never touched (how "unpopulated" is reported).
  const std::size_t ps = detail::page_size();
  const auto map = detail::sys_mmap(3 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  int move_error = ENOMEM;
  int mbind_error = ENOMEM;
  int home_error = ENOMEM;
  int many_error = ENOMEM;
  int protnone_status = -ENOMEM;
  if (map) {
    char* base = static_cast<char*>(map.value);
    std::memset(base, 1, 2 * ps);
    const int here = current_node();
    void* page = base;
    int status = 0;
    const auto mv = detail::sys_move_pages(1, &page, &here, &status, 0);
    move_error = mv.error;
    const auto mb = detail::sys_mbind(base, ps, MPOL_DEFAULT, nullptr, 0, MPOL_MF_MOVE);
    mbind_error = mb.error;
    // Range of length 0: the kernel validates the call and returns 0 without changing anything.
    home_error = detail::sys_set_mempolicy_home_node(base, 0, static_cast<unsigned long>(here), 0).error;
    unsigned long mask[16] = {};
    if (here >= 0 && here < static_cast<int>(sizeof(mask) * 8)) {
      mask[static_cast<unsigned>(here) / (8 * sizeof(unsigned long))] |= 1UL << (static_cast<unsigned>(here) % (8 * sizeof(unsigned long)));
      many_error = detail::sys_mbind(base, ps, MPOL_PREFERRED_MANY, mask, sizeof(mask) * 8, 0).error;
      detail::sys_mbind(base, ps, MPOL_DEFAULT, nullptr, 0, 0);
    }
    void* guarded = base + ps;
    if (detail::sys_mprotect(guarded, ps, PROT_NONE)) {
      const auto q = detail::sys_move_pages(1, &guarded, nullptr, &protnone_status, 0);
      if (!q) protnone_status = -q.error;
      detail::sys_mprotect(guarded, ps, PROT_READ | PROT_WRITE);
    }
    void* untouched = base + 2 * ps;
    int unpop = 0;
    const auto q = detail::sys_move_pages(1, &untouched, nullptr, &unpop, 0);
    r.unpopulated_status = q ? (unpop < 0 ? unpop : -ENOENT) : 0;
    detail::sys_munmap(base, 3 * ps);
  }
  r.migration = (move_error == 0 && mbind_error == 0) ? probe_state::yes
                : (move_error == EPERM || mbind_error == EPERM) ? probe_state::forbidden
                                                                 : probe_state::no;
  r.home_node = detail::state_of(home_error);
  r.preferred_many = detail::state_of(many_error, EINVAL);
  r.protnone_visible = protnone_status >= 0 ? probe_state::yes : probe_state::no;

  int value = 0;
  if (detail::parse_int(detail::read_first_line("/proc/sys/kernel/numa_balancing"), value)) r.numa_balancing = value;
  const std::string thp = detail::read_first_line("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::size_t lb = thp.find('['), rb = thp.find(']');
  if (lb != std::string::npos && rb != std::string::npos && rb > lb) r.transparent_hugepages = thp.substr(lb + 1, rb - lb - 1);
  if (detail::parse_int(detail::read_first_line("/proc/sys/vm/max_map_count"), value)) r.max_map_count = value;

  const bool multi = r.node_count > 1;
  r.items.push_back({"numa nodes", multi ? probe_state::yes : probe_state::no,
                     std::to_string(r.node_count) + " usable (" + detail::format_list(topo.nodes()) + ")" +
                         (topo.is_restricted() ? "; " + topo.restriction() : ""),
                     multi ? "placement policies, migration and next-touch act on these nodes"
                           : "one node: placement and migration calls succeed as no-ops; the thread pool runs "
                             "one node"});
  r.items.push_back({"numa system calls", r.numa_syscalls, "get_mempolicy: " + errno_name(gm.error),
                     r.numa_syscalls == probe_state::yes
                         ? "used directly (mbind, move_pages, get_mempolicy)"
                         : "policies are no-ops, allocations are placed by first touch, where() reports "
                           "residency only (see refusal_stats())"});
  r.items.push_back({"page migration", r.migration,
                     "move_pages: " + errno_name(move_error) + ", mbind(MPOL_MF_MOVE): " + errno_name(mbind_error),
                     r.migration == probe_state::yes
                         ? "move_to and next-touch migrate pages"
                         : "move_to moves nothing and counts such pages as failed; next-touch still "
                           "re-opens every armed chunk, so data stays reachable"});
  const std::string seccomp = detail::proc_status_field("Seccomp");
  const bool sandboxed = r.numa_calls_forbidden();
  r.items.push_back({"sandbox", sandboxed ? probe_state::forbidden : probe_state::no,
                     (seccomp == "2"   ? std::string("seccomp filter active")
                      : seccomp == "1" ? std::string("seccomp strict mode")
                                       : std::string("no seccomp filter")) +
                         (sandboxed ? "; the NUMA calls are denied (a container's seccomp profile, or no CAP_SYS_NICE)"
                                    : "; the NUMA calls are allowed"),
                     sandboxed ? "nothing throws for it: every placement call is a counted no-op (refusal_stats())"
                               : "placement calls reach the kernel"});
  r.items.push_back({"set_mempolicy_home_node (5.17+)", r.home_node, errno_name(home_error),
                     r.home_node == probe_state::yes ? "set_home_node uses it"
                                                     : "set_home_node reports errc::feature_unavailable"});
  r.items.push_back({"MPOL_PREFERRED_MANY (5.15+)", r.preferred_many, "mbind: " + errno_name(many_error),
                     r.preferred_many == probe_state::yes
                         ? "prefer() with several nodes uses it"
                         : "prefer() with several nodes falls back to MPOL_PREFERRED on the nearest one"});
  r.items.push_back({"move_pages sees PROT_NONE pages", r.protnone_visible,
                     protnone_status >= 0 ? "status node " + std::to_string(protnone_status)
                                          : "status " + errno_name(-protnone_status),
                     "next-touch re-opens a chunk before moving it, which works on every kernel"});
  r.items.push_back({"never-touched page status", r.unpopulated_status != 0 ? probe_state::yes : probe_state::no,
                     r.unpopulated_status != 0 ? errno_name(-r.unpopulated_status) : "unknown (move_pages refused)",
                     "where() counts -ENOENT and -EFAULT alike as unpopulated"});
  r.items.push_back({"automatic NUMA balancing", r.numa_balancing > 0 ? probe_state::yes : probe_state::no,
                     r.numa_balancing < 0 ? "unknown" : "kernel.numa_balancing=" + std::to_string(r.numa_balancing),
                     r.numa_balancing > 0 ? "the kernel may move pages after numaaff placed them; set "
                                            "kernel.numa_balancing=0 for strict placement"
                                          : "pages stay where numaaff puts them"});
  r.items.push_back({"transparent huge pages", r.transparent_hugepages == "never" ? probe_state::no : probe_state::yes,
                     r.transparent_hugepages.empty() ? "unknown" : r.transparent_hugepages,
                     "huge pages move as a whole; partial protection splits them"});
  {  // each node's explicit huge page pools, as they were when the report was made
    std::string pools;
    bool any = false;
    for (const node_id n : topo.nodes())
      for (const std::size_t size : {std::size_t{2} << 20, std::size_t{1} << 30}) {
        const detail::hugetlb_pool pool = detail::hugetlb_pool_of(n, size);
        if (pool.total < 0) continue;
        any = any || pool.total > 0;
        pools += (pools.empty() ? "" : ", ") + std::string("node ") + std::to_string(n) + " " +
                 (size == (std::size_t{2} << 20) ? "2 MiB" : "1 GiB") + ": " + std::to_string(pool.total) + " reserved, " +
                 std::to_string(pool.free < 0 ? 0 : pool.free) + " free";
      }
    r.items.push_back({"explicit huge pages", any ? probe_state::yes : probe_state::no, pools.empty() ? "no pools" : pools,
                       any ? "kinds and allocators with huge_page_mode::reserved_2mib/_1gib take them from their node's pool"
                           : "huge_page_mode::reserved_*: strict blocks fail (std::bad_alloc, ENOMEM), preferred ones get "
                             "ordinary pages (refusal_stats().huge_page_fallbacks)"});
  }
  r.items.push_back({"vm.max_map_count", probe_state::yes, r.max_map_count < 0 ? "unknown" : std::to_string(r.max_map_count),
                     "next-touch merges chunks when mprotect runs out of mappings (ENOMEM); weighted_interleave "
                     "sizes its tiles to stay within it, leaves an eighth (at least 1,024) to the rest of the program, "
                     "and falls back to plain interleave when that is all that is left (refusal_stats())"});
  r.start_policy = detail::start_policy;
  const bool inherited = r.start_policy != "default" && r.start_policy != "unknown";
  r.items.push_back({"memory policy at start", inherited ? probe_state::yes : probe_state::no, r.start_policy,
                     inherited ? "kept for all memory numaaff is not asked to place (numaaff never sets a thread's "
                                 "policy); its allocators and range policies bind what they are given"
                               : "first touch, except where numaaff is asked to place memory"});
  const detail::cgroup_memory cg = detail::cgroup_memory_now();
  r.cgroup_memory_limit = cg.limited ? cg.limit : 0;
  r.cgroup_memory_room = cg.limited ? cg.room() : 0;
  r.items.push_back({"memory cgroup limit", cg.limited ? probe_state::yes : probe_state::no,
                     cg.limited ? std::to_string(cg.limit >> 20) + " MiB (" + std::to_string(cg.used >> 20) + " MiB used, " +
                                      std::to_string(cg.room() >> 20) + " MiB left) at " + cg.where
                                : "none",
                     cg.limited ? "the room numaaff sees on each node is at most what the cgroup still allows (tier "
                                  "spill, populated strict blocks)"
                                : "the room on a node is its free memory"});
  std::string system_weights;
  for (node_id n : topo.nodes())
    if (const unsigned w = detail::system_interleave_weight(n)) system_weights += (system_weights.empty() ? "" : " ") + std::to_string(n) + ":" + std::to_string(w);
  r.items.push_back({"MPOL_WEIGHTED_INTERLEAVE (6.9+)", system_weights.empty() ? probe_state::no : probe_state::yes,
                     system_weights.empty() ? "no system weights in sysfs" : "system weights " + system_weights,
                     system_weights.empty() ? "weighted_interleave places pages with per-node runs (tiles) in user space"
                                            : "weighted_interleave uses it when the weights are in the system weights' "
                                              "proportion, else per-node runs (tiles); numaaff never writes the weights"});
  std::vector<node_id> memory_only;
  for (node_id n : topo.nodes())
    if (!topo.has_cpus(n)) memory_only.push_back(n);
  r.items.push_back({"memory-only nodes", memory_only.empty() ? probe_state::no : probe_state::yes,
                     memory_only.empty() ? "none" : detail::format_list(memory_only),
                     memory_only.empty() ? "every node runs threads"
                                         : "never given workers or chosen as a homenode; reach them with policies, "
                                           "allocators, weighted_interleave"});
  const bool user_attributes = topo.memory_attributes_from() == attribute_source::user;
  r.items.push_back({"memory attributes (HMAT)", topo.has_memory_attributes() ? probe_state::yes : probe_state::no,
                     user_attributes ? "user override (NUMAAFF_MEMORY_ATTRIBUTES)"
                     : topo.has_memory_attributes() ? "bandwidth and latency per initiator and target from the firmware"
                                                    : "none from the firmware",
                     topo.has_memory_attributes() ? "targets_by() and best_target() rank memory by them"
                                                  : "targets_by() and best_target() rank memory by distance"});
  return r;
}

inline refusal_statistics refusal_stats() noexcept {
  refusal_statistics s;
  s.policies_skipped = detail::refusals.policies.load(std::memory_order_relaxed);
  s.mappings_unbound = detail::refusals.mappings.load(std::memory_order_relaxed);
  s.pages_unmoved = detail::refusals.pages.load(std::memory_order_relaxed);
  s.threads_unpinned = detail::refusals.pinnings.load(std::memory_order_relaxed);
  s.weighted_fallbacks = detail::refusals.weighted_fallbacks.load(std::memory_order_relaxed);
  s.huge_page_fallbacks = detail::refusals.huge_page_fallbacks.load(std::memory_order_relaxed);
  return s;
}

inline const capability_report& system_report() {
  static const capability_report report = probe_capabilities(topology::system());
  return report;
}

inline std::string capability_report::to_string() const {
  std::string s = "numaaff capability report (kernel " + kernel_release + ")\n";
  std::size_t width = 0;
  for (const capability& c : items) width = std::max(width, c.name.size());
  for (const capability& c : items) {
    s += "  " + c.name + std::string(width - c.name.size() + 2, ' ') + detail::state_name(c.state) + ": " +
         c.detail + "\n" + std::string(width + 6, ' ') + "-> " + c.action + "\n";
  }
  s += std::string("placement effective: ") + (placement_effective() ? "yes" : "no (placement calls are no-ops here)") + "\n";
  return s;
}

}  // namespace numaaff
