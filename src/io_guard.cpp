// The I/O guard, libnumaaff_ioguard: libc's I/O calls made safe on memory armed for next touch.
//
// The kernel does not fault on an armed (PROT_NONE) chunk: a read(), recv() or fread() into
// one fails with EFAULT (and a datagram received that way is gone), a write() or send() from
// one fails likewise. This library, preloaded (LD_PRELOAD=libnumaaff_ioguard.so.0, the name
// the runtime package installs) or linked into the program, takes the place of those calls:
// before each, it asks every copy of numaaff in the process to open, for the calling thread,
// the armed chunks of the buffers the call is given (as touch_now would), then makes the real
// call. Memory that is not armed costs one load per copy of numaaff (a count of armed ranges)
// and nothing else.
//
// Each copy of numaaff keeps its own registry (a C++ program's compiled-in one, the C
// library's), so each offers its opener here when it first arms (numaaff_io_guard_register,
// found with dlsym); the guard needs none of numaaff's code itself.
//
// What it cannot cover: raw syscall(2), io_uring and POSIX AIO (the kernel reads the buffer
// later, not in a call made here), libc's internal calls that bypass these symbols (other
// than fread/fwrite, which are covered), statically linked programs, other processes'
// writes (process_vm_writev, MPI's single-copy transports) and devices' DMA. A signal
// handler that reads into armed memory may wait for the arming lock of the thread it
// interrupted: arm and open such buffers outside handlers.
#undef _FORTIFY_SOURCE  // the fortified inline wrappers would clash with the definitions here

#include <dlfcn.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <mutex>

#define NUMAAFF_IO_GUARD_API extern "C" __attribute__((visibility("default")))

