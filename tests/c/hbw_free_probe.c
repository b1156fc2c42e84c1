/* hbw_free_probe: an LD_PRELOAD library for tests/numa/test_kind_numa.cpp. It stands in front
 * of hbw_free, says on stderr where the first page of each block freed lies by a raw move_pages
 * query ("hbw_free probe: node N"), then frees it: so a program that cannot be changed (memkind's
 * own example) shows where its high-bandwidth blocks were. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>

void hbw_free(void* ptr) {
    static void (*real)(void*) = NULL;
    if (real == NULL) *(void**)&real = dlsym(RTLD_NEXT, "hbw_free");
    if (ptr != NULL) {
        void* page = (void*)((uintptr_t)ptr & ~(uintptr_t)4095);
        int status = -1;
        if (move_pages(0, 1, &page, NULL, &status, 0) == 0) fprintf(stderr, "hbw_free probe: node %d\n", status);
    }
    if (real != NULL) real(ptr);
}
