// What the I/O guard costs a call into memory that is not armed. Run it preloaded
// (LD_PRELOAD=libnumaaff_ioguard.so): `read`, `recv` and `fread` then go through the guard, and
// the same calls made straight into libc (looked up in libc.so.6 itself) are the baseline, in
// the same run. `/armed_elsewhere`: one range is armed somewhere else in the process, so the
// guard's opener looks the buffer up in the registry (the case of an AMR code mid-phase).
#include <numaaff/next_touch.hpp>

#include "ratio_report.hpp"

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace {

using read_fn = ssize_t (*)(int, void*, size_t);
using recv_fn = ssize_t (*)(int, void*, size_t, int);
using send_fn = ssize_t (*)(int, const void*, size_t, int);

void* libc() {
  static void* h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  return h;
}

/// Arms 1 MiB elsewhere while the benchmark runs, if asked.
struct elsewhere {
  char* p = nullptr;
  explicit elsewhere(bool arm) {
    if (!arm) return;
    p = static_cast<char*>(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    numaaff::affinity_on_next_touch(p, 1 << 20);
  }
  ~elsewhere() {
    if (p == nullptr) return;
    numaaff::disarm(p, 1 << 20);
    munmap(p, 1 << 20);
  }
};

template <class Read>
void read_zero(benchmark::State& state, Read&& do_read) {
  const elsewhere other(state.range(0) != 0);
  const int fd = open("/dev/zero", O_RDONLY);
  std::vector<char> buf(4096);
  for (auto _ : state) benchmark::DoNotOptimize(do_read(fd, buf.data(), buf.size()));
  close(fd);
  state.SetItemsProcessed(state.iterations());
}
void BM_read_guarded(benchmark::State& state) { read_zero(state, [](int fd, void* b, size_t n) { return read(fd, b, n); }); }
void BM_read_libc(benchmark::State& state) {
  const auto real = reinterpret_cast<read_fn>(dlsym(libc(), "read"));
  read_zero(state, real);
}

template <class Recv>
void datagram(benchmark::State& state, Recv&& do_recv) {
  const elsewhere other(state.range(0) != 0);
  int s[2];
  socketpair(AF_UNIX, SOCK_DGRAM, 0, s);
  const auto real_send = reinterpret_cast<send_fn>(dlsym(libc(), "send"));
  char msg[256] = {}, buf[256];
  for (auto _ : state) {
    real_send(s[0], msg, sizeof msg, 0);
    benchmark::DoNotOptimize(do_recv(s[1], buf, sizeof buf, 0));
  }
  close(s[0]);
  close(s[1]);
  state.SetItemsProcessed(state.iterations());
}
void BM_recv_guarded(benchmark::State& state) {
  datagram(state, [](int fd, void* b, size_t n, int f) { return recv(fd, b, n, f); });
}
void BM_recv_libc(benchmark::State& state) { datagram(state, reinterpret_cast<recv_fn>(dlsym(libc(), "recv"))); }

BENCHMARK(BM_read_guarded)->Arg(0)->Arg(1)->ArgName("armed_elsewhere");
BENCHMARK(BM_read_libc)->Arg(0)->Arg(1)->ArgName("armed_elsewhere");
BENCHMARK(BM_recv_guarded)->Arg(0)->Arg(1)->ArgName("armed_elsewhere");
BENCHMARK(BM_recv_libc)->Arg(0)->Arg(1)->ArgName("armed_elsewhere");

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("LD_PRELOAD") == nullptr)
    std::printf("note: run with LD_PRELOAD=libnumaaff_ioguard.so; without it both forms are libc's\n");
  using numaaff_bench::ratio;
  std::vector<ratio> ratios;
  for (const char* call : {"read", "recv"})
    for (const char* arg : {"0", "1"}) {
      const std::string suffix = std::string("/armed_elsewhere:") + arg;
      ratios.push_back({std::string("BM_") + call + "_guarded" + suffix, std::string("BM_") + call + "_libc" + suffix,
                        ratio::measure::time, 1.05,
                        std::string(call) + " through the guard / libc's" + (arg[0] == '1' ? ", a range armed elsewhere" : "")});
    }
  return numaaff_bench::run(argc, argv, ratios);
}
