/**
 * @file errors.hpp
 * @brief How numaaff reports failure.
 *
 * One model, as in `std::filesystem`:
 * - A caller's mistake (unknown node, null address with a length, malformed environment
 *   variable) throws `std::invalid_argument` whose message names the input, the offending
 *   value and what would be valid. Nothing is clamped silently.
 * - A failed system call throws `std::system_error` carrying the call's errno in
 *   `std::generic_category()`, with a message that starts with `numaaff: <call>`. Every
 *   operation that can fail because of the OS also has a `noexcept` overload taking a
 *   `std::error_code&`, which reports the same error without throwing.
 * - Conditions that have no errno (for instance: some pages could not be migrated) use
 *   `numaaff::errc` in `numaaff::error_category()`, also delivered as `std::system_error`, so
 *   a user catches one type.
 * - Work that thread_pool::cancel() discarded is reported by the wait that expected it
 *   (task_group::wait, parallel_for, for_each_node) as `std::system_error` with
 *   `std::errc::operation_canceled`, never by a normal return.
 * - A machine with one node, or a container that forbids migration, is not an error: the
 *   operation degrades to a correct no-op and the capability report (system_report.hpp) says so.
 */
#pragma once

#include <string>
#include <system_error>
#include <type_traits>

namespace numaaff {

/// numaaff's own error conditions (those with no errno behind them). Each is produced by some
/// call (conditions that are not errors, such as a refused migration or pages that could not
/// move, are counted instead: move_result, refusal_stats()). Values 1-6 are retired.
enum class errc {
  feature_unavailable = 7,  ///< the running kernel lacks the call (set_home_node before Linux 5.17)
  too_many_ranges = 8,      ///< the next-touch registry is full (disarm finished ranges)
  used_after_fork = 9,      ///< a thread_pool made before fork() was used in the child
  unusable_binding = 10,    ///< the launcher's binding leaves this process no CPU or no memory node
  mpi_call_failed = 11,     ///< an MPI call of the MPI bridge returned an error (the message has MPI's text)
  bad_counter_segment = 12, ///< a process's counter segment is corrupt, truncated or of another format version
};

namespace detail {
class numaaff_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "numaaff"; }
  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::feature_unavailable: return "the running kernel does not provide this feature";
      case errc::too_many_ranges: return "too many ranges are armed for next-touch at once";
      case errc::used_after_fork:
        return "the thread pool was created before fork(): its workers exist only in the parent process";
      case errc::unusable_binding: return "the process's binding leaves it no usable CPU or memory node";
      case errc::mpi_call_failed: return "an MPI call failed";
      case errc::bad_counter_segment:
        return "the counter segment is not one this numaaff can read (corrupt, truncated or another format version)";
    }
    return "unknown numaaff error " + std::to_string(code);
  }
  std::error_condition default_error_condition(int code) const noexcept override {
    // Let users compare with the portable std::errc where one fits.
    switch (static_cast<errc>(code)) {
      case errc::feature_unavailable: return std::errc::function_not_supported;
      case errc::bad_counter_segment: return std::errc::bad_message;
      default: return {code, *this};
    }
  }
};
}  // namespace detail

/// The category of numaaff::errc codes. Thread-safe; returns a process-wide singleton.
inline const std::error_category& error_category() noexcept {
  static const detail::numaaff_category category;
  return category;
}

/// Makes `std::error_code ec = numaaff::errc::too_many_ranges;` work.
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

}  // namespace numaaff

/// @cond  std's trait, not numaaff's API (Doxygen cannot place a specialisation in std)
template <>
struct std::is_error_code_enum<numaaff::errc> : std::true_type {};
/// @endcond
