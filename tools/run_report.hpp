// numaaff-run --report: runs the command as a child, samples its counters (held open, so its
// final image is read after it exits) and its memory per node five times a second, then
// prints a per-node summary to stderr: what ran where, what was stolen (and from which node),
// how idle the workers were, what moved there, what could not be moved, what the kernel or a
// sandbox refused, where its memory was at the end; with --report=FILE.json, the time series
// of every counter too (numaaff-report-plot draws it). Public calls only.
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

inline std::string json_u(const char* key, std::uint64_t v) { return std::string(",\"") + key + "\":" + std::to_string(v); }

inline std::string json_nodes(const report_sample& s) {
  std::string j = "[";
  bool first = true;
  for (numaaff::node_id n : numaaff::online_nodes()) {
    const numaaff::node_counters* c = s.counters.node(n);
    const numaaff::node_counters z;
    const numaaff::node_counters& r = c != nullptr ? *c : z;
    const auto m = s.memory.find(n);
    j += std::string(first ? "" : ",") + "{\"node\":" + std::to_string(n) + json_u("workers", r.workers) + json_u("tasks_run", r.tasks_run) +
         json_u("stolen_local", r.stolen_local) + json_u("stolen_in", r.stolen_in) + json_u("stolen_out", r.stolen_out) +
         json_u("queued", r.queued) + json_u("sleeps", r.sleeps) + json_u("worker_ns", static_cast<std::uint64_t>(r.worker_time.count())) +
         json_u("idle_ns", static_cast<std::uint64_t>(r.idle_time.count())) + json_u("next_touch_faults", r.next_touch_faults) +
         json_u("next_touch_chunks", r.next_touch_chunks) + json_u("next_touch_pages_moved", r.next_touch_pages_moved) +
         json_u("next_touch_pages_already_there", r.next_touch_pages_already_there) +
         json_u("next_touch_pages_failed", r.next_touch_pages_failed) + json_u("pages_moved", r.pages_moved) +
         json_u("move_pages_not_moved", r.pages_not_moved) + json_u("pages_not_moved", r.pages_not_moved + r.next_touch_pages_failed) +
         json_u("heap_bound_bytes", r.heap_bound_bytes) + json_u("heap_preferred_bytes", r.heap_preferred_bytes) +
         json_u("heap_bytes", r.heap_bound_bytes + r.heap_preferred_bytes) + json_u("heap_node_bytes", r.heap_by_kind.node) +
         json_u("heap_local_bytes", r.heap_by_kind.local) + json_u("heap_interleave_bytes", r.heap_by_kind.interleave) +
         json_u("heap_fastest_bytes", r.heap_by_kind.fastest) + json_u("heap_capacity_bytes", r.heap_by_kind.capacity) +
         json_u("process_bytes", m != s.memory.end() ? m->second : 0) + "}";
    first = false;
  }
  return j + "]";
}

/// One sample's process-wide part and its steal matrix, rows and columns in the order of
/// json_nodes (row: the thief's node, column: the node it took from).
inline std::string json_process(const report_sample& s) {
  const numaaff::refusal_statistics& f = s.counters.refusals;
  std::string j = json_u("pools", s.counters.pools) + json_u("workers", s.counters.workers) + ",\"refusals\":{\"policies_skipped\":" +
                  std::to_string(f.policies_skipped) + json_u("mappings_unbound", f.mappings_unbound) +
                  json_u("pages_unmoved", f.pages_unmoved) + json_u("threads_unpinned", f.threads_unpinned) +
                  json_u("weighted_fallbacks", f.weighted_fallbacks) + json_u("huge_page_fallbacks", f.huge_page_fallbacks) +
                  "},\"steals\":[";
  const std::vector<numaaff::node_id> nodes = numaaff::online_nodes();
  for (std::size_t t = 0; t < nodes.size(); ++t) {
    j += t ? ",[" : "[";
    for (std::size_t v = 0; v < nodes.size(); ++v) j += (v ? "," : "") + std::to_string(s.counters.stolen_between(nodes[t], nodes[v]));
    j += "]";
  }
  return j + "]";
}

