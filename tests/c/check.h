/* The C tests' one check: prints a line per check and counts the failures (the tests' exit
 * status is that count). */
#ifndef NUMAAFF_TEST_CHECK_H
#define NUMAAFF_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                        \
  do {                                                                     \
    if (cond) {                                                            \
      printf("ok   %s\n", #cond);                                          \
    } else {                                                               \
      printf("FAIL %s (line %d, errno %d)\n", #cond, __LINE__, errno);     \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

#endif
