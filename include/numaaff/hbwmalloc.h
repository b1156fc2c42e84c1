/**
 * @file hbwmalloc.h
 * @brief The hbwmalloc API (memkind's high-bandwidth memory interface) over numaaff's heap by
 * kind: a program written for memkind's <hbwmalloc.h> builds against numaaff by changing the
 * include to <numaaff/hbwmalloc.h> and the link line to numaaff::c (`pkg-config --libs numaaff-c`).
 *
 * The model, as hbwmalloc(3) gives it: high-bandwidth memory is, for the caller's node, the
 * node the firmware's HMAT gives the highest bandwidth when that is more than the caller's
 * own node's (HBM next to DRAM, say). Without an HMAT, or where no node is faster, there is
 * none: hbw_check_available() says ENODEV. MEMKIND_HBW_NODES, as in memkind, names the
 * high-bandwidth nodes instead (the kernel's list syntax, "1-3,5", read at the first hbw
 * call; numactl's "all", "!" and "+" forms are not read): the caller's is the nearest of them
 * by the kernel's distances; a list that does not parse, or names no node with memory, names
 * none. PREFERRED then spills from that node in the kernel's fallback order.
 * - HBW_POLICY_PREFERRED (the default): the nearest high-bandwidth node while it has room,
 *   then standard memory nearest first (numaaff_kind_with(NUMAAFF_KIND_FASTEST, PREFERRED);
 *   with MEMKIND_HBW_NODES, that node preferred, then the kernel's order from it).
 *   With no high-bandwidth memory: standard memory.
 * - HBW_POLICY_BIND and HBW_POLICY_BIND_ALL: only the nearest high-bandwidth node; a block over
 *   32 KiB it has no room for is NULL/ENOMEM (as is every block where there is none). numaaff
 *   checks the room of large blocks at allocation, small ones come from bound slabs; memory taken by others between then and the first touch can still
 *   meet the OOM killer, as the manual says of memkind. BIND_ALL binds to the nearest node too
 *   (memkind's binds to every high-bandwidth node, the nearest chosen at each fault).
 * - HBW_POLICY_INTERLEAVE: pages interleaved over every high-bandwidth node, no transparent
 *   huge pages.
 * hbw_set_policy() works once, before the first allocation (EPERM after; EINVAL for another
 * value). Blocks are freed with hbw_free() from any thread; a double free or a pointer the
 * heap did not give aborts with a message. hbw_posix_memalign_psize() with HBW_PAGESIZE_4KB
 * gives no huge pages; HBW_PAGESIZE_2MB and HBW_PAGESIZE_1GB take whole pages from the node's
 * reserved pool (/sys/devices/system/node/nodeN/hugepages/): BIND fails with ENOMEM when the
 * high-bandwidth node's pool is short, PREFERRED takes another pool or else ordinary pages;
 * HBW_PAGESIZE_1GB_STRICT wants a size that is a multiple of 1 GiB (else EINVAL); none of the
 * three goes with HBW_POLICY_INTERLEAVE (EINVAL), as the manual says.
 *
 * @code{.c}
 * #include <numaaff/hbwmalloc.h>
 * double* a = hbw_malloc(n * sizeof *a);   // on HBM when there is some and room, else DRAM
 * if (!a) perror("hbw_malloc");
 * hbw_free(a);
 * @endcode
 */
#ifndef NUMAAFF_HBWMALLOC_H
#define NUMAAFF_HBWMALLOC_H

#include <stddef.h>
#include <stdlib.h>

#include "numaaff.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The fallback policy (hbw_set_policy); the values are memkind's. */
typedef enum {
  HBW_POLICY_BIND = 1,       /**< the nearest high-bandwidth node only */
  HBW_POLICY_PREFERRED = 2,  /**< the nearest high-bandwidth node, then standard memory */
  HBW_POLICY_INTERLEAVE = 3, /**< interleaved over the high-bandwidth nodes */
  HBW_POLICY_BIND_ALL = 4    /**< as HBW_POLICY_BIND here */
} hbw_policy_t;

/** Page sizes of hbw_posix_memalign_psize; the values are memkind's. */
typedef enum {
  HBW_PAGESIZE_4KB = 1,
  HBW_PAGESIZE_2MB = 2,
  HBW_PAGESIZE_1GB_STRICT = 3,
  HBW_PAGESIZE_1GB = 4,
  HBW_PAGESIZE_MAX_VALUE
} hbw_pagesize_t;

/** hbw_verify_memory_region: touch each page (read and write back its first byte) first. */
#define HBW_TOUCH_PAGES (1 << 0)

/** 0 when the system has high-bandwidth memory (MEMKIND_HBW_NODES names a node with memory,
 *  or, without it, some CPU node has a faster node), else ENODEV, as memkind's. */
NUMAAFF_C_API int hbw_check_available(void) NUMAAFF_C_NOEXCEPT;
/** `size` bytes by the policy; NULL for 0, or NULL and errno (ENOMEM) on failure. */
NUMAAFF_C_API void* hbw_malloc(size_t size) NUMAAFF_C_NOEXCEPT;
/** `nmemb * size` zeroed bytes; NULL when either is 0 or the product overflows (ENOMEM). */
NUMAAFF_C_API void* hbw_calloc(size_t nmemb, size_t size) NUMAAFF_C_NOEXCEPT;
/** `ptr` resized, contents kept up to the smaller size; NULL `ptr`: hbw_malloc; `size` 0:
 *  hbw_free(ptr), NULL. On failure NULL and errno, `ptr` untouched. */
NUMAAFF_C_API void* hbw_realloc(void* ptr, size_t size) NUMAAFF_C_NOEXCEPT;
/** Frees a block of any hbw_* call; NULL is a no-op. */
NUMAAFF_C_API void hbw_free(void* ptr) NUMAAFF_C_NOEXCEPT;
/** The bytes the block can hold. */
NUMAAFF_C_API size_t hbw_malloc_usable_size(void* ptr) NUMAAFF_C_NOEXCEPT;
/** `size` bytes aligned to `alignment` (a power of two, a multiple of sizeof(void*), else
 *  EINVAL) in `*memptr`; `size` 0: 0 with NULL there; ENOMEM. */
NUMAAFF_C_API int hbw_posix_memalign(void** memptr, size_t alignment, size_t size) NUMAAFF_C_NOEXCEPT;
/** hbw_posix_memalign with a page size (see the file comment): EINVAL for another value, a
 *  huge page size under HBW_POLICY_INTERLEAVE, or HBW_PAGESIZE_1GB_STRICT with a size that is
 *  not a multiple of 1 GiB; ENOMEM. */
NUMAAFF_C_API int hbw_posix_memalign_psize(void** memptr, size_t alignment, size_t size,
                                           hbw_pagesize_t pagesize) NUMAAFF_C_NOEXCEPT;
/** The current policy. */
NUMAAFF_C_API hbw_policy_t hbw_get_policy(void) NUMAAFF_C_NOEXCEPT;
/** Sets the policy: once, before the first allocation (EPERM otherwise); EINVAL for a value
 *  not listed above. */
NUMAAFF_C_API int hbw_set_policy(hbw_policy_t mode) NUMAAFF_C_NOEXCEPT;
/** 0 when every page of [addr, addr + size) is on a high-bandwidth node, -1 when one is not
 *  (or was never touched); EINVAL for a NULL addr, a zero size or an unknown flag; EFAULT when
 *  the pages cannot be queried. A raw page-status query per call: slow, for checks. */
NUMAAFF_C_API int hbw_verify_memory_region(void* addr, size_t size, int flags) NUMAAFF_C_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* NUMAAFF_HBWMALLOC_H */
