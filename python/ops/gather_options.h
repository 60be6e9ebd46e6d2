// SPDX-License-Identifier: Apache-2.0
// The readers' options as the run functions read them off a call (the readers
// and the attention ops decode records the same way).
#pragma once

#include <string_view>

#include "mlakv/readers.h"
#include "op_call.h"

namespace mlakv::bindings {

/// The call's `scale` (k_scale) and `rope_dtype` ("bf16" or "fp16"; anything
/// else is left for the library to refuse).
inline GatherOptions gather_options(const OpCall& c) {
  GatherOptions options;
  options.scale = c.optional_tensor("scale");
  const std::string_view rope = c.text("rope_dtype");
  options.rope_dtype = rope == "bf16" ? DType::kBFloat16 : rope == "fp16" ? DType::kFloat16 : DType::kOther;
  return options;
}

}  // namespace mlakv::bindings
