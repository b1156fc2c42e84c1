// The calling thread's homenode, stored where the allocators, the thread pool and the
// next-touch handler can reach it without including each other: -1 means "none set", in which
// case the thread's current node stands in. The public accessors are
// numaaff::this_homenode()/set_homenode().
//
// A pool built on a synthetic or XML topology gives its tasks logical nodes of that topology:
// they schedule, but no system call may ever see them, so the state says whether the node is
// one of this machine's (`kernel`). Constant-initialised and initial-exec: the SIGSEGV handler
// reads it without a TLS call that could allocate.
#pragma once

namespace numaaff::detail {

struct homenode_state {
  int node = -1;
  bool kernel = true;  ///< node is a kernel node number, not a logical node of another topology
  /// Where the heap's small blocks of the local kind go (local_node_cached): the homenode where
  /// the thread places memory there, else the node it runs on. `source` says where to read it
  /// with one load: `current` for a homenode, the kernel's rseq area for the node it runs on
  /// (detail/running_node.hpp). Without an rseq node a getcpu, which costs more than a whole
  /// small allocation, gives `current`, read again only after `current_uses` more of them.
  /// Either is looked for again at once after numaaff pins the thread (pin_to_mask) or the
  /// homenode changes: a new homenode_state starts with no source, and code that changes `node`
  /// or `kernel` alone calls forget_current_node().
  const int* source = nullptr;
  int current = -1;
  unsigned current_uses = 0;
};
__attribute__((tls_model("initial-exec"))) inline thread_local homenode_state thread_home;

/// The calling thread's homenode where it may place memory: -1 when none is set or it is a
/// logical node of a topology that is not this machine's.
inline int memory_homenode() noexcept { return thread_home.kernel ? thread_home.node : -1; }

/// Without an rseq node, how many small local blocks a thread takes before its current node is
/// read again: a thread the kernel moves (or that moves itself without numaaff) gets local
/// blocks on its new node from the 65th allocation on at the latest (at once with one).
inline constexpr unsigned current_node_reuse = 64;

/// The cached node is read again at the next small local allocation.
inline void forget_current_node() noexcept {
  thread_home.source = nullptr;
  thread_home.current_uses = 0;
}

}  // namespace numaaff::detail
