// Where the live counters are published for other processes, and how they are read back.
//
// The segment is a file DIR/numaaff-PID (DIR: NUMAAFF_COUNTERS_DIR, else /dev/shm), mode 0600,
// so only the same user (and root) reads it. The first numaaff call that counts starts a
// publisher thread that copies collect_image() into the file's shared mapping every 100 ms,
// as a sequence lock: the sequence word is odd while a copy is under way. Readers never map
// the file (a hostile owner could truncate it under a reader's mapping: SIGBUS); they pread
// it whole between two reads of the sequence word and parse a stable copy.
//
// Nothing is left behind at exit (an atexit handler removes the file); a process that ended
// otherwise (a signal, _exit) leaves a file whose pid is gone or was reused, which the next
// reader removes when it is its owner's. A forked child publishes its own segment, with its
// own counts, from its first call that counts. NUMAAFF_COUNTERS=off publishes nothing.
#pragma once

#include "../errors.hpp"
#include "counters.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace numaaff::detail {

constexpr std::uint64_t counter_publish_interval_ns = 100'000'000;
constexpr const char* counter_file_prefix = "numaaff-";

/// The directory counter segments live in (NUMAAFF_COUNTERS_DIR, else /dev/shm).
inline std::string counters_directory() {
  const char* d = std::getenv("NUMAAFF_COUNTERS_DIR");
  return d != nullptr && *d != '\0' ? std::string(d) : std::string("/dev/shm");
}
inline std::string counter_file_of(const std::string& dir, long pid) {
  return dir + "/" + counter_file_prefix + std::to_string(pid);
}
/// NUMAAFF_COUNTERS: unset, "on" or "1" publish; "off" or "0" do not.
/// @throws std::invalid_argument naming the variable for any other value.
inline bool counters_enabled_by_environment() {
  const char* v = std::getenv("NUMAAFF_COUNTERS");
  if (v == nullptr || std::strcmp(v, "on") == 0 || std::strcmp(v, "1") == 0 || *v == '\0') return true;
  if (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0) return false;
  throw_invalid_argument(std::string("NUMAAFF_COUNTERS: '") + v + "' is not one of on, off, 1, 0");
}

/// The publisher's state. Never destroyed: the detached thread and the atexit handler use it
/// during exit.
struct counter_publisher {
  enum class state : int { idle, publishing, off, failed };
  std::atomic<int> st{static_cast<int>(state::idle)};
  std::mutex start_lock;  // one start at a time
  std::mutex round_lock;  // held by the publisher during a copy, and for good at exit
  std::uint64_t* words = nullptr;
  std::size_t bytes = 0;
  std::string path;
  std::string why;  // of state off or failed
  std::atomic<bool> exiting{false};
  std::uint64_t start_time = 0;
  long pid = 0;
  std::string comm;
  // The publisher thread's copy of the image (round_lock held). Kept here, not on its stack: a
  // forked child has no publisher thread, and a buffer only that thread's stack pointed to
  // would be memory nobody can reach there (LeakSanitizer reports it at the child's exit).
  std::vector<std::uint64_t> image;
  std::atomic<std::uint64_t> started_ns{0};  // when this process's counting began; 0: its static initialisation
};
inline counter_publisher& publisher() {
  static counter_publisher* p = new counter_publisher;  // leaked on purpose: see above
  return *p;
}

/// When this process's counting began: its start, or a forked child's fork.
inline std::uint64_t counting_started_ns() noexcept {
  const std::uint64_t t = publisher().started_ns.load(std::memory_order_relaxed);
  return t != 0 ? t : counters_started_ns();
}

/// One copy of the image into the shared mapping (round_lock held).
inline void publish_round(counter_publisher& p, std::vector<std::uint64_t>& image) {
  collect_image(image, p.pid, p.start_time, counter_publish_interval_ns, p.comm, counting_started_ns());
  image[image::h_published_ns] = monotonic_ns();
  if (image.size() * sizeof(std::uint64_t) != p.bytes) return;  // cannot happen: the layout is fixed per machine
  auto* seq = reinterpret_cast<std::atomic<std::uint64_t>*>(&p.words[image::h_sequence]);
  const std::uint64_t s = seq->load(std::memory_order_relaxed);
  seq->store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < image.size(); ++i)
    if (i != image::h_sequence)
      reinterpret_cast<std::atomic<std::uint64_t>*>(&p.words[i])->store(image[i], std::memory_order_relaxed);
  seq->store(s + 2, std::memory_order_release);
}

