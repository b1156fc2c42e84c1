// What the fuzz targets share.
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>

namespace numaaff_fuzz {

/// False for a synthetic description whose counts could make hwloc build millions of objects
/// (any number above 64, or their product above 4096): that measures hwloc's memory, not
/// numaaff's parsing, and makes the fuzzer time out.
inline bool small_synthetic(const std::string& s) {
  unsigned long long product = 1;
  for (std::size_t i = 0; i < s.size();) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    unsigned long long n = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      n = n * 10 + static_cast<unsigned>(s[i] - '0');
      if (n > 64) return false;
      ++i;
    }
    product *= n == 0 ? 1 : n;
    if (product > 4096) return false;
  }
  return s.size() < 256;
}

}  // namespace numaaff_fuzz
