/* The I/O guard linked into a C program (the other way to get it than LD_PRELOAD): memory
 * armed through the C library (its own copy of numaaff) is read into, received into and
 * written from by plain libc calls, every byte kept. Exit status = number of failed checks. */
#include <numaaff/numaaff.h>

#include "check.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
  const size_t ps = (size_t)sysconf(_SC_PAGESIZE), bytes = 8 * ps;
  char* a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(a != MAP_FAILED);
  char data[3000];
  for (size_t i = 0; i < sizeof data; ++i) data[i] = (char)('A' + i % 26);
  int p[2], s[2];
  CHECK(pipe(p) == 0 && socketpair(AF_UNIX, SOCK_DGRAM, 0, s) == 0);
  CHECK(write(p[1], data, sizeof data) == (ssize_t)sizeof data);
  CHECK(send(s[0], data, 1500, 0) == 1500);
  CHECK(numaaff_next_touch(a, bytes) == 0);
  CHECK(read(p[0], a + 10, sizeof data) == (ssize_t)sizeof data && memcmp(a + 10, data, sizeof data) == 0);
  CHECK(recv(s[1], a + 4 * ps, 1500, MSG_DONTWAIT) == 1500 && memcmp(a + 4 * ps, data, 1500) == 0);
  CHECK(numaaff_next_touch(a, bytes) == 0);
  CHECK(write(p[1], a + 10, 100) == 100);
  char back[100];
  CHECK(read(p[0], back, sizeof back) == 100 && memcmp(back, data, sizeof back) == 0);
  numaaff_disarm(a, bytes);
  munmap(a, bytes);
  printf("%d failed\n", failures);
  return failures;
}