inline void publisher_main() {
  counter_publisher& p = publisher();
  for (;;) {
    {
      std::lock_guard<std::mutex> l(p.round_lock);
      if (p.exiting.load(std::memory_order_relaxed) || p.st.load(std::memory_order_acquire) != static_cast<int>(counter_publisher::state::publishing)) return;
      try {
        publish_round(p, p.image);
      } catch (...) {  // out of memory: the segment keeps its last image, the next round tries again
      }
    }
    timespec ts{0, static_cast<long>(counter_publish_interval_ns)};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
}

/// Is the process `pid` alive and the one that started at `start_time`? A segment of a
/// process that is gone, or whose pid now names another process, is stale.
inline bool segment_owner_alive(long pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  const std::uint64_t now = process_start_time(pid);
  return now != 0 && now == start_time;
}

/// Was the segment file (`st`) made by the owner of process `pid`? The directory is shared by
/// every user (/dev/shm), so another user can make a well-formed file under any pid's name:
/// its figures must never be read as that process's. A process that is gone has no owner to
/// ask: only the reader's own files (a launcher's child's last image) are read then.
inline bool segment_made_by_its_process_owner(const struct stat& st, long pid) {
  struct stat proc {};
  const std::string dir = "/proc/" + std::to_string(pid);
  if (::stat(dir.c_str(), &proc) == 0) return st.st_uid == proc.st_uid;
  return st.st_uid == ::geteuid();
}

/// Creates this process's segment file (O_EXCL; a file of the same name left by an earlier
/// process with this pid, or by this process before an exec, is removed first when it is
/// ours). @return the descriptor, or -1 with `why`.
inline int create_segment_file(const std::string& path, std::size_t bytes, std::string& why) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      // Its pages are taken now: a sparse file on a full tmpfs would raise SIGBUS at the first
      // copy into the mapping, in the application.
      if (const int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0) {
        why = path + ": posix_fallocate: " + std::strerror(e);
        ::close(fd);
        ::unlink(path.c_str());
        return -1;
      }
      return fd;
    }
    if (errno != EEXIST) break;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || st.st_uid != ::geteuid() || !S_ISREG(st.st_mode)) {
      why = path + ": exists and is not this user's file";
      return -1;
    }
    ::unlink(path.c_str());  // our name, so an earlier process's (pid reuse) or ours before exec()
  }
  why = path + ": open: " + std::strerror(errno);
  return -1;
}

/// The last image, then the file goes: a reader that holds it open (numaaff-run --report) reads
/// the process's final counts.
inline void counters_at_exit() noexcept {
  counter_publisher& p = publisher();
  // A child of vfork() or a raw clone() that calls exit() ran no fork handler: the segment is
  // its parent's.
  if (p.words != nullptr && static_cast<long>(::getpid()) != p.pid) return;
  std::lock_guard<std::mutex> round(p.round_lock);
  p.exiting.store(true, std::memory_order_relaxed);  // the publisher stops at its next round
  if (p.st.load(std::memory_order_acquire) != static_cast<int>(counter_publisher::state::publishing)) return;
  try {
    std::vector<std::uint64_t> image;
    publish_round(p, image);
  } catch (...) {  // out of memory: the last periodic image stays
  }
  // A launcher waiting for this process (numaaff-run --report) reads the file after the exit,
  // then removes it; it names itself, so that only its own child leaves the file.
  const char* keep = std::getenv("NUMAAFF_COUNTERS_KEEP_FOR");
  if (keep != nullptr && std::strtol(keep, nullptr, 10) == static_cast<long>(::getppid()) && ::getppid() > 1) return;
  ::unlink(p.path.c_str());
}

