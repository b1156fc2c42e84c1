// Fuzz target: numaaff-run's command line (tools/numaaff_run_args.hpp), then the library's
// parsers on the NUMAAFF_* values it would set, as the launcher checks them before exec. The
// input is split at NUL bytes into arguments. An invocation is accepted or has an error
// message, or asks for the usage or the version; an accepted one is coherent (a command
// exactly when not --show, --pid only with --show, a homenode set exactly when -n/-N was
// given).
#include <numaaff/thread_pool.hpp>
#include <numaaff/topology.hpp>

#include "../tools/numaaff_run_args.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  std::vector<std::string> args{"numaaff-run"};
  args.emplace_back();
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.emplace_back();
    } else {
      args.back().push_back(static_cast<char>(data[i]));
    }
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  const int argc = static_cast<int>(argv.size());
  argv.push_back(nullptr);
  const numaaff_run::invocation r = numaaff_run::parse(argc, argv.data());
  if (!r.error.empty() || r.help || r.version) return 0;  // --help, --version: no command, no setting
  if (r.show_only != (r.command == 0)) std::abort();
  if (!r.show_only && (r.command < 1 || r.command >= argc)) std::abort();
  if (r.pid != 0 && !r.show_only) std::abort();
  if ((r.homenode >= 0) != (r.set.count("NUMAAFF_HOMENODE") == 1)) std::abort();
  if (r.bind_cpus && r.homenode < 0) std::abort();
  try {
    const auto lookup = [&](const char* name) -> const char* {
      const auto it = r.set.find(name);
      return it == r.set.end() ? nullptr : it->second.c_str();
    };
    (void)numaaff::thread_pool_options::from_environment(lookup);
    static const numaaff::topology four = numaaff::topology::from_synthetic("pack:2 numa:2 core:2 pu:1");
    if (const char* d = lookup("NUMAAFF_DISTANCES")) (void)four.with_distances(d, "NUMAAFF_DISTANCES");
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("NUMAAFF_") == std::string::npos) std::abort();
  }
  return 0;
}
