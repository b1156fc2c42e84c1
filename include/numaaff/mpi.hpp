/**
 * @file mpi.hpp
 * @brief numaaff inside MPI ranks: what a rank may use, where the job's ranks sit, a
 *        communicator per host and per node, and MPI buffers armed for next touch.
 *
 * The model is the hybrid one AMR and PDE codes use at scale: one rank per NUMA node (or
 * socket), numaaff's pool or an OpenMP team inside each rank. numaaff is then the thread and
 * memory layer of a rank, and it must stay inside what the launcher gave the rank.
 * `topology::system()` already honours the cgroup cpuset *and* the CPU and memory binding
 * (`mpirun --bind-to numa|core|none`, `--map-by ppr:1:numa`, Slurm's cpusets), which hwloc
 * alone does not fold in, so the default pool, the node and local allocators and next touch
 * in a rank use the rank's CPUs and nodes only. This header adds what needs MPI:
 * - this_rank(): the rank's view (CPUs, nodes, memory nodes, what restricted it);
 * - gather_layout(): every rank's view gathered over a communicator, printed like
 *   `numactl -H`, with the layouts that usually are mistakes named (a rank spanning nodes,
 *   ranks sharing CPUs or a node);
 * - split_by_host() and split_by_node(): communicators of the ranks on one host, and of the
 *   ranks on one host that use the same nodes;
 * - prepare_buffer(): the rule for MPI buffers armed for next touch (below).
 *
 * MPI buffers and next touch: an MPI library moves large messages between ranks of one host
 * with a single copy made by the kernel (Open MPI's vader transport uses process_vm_readv,
 * CMA), and over TCP with read(). The kernel does not take page faults through numaaff's
 * handler: a copy into or out of an armed chunk fails with EFAULT, which Open MPI reports
 * (`Read -1, expected 1048576, errno = 14`) before it falls back to a slower copy. Call
 * prepare_buffer() on every armed buffer (send or receive) before handing it to MPI: it opens
 * the armed chunks and moves them to the calling thread's node, as its own touch would.
 *
 * Never included by numaaff.hpp: include it where <mpi.h> is available and link MPI (CMake:
 * `target_link_libraries(app PRIVATE numaaff::numaaff MPI::MPI_CXX)`).
 * @code{.cpp}
 * MPI_Init(&argc, &argv);
 * const numaaff::mpi::job_layout layout = numaaff::mpi::gather_layout(MPI_COMM_WORLD);
 * if (rank == 0) std::fputs(layout.to_string().c_str(), stdout);   // one line per rank
 * numaaff::thread_pool pool;      // this rank's CPUs only, whatever the launcher did
 * numaaff::mpi::prepare_buffer(halo, halo_bytes);   // armed at the last phase change
 * MPI_Recv(halo, count, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
 * @endcode
 */
#pragma once

#include "detail/text.hpp"
#include "errors.hpp"
#include "next_touch.hpp"
#include "topology.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace numaaff::mpi {

/// What one rank may use, as numaaff sees it (topology::system() of that rank).
struct rank_view {
  int rank = 0;                       ///< in the communicator it was gathered over
  std::string host;                   ///< gethostname()
  std::vector<int> cpus;              ///< the CPUs it may run on (cpuset AND binding)
  std::vector<node_id> cpu_nodes;     ///< the nodes of those CPUs
  std::vector<node_id> memory_nodes;  ///< the nodes with memory in its view: its CPUs' nodes and the allowed memory-only nodes
  std::string restriction;            ///< topology::restriction(), "" when unrestricted

  /// True when its CPUs lie on more than one node (`--bind-to none`, `--bind-to socket` on a
  /// socket of several nodes): numaaff then spreads the rank's pool over those nodes.
  bool spans_nodes() const noexcept { return cpu_nodes.size() > 1; }
};

/**
 * The job's layout: every rank's view, in rank order, gathered by gather_layout().
 * A value type; thread-safe to read.
 */
class job_layout {
 public:
  job_layout() = default;
  explicit job_layout(std::vector<rank_view> ranks) : ranks_(std::move(ranks)) {}

