// numaaff-run --report: runs the command as a child, samples its counters (held open, so its
// final image is read after it exits) and its memory per node five times a second, then
// prints a per-node summary to stderr: what ran where, what was stolen, what moved there, what
// could not be moved, where its memory was at the end; with --report=FILE.json, the time
// series too (numaaff-report-plot draws it). Public calls only.
#pragma once

#include <numaaff/numaaff.hpp>

#include "json_text.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace numaaff_run {

struct report_sample {
  double t = 0;                                  // seconds since the start
  numaaff::counter_snapshot counters;            // empty until the command publishes
  std::map<numaaff::node_id, std::uint64_t> memory;  // its bytes per node (numa_maps)
};

inline std::string json_nodes(const report_sample& s) {
  std::string j = "[";
  bool first = true;
  for (numaaff::node_id n : numaaff::online_nodes()) {
    const numaaff::node_counters* c = s.counters.node(n);
    const numaaff::node_counters z;
    const numaaff::node_counters& r = c != nullptr ? *c : z;
    const auto m = s.memory.find(n);
    j += std::string(first ? "" : ",") + "{\"node\":" + std::to_string(n) + ",\"tasks_run\":" + std::to_string(r.tasks_run) +
         ",\"stolen_in\":" + std::to_string(r.stolen_in) + ",\"stolen_out\":" + std::to_string(r.stolen_out) +
         ",\"next_touch_pages_moved\":" + std::to_string(r.next_touch_pages_moved) + ",\"pages_moved\":" +
         std::to_string(r.pages_moved) + ",\"pages_not_moved\":" + std::to_string(r.pages_not_moved + r.next_touch_pages_failed) +
         ",\"heap_bytes\":" + std::to_string(r.heap_bound_bytes + r.heap_preferred_bytes) +
         ",\"process_bytes\":" + std::to_string(m != s.memory.end() ? m->second : 0) + "}";
    first = false;
  }
  return j + "]";
}

/// Runs argv[0..] as a child and reports on it. @return its exit status (128 + signal).
inline int run_with_report(char* const* argv, const std::string& file) {
  const auto start = std::chrono::steady_clock::now();
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "numaaff-run: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    // Its counters' file stays after it exits, for this process to read its final counts.
    ::setenv("NUMAAFF_COUNTERS_KEEP_FOR", std::to_string(::getppid()).c_str(), 1);
    ::execvp(argv[0], argv);
    std::fprintf(stderr, "numaaff-run: %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  // A ^C reaches the command too (same process group); this process stays to report.
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  numaaff::counter_reader reader;
  std::vector<report_sample> samples;
  int status = 0;
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (;;) {
    const pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) break;
    if (w < 0 && errno != EINTR) break;
    if (!reader.is_open()) {
      std::error_code ec;
      reader = numaaff::counter_reader(child, ec);  // appears at the command's first call that counts
    }
    report_sample s;
    s.t = seconds();
    std::error_code ec;
    if (reader.is_open()) s.counters = reader.read(ec);
    if (ec && !samples.empty()) s.counters = samples.back().counters;  // not yet filled, or torn: the last good one
    s.memory = numaaff::process_memory_by_node(child, ec);
    if (!ec) samples.push_back(std::move(s));  // a sample of a process that just exited has no memory
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  report_sample last;
  last.t = seconds();
  if (!samples.empty()) last.memory = samples.back().memory;  // where its memory was, last seen
  std::error_code ec;
  if (!reader.is_open()) reader = numaaff::counter_reader(child, ec);  // it ended before the first look
  if (reader.is_open()) {
    last.counters = reader.read(ec);  // the final image it published at exit
    reader.discard();                 // the file it left for us
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;

  std::fprintf(stderr, "numaaff-run: report of pid %ld (%s), %.2f s, exit status %d\n", static_cast<long>(child), argv[0], last.t, code);
  if (!reader.is_open())
    std::fprintf(stderr, "  no numaaff counters: the command made no numaaff call that counts, or runs with NUMAAFF_COUNTERS=off\n");
  std::uint64_t total_memory = 0;
  for (const auto& [n, b] : last.memory) total_memory += b;
  std::fprintf(stderr, "  %4s %10s %10s %10s %12s %12s %10s %12s %7s\n", "node", "tasks", "stolen_in", "stolen_out", "next_touch", "moved_to",
               "not_moved", "memory_MiB", "share%");
  for (numaaff::node_id n : numaaff::online_nodes()) {
    const numaaff::node_counters* c = last.counters.node(n);
    const numaaff::node_counters z;
    const numaaff::node_counters& r = c != nullptr ? *c : z;
    const auto m = last.memory.find(n);
    const double bytes = m != last.memory.end() ? static_cast<double>(m->second) : 0.0;
    std::fprintf(stderr, "  %4d %10llu %10llu %10llu %12llu %12llu %10llu %12.1f %7.1f\n", n, static_cast<unsigned long long>(r.tasks_run),
                 static_cast<unsigned long long>(r.stolen_in), static_cast<unsigned long long>(r.stolen_out),
                 static_cast<unsigned long long>(r.next_touch_pages_moved), static_cast<unsigned long long>(r.pages_moved),
                 static_cast<unsigned long long>(r.pages_not_moved + r.next_touch_pages_failed), bytes / (1024.0 * 1024.0),
                 total_memory > 0 ? 100.0 * bytes / static_cast<double>(total_memory) : 0.0);
  }
  std::fprintf(stderr, "  (tasks stolen_in ran here away from their homenode; next_touch and moved_to: pages moved here; "
                       "not_moved: pages that could not be moved here; memory: where the command's pages were last seen)\n");
  if (!file.empty()) {
    std::FILE* f = std::fopen(file.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "numaaff-run: %s: %s\n", file.c_str(), std::strerror(errno));
      return code != 0 ? code : 1;
    }
    std::string j = "{\"format\":1,\"pid\":" + std::to_string(child) + ",\"command\":" + numaaff_tools::json_string(argv[0]) +
                    ",\"exit_status\":" + std::to_string(code) + ",\"seconds\":" + std::to_string(last.t) +
                    ",\"numaaff\":" + (reader.is_open() ? "true" : "false") + ",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i)
      j += std::string(i ? "," : "") + "{\"t\":" + std::to_string(samples[i].t) + ",\"nodes\":" + json_nodes(samples[i]) + "}";
    j += "],\"final\":{\"t\":" + std::to_string(last.t) + ",\"nodes\":" + json_nodes(last) + "}}\n";
    std::fputs(j.c_str(), f);
    std::fclose(f);
  }
  return code;
}

}  // namespace numaaff_run
