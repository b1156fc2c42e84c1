// numaaff-top: one row per NUMA node, refreshed every second: CPU use, numaaff's tasks and
// steals, a process's memory on the node and its share, pages moved there, free memory and
// huge pages. Kernel figures for any process; numaaff's counters (counters.hpp) for numaaff
// processes, read from their segments without stopping them.
//
//   numaaff-top                     every numaaff process of this user, summed
//   numaaff-top --pid 4242          one process (any: kernel figures only if not numaaff's)
//   numaaff-top --name amr          the newest numaaff process named amr, across restarts
//   numaaff-top --once --json       one sample (two reads an interval apart) as JSON
//
// Keys on a terminal: q quits, s switches the order (by node, by the process's pages).
// Everything read from another process is validated by the library: a hostile or truncated
// segment is reported, never trusted.
#include <numaaff/numaaff.hpp>

#include "json_text.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace {

struct options {
  long pid = 0;
  std::string name;
  bool once = false, json = false;
  double interval = 1.0;
  bool sort_by_pages = false;
  long count = 0;  // 0: until stopped
};

int usage(FILE* to, int status) {
  std::fprintf(to,
               "usage: numaaff-top [--pid PID | --name COMMAND] [--once] [--json] [--interval SECONDS]\n"
               "                   [--sort node|pages] [--count N]\n"
               "  --pid PID          show process PID (kernel figures for any process, numaaff's counters for numaaff's)\n"
               "  --name COMMAND     follow the newest numaaff process with this command name (it may restart)\n"
               "                     (neither: every numaaff process of this user, summed)\n"
               "  --once             print one sample (two reads an interval apart) and exit\n"
               "  --json             print samples as JSON objects, one per line\n"
               "  --interval SECONDS time between samples, 0.2 to 3600 (default 1)\n"
               "  --sort node|pages  order of the rows: by node number (default) or by the process's memory\n"
               "  --count N          stop after N samples\n"
               "  --help, --version\n"
               "keys on a terminal: q quits, s switches the order\n");
  return status;
}

int bad_usage(const std::string& why) {
  std::fprintf(stderr, "numaaff-top: %s\n", why.c_str());
  return usage(stderr, 2);
}

bool parse_long(const char* s, long lo, long hi, long& out) {
  const char* end = s + std::strlen(s);
  const auto r = std::from_chars(s, end, out);
  return r.ec == std::errc() && r.ptr == end && out >= lo && out <= hi;
}

// ---- one sample ------------------------------------------------------------------------

/// One numaaff process as read at one sample.
struct process_sample {
  numaaff::counter_snapshot counters;
};

struct sample {
  std::chrono::steady_clock::time_point at;
  std::vector<numaaff::cpu_time> cpus;
  long long kernel_migrated = -1;
  std::map<numaaff::node_id, numaaff::node_memory_status> memory;
  std::map<numaaff::node_id, std::uint64_t> process_bytes;  // of the target process(es)
  bool process_bytes_known = false;
  std::map<long, numaaff::counter_snapshot> numaaff_processes;  // by pid
  std::string target;  // what the sample is of, for the header
  std::string status;  // why figures are missing, if they are
};

/// The numaaff processes of this user that `o` selects, read now.
std::map<long, numaaff::counter_snapshot> read_numaaff(const options& o, std::string& status) {
  std::map<long, numaaff::counter_snapshot> out;
  if (o.pid != 0) {
    std::error_code ec;
    numaaff::counter_snapshot s = numaaff::snapshot(o.pid, ec);
    if (!ec) {
      out.emplace(o.pid, std::move(s));
    } else if (ec == std::errc::no_such_file_or_directory && ::kill(static_cast<pid_t>(o.pid), 0) != 0 && errno == ESRCH) {
      status = "the process is gone";
    } else if (ec == std::errc::no_such_file_or_directory || ec == std::errc::permission_denied) {
      status = "no numaaff counters (not a numaaff process, NUMAAFF_COUNTERS=off, or another user's): kernel figures only";
    } else if (ec == std::errc::no_such_process) {
      status = "the process is gone";
    } else {
      try {
        (void)numaaff::snapshot(o.pid);
      } catch (const std::exception& e) {
        status = std::string("its counters are unreadable: ") + e.what();
      }
    }
    return out;
  }
  for (long pid : numaaff::counter_processes()) {
    std::error_code ec;
    numaaff::counter_snapshot s = numaaff::snapshot(pid, ec);
    if (ec) continue;  // gone between the listing and the read
    if (!o.name.empty() && s.command != o.name) continue;
    out.emplace(pid, std::move(s));
  }
  if (!o.name.empty() && out.size() > 1) {  // the newest one: the restarted process
    auto newest = out.begin();
    for (auto it = out.begin(); it != out.end(); ++it)
      if (it->second.started_at > newest->second.started_at) newest = it;
    const long keep = newest->first;
    for (auto it = out.begin(); it != out.end();) it = it->first == keep ? std::next(it) : out.erase(it);
  }
  if (out.empty()) status = o.name.empty() ? "no numaaff process of this user publishes counters now"
                                           : "no numaaff process named " + o.name + " now (waiting for one)";
  return out;
}