inline void counters_before_fork() noexcept {
  counter_publisher& p = publisher();
  p.start_lock.lock();
  p.round_lock.lock();
  registry_of_counters().lock.lock();
}
inline void counters_after_fork_in_parent() noexcept {
  counter_publisher& p = publisher();
  registry_of_counters().lock.unlock();
  p.round_lock.unlock();
  p.start_lock.unlock();
}
/// The child has no publisher and must not write into the parent's segment: the mapping goes,
/// and the child's first call that counts publishes the child's own. Its counts start at zero
/// (the parent's pools are not the child's; its node events are cleared).
inline void counters_after_fork_in_child() noexcept {
  counter_publisher& p = publisher();
  registry_of_counters().sources.clear();  // the parent's pools: their workers are not here
  registry_of_counters().lock.unlock();
  if (p.words != nullptr) ::munmap(p.words, p.bytes);
  p.words = nullptr;
  if (p.st.load(std::memory_order_relaxed) == static_cast<int>(counter_publisher::state::publishing))
    p.st.store(static_cast<int>(counter_publisher::state::idle), std::memory_order_relaxed);
  p.started_ns.store(monotonic_ns(), std::memory_order_relaxed);
  for (auto& k : retired_steals)
    if (k.load(std::memory_order_relaxed) != 0) k.store(0, std::memory_order_relaxed);
  for (node_event_counters& e : node_events) {
    for (auto* a : {&e.tasks_run, &e.stolen_local, &e.stolen_in, &e.stolen_out, &e.sleeps, &e.worker_ns, &e.idle_ns,
                    &e.nt_chunks, &e.nt_pages_moved, &e.nt_pages_already, &e.nt_pages_failed, &e.nt_faults, &e.pages_moved,
                    &e.pages_not_moved})
      if (a->load(std::memory_order_relaxed) != 0) a->store(0, std::memory_order_relaxed);
  }
  p.round_lock.unlock();
  p.start_lock.unlock();
}

/// Everything the publisher and the fork handlers use is made during static initialisation,
/// before any thread can fork: a child forked while another thread held a lock or ran a
/// static's first initialisation would wait on it forever. The handlers that keep the locks
/// across fork() are registered here too, and so is the exit handler: it runs before the
/// destructors of the statics made before it (the node list, the row table), which the
/// publisher reads.
inline const bool counter_hooks_ready = [] {
  try {
    (void)publisher();
    (void)registry_of_counters();
    (void)counters_started_ns();
    (void)counter_slots();
  } catch (...) {  // out of memory at start-up
    return false;
  }
  return ::pthread_atfork(counters_before_fork, counters_after_fork_in_parent, counters_after_fork_in_child) == 0 &&
         std::atexit(counters_at_exit) == 0;
}();

inline bool read_segment(const std::string& dir, long pid, std::vector<std::uint64_t>& words, parsed_image& out,
                         std::string& why, std::error_code& ec);
inline std::vector<long> segment_pids(const std::string& dir);

/// Removes the segments in the counters' directory that processes of this user left when they
/// died (read_segment removes a stale one it reads).
inline void remove_stale_segments() {
  const std::string dir = counters_directory();
  const long self = static_cast<long>(::getpid());
  for (long pid : segment_pids(dir)) {
    if (pid == self) continue;  // ours, from before an exec: replaced below
    std::vector<std::uint64_t> words;
    parsed_image m;
    std::string why;
    std::error_code ec;
    (void)read_segment(dir, pid, words, m, why, ec);
  }
}

