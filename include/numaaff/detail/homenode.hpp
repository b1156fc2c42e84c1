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
};
__attribute__((tls_model("initial-exec"))) inline thread_local homenode_state thread_home;

/// The calling thread's homenode where it may place memory: -1 when none is set or it is a
/// logical node of a topology that is not this machine's.
inline int memory_homenode() noexcept { return thread_home.kernel ? thread_home.node : -1; }

}  // namespace numaaff::detail