sample take_sample(const options& o) {
  sample s;
  s.at = std::chrono::steady_clock::now();
  s.cpus = numaaff::cpu_times();
  s.kernel_migrated = numaaff::kernel_numa_pages_migrated();
  for (numaaff::node_id n : numaaff::online_nodes()) {
    try {
      s.memory[n] = numaaff::node_memory(n);
    } catch (const std::exception&) {  // a node gone offline meanwhile
    }
  }
  s.numaaff_processes = read_numaaff(o, s.status);
  std::vector<long> pids;
  if (o.pid != 0) {
    pids.push_back(o.pid);
  } else {
    for (const auto& [pid, c] : s.numaaff_processes) pids.push_back(pid);
  }
  for (long pid : pids) {
    std::error_code ec;
    const auto bytes = numaaff::process_memory_by_node(pid, ec);
    if (ec) {
      if (o.pid != 0 && s.status.empty())
        s.status = ec == std::errc::no_such_file_or_directory ? "the process is gone" : "numa_maps: " + ec.message();
      continue;
    }
    s.process_bytes_known = true;
    for (const auto& [n, b] : bytes) s.process_bytes[n] += b;
  }
  if (o.pid != 0) {
    const auto it = s.numaaff_processes.find(o.pid);
    s.target = "pid " + std::to_string(o.pid) + (it != s.numaaff_processes.end() ? " (" + it->second.command + ")" : "");
  } else if (!o.name.empty()) {
    s.target = s.numaaff_processes.empty() ? "name " + o.name
                                           : "name " + o.name + ", pid " + std::to_string(s.numaaff_processes.begin()->first);
  } else {
    s.target = std::to_string(s.numaaff_processes.size()) + " numaaff process" + (s.numaaff_processes.size() == 1 ? "" : "es");
  }
  return s;
}

// ---- rows ------------------------------------------------------------------------------

/// A figure that may be unknown (no earlier sample, or nothing to read).
using figure = std::optional<double>;

struct node_row {
  numaaff::node_id node = -1;
  std::size_t cpus = 0;
  bool memory_only = false;
  int tier = -1;
  std::string kind;
  figure cpu_percent, tasks_per_s, steals_in_per_s, steals_out_per_s, busy_percent, moved_per_s;
  figure queued, workers;
  figure process_bytes, process_share;
  figure free_bytes, total_bytes, huge_reserved, huge_free;
};

struct frame {
  std::string target, status;
  figure kernel_migrated_per_s;
  double seconds = 0;
  std::vector<node_row> rows;
  std::vector<long> pids;
};

/// Sums a counter's growth over the processes read in both samples, per second of each
/// process's own publication times (a process seen once has no rate yet).
template <class Get>
figure numaaff_rate(const sample* before, const sample& now, numaaff::node_id n, Get&& get) {
  if (before == nullptr || now.numaaff_processes.empty()) return std::nullopt;
  double rate = 0;
  bool any = false;
  for (const auto& [pid, c] : now.numaaff_processes) {
    const auto it = before->numaaff_processes.find(pid);
    if (it == before->numaaff_processes.end() || it->second.started_at != c.started_at) continue;
    const numaaff::node_counters* a = it->second.node(n);
    const numaaff::node_counters* b = c.node(n);
    const double dt = std::chrono::duration<double>(c.taken_at - it->second.taken_at).count();
    any = true;
    if (a == nullptr || b == nullptr || dt <= 0) continue;
    const double va = get(*a), vb = get(*b);
    if (vb >= va) rate += (vb - va) / dt;
  }
  return any ? figure(rate) : std::nullopt;
}

void sort_rows(frame& f, const options& o) {
  std::stable_sort(f.rows.begin(), f.rows.end(), [&](const node_row& a, const node_row& b) {
    if (!o.sort_by_pages) return a.node < b.node;
    return a.process_bytes.value_or(-1) > b.process_bytes.value_or(-1);
  });
}