  const std::vector<rank_view>& ranks() const noexcept { return ranks_; }
  /// The hosts, in order of their first rank.
  std::vector<std::string> hosts() const;
  /// The ranks on `host` whose CPUs include some of node `n`'s.
  std::vector<int> ranks_on(const std::string& host, node_id n) const;
  /**
   * The layouts that are usually mistakes, one sentence each: a rank that spans nodes, ranks
   * of one host that share CPUs (they oversubscribe each other's pools), ranks of one host
   * that share a node without sharing CPUs (their memory competes on that node). Empty for
   * one rank per node, each bound to it. At most 32 sentences, the last saying how many more.
   */
  std::vector<std::string> problems() const;
  /**
   * Per host, per node: the ranks on it and their CPUs, like `numactl -H` for the job, then
   * problems(). For example:
   * @code
   * host vm: 4 ranks
   *   node 0: rank 0 (cpus 0)
   *   node 1: rank 1 (cpus 1)
   * @endcode
   */
  std::string to_string() const;

 private:
  std::vector<rank_view> ranks_;
};

/**
 * This process's view, with its rank in `comm`. Not collective; allocates.
 * @throws std::system_error with numaaff::errc::unusable_binding, naming the binding, when the
 *         launcher's binding leaves the rank no CPU or no node with both CPUs and memory
 *         (topology::restriction_is_unusable()); numaaff::errc::mpi_call_failed if
 *         MPI_Comm_rank fails (with MPI_ERRORS_RETURN set on `comm`).
 * One node: one node, the rank's CPUs.
 */
rank_view this_rank(MPI_Comm comm = MPI_COMM_WORLD);

/**
 * Every rank's view over `comm`. Collective (two MPI_Allgather and an MPI_Allgatherv of a few
 * hundred bytes per rank); call it once at start-up: nothing in numaaff needs it afterwards.
 * Thread safety: as the MPI library's for collectives on `comm`.
 * @throws std::system_error with numaaff::errc::unusable_binding on every rank when some
 *         rank's binding is unusable (the message names each such rank, its host and its
 *         binding; the collectives complete first, so no rank is left waiting);
 *         numaaff::errc::mpi_call_failed if an MPI call fails; std::invalid_argument naming
 *         `comm` for MPI_COMM_NULL or an intercommunicator (as split_by_host and
 *         split_by_node: merge one with MPI_Intercomm_merge first).
 */
job_layout gather_layout(MPI_Comm comm = MPI_COMM_WORLD);

/**
 * A new communicator of the ranks of `comm` on this host (MPI_Comm_split_type with
 * MPI_COMM_TYPE_SHARED), ranks in `comm` order. Collective; the caller frees it
 * (MPI_Comm_free). @throws numaaff::errc::mpi_call_failed if the split fails.
 */
MPI_Comm split_by_host(MPI_Comm comm = MPI_COMM_WORLD);

/**
 * A new communicator of the ranks of `comm` on this host that use the same NUMA nodes
 * (this_rank().cpu_nodes equal), ranks in `comm` order: with one rank per node each rank is
 * alone; with `ppr:2:numa` the two ranks of a node share one. Unlike Open MPI's
 * OMPI_COMM_TYPE_NUMA split, which puts each unbound rank alone, unbound ranks that span the
 * same nodes share one communicator. Collective; the caller frees it.
 * @throws numaaff::errc::unusable_binding on every rank of a host where some rank's binding is
 *         unusable (after the collectives); numaaff::errc::mpi_call_failed as split_by_host().
 */
MPI_Comm split_by_node(MPI_Comm comm = MPI_COMM_WORLD);

/**
 * Makes an MPI buffer armed for next touch ready for the MPI library (see the file comment):
 * opens its armed chunks and moves them to the calling thread's node, like touch_now(). Call
 * it before MPI_Send, MPI_Recv, MPI_Isend, MPI_Irecv or a collective on the buffer. A buffer
 * that is not armed costs one lookup. Thread-safe; blocks on other threads opening the same
 * chunks; no allocation. One node: opens, pages stay.
 * @throws std::invalid_argument for a null or wrapping range; std::system_error "mprotect".
 */
inline void prepare_buffer(void* buffer, std::size_t bytes) { touch_now(buffer, bytes); }
/// Same, reporting failure through `ec`.
inline void prepare_buffer(void* buffer, std::size_t bytes, std::error_code& ec) noexcept { touch_now(buffer, bytes, ec); }
/**
 * The same for `count` elements of `type` at `buffer`, as an MPI call with these arguments
 * reads or writes them (from the type's true lower bound to the last element's true end).
 * @throws as above; numaaff::errc::mpi_call_failed if the type's extent cannot be read;
 *         std::invalid_argument naming `count` if it is negative.
 */
