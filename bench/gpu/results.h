// SPDX-License-Identifier: Apache-2.0
// The measurements of one run: printed as they come, written as JSON at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlakv_bench {

struct Result {
  std::string op, format, slots, variant;
  std::int64_t tokens;
  double us, gbps, copy_us, fraction;
  // attention only
  std::int64_t rows = 0, heads = 0, topk = 0;
  double tflops = 0, two_step_us = 0;
};

/// Prints a writer or reader row of the table and keeps the result.
void report(Result r);
/// Prints an attention line and keeps the result.
void report_attention(Result r);
/// The results kept so far.
const std::vector<Result>& results();

/// Writes the results as one JSON object (device, commit, k_scale, measurements); exits 2 when `path` cannot be
/// written.
void write_json(const std::string& path, const std::string& device, const std::string& commit, float k_scale);

}  // namespace mlakv_bench
