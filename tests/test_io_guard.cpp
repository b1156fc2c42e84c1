// The I/O guard (libnumaaff_ioguard) on this host (layer 2). ctest runs this program twice:
// preloaded (LD_PRELOAD=libnumaaff_ioguard.so, NUMAAFF_TEST_IO_GUARD set), where every libc
// I/O call below works on armed memory, keeps every byte and leaves the buffer opened; and
// without the guard, where the same calls fail with EFAULT (a datagram is lost), which is
// what the guard is for. The program is not linked with the guard: it arms in its own,
// compiled-in copy of numaaff, which offers the guard its opener when it first arms.
#include <numaaff/next_touch.hpp>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
bool guarded() { return std::getenv("NUMAAFF_TEST_IO_GUARD") != nullptr; }

/// An armed buffer of `pages` pages, filled with `fill` before arming.
struct armed {
  char* p;
  std::size_t bytes;
  explicit armed(std::size_t pages, char fill = 0) : bytes(pages * ps) {
    p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    std::memset(p, fill, bytes);
    numaaff::affinity_on_next_touch(p, bytes);
  }
  ~armed() {
    numaaff::disarm(p, bytes);
    munmap(p, bytes);
  }
};

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 23);
  return s;
}

/// Checks one call's outcome: with the guard it moved `want` bytes (and `ok` holds), without
/// it failed with EFAULT.
void expect_outcome(ssize_t got, std::size_t want, bool ok, const char* call) {
  if (guarded()) {
    EXPECT_EQ(got, static_cast<ssize_t>(want)) << call << ": " << std::strerror(errno);
    EXPECT_TRUE(ok) << call << ": the bytes differ";
  } else {
    EXPECT_EQ(got, -1) << call << " worked on armed memory without the guard";
    EXPECT_EQ(errno, EFAULT) << call;
  }
}

TEST(IoGuard, ReadAndReadvIntoArmedMemory) {
  const std::string data = pattern(3 * ps);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
  {
    armed a(4);
    const ssize_t n = read(fds[0], a.p + 100, 2 * ps);
    expect_outcome(n, 2 * ps, n > 0 && std::memcmp(a.p + 100, data.data(), 2 * ps) == 0, "read");
    if (guarded()) {
      EXPECT_FALSE(numaaff::is_armed(a.p + 100, 2 * ps));
    }
  }
  if (!guarded()) return;  // the pipe still holds what the failed read left
  armed b(4);
  iovec iov[2] = {{b.p, ps / 2}, {b.p + 2 * ps, ps / 2}};
  const ssize_t n = readv(fds[0], iov, 2);
  expect_outcome(n, ps, n > 0 && std::memcmp(b.p, data.data() + 2 * ps, ps / 2) == 0 &&
                            std::memcmp(b.p + 2 * ps, data.data() + 2 * ps + ps / 2, ps / 2) == 0,
                 "readv");
  close(fds[0]);
  close(fds[1]);
}

TEST(IoGuard, DatagramsReceivedIntoArmedMemoryAreNotLost) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, fds), 0);
  const std::string d = pattern(1000);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(send(fds[0], d.data(), d.size(), 0), static_cast<ssize_t>(d.size()));
  armed a(8);
  ssize_t n = recv(fds[1], a.p, 1000, MSG_DONTWAIT);
  expect_outcome(n, 1000, n > 0 && std::memcmp(a.p, d.data(), 1000) == 0, "recv");
  if (!guarded()) {
    // The datagram was consumed by the failed call: the next one is the second sent.
    char probe[1];
    ASSERT_EQ(recv(fds[1], probe, 0, MSG_DONTWAIT | MSG_TRUNC), 1000);
    return;
  }
  n = recvfrom(fds[1], a.p + ps, 1000, MSG_DONTWAIT, nullptr, nullptr);
  expect_outcome(n, 1000, n > 0 && std::memcmp(a.p + ps, d.data(), 1000) == 0, "recvfrom");
  iovec iov{a.p + 2 * ps, 1000};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  n = recvmsg(fds[1], &m, MSG_DONTWAIT);
  expect_outcome(n, 1000, n > 0 && std::memcmp(a.p + 2 * ps, d.data(), 1000) == 0, "recvmsg");
  iovec iov2{a.p + 4 * ps, 1000};
  mmsghdr mm{};
  mm.msg_hdr.msg_iov = &iov2;
  mm.msg_hdr.msg_iovlen = 1;
  const int got = recvmmsg(fds[1], &mm, 1, MSG_DONTWAIT, nullptr);
  EXPECT_EQ(got, 1);
  EXPECT_EQ(mm.msg_len, 1000u);
  EXPECT_EQ(std::memcmp(a.p + 4 * ps, d.data(), 1000), 0);
  close(fds[0]);
  close(fds[1]);
}

