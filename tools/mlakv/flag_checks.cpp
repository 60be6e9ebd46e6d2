// SPDX-License-Identifier: Apache-2.0
#include "flag_checks.h"

#include <string>

namespace mlakv::tool {

CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](const std::string& text) {
        return text.find('-') == std::string::npos ? std::string() : "must be >= 0, got " + text;
      },
      "NONNEGATIVE");
}

}  // namespace mlakv::tool
