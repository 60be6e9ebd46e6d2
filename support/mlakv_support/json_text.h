// SPDX-License-Identifier: Apache-2.0
// Minimal JSON text: the one writer of the tool's --json output and the GPU
// benchmark's result files.
#pragma once

#include <fmt/core.h>

#include <cmath>
#include <string>
#include <string_view>

namespace mlakv::support {

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

/// A JSON number with `significant` digits (printf's %.Ng), or null for NaN /
/// infinity (which JSON cannot hold).
inline std::string json_number(double v, int significant) {
  return std::isfinite(v) ? fmt::format("{:.{}g}", v, significant) : "null";
}

/// A JSON number, or null for NaN / infinity (which JSON cannot hold).
inline std::string json_number(double v) { return json_number(v, 6); }

/// A JSON number with `decimals` digits after the point (printf's %.Nf), or null.
inline std::string json_fixed(double v, int decimals) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "null";
}

}  // namespace mlakv::support
