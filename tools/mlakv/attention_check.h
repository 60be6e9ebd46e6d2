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
/// `device` ("" when it can): it decodes 576-value queries over every format's
/// 512 + 64 records and compares each result with the decode over bf16
/// records, so the model must store those values, as bf16 too, and the
/// device's decode must read every format.
std::string attention_unavailable(const ModelPreset& model, const std::vector<Capacity>& caps, Device device);

}  // namespace mlakv::tool
