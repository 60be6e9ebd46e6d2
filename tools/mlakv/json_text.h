// SPDX-License-Identifier: Apache-2.0
// Minimal JSON text for the tool's --json output.
#pragma once

#include <fmt/core.h>

#include <cmath>
#include <string>
#include <string_view>

namespace mlakv::tool {

/// A JSON string literal.
inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// A JSON number, or null for NaN / infinity (which JSON cannot hold).
inline std::string json_number(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }

}  // namespace mlakv::tool
