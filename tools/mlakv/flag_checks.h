// SPDX-License-Identifier: Apache-2.0
// CLI11 checks shared by several subcommands' flags.
#pragma once

#include <CLI/CLI.hpp>

namespace mlakv::tool {

/// A CLI11 check of a seed's text: a decimal integer in [0, 2^64 - 1]. CLI11
/// alone would wrap "-1" and clamp 2^64 to 2^64 - 1 (another seed than asked for).
CLI::Validator seed_value();

}  // namespace mlakv::tool
