// The node of the CPU that runs the calling thread, read where the kernel keeps it for the
// thread: the rseq area glibc registers for every thread (glibc 2.35 on). From Linux 6.3 the
// kernel writes the thread's node there (node_id) whenever it returns to the thread on another
// CPU, so the node is one load, where getcpu is a vDSO call that costs more than a small
// allocation. Without the field (an older kernel or C library, rseq turned off with the
// glibc.pthread.rseq tunable, a registration that failed) callers read the node with getcpu.
#pragma once

#include <cstdint>

#if __has_include(<sys/rseq.h>)
#include <sys/auxv.h>
#include <sys/rseq.h>
#endif

namespace numaaff::detail {

/// The calling thread's node_id in its rseq area, nullptr where the kernel does not keep it for
/// this thread. The pointer stays valid for the thread's life (the area is in its TLS); read
/// the field with a relaxed atomic load, the kernel writes it between the thread's
/// instructions. No allocation, no lock, no system call.
inline const std::uint32_t* rseq_node_field() noexcept {
#if defined(RSEQ_SIG) && defined(__x86_64__)
  // The area's layout (uapi linux/rseq.h): cpu_id_start, cpu_id, rseq_cs (8 bytes), flags,
  // node_id, mm_cid. glibc registers 32 bytes; which fields the kernel fills is the smaller
  // of that and AT_RSEQ_FEATURE_SIZE (0 before Linux 6.3: the first 20 bytes), except that a
  // glibc whose __rseq_size is neither 20 nor 32 gives the size itself, as librseq reads it.
  constexpr unsigned long cpu_id_offset = 4, node_id_offset = 20, node_id_end = 24;
  constexpr unsigned long original_size = 20, original_area = 32, at_rseq_feature_size = 27;
  unsigned long size = __rseq_size;
  if (size == 0) return nullptr;  // glibc registered no area
  if (size == original_size || size == original_area) {
    unsigned long kernel = getauxval(at_rseq_feature_size);
    if (kernel == 0) kernel = original_size;
    size = kernel < original_area ? kernel : original_area;
  }
  if (size < node_id_end) return nullptr;
  char* thread_pointer = nullptr;
  asm("mov %%fs:0, %0" : "=r"(thread_pointer));  // the TCB's pointer to itself: glibc's thread pointer
  char* area = thread_pointer + __rseq_offset;
  // -1 before the thread registers, -2 when its registration failed.
  const auto cpu = static_cast<std::int32_t>(__atomic_load_n(reinterpret_cast<const std::uint32_t*>(area + cpu_id_offset), __ATOMIC_RELAXED));
  if (cpu < 0) return nullptr;
  return reinterpret_cast<const std::uint32_t*>(area + node_id_offset);
#else
  return nullptr;
#endif
}

}  // namespace numaaff::detail
