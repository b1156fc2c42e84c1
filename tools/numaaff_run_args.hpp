// numaaff-run's command line, parsed without side effects: the launcher acts on the result,
// and fuzz/fuzz_launcher_args feeds it arbitrary arguments.
#pragma once

#include <charconv>
#include <climits>
#include <map>
#include <string>
#include <system_error>

namespace numaaff_run {

using environment = std::map<std::string, std::string>;

/// What an invocation asks for; `error` says why it is wrong (empty when it is not).
struct invocation {
  environment set;  ///< the NUMAAFF_* variables to set (checked later by the library's parsers)
  int homenode = -1;
  bool bind_cpus = false;
  bool show_only = false;
  int pid = 0;      ///< --pid, with --show
  bool report = false;      ///< --report: wait for the command, then summarise its counters
  std::string report_file;  ///< --report=FILE.json: and write their time series there
  int command = 0;  ///< index in argv of the command to exec; 0 for none
  bool help = false;     ///< --help: print the usage and exit 0
  bool version = false;  ///< --version: print the version and exit 0
  std::string error;
};

/// The whole of `text` as a decimal number in [lo, hi]: no blanks, no '+', no digits past
/// the range (strtol and atoi clamp or wrap: 4294967296 was node 0).
inline bool parse_number(const std::string& text, long long lo, long long hi, long long& out) {
  const char* const last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), last, out);
  return !text.empty() && ec == std::errc() && ptr == last && out >= lo && out <= hi;
}

inline invocation parse(int argc, const char* const* argv) {
  invocation r;
  const auto fail = [&](std::string why) {
    r.error = std::move(why);
    return r;
  };
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    // Before the command only (after --, --help is the command's): nothing else is checked.
    if (a == "--help" || a == "-h") {
      r.help = true;
      return r;
    }
    if (a == "--version") {
      r.version = true;
      return r;
    }
    if (a == "--show") {
      r.show_only = true;
      continue;
    }
    if (a == "--report" || a.rfind("--report=", 0) == 0) {
      r.report = true;
      r.report_file = a.size() > 9 ? a.substr(9) : std::string();
      if (a.size() == 9 && a.back() == '=') return fail("--report= needs a file name");
      continue;
    }
    const bool node_option = a == "-n" || a == "--homenode" || a == "-N" || a == "--cpunodebind";
    const bool pid_option = a == "-p" || a == "--pid";
    const char* variable = a == "-P" || a == "--policy"             ? "NUMAAFF_NODE_POLICY"
                           : a == "-t" || a == "--threads-per-node" ? "NUMAAFF_THREADS_PER_NODE"
                           : a == "-s" || a == "--steal"            ? "NUMAAFF_STEAL"
                           : a == "-d" || a == "--distances"        ? "NUMAAFF_DISTANCES"
                                                                    : nullptr;
    if (!node_option && !pid_option && variable == nullptr)
      return fail(a.rfind('-', 0) == 0 ? "unknown option '" + a + "'" : "unexpected '" + a + "' (the command goes after --)");
    if (i + 1 == argc) return fail(a + " needs a value");
    const std::string v = argv[++i];
    long long number = 0;
    if (node_option) {
      if (!parse_number(v, 0, INT_MAX, number)) return fail(a + " takes a node number, not '" + v + "'");
      r.homenode = static_cast<int>(number);
      r.bind_cpus = r.bind_cpus || a == "-N" || a == "--cpunodebind";
      r.set["NUMAAFF_HOMENODE"] = std::to_string(r.homenode);
    } else if (pid_option) {
      if (!parse_number(v, 1, INT_MAX, number)) return fail(a + " takes a process id, not '" + v + "'");
      r.pid = static_cast<int>(number);
    } else {
      r.set[variable] = v;  // checked by the library's own parser
    }
  }
  if (r.pid != 0 && !r.show_only) return fail("--pid goes with --show");
  if (r.show_only && i < argc) return fail("--show takes no command");
  if (r.show_only && r.report) return fail("--report goes with a command, not --show");
  if (!r.show_only && i >= argc) return fail("no command to run (give -- COMMAND, or --show)");
  r.command = r.show_only ? 0 : i;
  return r;
}

}  // namespace numaaff_run