TEST(IoGuard, FreadAndPreadOfACheckpointIntoArmedMemory) {
  // A checkpoint larger than stdio's buffer: glibc reads it straight into the caller's buffer.
  const std::string data = pattern(64 * ps);
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fwrite(data.data(), 1, data.size(), f), data.size());
  ASSERT_EQ(fflush(f), 0);
  rewind(f);
  armed a(64);
  const std::size_t n = fread(a.p, 1, a.bytes, f);
  if (guarded()) {
    EXPECT_EQ(n, a.bytes);
    EXPECT_EQ(std::memcmp(a.p, data.data(), a.bytes), 0);
  } else {
    EXPECT_LT(n, a.bytes) << "fread filled an armed buffer without the guard";
    EXPECT_TRUE(ferror(f));
  }
  if (!guarded()) return fclose(f), void();
  armed b(8);
  const ssize_t r = pread(fileno(f), b.p, 8 * ps, static_cast<off_t>(ps));
  expect_outcome(r, 8 * ps, r > 0 && std::memcmp(b.p, data.data() + ps, 8 * ps) == 0, "pread");
  fclose(f);
}

TEST(IoGuard, WritesAndSendsFromArmedMemory) {
  armed a(4, 'q');
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ssize_t n = write(fds[1], a.p, ps);
  expect_outcome(n, ps, true, "write");
  if (!guarded()) return;
  std::vector<char> back(ps);
  ASSERT_EQ(read(fds[0], back.data(), ps), static_cast<ssize_t>(ps));
  EXPECT_EQ(back, std::vector<char>(ps, 'q'));
  armed b(4, 'r');
  int s[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, s), 0);
  n = send(s[0], b.p + ps, 512, 0);
  expect_outcome(n, 512, true, "send");
  iovec iov{b.p + 3 * ps, 256};
  n = writev(fds[1], &iov, 1);
  expect_outcome(n, 256, true, "writev");
  for (int fd : {fds[0], fds[1], s[0], s[1]}) close(fd);
}

// With _FORTIFY_SOURCE a read into an object of known size is a call of __read_chk.
TEST(IoGuard, FortifiedCallsAreCoveredToo) {
  alignas(4096) static char buffer[4 * 4096];
  ASSERT_LE(ps, 4096u);
  const std::string data = pattern(4096);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], data.data(), data.size()), 4096);
  numaaff::affinity_on_next_touch(buffer, sizeof buffer);
  const ssize_t n = read(fds[0], buffer, 4096);
  expect_outcome(n, 4096, n > 0 && std::memcmp(buffer, data.data(), 4096) == 0, "read (fortified)");
  numaaff::disarm(buffer, sizeof buffer);
  close(fds[0]);
  close(fds[1]);
}

TEST(IoGuard, MemoryThatIsNotArmedIsUntouched) {
  // errno and results exactly as without the guard, buffers never armed never opened.
  std::vector<char> buf(ps);
  errno = 0;
  EXPECT_EQ(read(-1, buf.data(), buf.size()), -1);
  EXPECT_EQ(errno, EBADF);
  armed a(2);
  errno = 0;
  EXPECT_EQ(read(-1, buf.data(), buf.size()), -1);  // an armed range elsewhere changes nothing here
  EXPECT_EQ(errno, EBADF);
  EXPECT_TRUE(numaaff::is_armed(a.p, a.bytes));
}

}  // namespace
