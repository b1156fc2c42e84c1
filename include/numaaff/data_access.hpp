/**
 * @file data_access.hpp
 * @brief What a task touches: the byte ranges it reads, writes or updates, for dataflow tasks.
 *
 * The model: a data_access is a byte range and a mode. Tasks run with accesses
 * (task_group::run, thread_pool::submit) are ordered by them: a task starts after every task
 * run earlier in the same group whose ranges overlap its own by at least one byte with at least
 * one of the two writing (`out`, `inout`). Readers (`in`) of the same bytes run concurrently;
 * `commutative` updates of the same bytes run one at a time in any order, after the accesses
 * before them and before the ones after them (OmpSs-2 `commutative`, OpenMP `mutexinoutset`).
 * Overlap is by bytes, partial overlaps included (OpenMP compares only base addresses). The
 * same ranges place the task: it runs on the CPU node holding the largest share of its
 * declared bytes (task_group.hpp).
 *
 * @code{.cpp}
 * numaaff::task_group g(pool);
 * g.run({numaaff::out(a, n * sizeof(double))}, [&] { fill(a, n); });
 * g.run({numaaff::in(a, numaaff::elements(n)), numaaff::inout(b)}, [&] { add(a, b); });  // after fill
 * g.wait();
 * @endcode
 *
 * The byte form takes a pointer and a size in bytes. A typed pointer takes its element count
 * only wrapped in numaaff::elements (so a byte count can never be read as an element count),
 * and a contiguous container (std::vector, std::array, a C array, a span) gives its whole
 * storage. Zero bytes is no access. Building an access is thread-safe and allocates nothing.
 * @throws std::invalid_argument naming the parameter for a null address with non-zero bytes
 * (`addr`), a range that wraps the address space (`bytes`), or an element count whose size
 * overflows (`count`).
 */
#pragma once

#include "detail/throw.hpp"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace numaaff {

/// How a task uses a range.
enum class access_mode {
  in,           ///< reads
  out,          ///< writes (ordered as inout: partial writes of a range are common)
  inout,        ///< reads and writes
  commutative,  ///< updates, in any order among commutative updates, never two at once
};

/// An element count for the typed forms of in/out/inout/commutative (see the file comment).
struct elements {
  explicit constexpr elements(std::size_t n) noexcept : count(n) {}
  std::size_t count;
};

/// A byte range and how a task uses it (a plain value; built by in, out, inout, commutative).
class data_access {
 public:
  /// @throws std::invalid_argument for a null address with non-zero bytes or a wrapping range.
  data_access(const void* addr, std::size_t bytes, access_mode mode, const char* fn = "numaaff::data_access")
      : begin_(reinterpret_cast<std::uintptr_t>(addr)), bytes_(bytes), mode_(mode) {
    if (bytes == 0) return;
    if (addr == nullptr)
      detail::throw_invalid_argument(std::string(fn) + ": addr is null with bytes = " + std::to_string(bytes));
    if (begin_ + bytes < begin_)
      detail::throw_invalid_argument(std::string(fn) + ": bytes = " + std::to_string(bytes) +
                                     " from addr " + std::to_string(begin_) + " wraps the address space");
  }
  const void* addr() const noexcept { return reinterpret_cast<const void*>(begin_); }
  std::size_t bytes() const noexcept { return bytes_; }
  access_mode mode() const noexcept { return mode_; }
  /// The first address past the range.
  std::uintptr_t end() const noexcept { return begin_ + bytes_; }
  std::uintptr_t begin() const noexcept { return begin_; }
  bool writes() const noexcept { return mode_ != access_mode::in; }

 private:
  std::uintptr_t begin_;
  std::size_t bytes_;
  access_mode mode_;
};

namespace detail {
template <class T>
std::size_t bytes_of(const char* fn, elements n) {
  if (n.count > std::numeric_limits<std::size_t>::max() / sizeof(T))
    throw_invalid_argument(std::string(fn) + ": count = " + std::to_string(n.count) + " elements of " +
                           std::to_string(sizeof(T)) + " bytes overflow size_t");
  return n.count * sizeof(T);
}
}  // namespace detail

/// The task reads [addr, addr + bytes).
inline data_access in(const void* addr, std::size_t bytes) { return {addr, bytes, access_mode::in, "numaaff::in"}; }
/// The task writes [addr, addr + bytes).
inline data_access out(void* addr, std::size_t bytes) { return {addr, bytes, access_mode::out, "numaaff::out"}; }
/// The task reads and writes [addr, addr + bytes).
inline data_access inout(void* addr, std::size_t bytes) { return {addr, bytes, access_mode::inout, "numaaff::inout"}; }
/// The task updates [addr, addr + bytes) commutatively (see the file comment).
inline data_access commutative(void* addr, std::size_t bytes) {
  return {addr, bytes, access_mode::commutative, "numaaff::commutative"};
}

/// Typed forms: `n` elements of T from `p`.
template <class T>
data_access in(const T* p, elements n) { return in(static_cast<const void*>(p), detail::bytes_of<T>("numaaff::in", n)); }
template <class T, class = std::enable_if_t<!std::is_const<T>::value>>
data_access out(T* p, elements n) { return out(static_cast<void*>(p), detail::bytes_of<T>("numaaff::out", n)); }
template <class T, class = std::enable_if_t<!std::is_const<T>::value>>
data_access inout(T* p, elements n) { return inout(static_cast<void*>(p), detail::bytes_of<T>("numaaff::inout", n)); }
template <class T, class = std::enable_if_t<!std::is_const<T>::value>>
data_access commutative(T* p, elements n) {
  return commutative(static_cast<void*>(p), detail::bytes_of<T>("numaaff::commutative", n));
}

/// Container forms: the whole contiguous storage of `c` (std::data, std::size).
template <class C, class = decltype(std::data(std::declval<const C&>()))>
data_access in(const C& c) {
  return in(std::data(c), elements(std::size(c)));
}
template <class C, class = decltype(std::data(std::declval<C&>())), class = std::enable_if_t<!std::is_const<C>::value>>
data_access out(C& c) {
  return out(std::data(c), elements(std::size(c)));
}
template <class C, class = decltype(std::data(std::declval<C&>())), class = std::enable_if_t<!std::is_const<C>::value>>
data_access inout(C& c) {
  return inout(std::data(c), elements(std::size(c)));
}
template <class C, class = decltype(std::data(std::declval<C&>())), class = std::enable_if_t<!std::is_const<C>::value>>
data_access commutative(C& c) {
  return commutative(std::data(c), elements(std::size(c)));
}

}  // namespace numaaff