frame make_frame(const sample* before, const sample& now, const options& o) {
  frame f;
  f.target = now.target;
  f.status = now.status;
  for (const auto& [pid, c] : now.numaaff_processes) f.pids.push_back(pid);
  const numaaff::topology& topo = numaaff::topology::system();
  if (before != nullptr) {
    f.seconds = std::chrono::duration<double>(now.at - before->at).count();
    if (now.kernel_migrated >= 0 && before->kernel_migrated >= 0 && f.seconds > 0)
      f.kernel_migrated_per_s = static_cast<double>(now.kernel_migrated - before->kernel_migrated) / f.seconds;
  }
  std::uint64_t total_process = 0;
  for (const auto& [n, b] : now.process_bytes) total_process += b;
  for (const auto& [n, mem] : now.memory) {
    node_row r;
    r.node = n;
    // The machine's CPUs of the node, not those this process may use (a top started from a
    // pinned shell still shows every node).
    const std::vector<int> cpus = numaaff::node_cpus(n);
    r.cpus = cpus.size();
    r.memory_only = cpus.empty();
    if (topo.has_node(n)) r.kind = topo.kind_of(n);
    r.tier = mem.tier;
    if (mem.free_bytes >= 0) r.free_bytes = static_cast<double>(mem.free_bytes);
    if (mem.total_bytes >= 0) r.total_bytes = static_cast<double>(mem.total_bytes);
    if (mem.huge_2mib_reserved >= 0) r.huge_reserved = static_cast<double>(mem.huge_2mib_reserved);
    if (mem.huge_2mib_free >= 0) r.huge_free = static_cast<double>(mem.huge_2mib_free);
    if (before != nullptr && r.cpus > 0) {
      std::uint64_t busy = 0, total = 0;
      for (int cpu : cpus) {
        const auto c = static_cast<std::size_t>(cpu);
        if (c >= now.cpus.size() || c >= before->cpus.size()) continue;
        busy += now.cpus[c].busy - std::min(now.cpus[c].busy, before->cpus[c].busy);
        total += now.cpus[c].total - std::min(now.cpus[c].total, before->cpus[c].total);
      }
      if (total > 0) r.cpu_percent = 100.0 * static_cast<double>(busy) / static_cast<double>(total);
    }
    using nc = numaaff::node_counters;
    r.tasks_per_s = numaaff_rate(before, now, n, [](const nc& c) { return static_cast<double>(c.tasks_run); });
    r.steals_in_per_s = numaaff_rate(before, now, n, [](const nc& c) { return static_cast<double>(c.stolen_in); });
    r.steals_out_per_s = numaaff_rate(before, now, n, [](const nc& c) { return static_cast<double>(c.stolen_out); });
    r.moved_per_s = numaaff_rate(before, now, n, [](const nc& c) {
      return static_cast<double>(c.next_touch_pages_moved + c.pages_moved);
    });
    const figure life = numaaff_rate(before, now, n, [](const nc& c) { return static_cast<double>(c.worker_time.count()); });
    const figure idle = numaaff_rate(before, now, n, [](const nc& c) { return static_cast<double>(c.idle_time.count()); });
    if (life && idle && *life > 0) r.busy_percent = std::max(0.0, 100.0 * (*life - *idle) / *life);
    if (!now.numaaff_processes.empty()) {
      double q = 0, w = 0;
      for (const auto& [pid, c] : now.numaaff_processes)
        if (const nc* x = c.node(n)) {
          q += static_cast<double>(x->queued);
          w += static_cast<double>(x->workers);
        }
      r.queued = q;
      r.workers = w;
    }
    if (now.process_bytes_known) {
      const auto it = now.process_bytes.find(n);
      const double b = it != now.process_bytes.end() ? static_cast<double>(it->second) : 0.0;
      r.process_bytes = b;
      if (total_process > 0) r.process_share = 100.0 * b / static_cast<double>(total_process);
    }
    f.rows.push_back(r);
  }
  sort_rows(f, o);
  return f;
}

// ---- output ----------------------------------------------------------------------------

std::string number(const figure& v, const char* format = "%.0f") {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}
std::string mib(const figure& v) { return v ? number(*v / (1024.0 * 1024.0), "%.1f") : "-"; }

std::string kind_text(const node_row& r) {
  std::string k = r.memory_only ? "memory" : "cpu";
  if (r.tier >= 0) k += " t" + std::to_string(r.tier);
  if (!r.kind.empty()) k += " " + r.kind;
  return k;
}

