/* hbw_named_nodes: a program of hbwmalloc's API run with MEMKIND_HBW_NODES set, which
 * hbwmalloc(3) says names the nodes treated as high-bandwidth (the way to use hbwmalloc on a
 * machine whose firmware gives no HMAT).
 *   none [preferred]: the variable names no node with memory (or does not parse):
 *                    hbw_check_available() says ENODEV, and a block under HBW_POLICY_BIND is
 *                    NULL with ENOMEM (under HBW_POLICY_PREFERRED: given, from other memory);
 *   NODE:            hbw_check_available() says 0 and a block of 4 MiB under HBW_POLICY_BIND
 *                    is given;
 *   NODE bind|preferred:
 *                    also every page of it (under that policy), written, is on NODE by a raw
 *                    move_pages query, and hbw_verify_memory_region calls it high-bandwidth;
 *   interleave A B:  the variable names A and B: a block of 16 MiB under
 *                    HBW_POLICY_INTERLEAVE, written, has every page on A or B, half on each
 *                    within 1%.
 * The last two run in the emulated guests (tests/numa/test_kind_numa.cpp, from a CPU of node 0).
 * Exit status 0 when it behaves so, else the number of the check that failed. */
#include <numaaff/hbwmalloc.h>

#include "page_nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int interleaved(int a, int b) {
    const size_t bytes = (size_t)16 << 20, pages = bytes / page_nodes_page;
    if (hbw_check_available() != 0) return 3;
    if (hbw_set_policy(HBW_POLICY_INTERLEAVE) != 0) return 4;
    char* p = hbw_malloc(bytes);
    int* status = malloc(pages * sizeof *status);
    if (p == NULL || status == NULL) return 6;
    memset(p, 1, bytes);
    if (page_nodes(p, bytes, status) != 0) return 8;
    size_t on_a = 0, on_b = 0;
    for (size_t i = 0; i < pages; ++i) {
        on_a += status[i] == a;
        on_b += status[i] == b;
    }
    const size_t half = pages / 2, slack = pages / 100;
    if (on_a + on_b != pages || on_a + slack < half || on_a > half + slack) {
        fprintf(stderr, "interleave: %zu pages on %d, %zu on %d, of %zu\n", on_a, a, on_b, b, pages);
        return 9;
    }
    if (hbw_verify_memory_region(p, bytes, 0) != 0) return 10;
    hbw_free(p);
    free(status);
    return 0;
}

int main(int argc, char** argv) {
    const size_t bytes = (size_t)4 << 20, pages = bytes / page_nodes_page;
    if (argc == 4 && strcmp(argv[1], "interleave") == 0) return interleaved(atoi(argv[2]), atoi(argv[3]));
    const int preferred = argc == 3 && strcmp(argv[2], "preferred") == 0;
    const int placed = argc == 3 && strcmp(argv[1], "none") != 0;
    if (argc < 2 || argc > 3 || (argc == 3 && !preferred && (!placed || strcmp(argv[2], "bind") != 0))) {
        fprintf(stderr, "usage: MEMKIND_HBW_NODES=LIST hbw_named_nodes none [preferred]|NODE [bind|preferred]|interleave A B\n");
        return 2;
    }
    const int none = strcmp(argv[1], "none") == 0;
    const int node = none ? -1 : atoi(argv[1]);
    if (hbw_check_available() != (none ? ENODEV : 0)) return 3;
    if (hbw_set_policy(preferred ? HBW_POLICY_PREFERRED : HBW_POLICY_BIND) != 0) return 4;
    errno = 0;
    char* p = hbw_malloc(bytes);
    if (none && preferred) {
        if (p == NULL) return 5;
        memset(p, 1, bytes);
        hbw_free(p);
        return 0;
    }
    if (none) return p == NULL && errno == ENOMEM ? 0 : 5;
    if (p == NULL) return 6;
    memset(p, 1, bytes);
    if (placed) {
        int* status = malloc(pages * sizeof *status);
        if (status == NULL) return 7;
        if (page_nodes(p, bytes, status) != 0) return 8;
        for (size_t i = 0; i < pages; ++i)
            if (status[i] != node) {
                fprintf(stderr, "%s: page %zu on node %d, not %d\n", argv[2], i, status[i], node);
                return 9;
            }
        if (hbw_verify_memory_region(p, bytes, 0) != 0) return 10;
        free(status);
    }
    hbw_free(p);
    return 0;
}
