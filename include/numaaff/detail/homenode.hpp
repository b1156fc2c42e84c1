// The calling thread's homenode, stored where both the allocators and the thread pool can
// reach it without including each other: -1 means "none set", in which case the thread's
// current node stands in. The public accessors are numaaff::this_homenode()/set_homenode().
#pragma once

namespace numaaff::detail {

inline thread_local int thread_homenode = -1;

}  // namespace numaaff::detail