namespace {

using opener = int (*)(const void*, std::size_t);
constexpr int max_openers = 16;  // copies of numaaff in one process
std::atomic<opener> openers[max_openers];
std::atomic<int> opener_count{0};

/// Opens what any copy of numaaff armed in [p, p + n). errno is kept: the call that follows
/// sets it as it would have.
inline void open_armed(const void* p, std::size_t n) noexcept {
  const int k = opener_count.load(std::memory_order_acquire);
  if (k == 0 || p == nullptr || n == 0) return;
  const int saved = errno;
  for (int i = 0; i < k; ++i)
    if (const opener f = openers[i].load(std::memory_order_acquire)) f(p, n);
  errno = saved;
}
inline void open_iov(const struct iovec* iov, int count) noexcept {
  if (opener_count.load(std::memory_order_acquire) == 0 || iov == nullptr) return;
  for (int i = 0; i < count; ++i) open_armed(iov[i].iov_base, iov[i].iov_len);
}
inline void open_msg(const struct msghdr* m) noexcept {
  if (m != nullptr) open_iov(m->msg_iov, static_cast<int>(m->msg_iovlen));
}
inline void open_mmsg(const struct mmsghdr* v, unsigned count) noexcept {
  if (opener_count.load(std::memory_order_acquire) == 0 || v == nullptr) return;
  for (unsigned i = 0; i < count; ++i) open_msg(&v[i].msg_hdr);
}
inline std::size_t product(std::size_t a, std::size_t b) noexcept {
  std::size_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? ~std::size_t{0} : r;
}

/// The definition the program would have called without the guard: the next one after ours.
/// Each is looked up when the library is loaded (so that no call, even from a signal handler,
/// runs dlsym), or at its first use if a constructor of another library calls it earlier.
template <class F>
struct real_call {
  const char* name;
  std::atomic<F> fn{nullptr};
  F get() noexcept {
    F f = fn.load(std::memory_order_acquire);
    if (f == nullptr) {
      f = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
      fn.store(f, std::memory_order_release);
    }
    return f;
  }
};

#define NUMAAFF_REAL(fn, ret, ...) real_call<ret (*)(__VA_ARGS__)> real_##fn{#fn}
NUMAAFF_REAL(read, ssize_t, int, void*, size_t);
NUMAAFF_REAL(pread, ssize_t, int, void*, size_t, off_t);
NUMAAFF_REAL(pread64, ssize_t, int, void*, size_t, off64_t);
NUMAAFF_REAL(readv, ssize_t, int, const struct iovec*, int);
NUMAAFF_REAL(preadv, ssize_t, int, const struct iovec*, int, off_t);
NUMAAFF_REAL(preadv64, ssize_t, int, const struct iovec*, int, off64_t);
NUMAAFF_REAL(preadv2, ssize_t, int, const struct iovec*, int, off_t, int);
NUMAAFF_REAL(preadv64v2, ssize_t, int, const struct iovec*, int, off64_t, int);
NUMAAFF_REAL(recv, ssize_t, int, void*, size_t, int);
NUMAAFF_REAL(recvfrom, ssize_t, int, void*, size_t, int, struct sockaddr*, socklen_t*);
NUMAAFF_REAL(recvmsg, ssize_t, int, struct msghdr*, int);
NUMAAFF_REAL(recvmmsg, int, int, struct mmsghdr*, unsigned int, int, struct timespec*);
NUMAAFF_REAL(fread, size_t, void*, size_t, size_t, FILE*);
NUMAAFF_REAL(fread_unlocked, size_t, void*, size_t, size_t, FILE*);
NUMAAFF_REAL(__read_chk, ssize_t, int, void*, size_t, size_t);
NUMAAFF_REAL(__pread_chk, ssize_t, int, void*, size_t, off_t, size_t);
NUMAAFF_REAL(__pread64_chk, ssize_t, int, void*, size_t, off64_t, size_t);
NUMAAFF_REAL(__recv_chk, ssize_t, int, void*, size_t, size_t, int);
NUMAAFF_REAL(__recvfrom_chk, ssize_t, int, void*, size_t, size_t, int, struct sockaddr*, socklen_t*);
NUMAAFF_REAL(__fread_chk, size_t, void*, size_t, size_t, size_t, FILE*);
NUMAAFF_REAL(__fread_unlocked_chk, size_t, void*, size_t, size_t, size_t, FILE*);
NUMAAFF_REAL(write, ssize_t, int, const void*, size_t);
NUMAAFF_REAL(pwrite, ssize_t, int, const void*, size_t, off_t);
NUMAAFF_REAL(pwrite64, ssize_t, int, const void*, size_t, off64_t);
NUMAAFF_REAL(writev, ssize_t, int, const struct iovec*, int);
NUMAAFF_REAL(pwritev, ssize_t, int, const struct iovec*, int, off_t);
NUMAAFF_REAL(pwritev64, ssize_t, int, const struct iovec*, int, off64_t);
NUMAAFF_REAL(pwritev2, ssize_t, int, const struct iovec*, int, off_t, int);
NUMAAFF_REAL(pwritev64v2, ssize_t, int, const struct iovec*, int, off64_t, int);
NUMAAFF_REAL(send, ssize_t, int, const void*, size_t, int);
NUMAAFF_REAL(sendto, ssize_t, int, const void*, size_t, int, const struct sockaddr*, socklen_t);
NUMAAFF_REAL(sendmsg, ssize_t, int, const struct msghdr*, int);
NUMAAFF_REAL(sendmmsg, int, int, struct mmsghdr*, unsigned int, int);
NUMAAFF_REAL(fwrite, size_t, const void*, size_t, size_t, FILE*);
NUMAAFF_REAL(fwrite_unlocked, size_t, const void*, size_t, size_t, FILE*);
#undef NUMAAFF_REAL

__attribute__((constructor)) void resolve_all() {
  (void)real_read.get(), (void)real_pread.get(), (void)real_pread64.get(), (void)real_readv.get();
  (void)real_preadv.get(), (void)real_preadv64.get(), (void)real_preadv2.get(), (void)real_preadv64v2.get();
  (void)real_recv.get(), (void)real_recvfrom.get(), (void)real_recvmsg.get(), (void)real_recvmmsg.get();
  (void)real_fread.get(), (void)real_fread_unlocked.get(), (void)real___read_chk.get(), (void)real___pread_chk.get();
  (void)real___pread64_chk.get(), (void)real___recv_chk.get(), (void)real___recvfrom_chk.get();
  (void)real___fread_chk.get(), (void)real___fread_unlocked_chk.get(), (void)real_write.get(), (void)real_pwrite.get();
  (void)real_pwrite64.get(), (void)real_writev.get(), (void)real_pwritev.get(), (void)real_pwritev64.get();
  (void)real_pwritev2.get(), (void)real_pwritev64v2.get(), (void)real_send.get(), (void)real_sendto.get();
  (void)real_sendmsg.get(), (void)real_sendmmsg.get(), (void)real_fwrite.get(), (void)real_fwrite_unlocked.get();
}

}  // namespace

