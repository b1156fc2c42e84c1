// numaaff-run: run a command with a homenode and a node policy, in the spirit of the 2002
// scheduler's `nodpol` tool and of numactl; or show what a numaaff process would use.
//
//   numaaff-run -n 2 -P fork -- ./solver      homenode 2 for the solver's threads and memory
//   numaaff-run -N 1 -- ./solver              run on node 1's CPUs only (as numactl -N 1)
//   numaaff-run -P exec -s distance:200 --show   what a pool started like that would do
//   numaaff-run --show --pid 4242             what the running process 4242 uses
//   numaaff-run --report=run.json -- ./amr    a per-node summary at the end, the counters over time in run.json
//
// It sets the NUMAAFF_* variables the library reads (so a wrong value fails here, with the
// same message the library would give), sets the process's memory policy to prefer the
// homenode (inherited across exec: plain malloc'd memory lands there too), binds CPUs for -N,
// then execs the command. A wrong invocation (an unknown option, a number that is not one, out
// of range or negative, a value the library refuses) prints why and the usage, and exits 2.
#include <numaaff/numaaff.hpp>

#include "numaaff_run_args.hpp"
#include "run_report.hpp"

#include <numaif.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

int usage(const char* prog, FILE* to = stderr, int status = 2) {
  std::fprintf(to,
               "usage: %s [options] -- COMMAND [ARGS...]\n"
               "       %s [options] --show [--pid PID]\n"
               "options:\n"
               "  -n, --homenode NODE        homenode of the command's threads and memory\n"
               "  -N, --cpunodebind NODE     homenode NODE and run on its CPUs only (numactl -N)\n"
               "  -P, --policy POLICY        node policy of its pools: fork | exec | round_robin\n"
               "  -t, --threads-per-node T   workers per node of its pools\n"
               "  -s, --steal MODE           distance[:MICROSECONDS] | local | free\n"
               "  -d, --distances SPEC       distance matrix override (as NUMAAFF_DISTANCES)\n"
               "  --report[=FILE.json]       wait for the command, then print what ran and moved on each node\n"
               "                             (and write the counters' time series to FILE.json)\n"
               "  --show                     print what a numaaff process would use, and exit\n"
               "  -p, --pid PID              with --show: read process PID's environment and CPUs\n"
               "  -h, --help, --version\n",
               prog, prog);
  return status;
}

/// Says what is wrong with the invocation, then prints the usage; returns its exit status.
int bad_usage(const char* prog, const std::string& why) {
  std::fprintf(stderr, "numaaff-run: %s\n", why.c_str());
  return usage(prog);
}

/// A library message without its "numaaff: " prefix (ours comes first).
std::string without_prefix(const char* what) {
  const std::string s = what;
  return s.rfind("numaaff: ", 0) == 0 ? s.substr(9) : s;
}

using numaaff_run::environment;

environment environment_of(int pid) {
  environment env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) throw std::runtime_error("cannot read /proc/" + std::to_string(pid) + "/environ (no such process, or not ours)");
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const std::size_t eq = entry.find('=');
    if (eq != std::string::npos && entry.compare(0, 8, "NUMAAFF_") == 0) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

std::vector<int> cpus_of_process(int pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(pid, sizeof set, &set) != 0) throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(static_cast<std::size_t>(c), &set)) out.push_back(c);
  return out;
}