/// Starts publishing if nothing has tried yet in this process. Cheap after the first call (one
/// acquire load). Never throws: a failure is kept (counters_status()) and counting goes on in
/// the process (snapshot() still works).
inline void publish_counters() noexcept {
  counter_publisher& p = publisher();
  if (p.st.load(std::memory_order_acquire) != static_cast<int>(counter_publisher::state::idle)) return;
  std::lock_guard<std::mutex> l(p.start_lock);  // held by the catch blocks too: they write p.why
  try {
    if (p.st.load(std::memory_order_relaxed) != static_cast<int>(counter_publisher::state::idle)) return;
    if (p.exiting.load(std::memory_order_relaxed)) return;  // exit has begun: nothing new is published
    auto give_up = [&](counter_publisher::state s, std::string why) {
      p.why = std::move(why);
      p.st.store(static_cast<int>(s), std::memory_order_release);
    };
    if (!counters_enabled_by_environment()) return give_up(counter_publisher::state::off, "NUMAAFF_COUNTERS=off");
    if (!counter_hooks_ready) return give_up(counter_publisher::state::failed, "no room for the atexit or atfork handlers");
    remove_stale_segments();  // what processes of this user that died left here
    p.pid = static_cast<long>(::getpid());
    p.start_time = process_start_time(p.pid);
    p.comm = process_comm();
    std::vector<std::uint64_t> image;
    collect_image(image, p.pid, p.start_time, counter_publish_interval_ns, p.comm, counting_started_ns());
    const std::size_t bytes = image.size() * sizeof(std::uint64_t);
    const std::string path = counter_file_of(counters_directory(), p.pid);
    std::string why;
    const int fd = create_segment_file(path, bytes, why);
    if (fd < 0) return give_up(counter_publisher::state::failed, why);
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
      ::unlink(path.c_str());
      return give_up(counter_publisher::state::failed, path + ": mmap: " + std::strerror(errno));
    }
    p.words = static_cast<std::uint64_t*>(m);
    p.bytes = bytes;
    p.path = path;
    p.st.store(static_cast<int>(counter_publisher::state::publishing), std::memory_order_release);
    {
      std::lock_guard<std::mutex> r(p.round_lock);
      publish_round(p, image);
    }
    // The publisher takes no signal of the process's: they go to the application's threads.
    sigset_t all, old;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      std::thread(publisher_main).detach();
    } catch (...) {
      ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
      std::lock_guard<std::mutex> r(p.round_lock);
      ::unlink(path.c_str());
      ::munmap(p.words, p.bytes);
      p.words = nullptr;
      return give_up(counter_publisher::state::failed, "no thread for the publisher");
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  } catch (const std::exception& e) {  // a bad NUMAAFF_COUNTERS, or out of memory: said by counters_status()
    try {
      p.why = e.what();
    } catch (...) {
    }
    p.st.store(static_cast<int>(counter_publisher::state::failed), std::memory_order_release);
  } catch (...) {
    p.st.store(static_cast<int>(counter_publisher::state::failed), std::memory_order_release);
  }
}

/// Opens the segment of `pid` in `dir` for reading (never following a link, never blocking on
/// a FIFO). -1 with `ec` (errno of open) and `why` otherwise.
inline int open_segment(const std::string& dir, long pid, std::string& why, std::error_code& ec) {
  const std::string path = counter_file_of(dir, pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    ec.assign(errno, std::system_category());
    why = path + ": open";
  }
  return fd;
}