void prepare_buffer(void* buffer, int count, MPI_Datatype type);

// ---- implementation ---------------------------------------------------------------------

}  // namespace numaaff::mpi

namespace numaaff::detail {

[[noreturn]] inline void mpi_throw(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  throw std::system_error(make_error_code(errc::mpi_call_failed),
                          std::string("numaaff: ") + call + ": " + std::string(text, static_cast<std::size_t>(std::max(0, length))));
}

inline void mpi_check(int code, const char* call) {
  if (code != MPI_SUCCESS) mpi_throw(code, call);
}

inline std::string mpi_host_name() {
  char name[HOST_NAME_MAX + 2] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// A text field of the gathered view: the separator cannot occur in it.
inline std::string mpi_field(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// This rank's view without throwing for an unusable binding (`unusable` says why), so that
// collectives still run on every rank and all of them can report it.
inline mpi::rank_view mpi_view(MPI_Comm comm, std::string& unusable) {
  const topology& topo = topology::system();
  mpi::rank_view v;
  mpi_check(MPI_Comm_rank(comm, &v.rank), "MPI_Comm_rank");
  v.host = mpi_host_name();
  v.cpus = topo.cpus();
  v.cpu_nodes = topo.cpu_nodes();
  for (node_id n : topo.nodes())
    if (topo.memory_of(n) > 0) v.memory_nodes.push_back(n);
  v.restriction = topo.restriction();
  unusable = topo.restriction_is_unusable() ? topo.restriction() : std::string();
  return v;
}

[[noreturn]] inline void mpi_throw_unusable(const std::string& what) {
  throw std::system_error(make_error_code(errc::unusable_binding), "numaaff: " + what);
}

// One rank's view as text, for the gather: one field per line, the last saying why the
// binding is unusable ("" when it is not).
inline std::string mpi_encode(const mpi::rank_view& v, const std::string& unusable) {
  return mpi_field(v.host) + "\n" + format_list(v.cpus) + "\n" + format_list(v.cpu_nodes) + "\n" + format_list(v.memory_nodes) +
         "\n" + mpi_field(v.restriction) + "\n" + mpi_field(unusable);
}

inline mpi::rank_view mpi_decode(int rank, const std::string& s, std::string& unusable) {
  mpi::rank_view v;
  v.rank = rank;
  constexpr int fields = 6;
  std::string field[fields];
  std::size_t at = 0;
  for (int k = 0; k < fields; ++k) {
    const std::size_t end = k == fields - 1 ? s.size() : std::min(s.find('\n', at), s.size());
    field[k] = s.substr(std::min(at, s.size()), end - std::min(at, end));
    at = end + 1;
  }
  v.host = field[0];
  const auto list = [](const std::string& text, std::vector<int>& out) { return text == "none" || parse_list(text, out); };
  if (!list(field[1], v.cpus) || !list(field[2], v.cpu_nodes) || !list(field[3], v.memory_nodes))
    throw std::system_error(make_error_code(errc::mpi_call_failed), "numaaff: gather_layout: rank " + std::to_string(rank) +
                                                                       " sent a view that does not parse (another numaaff version?)");
  v.restriction = field[4];
  unusable = field[5];
  return v;
}

// The bridge's collectives size their arrays by the local group and gather into them: over an
// intercommunicator every rank of the remote group would write past them. So `comm` must be
// an intracommunicator (MPI_Intercomm_merge makes one of an intercommunicator).
inline void require_intracomm(const char* fn, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) throw_invalid_argument(std::string("mpi::") + fn + ": comm is MPI_COMM_NULL");
  int inter = 0;
  mpi_check(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  if (inter != 0)
    throw_invalid_argument(std::string("mpi::") + fn +
                           ": comm is an intercommunicator; pass an intracommunicator (MPI_Intercomm_merge makes one)");
}

// Every rank's string, in rank order. Collective over comm (an intracommunicator).
inline std::vector<std::string> mpi_allgather_strings(MPI_Comm comm, const std::string& mine) {
  require_intracomm("allgather", comm);
  int size = 0;
  mpi_check(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  if (mine.size() > static_cast<std::size_t>(INT_MAX)) throw_invalid_argument("numaaff::mpi: a rank's view exceeds 2 GiB");
  int length = static_cast<int>(mine.size());
  const auto n = static_cast<std::size_t>(size);
  std::vector<int> lengths(n), offsets(n);
  mpi_check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm), "MPI_Allgather");
  long long total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
    if (total > INT_MAX) throw_invalid_argument("numaaff::mpi: the ranks' views exceed 2 GiB");
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  mpi_check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, comm),
            "MPI_Allgatherv");
  std::vector<std::string> out;
  out.reserve(n);
  for (std::size_t r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])));
  return out;
}

