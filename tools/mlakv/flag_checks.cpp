// SPDX-License-Identifier: Apache-2.0
#include "flag_checks.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

namespace mlakv::tool {

CLI::Validator seed_value() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        if (text.find('-') != std::string::npos) return "must be >= 0, got " + text;
        std::uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range) return "must be at most 2^64 - 1 (18446744073709551615), got " + text;
        if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
          return "must be a decimal integer in [0, 2^64 - 1], got '" + text + "'";
        }
        return "";
      },
      "SEED");
}

}  // namespace mlakv::tool
