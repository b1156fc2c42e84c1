/**
 * @file homenode.hpp
 * @brief The homenode of the calling thread, and binding the calling thread to a node.
 *
 * A *homenode* is the node a thread or task belongs to: it runs there, and the memory it
 * allocates is placed there (local_allocator, local_resource, next touch's
 * `toucher_homenode`). Inside a thread-pool task it is the task's; a plain thread (one of the
 * application's, an OpenMP or MPI thread) has none until it says so:
 * - set_homenode(n): memory only. The thread's allocations go to node n wherever it runs.
 * - pin_this_thread(n): both. The thread runs on node n's CPUs from now on (the kernel's
 *   balancer can no longer move it away from its memory) and n becomes its homenode.
 *
 * One node: every call works; node 0 is the only valid node and pinning binds to every CPU
 * the process may use.
 *
 * @code{.cpp}
 * std::thread t([] {
 *   numaaff::pin_this_thread(1);              // runs on node 1's CPUs, homenode 1
 *   std::vector<double, numaaff::local_allocator<double>> v(1 << 20);  // on node 1
 * });
 * @endcode
 */
#pragma once

#include "detail/homenode.hpp"
#include "detail/numa_calls.hpp"
#include "detail/pinning.hpp"
#include "detail/running_node.hpp"
#include "detail/text.hpp"
#include "detail/throw.hpp"
#include "topology.hpp"

#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff {

namespace detail {

/// `NUMAAFF_HOMENODE`, read once: the homenode of threads that set none (-1 when unset).
inline node_id environment_homenode() {
  static const node_id node = [] {
    const char* v = std::getenv("NUMAAFF_HOMENODE");
    if (v == nullptr || trim(v).empty()) return -1;
    int n = -1;
    if (!parse_int(v, n) || !valid_node(n))
      throw_invalid_argument(std::string("NUMAAFF_HOMENODE='") + v + "': expected one of the kernel's nodes (" +
                             format_list(kernel_nodes()) + ")");
    return n;
  }();
  return node;
}

/// Where "local" memory of the calling thread goes: this_homenode(), except that a logical
/// node of a pool on a synthetic or XML topology never reaches the kernel (the thread's
/// memory then goes where this_homenode() would go without it).
inline node_id local_node() {
  const int home = memory_homenode();
  if (home >= 0) return home;
  const node_id env = environment_homenode();
  return env >= 0 ? env : current_node();
}

/// Reads the node of the calling thread's small local blocks again, for local_node_cached (out
/// of line: the rare path): its homenode where it places memory there, else NUMAAFF_HOMENODE's,
/// else the node it runs on; and says where to read it from now on.
[[gnu::noinline]] inline node_id refresh_current_node() noexcept {
  homenode_state& h = thread_home;
  node_id n = memory_homenode();
  if (n < 0) {
    try {
      n = environment_homenode();
    } catch (...) {
      return -1;
    }
  }
  if (n < 0) {
    if (const std::uint32_t* running = rseq_node_field()) {
      // The same object as a signed int (a signed and an unsigned type of one size may alias).
      h.source = reinterpret_cast<const int*>(running);
      return static_cast<node_id>(__atomic_load_n(running, __ATOMIC_RELAXED));
    }
    std::error_code ec;
    n = current_node(ec);
    if (n < 0) return -1;
    h.current = n;
    h.current_uses = current_node_reuse - 1;
    return n;
  }
  h.current = n;
  h.source = &h.current;
  return n;
}

/// local_node() for the heap's small blocks, without throwing: one load where the node has a
/// source (a homenode, the kernel's rseq area), else getcpu's answer read again every
/// current_node_reuse calls; at once after the homenode changed (detail/homenode.hpp says
/// why). -1 when the node cannot be had without an exception (a bad NUMAAFF_HOMENODE, a
/// failing getcpu): the caller then takes the path that reports it.
inline node_id local_node_cached() noexcept {
  homenode_state& h = thread_home;
  if (const int* source = h.source) return __atomic_load_n(source, __ATOMIC_RELAXED);
  if (h.current_uses != 0) {
    --h.current_uses;
    return h.current;
  }
  return refresh_current_node();
}

}  // namespace detail

/**
 * The calling thread's homenode: inside a thread-pool task, the task's; else the one
 * set_homenode() gave the thread; else the process's (`NUMAAFF_HOMENODE`, as the launcher
 * `numaaff-run -n` sets it); else the node the thread runs on now. Thread-safe, no allocation,
 * no blocking. @throws std::invalid_argument when `NUMAAFF_HOMENODE` is not a kernel node.
 */
inline node_id this_homenode() {
  if (detail::thread_home.node >= 0) return detail::thread_home.node;
  const node_id env = detail::environment_homenode();
  return env >= 0 ? env : current_node();
}

/**
 * Sets the calling thread's homenode (memory only: it does not move the thread; the thread
 * pool's workers are bound to theirs). `-1` clears it.
 * @throws std::invalid_argument for a node the kernel does not have.
 */
inline void set_homenode(node_id node) {
  if (node != -1) detail::require_node("set_homenode", node);
  detail::thread_home = {node, true};
}

namespace detail {

/// The kernel nodes with CPUs this process may use: pinning binds real CPUs, whatever
/// NUMAAFF_TOPOLOGY says.
inline std::vector<node_id> nodes_with_usable_cpus() {
  std::vector<node_id> out;
  for (node_id n : kernel_nodes())
    if (!usable_cpus_of(n).empty()) out.push_back(n);
  return out;
}

}  // namespace detail

/**
 * Binds the calling thread to the CPUs of `node` that this process may use (the process's
 * CPU binding at start-up, which the cgroup cpuset bounds), and makes `node` its homenode, so
 * that the thread runs where its memory goes and the kernel's NUMA balancing cannot move it
 * to another node.
 *
 * Thread-safe (affects only the calling thread). Reads the node's sysfs CPU list and
 * allocates small vectors. A sandbox that forbids
 * sched_setaffinity (EPERM) makes it a no-op for the CPUs, counted in refusal_stats(); the
 * homenode is still set.
 * @throws std::invalid_argument naming `node` for a node the kernel does not have, or one
 *         without CPUs this process may use (a memory-only node, or outside the cpuset).
 * @throws std::system_error named "sched_setaffinity" if the kernel refuses the mask otherwise.
 */
inline void pin_this_thread(node_id node, std::error_code& ec) noexcept {
  ec.clear();
  try {
    const std::vector<int> cpus = detail::valid_node(node) ? detail::usable_cpus_of(node) : std::vector<int>{};
    if (cpus.empty()) {
      ec = std::make_error_code(std::errc::invalid_argument);
      return;
    }
    ec = detail::pin_to_mask(detail::cpu_mask(cpus));
    if (ec && detail::refused(ec.value())) {
      detail::refusals.pinnings.fetch_add(1, std::memory_order_relaxed);
      ec.clear();
    }
    if (!ec) detail::thread_home = {node, true};
  } catch (const std::system_error& e) {
    ec = e.code();
  } catch (...) {
    ec = std::make_error_code(std::errc::not_enough_memory);
  }
}

inline void pin_this_thread(node_id node) {
  detail::require_node("pin_this_thread", node);
  if (detail::usable_cpus_of(node).empty())
    detail::throw_invalid_argument("pin_this_thread: node " + std::to_string(node) +
                                   " has no CPU this process may use (nodes with CPUs: " +
                                   detail::format_list(detail::nodes_with_usable_cpus()) + ")");
  detail::or_throw("pin_this_thread", [&](std::error_code& ec) { pin_this_thread(node, ec); });
}

}  // namespace numaaff