std::vector<std::string> text_lines(const frame& f) {
  std::vector<std::string> lines;
  char buf[512];
  std::snprintf(buf, sizeof buf, "numaaff-top %s  %s  kernel numa_pages_migrated %s/s", numaaff::version(),
                numaaff_tools::terminal_text(f.target).c_str(), number(f.kernel_migrated_per_s).c_str());
  lines.emplace_back(buf);
  if (!f.status.empty()) lines.push_back("  " + numaaff_tools::terminal_text(f.status));
  std::snprintf(buf, sizeof buf, "%4s %-14s %4s %6s %9s %8s %8s %6s %7s %10s %6s %9s %10s %9s", "NODE", "KIND", "CPUS", "CPU%",
                "TASKS/s", "STEALin", "STEALout", "BUSY%", "QUEUED", "PROC_MiB", "SHARE%", "MOVED/s", "FREE_MiB", "HUGE2M");
  lines.emplace_back(buf);
  for (const node_row& r : f.rows) {
    const std::string huge = r.huge_reserved ? number(r.huge_free) + "/" + number(r.huge_reserved) : "-";
    std::snprintf(buf, sizeof buf, "%4d %-14.14s %4zu %6s %9s %8s %8s %6s %7s %10s %6s %9s %10s %9s", r.node, kind_text(r).c_str(),
                  r.cpus, number(r.cpu_percent, "%.1f").c_str(), number(r.tasks_per_s).c_str(), number(r.steals_in_per_s).c_str(),
                  number(r.steals_out_per_s).c_str(), number(r.busy_percent, "%.1f").c_str(), number(r.queued).c_str(),
                  mib(r.process_bytes).c_str(), number(r.process_share, "%.1f").c_str(), number(r.moved_per_s).c_str(),
                  mib(r.free_bytes).c_str(), huge.c_str());
    lines.emplace_back(buf);
  }
  return lines;
}

std::string json_number(const figure& v) {
  if (!v || !std::isfinite(*v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", *v);
  return buf;
}

std::string json_frame(const frame& f) {
  std::string j = "{\"format\":1,\"version\":" + numaaff_tools::json_string(numaaff::version()) + ",\"target\":" + numaaff_tools::json_string(f.target) +
                  ",\"status\":" + numaaff_tools::json_string(f.status) + ",\"seconds\":" + json_number(f.seconds) +
                  ",\"kernel_numa_pages_migrated_per_s\":" + json_number(f.kernel_migrated_per_s) + ",\"pids\":[";
  for (std::size_t i = 0; i < f.pids.size(); ++i) j += (i ? "," : "") + std::to_string(f.pids[i]);
  j += "],\"nodes\":[";
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const node_row& r = f.rows[i];
    j += std::string(i ? "," : "") + "{\"node\":" + std::to_string(r.node) + ",\"cpus\":" + std::to_string(r.cpus) +
         ",\"memory_only\":" + (r.memory_only ? "true" : "false") + ",\"tier\":" + (r.tier >= 0 ? std::to_string(r.tier) : "null") +
         ",\"kind\":" + numaaff_tools::json_string(r.kind) + ",\"cpu_percent\":" + json_number(r.cpu_percent) +
         ",\"tasks_per_s\":" + json_number(r.tasks_per_s) + ",\"steals_in_per_s\":" + json_number(r.steals_in_per_s) +
         ",\"steals_out_per_s\":" + json_number(r.steals_out_per_s) + ",\"busy_percent\":" + json_number(r.busy_percent) +
         ",\"workers\":" + json_number(r.workers) + ",\"queued\":" + json_number(r.queued) +
         ",\"process_bytes\":" + json_number(r.process_bytes) + ",\"process_share_percent\":" + json_number(r.process_share) +
         ",\"moved_pages_per_s\":" + json_number(r.moved_per_s) + ",\"free_bytes\":" + json_number(r.free_bytes) +
         ",\"total_bytes\":" + json_number(r.total_bytes) + ",\"huge_2mib_reserved\":" + json_number(r.huge_reserved) +
         ",\"huge_2mib_free\":" + json_number(r.huge_free) + "}";
  }
  return j + "]}";
}

// ---- the terminal ----------------------------------------------------------------------

volatile sig_atomic_t stop_requested = 0, resized = 0;
termios saved_terminal{};
bool terminal_raw = false;

void restore_terminal() {
  if (terminal_raw) {
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_terminal);
    terminal_raw = false;
  }
}

