// Small text helpers shared by topology, the capability report and environment parsing:
// strict integer parsing (no silent clamping or trailing garbage) and "0-3,6" list formatting.
#pragma once

#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace numaaff::detail {

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

/// Parses the whole of `s` (after trimming blanks) as a decimal int: std::errc() on success,
/// std::errc::result_out_of_range for a whole number an int cannot hold (so that a message can
/// say so, rather than "not a number"), std::errc::invalid_argument for anything else.
inline std::errc parse_int_status(std::string_view s, int& out) noexcept {
  s = trim(s);
  const char* first = s.data();
  const char* const last = s.data() + s.size();
  const bool plus = first != last && *first == '+';
  if (plus) ++first;
  if (first == last || (plus && *first == '-')) return std::errc::invalid_argument;  // "", "+", "+-1"
  const auto [ptr, ec] = std::from_chars(first, last, out);
  if (ptr != last) return std::errc::invalid_argument;  // trailing garbage, or no digits at all
  return ec;
}

/// Parses the whole of `s` (after trimming blanks) as a decimal int; false on anything else.
inline bool parse_int(std::string_view s, int& out) noexcept { return parse_int_status(s, out) == std::errc(); }

/// Splits on `sep`, keeping empty fields (so "1,,2" is seen as malformed by the caller).
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

/**
 * Parses the kernel's list syntax ("0-3,6", as in sysfs cpulist and node/online) into
 * numbers as written. False if any field is malformed, a range runs backwards, or a number
 * is not below `limit` (which bounds what a hostile "0-2000000000" can make us allocate).
 */
inline bool parse_list(std::string_view s, std::vector<int>& out, int limit = 1 << 16) {
  out.clear();
  for (std::string_view part : split(trim(s), ',')) {
    const std::size_t dash = part.find('-', 1);  // a leading '-' is a sign, and invalid
    int lo = 0, hi = 0;
    if (!parse_int(part.substr(0, dash), lo)) return false;
    hi = lo;
    if (dash != std::string_view::npos && !parse_int(part.substr(dash + 1), hi)) return false;
    if (lo < 0 || hi < lo || hi >= limit) return false;
    for (int n = lo; n <= hi; ++n) out.push_back(n);
  }
  return true;
}

/// Formats ascending integers as ranges: {0,1,2,3,6} -> "0-3,6"; {} -> "none".
inline std::string format_list(const std::vector<int>& values) {
  if (values.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(values[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(values[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace numaaff::detail
