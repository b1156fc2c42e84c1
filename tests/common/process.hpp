// Running a command from a test: the shell, its merged output, and its status when it failed;
// or a function in a forked child that an alarm bounds; and this process's memory figures.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

namespace numaaff_test {

/// A size field of /proc/self/status in KiB ("VmRSS:", the resident size; "VmHWM:", its peak
/// since start or the last reset); 0 when absent.
inline std::size_t status_kib(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stoul(line.substr(std::string(field).size()));
  return 0;
}

/// Runs `cmd` with /bin/sh and returns stdout and stderr; a non-zero status is appended as
/// "(exit status N)" so that callers can both search the output and see the failure.
inline std::string run_command(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return "popen failed";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  return status == 0 ? out : out + "\n(exit status " + std::to_string(status) + ")";
}

/// Runs `f` (which returns an exit status) in a fork()ed child and says how that ended: "" for
/// status 0, else "exit status N", "hung (killed after N s)" or "killed by signal N". An alarm
/// bounds the child, so a hang fails the test in seconds. The child leaves with _exit: no
/// atexit handler, no flush of gtest's buffers, no destructor of the parent's objects.
template <class F>
std::string run_in_child(unsigned seconds, F f) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::alarm(seconds);
    int status = 125;
    try {
      status = f();
    } catch (...) {
    }
    ::_exit(status);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "waitpid failed";
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? std::string() : "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return "hung (killed after " + std::to_string(seconds) + " s)";
  return "killed by signal " + std::to_string(WTERMSIG(status));
}

}  // namespace numaaff_test
