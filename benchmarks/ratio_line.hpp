// ratio_line.hpp: the lines that every numaaff benchmark, and the examples, tests and tools
// whose figures benchmarks/README.md shows, end with; benchmarks/report.py reads them. A
// context line names the machine; after the heading "ratios (same run):" each target has a line
//
//   <label>  <value><unit>  target <op> <bound><unit>  met|MISSED
//
// whose verdict is judged on the two figures as printed, so that no line's verdict contradicts
// its own numbers. Needs numaaff only (ratio_report.hpp prints Google Benchmark's figures
// through it).
#pragma once

#include <numaaff/system_report.hpp>
#include <numaaff/topology.hpp>

#include <sys/utsname.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace numaaff_report {

/// The machine: kernel release, nodes, the CPUs this process may use, and whether placement
/// takes effect here (one line, before the figures it describes).
inline void print_context() {
  utsname u{};
  ::uname(&u);
  const numaaff::topology& t = numaaff::topology::system();
  std::printf("numaaff benchmark on kernel %s, %zu node(s), %zu cpu(s), placement effective: %s\n", u.release, t.node_count(),
              t.cpus().size(), numaaff::system_report().placement_effective() ? "yes" : "no");
}

/// The heading of the targets' lines.
inline void print_ratio_heading() { std::printf("ratios (same run):\n"); }

/// One target's line: `value` against `bound` by `op` (">=" or "<="), both with `decimals`
/// places, in `unit` ("x", "ns" or "%"). Returns whether the target is met.
inline bool print_ratio_line(const std::string& label, double value, const char* unit, const char* op, double bound, int decimals) {
  char shown[64], limit[64];
  std::snprintf(shown, sizeof shown, "%.*f", decimals, value);
  std::snprintf(limit, sizeof limit, "%.*f", decimals, bound);
  const double v = std::strtod(shown, nullptr), b = std::strtod(limit, nullptr);
  const bool met = op[0] == '>' ? v >= b : v <= b;
  std::printf("  %-62s %9s%s  target %s %s%s  %s\n", label.c_str(), shown, unit, op, limit, unit, met ? "met" : "MISSED");
  return met;
}

/// A target's line kept for later, for a program that prints its own tables first.
struct ratio_figure {
  std::string label;
  double value;
  const char* unit;
  const char* op;
  double bound;
  int decimals;
};

/// The context, the heading and the lines of `figures`, in order.
inline void print_ratio_block(const std::vector<ratio_figure>& figures) {
  print_context();
  print_ratio_heading();
  for (const ratio_figure& f : figures) print_ratio_line(f.label, f.value, f.unit, f.op, f.bound, f.decimals);
}

}  // namespace numaaff_report
