// SPDX-License-Identifier: Apache-2.0
// Whether `mlakv report` can run its sparse-attention check on a model's formats.
#pragma once

#include <string>
#include <vector>

#include "capacity.h"
#include "mlakv/tensor_view.h"
#include "models.h"

namespace mlakv::tool {

/// Why the sparse-attention check cannot run on the model's formats on
/// `device` ("" when it can): it decodes every format and compares each result
/// with the decode over bf16 records, so the decode must read all of them,
/// bf16 included.
std::string attention_unavailable(const ModelPreset& model, const std::vector<Capacity>& caps, Device device);

}  // namespace mlakv::tool
