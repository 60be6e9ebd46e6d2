// SPDX-License-Identifier: Apache-2.0
// What `mlakv report` measures on: seeded synthetic activations, or the
// user's kv_c.npy, k_pe.npy and optional q.npy (--activations).
#pragma once

#include <cstdint>
#include <string>

#include "measure.h"
#include "models.h"
#include "report_options.h"
#include "synthetic.h"

namespace mlakv::tool {

inline constexpr std::int64_t kTopk = 2048;  // tokens an indexer selects per query (DeepSeek-V3.2)

struct Inputs {
  Activations bf16;
  Activations fp16;
  Queries queries;     // none without the sparse-attention check
  std::string source;  // where the values came from, for the report's header
};

/// `tokens` synthetic tokens of `model`; queries only when the sparse-attention check runs (`attention`).
Inputs synthetic_inputs(const ReportOptions& o, std::int64_t tokens, const ModelPreset& model, bool attention);

/// Refuses, naming --activations, a directory whose arrays (sized from their
/// .npy headers, before any value is read) need more host memory than is available.
void check_user_inputs_fit(const ReportOptions& o, const ModelPreset& model, bool attention);

/// kv_c.npy [T, nope_dims] (512, or DeepSeek V4's 448) and k_pe.npy [T, 64]
/// (float32 or float16) of --activations, and its optional q.npy [R, H, 576],
/// read only when the sparse-attention check runs (`attention`). Throws
/// mlakv::Error naming --activations, the file and what was expected.
Inputs user_inputs(const ReportOptions& o, const ModelPreset& model, bool attention);

}  // namespace mlakv::tool