inline bool shares_any(const std::vector<int>& a, const std::vector<int>& b) {
  for (int x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

}  // namespace numaaff::detail

namespace numaaff::mpi {

inline rank_view this_rank(MPI_Comm comm) {
  std::string unusable;
  rank_view v = detail::mpi_view(comm, unusable);
  if (!unusable.empty()) detail::mpi_throw_unusable("this rank's binding is unusable: " + unusable);
  return v;
}

inline job_layout gather_layout(MPI_Comm comm) {
  detail::require_intracomm("gather_layout", comm);
  std::string unusable;
  const rank_view mine = detail::mpi_view(comm, unusable);
  const std::vector<std::string> all = detail::mpi_allgather_strings(comm, detail::mpi_encode(mine, unusable));
  std::vector<rank_view> ranks;
  ranks.reserve(all.size());
  std::string bad;  // every unusable rank, the same text on every rank
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::string why;
    ranks.push_back(detail::mpi_decode(static_cast<int>(r), all[r], why));
    if (!why.empty()) bad += (bad.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " on " + ranks.back().host + ": " + why;
  }
  if (!bad.empty()) detail::mpi_throw_unusable("unusable binding: " + bad);
  return job_layout(std::move(ranks));
}

inline std::vector<std::string> job_layout::hosts() const {
  std::vector<std::string> out;
  for (const rank_view& v : ranks_)
    if (std::find(out.begin(), out.end(), v.host) == out.end()) out.push_back(v.host);
  return out;
}

inline std::vector<int> job_layout::ranks_on(const std::string& host, node_id n) const {
  std::vector<int> out;
  for (const rank_view& v : ranks_)
    if (v.host == host && std::find(v.cpu_nodes.begin(), v.cpu_nodes.end(), n) != v.cpu_nodes.end()) out.push_back(v.rank);
  return out;
}

inline std::vector<std::string> job_layout::problems() const {
  using detail::format_list;
  std::vector<std::string> out;
  for (const rank_view& v : ranks_)
    if (v.spans_nodes())
      out.push_back("rank " + std::to_string(v.rank) + " on " + v.host + " spans nodes " + format_list(v.cpu_nodes) +
                    " (cpus " + format_list(v.cpus) + ")");
  for (std::size_t i = 0; i < ranks_.size(); ++i)
    for (std::size_t j = i + 1; j < ranks_.size(); ++j) {
      const rank_view &a = ranks_[i], &b = ranks_[j];
      if (a.host != b.host) continue;
      const std::string pair = "ranks " + std::to_string(a.rank) + " and " + std::to_string(b.rank) + " on " + a.host;
      if (detail::shares_any(a.cpus, b.cpus)) {
        std::vector<int> shared;
        for (int c : a.cpus)
          if (std::find(b.cpus.begin(), b.cpus.end(), c) != b.cpus.end()) shared.push_back(c);
        out.push_back(pair + " share cpus " + format_list(shared) + ": their threads compete for them");
      } else if (detail::shares_any(a.cpu_nodes, b.cpu_nodes)) {
        std::vector<int> shared;
        for (int n : a.cpu_nodes)
          if (std::find(b.cpu_nodes.begin(), b.cpu_nodes.end(), n) != b.cpu_nodes.end()) shared.push_back(n);
        out.push_back(pair + " share node " + format_list(shared) + " (different cpus): their memory competes there");
      }
    }
  constexpr std::size_t most = 32;
  if (out.size() > most) {
    const std::size_t more = out.size() - (most - 1);
    out.resize(most - 1);
    out.push_back("and " + std::to_string(more) + " more like these");
  }
  return out;
}

inline std::string job_layout::to_string() const {
  using detail::format_list;
  std::string s;
  for (const std::string& host : hosts()) {
    std::vector<node_id> nodes;
    std::size_t count = 0;
    for (const rank_view& v : ranks_) {
      if (v.host != host) continue;
      ++count;
      for (node_id n : v.cpu_nodes)
        if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
    }
    std::sort(nodes.begin(), nodes.end());
    s += "host " + host + ": " + std::to_string(count) + (count == 1 ? " rank\n" : " ranks\n");
    for (node_id n : nodes) {
      s += "  node " + std::to_string(n) + ":";
      const char* sep = " ";
      for (const rank_view& v : ranks_) {
        if (v.host != host || std::find(v.cpu_nodes.begin(), v.cpu_nodes.end(), n) == v.cpu_nodes.end()) continue;
        s += sep + std::string("rank ") + std::to_string(v.rank) + " (cpus " + format_list(v.cpus) + ")";
        sep = ", ";
      }
      s += "\n";
    }
  }
  for (const std::string& p : problems()) s += "note: " + p + "\n";
  return s;
}

inline void prepare_buffer(void* buffer, int count, MPI_Datatype type) {
  if (count < 0) detail::throw_invalid_argument("numaaff::mpi::prepare_buffer: count is negative (" + std::to_string(count) + ")");
  if (type == MPI_DATATYPE_NULL) detail::throw_invalid_argument("numaaff::mpi::prepare_buffer: type is MPI_DATATYPE_NULL");
  if (count == 0) return;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  detail::mpi_check(MPI_Type_get_extent(type, &lb, &extent), "MPI_Type_get_extent");
  detail::mpi_check(MPI_Type_get_true_extent(type, &true_lb, &true_extent), "MPI_Type_get_true_extent");
  // [true_lb + min(0, (count-1) * extent), true_lb + true_extent + max(0, (count-1) * extent))
  MPI_Aint step = 0, first = 0, last = 0;
  if (__builtin_mul_overflow(static_cast<MPI_Aint>(count - 1), extent, &step) ||
      __builtin_add_overflow(true_lb, std::min<MPI_Aint>(0, step), &first) ||
      __builtin_add_overflow(true_lb + true_extent, std::max<MPI_Aint>(0, step), &last) || last < first)
    detail::throw_invalid_argument("numaaff::mpi::prepare_buffer: count " + std::to_string(count) +
                                   " elements of this type exceed the address space");
  // In addresses, so that MPI_BOTTOM with absolute displacements works too.
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(buffer) + static_cast<std::uintptr_t>(first);
  if (last > first) prepare_buffer(reinterpret_cast<void*>(at), static_cast<std::size_t>(last - first));
}

inline MPI_Comm split_by_host(MPI_Comm comm) {
  detail::require_intracomm("split_by_host", comm);
  int rank = 0;
  detail::mpi_check(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  MPI_Comm out = MPI_COMM_NULL;
  detail::mpi_check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &out), "MPI_Comm_split_type");
  return out;
}

inline MPI_Comm split_by_node(MPI_Comm comm) {
  detail::require_intracomm("split_by_node", comm);
  std::string unusable;
  const rank_view me = detail::mpi_view(comm, unusable);
  MPI_Comm host = split_by_host(comm);
  // Ranks of the host with the same node list share a colour: the host rank of the first of
  // them. An unusable binding is gathered too, so that every rank of its host throws.
  int color = 0;
  try {
    const std::string mine = unusable.empty() ? detail::format_list(me.cpu_nodes) : "!" + detail::mpi_field(unusable);
    const std::vector<std::string> lists = detail::mpi_allgather_strings(host, mine);
    for (std::size_t r = 0; r < lists.size(); ++r)
      if (!lists[r].empty() && lists[r][0] == '!')
        detail::mpi_throw_unusable("unusable binding: rank " + std::to_string(r) + " of host " + me.host + ": " + lists[r].substr(1));
    color = static_cast<int>(std::find(lists.begin(), lists.end(), mine) - lists.begin());
  } catch (...) {
    MPI_Comm_free(&host);
    throw;
  }
  MPI_Comm out = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(host, color, me.rank, &out);
  MPI_Comm_free(&host);
  detail::mpi_check(rc, "MPI_Comm_split");
  return out;
}

}  // namespace numaaff::mpi