/// Called by each copy of numaaff when it first arms a range (through dlsym, so no copy
/// depends on the guard): `open(addr, bytes)` opens what that copy armed there. 0, or ENOSPC
/// when more copies than the guard has room for offered one.
NUMAAFF_IO_GUARD_API int numaaff_io_guard_register(opener open) {
  static std::mutex lock;  // registration only: the calls above never take it
  std::lock_guard<std::mutex> guard(lock);
  const int k = opener_count.load(std::memory_order_relaxed);
  for (int i = 0; i < k; ++i)
    if (openers[i].load(std::memory_order_relaxed) == open) return 0;
  if (k == max_openers) return ENOSPC;
  openers[k].store(open, std::memory_order_release);
  opener_count.store(k + 1, std::memory_order_release);
  return 0;
}

// ---- into the buffer ---------------------------------------------------------------------

NUMAAFF_IO_GUARD_API ssize_t read(int fd, void* buf, size_t n) {
  open_armed(buf, n);
  return real_read.get()(fd, buf, n);
}
NUMAAFF_IO_GUARD_API ssize_t pread(int fd, void* buf, size_t n, off_t at) {
  open_armed(buf, n);
  return real_pread.get()(fd, buf, n, at);
}
NUMAAFF_IO_GUARD_API ssize_t pread64(int fd, void* buf, size_t n, off64_t at) {
  open_armed(buf, n);
  return real_pread64.get()(fd, buf, n, at);
}
NUMAAFF_IO_GUARD_API ssize_t readv(int fd, const struct iovec* iov, int count) {
  open_iov(iov, count);
  return real_readv.get()(fd, iov, count);
}
NUMAAFF_IO_GUARD_API ssize_t preadv(int fd, const struct iovec* iov, int count, off_t at) {
  open_iov(iov, count);
  return real_preadv.get()(fd, iov, count, at);
}
NUMAAFF_IO_GUARD_API ssize_t preadv64(int fd, const struct iovec* iov, int count, off64_t at) {
  open_iov(iov, count);
  return real_preadv64.get()(fd, iov, count, at);
}
NUMAAFF_IO_GUARD_API ssize_t preadv2(int fd, const struct iovec* iov, int count, off_t at, int flags) {
  open_iov(iov, count);
  return real_preadv2.get()(fd, iov, count, at, flags);
}
NUMAAFF_IO_GUARD_API ssize_t preadv64v2(int fd, const struct iovec* iov, int count, off64_t at, int flags) {
  open_iov(iov, count);
  return real_preadv64v2.get()(fd, iov, count, at, flags);
}
NUMAAFF_IO_GUARD_API ssize_t recv(int fd, void* buf, size_t n, int flags) {
  open_armed(buf, n);
  return real_recv.get()(fd, buf, n, flags);
}
NUMAAFF_IO_GUARD_API ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* from, socklen_t* len) {
  open_armed(buf, n);
  return real_recvfrom.get()(fd, buf, n, flags, from, len);
}
NUMAAFF_IO_GUARD_API ssize_t recvmsg(int fd, struct msghdr* m, int flags) {
  open_msg(m);
  return real_recvmsg.get()(fd, m, flags);
}
NUMAAFF_IO_GUARD_API int recvmmsg(int fd, struct mmsghdr* v, unsigned int count, int flags, struct timespec* timeout) {
  open_mmsg(v, count);
  return real_recvmmsg.get()(fd, v, count, flags, timeout);
}
NUMAAFF_IO_GUARD_API size_t fread(void* p, size_t size, size_t n, FILE* f) {
  open_armed(p, product(size, n));
  return real_fread.get()(p, size, n, f);
}
NUMAAFF_IO_GUARD_API size_t fread_unlocked(void* p, size_t size, size_t n, FILE* f) {
  open_armed(p, product(size, n));
  return real_fread_unlocked.get()(p, size, n, f);
}
// _FORTIFY_SOURCE turns the calls above into these in the program.
NUMAAFF_IO_GUARD_API ssize_t __read_chk(int fd, void* buf, size_t n, size_t room) {
  open_armed(buf, n);
  return real___read_chk.get()(fd, buf, n, room);
}
NUMAAFF_IO_GUARD_API ssize_t __pread_chk(int fd, void* buf, size_t n, off_t at, size_t room) {
  open_armed(buf, n);
  return real___pread_chk.get()(fd, buf, n, at, room);
}
NUMAAFF_IO_GUARD_API ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t at, size_t room) {
  open_armed(buf, n);
  return real___pread64_chk.get()(fd, buf, n, at, room);
}
NUMAAFF_IO_GUARD_API ssize_t __recv_chk(int fd, void* buf, size_t n, size_t room, int flags) {
  open_armed(buf, n);
  return real___recv_chk.get()(fd, buf, n, room, flags);
}
NUMAAFF_IO_GUARD_API ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t room, int flags, struct sockaddr* from,
                                            socklen_t* len) {
  open_armed(buf, n);
  return real___recvfrom_chk.get()(fd, buf, n, room, flags, from, len);
}
NUMAAFF_IO_GUARD_API size_t __fread_chk(void* p, size_t room, size_t size, size_t n, FILE* f) {
  open_armed(p, product(size, n));
  return real___fread_chk.get()(p, room, size, n, f);
}
NUMAAFF_IO_GUARD_API size_t __fread_unlocked_chk(void* p, size_t room, size_t size, size_t n, FILE* f) {
  open_armed(p, product(size, n));
  return real___fread_unlocked_chk.get()(p, room, size, n, f);
}

