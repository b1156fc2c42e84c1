// A Google Benchmark main that also prints ratios between benchmarks of the same run, so that
// every speed target is a ratio against a baseline measured minutes apart on the same machine,
// never an absolute figure. It prints the topology it ran on first.
#pragma once

#include "ratio_line.hpp"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace numaaff_bench {

/// "numerator / denominator: at least (or at most) target" on a per-item rate, a wall time or
/// a CPU time (the process's for benchmarks registered with MeasureProcessCPUTime(), else the
/// benchmark thread's); or, for extra_ns_per_item, "numerator's time per item minus the
/// denominator's, in ns: at most target" (what one runtime adds to another's per-item cost);
/// or, for counter, the user counter named `counter` of both: at most target (a size, say);
/// or, for ns_per_item and cpu_ns_per_item, the numerator's wall (or process CPU) time per
/// item in ns, beside the denominator's as its target times `target` (the same figure a
/// rate or cpu_time ratio gives, as the two costs themselves).
struct ratio {
  std::string numerator;
  std::string denominator;
  enum class measure { rate, time, cpu_time, extra_ns_per_item, counter, ns_per_item, cpu_ns_per_item } what;
  double target;  // for rate: numerator/denominator >= target; for the others: <= target
  std::string label;
  std::string counter = {};
};

class collecting_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // With --benchmark_repetitions the median stands for the benchmark (noisy machines and
    // emulated ones need it); otherwise the single iteration run does.
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type != Run::RT_Iteration && !median) continue;
      const std::string name = r.run_name.str();
      if (!median && medians_.count(name) != 0) continue;
      if (median) medians_[name] = true;
      const auto it = r.counters.find("items_per_second");
      rate_[name] = it != r.counters.end() ? it->second.value : 0.0;
      for (const auto& c : r.counters) counters_[name + "#" + c.first] = c.second.value;
      time_[name] = r.GetAdjustedRealTime();
      cpu_[name] = r.GetAdjustedCPUTime();
    }
  }
  int print_ratios(const std::vector<ratio>& ratios) const {
    std::printf("\n");
    numaaff_report::print_ratio_heading();
    int missed = 0;
    for (const ratio& q : ratios) {
      const bool per_item = q.what == ratio::measure::extra_ns_per_item;
      const bool counter = q.what == ratio::measure::counter;
      const bool cost = q.what == ratio::measure::ns_per_item || q.what == ratio::measure::cpu_ns_per_item;
      const auto& table = counter ? counters_
                          : q.what == ratio::measure::rate || per_item || cost ? rate_
                          : q.what == ratio::measure::time                     ? time_
                                                                               : cpu_;
      const std::string suffix = counter ? "#" + q.counter : std::string();
      const auto a = table.find(q.numerator + suffix), b = table.find(q.denominator + suffix);
      if (a == table.end() || b == table.end() || b->second == 0.0 || a->second == 0.0) continue;  // filtered out
      if (cost) {
        // Wall ns per item from the rate; CPU ns per item scales it by CPU time over wall time.
        const bool on_cpu = q.what == ratio::measure::cpu_ns_per_item;
        auto ns = [&](const std::string& name, double rate) {
          const double share = on_cpu && time_.at(name) > 0.0 ? cpu_.at(name) / time_.at(name) : 1.0;
          return share * 1e9 / rate;
        };
        const double mine = ns(q.numerator, a->second), theirs = q.target * ns(q.denominator, b->second);
        missed += numaaff_report::print_ratio_line(q.label, mine, "ns", "<=", theirs, 0) ? 0 : 1;
        continue;
      }
      if (per_item) {
        const double extra = 1e9 / a->second - 1e9 / b->second;
        missed += numaaff_report::print_ratio_line(q.label, extra, "ns", "<=", q.target, 0) ? 0 : 1;
        continue;
      }
      const double v = a->second / b->second;
      missed += numaaff_report::print_ratio_line(q.label, v, "x", q.what == ratio::measure::rate ? ">=" : "<=", q.target, 2) ? 0 : 1;
    }
    return missed;
  }

 private:
  std::map<std::string, double> rate_;
  std::map<std::string, double> time_;
  std::map<std::string, double> cpu_;
  std::map<std::string, double> counters_;  // "run name#counter name"
  std::map<std::string, bool> medians_;
};

/// Runs the registered benchmarks and prints the ratios. Returns 0: a missed target is
/// reported, not an error (benchmarks are smoke-run in CI on emulated or one-node machines).
inline int run(int argc, char** argv, const std::vector<ratio>& ratios) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  numaaff_report::print_context();
  collecting_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios(ratios);
  benchmark::Shutdown();
  return 0;
}

}  // namespace numaaff_bench
