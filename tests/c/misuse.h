/* The C tests' check that a misuse of the heap aborts with a message. */
#ifndef NUMAAFF_TEST_MISUSE_H
#define NUMAAFF_TEST_MISUSE_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs `misuse` in a forked child with its stderr in a pipe: 1 if the child died of SIGABRT
 * after writing `message`. */
static inline int aborts_saying(void (*misuse)(void), const char* message) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  fflush(NULL); /* the child must not print the parent's buffered lines again */
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    alarm(20); /* a hang ends as SIGALRM, not as the abort looked for */
    misuse();
    _exit(0);
  }
  close(fds[1]);
  char said[512];
  size_t n = 0;
  ssize_t got;
  while (n < sizeof said - 1 && (got = read(fds[0], said + n, sizeof said - 1 - n)) > 0) n += (size_t)got;
  said[n] = '\0';
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(said, message) != NULL;
}
#endif