/// Reads an open segment `fd` (named `path`, of `pid`) into `words`: a stable copy (the
/// sequence word even and unchanged around the copy), parsed and checked to be `pid`'s. With
/// `alive_only`, a segment whose process is gone, or whose pid now names another process, is
/// ESRCH (and removed when it is this user's); without, it is read all the same (a reader
/// that holds the file open reads its last image after the process ended).
inline bool read_open_segment(int fd, const std::string& path, long pid, bool alive_only, std::vector<std::uint64_t>& words,
                              parsed_image& out, std::string& why, std::error_code& ec) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ec.assign(errno, std::system_category());
    why = path + ": fstat";
    return false;
  }
  const std::uint64_t limit = (image::header_words + 2 * image::max_fields +
                               image::max_nodes * image::max_fields + image::max_nodes * image::max_nodes) * 8;
  // The path still names this file (a new process with the pid may have replaced it since it
  // was opened): only then may a stale one be removed by name.
  auto remove_if_stale = [&] {
    struct stat now {};
    if (!alive_only || st.st_uid != ::geteuid() || (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) return;
    if (::lstat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) ::unlink(path.c_str());
  };
  auto bad = [&](std::string w) {
    remove_if_stale();  // what a process that died while making or copying left
    ec = make_error_code(errc::bad_counter_segment);
    why = path + ": " + w;
    return false;
  };
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(image::header_words * 8) ||
      static_cast<std::uint64_t>(st.st_size) > limit || st.st_size % 8 != 0)
    return bad("not a regular file of a plausible size");
  if (!segment_made_by_its_process_owner(st, pid))
    return bad("made by uid " + std::to_string(st.st_uid) + ", not by the owner of process " + std::to_string(pid));
  auto read_all = [&](void* to, std::size_t n, off_t at) {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd, static_cast<char*>(to) + done, n - done, at + static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return done;
      done += static_cast<std::size_t>(r);
    }
    return done;
  };
  // A live writer holds the sequence odd for the microseconds of one copy, unless it is
  // descheduled in the middle (a loaded machine, a vCPU the host holds back): the reader waits
  // up to a second for it, in growing sleeps, while its process lives (once it is gone, one
  // more read: it may have finished its last copy just before it ended).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  bool writer_gone = false;
  for (auto pause = std::chrono::microseconds(200);; pause = std::min(2 * pause, std::chrono::microseconds(20000))) {
    std::uint64_t before = 0, after = 0;
    words.assign(static_cast<std::size_t>(st.st_size) / 8, 0);
    const off_t seq_at = static_cast<off_t>(image::h_sequence * 8);
    if (read_all(&before, 8, seq_at) != 8) return bad("truncated");
    const std::size_t got = read_all(words.data(), words.size() * 8, 0);
    if (read_all(&after, 8, seq_at) != 8 || got != words.size() * 8) return bad("truncated while read");
    if (before % 2 != 0 || before != after || words[image::h_sequence] != before) {  // an update is under way
      if (writer_gone || std::chrono::steady_clock::now() >= give_up) break;
      writer_gone = ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
      if (!writer_gone) std::this_thread::sleep_for(pause);
      continue;
    }
    if (std::string w; !parse_image(words.data(), words.size(), out, w)) return bad(w);
    if (out.pid != static_cast<std::uint64_t>(pid)) return bad("written for pid " + std::to_string(out.pid));
    if (alive_only && !segment_owner_alive(pid, out.start_time)) {
      struct stat now {};  // the next reader cleans what a crash left
      if (st.st_uid == ::geteuid() && ::lstat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
        ::unlink(path.c_str());
      why = path + ": left by a process that is gone";
      ec = std::error_code(ESRCH, std::system_category());
      return false;
    }
    // Its process lives but publishes no more (it exec'd a program without numaaff, or is
    // stopped): not a publisher now. The file stays: it may resume.
    const std::uint64_t now_ns = monotonic_ns();
    if (alive_only && out.published_ns + 100 * counter_publish_interval_ns < now_ns) {
      why = path + ": not updated for " + std::to_string((now_ns - out.published_ns) / 1000000000u) + " s";
      ec = std::error_code(ESRCH, std::system_category());
      return false;
    }
    ec.clear();
    return true;
  }
  return bad("never stable (an update was always under way)");
}

/// Reads the segment of `pid` from `dir` into `words` and parses it (open_segment, then
/// read_open_segment of a live process). ENOENT: no segment; ESRCH: the process is gone;
/// bad_counter_segment with `why`.
inline bool read_segment(const std::string& dir, long pid, std::vector<std::uint64_t>& words, parsed_image& out,
                         std::string& why, std::error_code& ec) {
  const int fd = open_segment(dir, pid, why, ec);
  if (fd < 0) return false;
  const bool ok = read_open_segment(fd, counter_file_of(dir, pid), pid, true, words, out, why, ec);
  ::close(fd);
  return ok;
}

/// The pids with a counter segment in `dir` (not checked: read_segment says which are live).
inline std::vector<long> segment_pids(const std::string& dir) {
  std::vector<long> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  const std::size_t prefix = std::strlen(counter_file_prefix);
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, counter_file_prefix, prefix) != 0) continue;
    const char* digits = e->d_name + prefix;
    if (*digits == '\0' || std::strlen(digits) > 9) continue;
    bool ok = true;
    for (const char* c = digits; *c != '\0'; ++c) ok = ok && *c >= '0' && *c <= '9';
    if (ok) out.push_back(std::strtol(digits, nullptr, 10));
  }
  ::closedir(d);
  return out;
}

}  // namespace numaaff::detail
