// SPDX-License-Identifier: Apache-2.0
// CLI11 checks shared by several subcommands' flags.
#pragma once

#include <CLI/CLI.hpp>

namespace mlakv::tool {

/// A CLI11 check: the value is written without a minus sign ("-1" would wrap an unsigned seed).
CLI::Validator non_negative_integer();

}  // namespace mlakv::tool
