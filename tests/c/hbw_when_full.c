/* hbw_when_full: a program written against memkind's hbwmalloc.h API alone (plus libnuma's raw
 * page query), run by tests/numa/test_kind_numa.cpp in the tiered guest while its parent holds
 * all of the high-bandwidth node's room. It sets the policy named by its argument before its
 * first allocation, as hbwmalloc(3) asks, and asks for 32 MiB:
 *   bind:      NULL with errno ENOMEM (hbwmalloc(3): not enough high-bandwidth memory);
 *   preferred: a block that is all resident, not all on the high-bandwidth node (it fell back),
 *              and that hbw_verify_memory_region does not call high-bandwidth.
 * Exit status 0 when it behaves so, else the number of the check that failed. */
#include <numaaff/hbwmalloc.h>

#include "page_nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
    const size_t bytes = (size_t)32 << 20, pages = bytes / page_nodes_page;
    const int bind = argc == 3 && strcmp(argv[1], "bind") == 0;
    const int hbm = argc == 3 ? atoi(argv[2]) : -1;
    if (argc != 3 || (!bind && strcmp(argv[1], "preferred") != 0)) {
        fprintf(stderr, "usage: hbw_when_full bind|preferred HBM_NODE\n");
        return 2;
    }
    if (hbw_check_available() != 0) return 3;
    if (hbw_set_policy(bind ? HBW_POLICY_BIND : HBW_POLICY_PREFERRED) != 0) return 4;
    errno = 0;
    char* p = hbw_malloc(bytes);
    if (bind) return p == NULL && errno == ENOMEM ? 0 : 5;
    if (p == NULL) return 6;
    memset(p, 1, bytes);
    int* status = malloc(pages * sizeof *status);
    if (status == NULL) return 7;
    if (page_nodes(p, bytes, status) != 0) return 8;
    size_t on_hbm = 0;
    for (size_t i = 0; i < pages; ++i) {
        if (status[i] < 0) return 9; /* every page was written: resident */
        on_hbm += status[i] == hbm;
    }
    if (on_hbm == pages) {
        fprintf(stderr, "preferred: all %zu pages on the full node %d\n", pages, hbm);
        return 10;
    }
    if (hbw_verify_memory_region(p, bytes, 0) == 0) return 11;
    hbw_free(p);
    free(status);
    return 0;
}
