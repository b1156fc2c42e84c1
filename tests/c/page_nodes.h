/* The node of every page of a block, by a raw move_pages query (no target nodes: it only
 * reports), for the C test programs that check where hbwmalloc put a block. */
#ifndef NUMAAFF_TEST_PAGE_NODES_H
#define NUMAAFF_TEST_PAGE_NODES_H

#include <numaif.h>
#include <stdlib.h>

enum { page_nodes_page = 4096 };

/* Fills status[i] with the node of page i of [p, p + bytes) (written before, so resident, or
 * a negative errno); 0 on success, -1 when the query or its array could not be made. */
static inline int page_nodes(char* p, size_t bytes, int* status) {
    const size_t pages = bytes / page_nodes_page;
    void** at = malloc(pages * sizeof *at);
    if (at == NULL) return -1;
    for (size_t i = 0; i < pages; ++i) at[i] = p + i * page_nodes_page;
    const long rc = move_pages(0, pages, at, NULL, status, 0);
    free(at);
    return rc == 0 ? 0 : -1;
}

#endif
