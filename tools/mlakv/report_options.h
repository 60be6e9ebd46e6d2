// SPDX-License-Identifier: Apache-2.0
// The flags of `mlakv report`, as parsed.
#pragma once

#include <cstdint>
#include <string>

#include "model_options.h"

namespace mlakv::tool {

struct ReportOptions {
  ModelOptions model;
  std::string device = "cpu";
  std::int64_t tokens = 0;  // 0: 4096 on the CPU, 262144 on CUDA
  std::int64_t queries = 4;
  std::uint64_t seed = 0;
  std::string activations;
  bool allow_nonfinite = false;
  std::string max_attention_error_text = "2%";
  double max_attention_error = 0.02;  // parsed from the text
  bool json = false;
  std::string plot;
  bool quiet = false;
};

}  // namespace mlakv::tool