// ---- from the buffer ---------------------------------------------------------------------

NUMAAFF_IO_GUARD_API ssize_t write(int fd, const void* buf, size_t n) {
  open_armed(buf, n);
  return real_write.get()(fd, buf, n);
}
NUMAAFF_IO_GUARD_API ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  open_armed(buf, n);
  return real_pwrite.get()(fd, buf, n, at);
}
NUMAAFF_IO_GUARD_API ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t at) {
  open_armed(buf, n);
  return real_pwrite64.get()(fd, buf, n, at);
}
NUMAAFF_IO_GUARD_API ssize_t writev(int fd, const struct iovec* iov, int count) {
  open_iov(iov, count);
  return real_writev.get()(fd, iov, count);
}
NUMAAFF_IO_GUARD_API ssize_t pwritev(int fd, const struct iovec* iov, int count, off_t at) {
  open_iov(iov, count);
  return real_pwritev.get()(fd, iov, count, at);
}
NUMAAFF_IO_GUARD_API ssize_t pwritev64(int fd, const struct iovec* iov, int count, off64_t at) {
  open_iov(iov, count);
  return real_pwritev64.get()(fd, iov, count, at);
}
NUMAAFF_IO_GUARD_API ssize_t pwritev2(int fd, const struct iovec* iov, int count, off_t at, int flags) {
  open_iov(iov, count);
  return real_pwritev2.get()(fd, iov, count, at, flags);
}
NUMAAFF_IO_GUARD_API ssize_t pwritev64v2(int fd, const struct iovec* iov, int count, off64_t at, int flags) {
  open_iov(iov, count);
  return real_pwritev64v2.get()(fd, iov, count, at, flags);
}
NUMAAFF_IO_GUARD_API ssize_t send(int fd, const void* buf, size_t n, int flags) {
  open_armed(buf, n);
  return real_send.get()(fd, buf, n, flags);
}
NUMAAFF_IO_GUARD_API ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* to, socklen_t len) {
  open_armed(buf, n);
  return real_sendto.get()(fd, buf, n, flags, to, len);
}
NUMAAFF_IO_GUARD_API ssize_t sendmsg(int fd, const struct msghdr* m, int flags) {
  open_msg(m);
  return real_sendmsg.get()(fd, m, flags);
}
NUMAAFF_IO_GUARD_API int sendmmsg(int fd, struct mmsghdr* v, unsigned int count, int flags) {
  open_mmsg(v, count);
  return real_sendmmsg.get()(fd, v, count, flags);
}
NUMAAFF_IO_GUARD_API size_t fwrite(const void* p, size_t size, size_t n, FILE* f) {
  open_armed(p, product(size, n));
  return real_fwrite.get()(p, size, n, f);
}
NUMAAFF_IO_GUARD_API size_t fwrite_unlocked(const void* p, size_t size, size_t n, FILE* f) {
  open_armed(p, product(size, n));
  return real_fwrite_unlocked.get()(p, size, n, f);
}
