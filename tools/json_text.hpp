// Text the tools print that another process wrote (a command name): as a JSON string with
// everything escaped that must be (and every byte outside printable ASCII, since command names
// need not be UTF-8), or as terminal text that cannot carry an escape sequence.
#pragma once

#include <cstdio>
#include <string>

namespace numaaff_tools {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

/// `s` with every byte outside printable ASCII shown as '?': a process may name itself with
/// control characters, and a terminal would obey them.
inline std::string terminal_text(std::string s) {
  for (char& ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) ch = '?';
  }
  return s;
}

}  // namespace numaaff_tools