inline std::string json_sample(const report_sample& s) {
  return "{\"t\":" + std::to_string(s.t) + json_process(s) + ",\"nodes\":" + json_nodes(s) + "}";
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
  std::fprintf(stderr, "  %4s %10s %10s %10s %6s %12s %12s %10s %12s %7s\n", "node", "tasks", "stolen_in", "stolen_out", "idle%",
               "next_touch", "moved_to", "not_moved", "memory_MiB", "share%");
  const std::vector<numaaff::node_id> nodes = numaaff::online_nodes();
  for (numaaff::node_id n : nodes) {
    const numaaff::node_counters* c = last.counters.node(n);
    const numaaff::node_counters z;
    const numaaff::node_counters& r = c != nullptr ? *c : z;
    const auto m = last.memory.find(n);
    const double bytes = m != last.memory.end() ? static_cast<double>(m->second) : 0.0;
    const std::string idle = r.worker_time.count() > 0
                                 ? std::to_string(static_cast<int>(100.0 * static_cast<double>(r.idle_time.count()) /
                                                                   static_cast<double>(r.worker_time.count()) + 0.5))
                                 : "-";
    std::fprintf(stderr, "  %4d %10llu %10llu %10llu %6s %12llu %12llu %10llu %12.1f %7.1f\n", n, static_cast<unsigned long long>(r.tasks_run),
                 static_cast<unsigned long long>(r.stolen_in), static_cast<unsigned long long>(r.stolen_out), idle.c_str(),
                 static_cast<unsigned long long>(r.next_touch_pages_moved), static_cast<unsigned long long>(r.pages_moved),
                 static_cast<unsigned long long>(r.pages_not_moved + r.next_touch_pages_failed), bytes / (1024.0 * 1024.0),
                 total_memory > 0 ? 100.0 * bytes / static_cast<double>(total_memory) : 0.0);
  }
  std::fprintf(stderr, "  (tasks stolen_in ran here away from their homenode; idle%%: of its workers' time, searching or asleep; "
                       "next_touch and moved_to: pages moved here; not_moved: pages that could not be moved here; memory: where "
                       "the command's pages were last seen)\n");
  // Which node's workers ran which node's tasks: only when some work crossed nodes.
  std::uint64_t crossed = 0;
  for (numaaff::node_id t : nodes)
    for (numaaff::node_id v : nodes) crossed += last.counters.stolen_between(t, v);
  if (crossed > 0) {
    std::fprintf(stderr, "  tasks stolen between nodes (row: the workers' node, column: the node they took from):\n  %8s", "");
    for (numaaff::node_id v : nodes) std::fprintf(stderr, " %9d", v);
    std::fprintf(stderr, "\n");
    for (numaaff::node_id t : nodes) {
      std::fprintf(stderr, "  %8d", t);
      for (numaaff::node_id v : nodes) std::fprintf(stderr, " %9llu", static_cast<unsigned long long>(last.counters.stolen_between(t, v)));
      std::fprintf(stderr, "\n");
    }
  }
  const numaaff::refusal_statistics& refused = last.counters.refusals;
  if (refused.policies_skipped + refused.mappings_unbound + refused.pages_unmoved + refused.threads_unpinned + refused.weighted_fallbacks + refused.huge_page_fallbacks > 0)
    std::fprintf(stderr,
                 "  refused or fell back: %llu policies skipped, %llu mappings unbound, %llu pages unmoved, %llu threads unpinned, "
                 "%llu weighted interleaves as plain, %llu huge-page blocks on ordinary pages\n",
                 static_cast<unsigned long long>(refused.policies_skipped), static_cast<unsigned long long>(refused.mappings_unbound),
                 static_cast<unsigned long long>(refused.pages_unmoved), static_cast<unsigned long long>(refused.threads_unpinned),
                 static_cast<unsigned long long>(refused.weighted_fallbacks), static_cast<unsigned long long>(refused.huge_page_fallbacks));
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
      j += std::string(i ? "," : "") + json_sample(samples[i]);
    j += "],\"final\":" + json_sample(last) + "}\n";
    std::fputs(j.c_str(), f);
    std::fclose(f);
  }
  return code;
}

}  // namespace numaaff_run
