/* A C user's program: numaaff.h and numaaff::c (or pkg-config numaaff-c), nothing else. */
#include <numaaff/numaaff.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  int node = 0;
  size_t count = 0;
  if (numaaff_nodes(&node, 1, &count) != 0) return 1;
  char* p = numaaff_alloc_onnode(1 << 20, node);
  if (p == NULL) return 2;
  memset(p, 1, 1 << 20);
  if (numaaff_next_touch(p, 1 << 20) != 0) return 3;
  p[12345] = 2;
  numaaff_free(p, 1 << 20);
  printf("C consumer: %zu node(s)\n", count);
  return 0;
}