/// The pool options and topology a process with `env` gets; throws what the library would.
std::pair<numaaff::thread_pool_options, numaaff::topology> configuration(const environment& env) {
  const numaaff::thread_pool_options o = numaaff::thread_pool_options::from_environment([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  numaaff::topology t = numaaff::topology::system();
  if (const auto it = env.find("NUMAAFF_DISTANCES"); it != env.end()) t = t.with_distances(it->second, "NUMAAFF_DISTANCES");
  return {o, t};
}

/// What a default thread_pool in a process with `env` and CPUs `cpus` would be.
void show(const environment& env, const std::vector<int>& cpus, const char* whose) {
  const auto [o, t] = configuration(env);
  std::printf("%s\n", whose);
  for (const auto& [k, v] : env) std::printf("  %s=%s\n", k.c_str(), v.c_str());
  std::printf("homenode: %s\n", env.count("NUMAAFF_HOMENODE") ? env.at("NUMAAFF_HOMENODE").c_str() : "none (each thread's current node)");
  std::printf("node policy: %s; steal: %s", numaaff::to_string(o.policy).c_str(), numaaff::to_string(o.steal).c_str());
  if (o.steal == numaaff::steal_mode::distance) std::printf(" (%lld us per 10 distance units)", static_cast<long long>(o.steal_delay.count()));
  std::printf("\nallowed cpus: %s\n", numaaff::detail::format_list(cpus).c_str());
  std::vector<numaaff::node_id> used;
  for (numaaff::node_id n : t.nodes()) {
    std::vector<int> mine;
    for (int c : t.cpus_of(n))
      for (int a : cpus)
        if (a == c) mine.push_back(c);
    if (mine.empty()) continue;
    used.push_back(n);
    const std::size_t workers = o.threads_per_node > 0 ? static_cast<std::size_t>(o.threads_per_node) : mine.size();
    std::printf("node %d: %zu workers on cpus %s\n", n, workers, numaaff::detail::format_list(mine).c_str());
  }
  if (o.steal != numaaff::steal_mode::local) {
    for (numaaff::node_id from : used) {
      std::printf("node %d steals from:%s", from, used.size() == 1 ? " none (one node)" : "");
      for (numaaff::node_id to : t.nodes_by_distance(from)) {
        if (to == from || std::find(used.begin(), used.end(), to) == used.end()) continue;
        const auto d = std::chrono::duration_cast<std::chrono::microseconds>(numaaff::remote_steal_delay(o, t, from, to));
        std::printf(" %d after %lld us", to, static_cast<long long>(d.count()));
      }
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const numaaff_run::invocation inv = numaaff_run::parse(argc, argv);
  if (!inv.error.empty()) return bad_usage(argv[0], inv.error);
  if (inv.help) return usage(argv[0], stdout, 0);
  if (inv.version) {
    std::printf("numaaff-run %s\n", numaaff::version());
    return 0;
  }
  const environment& set = inv.set;
  const int homenode = inv.homenode, pid = inv.pid;
  const bool bind_cpus = inv.bind_cpus, show_only = inv.show_only;
  const int i = show_only ? argc : inv.command;

  try {
    const numaaff::topology& t = numaaff::topology::system();
    if (homenode >= 0 && !t.has_node(homenode))
      return bad_usage(argv[0], "node " + std::to_string(homenode) + " is not one of this machine's nodes (" +
                                    numaaff::detail::format_list(t.nodes()) + ")");
    configuration(set);  // a wrong value fails here, not in the command
  } catch (const std::invalid_argument& e) {
    return bad_usage(argv[0], without_prefix(e.what()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numaaff-run: %s\n", without_prefix(e.what()).c_str());
    return 2;
  }

  try {
    const numaaff::topology& t = numaaff::topology::system();
    if (show_only) {
      if (pid != 0) {
        show(environment_of(pid), cpus_of_process(pid), ("process " + std::to_string(pid) + ":").c_str());
      } else {
        environment env;
        for (const char* name : {"NUMAAFF_HOMENODE", "NUMAAFF_NODE_POLICY", "NUMAAFF_THREADS_PER_NODE", "NUMAAFF_STEAL", "NUMAAFF_DISTANCES"})
          if (const char* v = std::getenv(name)) env[name] = v;
        for (const auto& [k, v] : set) env[k] = v;
        std::vector<int> cpus = bind_cpus ? t.cpus_of(homenode) : cpus_of_process(0);
        show(env, cpus, "a numaaff process started so would use:");
      }
      return 0;
    }
    for (const auto& [k, v] : set) setenv(k.c_str(), v.c_str(), 1);
    if (homenode >= 0) {
      unsigned long mask[16] = {};
      mask[static_cast<unsigned>(homenode) / (8 * sizeof(unsigned long))] |= 1ul << (static_cast<unsigned>(homenode) % (8 * sizeof(unsigned long)));
      if (set_mempolicy(MPOL_PREFERRED, mask, 8 * sizeof mask) != 0)
        std::fprintf(stderr, "numaaff-run: set_mempolicy: %s (memory placement left to the kernel)\n", std::strerror(errno));
    }
    if (bind_cpus) {
      cpu_set_t cpus;
      CPU_ZERO(&cpus);
      for (int c : t.cpus_of(homenode)) CPU_SET(static_cast<std::size_t>(c), &cpus);
      if (sched_setaffinity(0, sizeof cpus, &cpus) != 0) {
        std::fprintf(stderr, "numaaff-run: sched_setaffinity: %s\n", std::strerror(errno));
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "numaaff-run: %s\n", without_prefix(e.what()).c_str());
    return 2;
  }
  if (inv.report) return numaaff_run::run_with_report(argv + i, inv.report_file);
  execvp(argv[i], argv + i);
  std::fprintf(stderr, "numaaff-run: %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}
