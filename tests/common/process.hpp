// Running a command from a test: the shell, its merged output, and its status when it failed.
#pragma once

#include <cstdio>
#include <string>

namespace numaaff_test {

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

}  // namespace numaaff_test
