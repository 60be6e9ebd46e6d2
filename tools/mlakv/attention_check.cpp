// SPDX-License-Identifier: Apache-2.0
#include "attention_check.h"

#include <fmt/core.h>

#include "mlakv/capabilities.h"
#include "mlakv/formats.h"
#include "mlakv/vocabulary.h"

namespace mlakv::tool {

std::string attention_unavailable(const ModelPreset& model, const std::vector<Capacity>& caps, Device device) {
  // The check's geometry, whatever the backend: 576-value queries over 512 + 64
  // records, each format against bf16 records of the same values.
  if (model.nope_dims != kLatentDim) {
    std::string ids;
    for (const Capacity& c : caps) ids += (ids.empty() ? "" : ", ") + std::string(format_info(c.format).id);
    return fmt::format(
        "the sparse-attention check decodes {}-value queries over records of {} + {} values and compares each "
        "format with bf16 records of the same values; {}'s formats store {} + {} values ({}), none as bf16; "
        "docs/attention.md says what a DeepSeek V4 decode needs",
        kQueryDim, kLatentDim, kRopeDim, model.name, model.nope_dims, kRopeDim, ids);
  }
  const Backend backend = device.type == DeviceType::kCuda ? Backend::kCuda : Backend::kCpu;
  bool reference = false;
  std::string unread;
  for (const Capacity& c : caps) {
    reference = reference || c.format == Format::kBf16;
    if (!supports(c.format, backend, Operation::kDecode)) {
      unread += (unread.empty() ? "" : ", ") + std::string(format_info(c.format).id);
    }
  }
  if (!unread.empty()) {
    return fmt::format(
        "the sparse decode reads token-major records of {} + {} values, not {}'s {} + {} formats ({}); "
        "docs/attention.md says what a DeepSeek V4 decode needs",
        kLatentDim, kRopeDim, model.name, model.nope_dims, kRopeDim, unread);
  }
  if (!reference) {
    return fmt::format("no bf16 record of {}'s {} + {} values to decode the reference over", model.name,
                       model.nope_dims, kRopeDim);
  }
  return "";
}

}  // namespace mlakv::tool
