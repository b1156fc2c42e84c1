/* hbw_named_nodes: a program of hbwmalloc's API run with MEMKIND_HBW_NODES set, which
 * hbwmalloc(3) says names the nodes treated as high-bandwidth (the way to use hbwmalloc on a
 * machine whose firmware gives no HMAT). It sets HBW_POLICY_BIND and asks for 4 MiB:
 *   none:        the variable names no node with memory (or does not parse): hbw_check_available()
 *                says ENODEV and the block is NULL with ENOMEM;
 *   NODE:        hbw_check_available() says 0 and the block is given;
 *   NODE place:  also every page of it, written, is on NODE by a raw move_pages query, and
 *                hbw_verify_memory_region calls it high-bandwidth (in the emulated guests,
 *                run by tests/numa/test_kind_numa.cpp from a CPU of node 0).
 * Exit status 0 when it behaves so, else the number of the check that failed. */
#include <numaaff/hbwmalloc.h>

#include <errno.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
    const size_t bytes = (size_t)4 << 20, page = 4096, pages = bytes / page;
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "place") != 0)) {
        fprintf(stderr, "usage: MEMKIND_HBW_NODES=LIST hbw_named_nodes none|NODE [place]\n");
        return 2;
    }
    const int none = strcmp(argv[1], "none") == 0;
    const int node = none ? -1 : atoi(argv[1]);
    if (hbw_check_available() != (none ? ENODEV : 0)) return 3;
    if (hbw_set_policy(HBW_POLICY_BIND) != 0) return 4;
    errno = 0;
    char* p = hbw_malloc(bytes);
    if (none) return p == NULL && errno == ENOMEM ? 0 : 5;
    if (p == NULL) return 6;
    memset(p, 1, bytes);
    if (argc == 3) {
        void** at = malloc(pages * sizeof *at);
        int* status = malloc(pages * sizeof *status);
        if (at == NULL || status == NULL) return 7;
        for (size_t i = 0; i < pages; ++i) at[i] = p + i * page;
        if (move_pages(0, pages, at, NULL, status, 0) != 0) return 8;
        for (size_t i = 0; i < pages; ++i)
            if (status[i] != node) {
                fprintf(stderr, "page %zu on node %d, not %d\n", i, status[i], node);
                return 9;
            }
        if (hbw_verify_memory_region(p, bytes, 0) != 0) return 10;
        free(at);
        free(status);
    }
    hbw_free(p);
    return 0;
}