void draw(const frame& f, bool tty) {
  const std::vector<std::string> lines = text_lines(f);
  if (!tty) {
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    std::printf("\n");
    std::fflush(stdout);
    return;
  }
  winsize ws{};
  std::size_t cols = 80, rows = 24;
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    cols = ws.ws_col;
    rows = ws.ws_row;
  }
  std::string out = "\x1b[H\x1b[2J";
  for (std::size_t i = 0; i < lines.size() && i + 1 < rows; ++i) out += lines[i].substr(0, cols) + "\r\n";
  out += std::string("q quit, s sort by ") + "node/pages";
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)what;
      return argv[++i];
    };
    if (a == "--help" || a == "-h") return usage(stdout, 0);
    if (a == "--version") {
      std::printf("numaaff-top %s\n", numaaff::version());
      return 0;
    }
    if (a == "--once") {
      o.once = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--pid" || a == "-p") {
      const char* v = value("--pid");
      if (v == nullptr || !parse_long(v, 1, 0x3fffffff, o.pid)) return bad_usage("--pid takes a process id (a positive number)");
    } else if (a == "--name") {
      const char* v = value("--name");
      if (v == nullptr || *v == '\0') return bad_usage("--name takes a command name");
      o.name = v;
    } else if (a == "--interval" || a == "-d") {
      const char* v = value("--interval");
      char* end = nullptr;
      o.interval = v != nullptr ? std::strtod(v, &end) : -1;
      if (v == nullptr || end == v || *end != '\0' || !(o.interval >= 0.2 && o.interval <= 3600))
        return bad_usage("--interval takes seconds from 0.2 to 3600");
    } else if (a == "--sort") {
      const char* v = value("--sort");
      if (v == nullptr || (std::strcmp(v, "node") != 0 && std::strcmp(v, "pages") != 0))
        return bad_usage("--sort takes node or pages");
      o.sort_by_pages = std::strcmp(v, "pages") == 0;
    } else if (a == "--count" || a == "-n") {
      const char* v = value("--count");
      if (v == nullptr || !parse_long(v, 1, 1L << 40, o.count)) return bad_usage("--count takes a positive number");
    } else {
      return bad_usage("unknown option " + a);
    }
  }
  if (o.pid != 0 && !o.name.empty()) return bad_usage("--pid and --name exclude each other");
  if (o.once) o.count = 1;

  const bool tty = !o.json && ::isatty(STDOUT_FILENO) == 1;
  const bool keys = tty && ::isatty(STDIN_FILENO) == 1;
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_requested = 1; };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);
  sa.sa_handler = [](int) { resized = 1; };
  ::sigaction(SIGWINCH, &sa, nullptr);
  if (keys && ::tcgetattr(STDIN_FILENO, &saved_terminal) == 0) {
    termios raw = saved_terminal;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    terminal_raw = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    std::atexit(restore_terminal);
  }
  if (tty) std::fputs("\x1b[?25l", stdout);  // no cursor while drawing

  try {
    std::optional<sample> before;
    if (o.once) before = take_sample(o);  // --once: the rates need a first read
    std::optional<frame> last;
    for (long shown = 0; !stop_requested && (o.count == 0 || shown < o.count);) {
      // Wait an interval (or, live, draw at once the first time), answering keys and resizes.
      const bool wait = before.has_value();
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait ? o.interval : 0);
      while (!stop_requested && std::chrono::steady_clock::now() < until) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        pollfd p{keys ? STDIN_FILENO : -1, POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(1, left.count())));
        if (resized) {
          resized = 0;
          if (last) draw(*last, tty);
        }
        if (r > 0 && (p.revents & POLLIN) != 0) {
          char c = 0;
          if (::read(STDIN_FILENO, &c, 1) == 1) {
            if (c == 'q') stop_requested = 1;
            if (c == 's' && last) {
              o.sort_by_pages = !o.sort_by_pages;
              sort_rows(*last, o);
              draw(*last, tty);
            }
          }
        }
      }
      if (stop_requested) break;
      sample now = take_sample(o);
      frame f = make_frame(before ? &*before : nullptr, now, o);
      if (o.json) {
        std::printf("%s\n", json_frame(f).c_str());
        std::fflush(stdout);
      } else {
        draw(f, tty);
      }
      last = std::move(f);
      before = std::move(now);
      ++shown;
    }
  } catch (const std::exception& e) {
    restore_terminal();
    if (tty) std::fputs("\x1b[?25h\n", stdout);
    std::fprintf(stderr, "numaaff-top: %s\n", e.what());
    return 1;
  }
  restore_terminal();
  if (tty) std::fputs("\x1b[?25h\n", stdout);
  return 0;
}
