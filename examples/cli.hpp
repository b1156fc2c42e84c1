// cli.hpp: the command-line handling shared by the examples and the experiment programs in
// benchmarks/. Options are `--name value` or `--flag`; a value out of range, an unknown option
// or a stray argument prints the usage on stderr and exits with status 2, so scripts and CI see
// a mistake at once instead of a run with silently different settings. `--help` prints the
// usage on stdout and exits 0.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace example_cli {

class args {
 public:
  args(int argc, char** argv, std::string usage) : program_(argv[0]), usage_(std::move(usage)) {
    for (int i = 1; i < argc; ++i) rest_.emplace_back(argv[i]);
    if (flag("help") || flag("h")) {
      std::printf("usage: %s %s\n", program_.c_str(), usage_.c_str());
      std::exit(0);
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s %s\n", program_.c_str(), why.c_str(), program_.c_str(), usage_.c_str());
    std::exit(2);
  }

  /// The value of `--name VALUE` (removed), or `fallback`.
  std::string text(const char* name, const char* fallback) {
    std::string v = fallback;
    value(name, v);
    return v;
  }

  /// `--name` present (and removed).
  bool flag(const char* name) {
    for (auto it = rest_.begin(); it != rest_.end(); ++it) {
      if (*it == std::string("--") + name || *it == std::string("-") + name) {
        rest_.erase(it);
        return true;
      }
    }
    return false;
  }

  /// `--name N` with lo <= N <= hi, or `fallback`.
  long integer(const char* name, long fallback, long lo, long hi) {
    std::string v;
    if (!value(name, v)) return fallback;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
      fail("--" + std::string(name) + " takes an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", not '" + v + "'");
    return n;
  }

  /// `--name N` as a size or count (lo >= 0).
  std::size_t size(const char* name, long fallback, long lo, long hi) {
    return static_cast<std::size_t>(integer(name, fallback, lo, hi));
  }

  /// `--name WORD` with WORD one of `allowed`, or `fallback`.
  std::string choice(const char* name, const char* fallback, std::initializer_list<const char*> allowed) {
    std::string v;
    if (!value(name, v)) return fallback;
    std::string list;
    for (const char* a : allowed) {
      if (v == a) return v;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    fail("--" + std::string(name) + " takes one of " + list + ", not '" + v + "'");
  }

  /// Call after the last query: anything left is a mistake.
  void done() const {
    if (!rest_.empty()) fail("unexpected argument '" + rest_.front() + "'");
  }

 private:
  bool value(const char* name, std::string& out) {
    for (auto it = rest_.begin(); it != rest_.end(); ++it) {
      if (*it != std::string("--") + name) continue;
      if (it + 1 == rest_.end()) fail("--" + std::string(name) + " needs a value");
      out = *(it + 1);
      rest_.erase(it, it + 2);
      return true;
    }
    return false;
  }

  std::string program_;
  std::string usage_;
  std::vector<std::string> rest_;
};

}  // namespace example_cli
