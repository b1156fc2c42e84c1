// Fuzz target: the reader of other processes' counter segments (counters.hpp), which a hostile
// or broken process of the same user writes. The input is parsed as an image directly, and
// again through the file path: written as this process's segment (with its pid and start
// time, so that it gets past the liveness check) in a private directory and read with
// numaaff::snapshot(pid). Either must refuse it with an error or give figures that lie inside
// the image; nothing may crash, hang or read outside it.
#include <numaaff/counters.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

namespace {

// The directory's name is plain static storage: the exit handler that empties it runs after
// the destructors of statics made after its registration.
char directory[64] = "/tmp/numaaff-fuzz-counters-XXXXXX";

const char* private_directory() {
  static const bool made = [] {
    if (::mkdtemp(directory) == nullptr) std::abort();
    ::setenv("NUMAAFF_COUNTERS_DIR", directory, 1);  // the reader's directory; nothing publishes here
    ::setenv("NUMAAFF_COUNTERS", "off", 1);
    std::atexit([] {  // nothing left in /tmp
      const std::string file = std::string(directory) + "/numaaff-" + std::to_string(::getpid());
      ::unlink(file.c_str());
      ::rmdir(directory);
    });
    return true;
  }();
  (void)made;
  return directory;
}

void within(const numaaff::detail::parsed_image& m, const std::uint64_t* words, std::size_t n) {
  auto inside = [&](const std::uint64_t* p, std::uint64_t count) {
    if (p < words || p > words + n || count > static_cast<std::uint64_t>(words + n - p)) std::abort();
  };
  inside(m.process, m.process_stride);
  inside(m.nodes, m.node_count * m.node_stride);
  if (m.steals != nullptr) inside(m.steals, m.node_count * m.node_count);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace numaaff::detail;
  const std::string dir = private_directory();
  if (size > (std::size_t{1} << 20)) return 0;
  std::vector<std::uint64_t> words((size + 7) / 8, 0);
  if (size != 0) std::memcpy(words.data(), data, size);
  parsed_image m;
  std::string why;
  if (parse_image(words.data(), words.size(), m, why)) {
    within(m, words.data(), words.size());
    const numaaff::counter_snapshot s = numaaff::detail::snapshot_of(m);
    if (s.nodes.size() != m.node_count) std::abort();
  } else if (why.empty()) {
    std::abort();  // a refusal says why
  }
  // The file path, as this process's segment.
  const long pid = static_cast<long>(::getpid());
  static const std::uint64_t start = process_start_time(pid);
  if (words.size() > image::h_published_ns) {
    words[image::h_pid] = static_cast<std::uint64_t>(pid);
    words[image::h_start_time] = start;
    words[image::h_published_ns] = monotonic_ns();  // a live publisher's: the rest is the input's
  }
  const std::string path = counter_file_of(dir, pid);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) std::abort();
  const std::size_t bytes = size;  // the file keeps the input's length: a size not of whole words too
  if (bytes != 0 && ::write(fd, words.data(), bytes) != static_cast<ssize_t>(bytes)) std::abort();
  ::close(fd);
  std::error_code ec;
  const numaaff::counter_snapshot s = numaaff::snapshot(pid, ec);
  if (!ec && s.pid != pid) std::abort();
  if (ec && !s.nodes.empty()) std::abort();
  return 0;
}
