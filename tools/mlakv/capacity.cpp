// SPDX-License-Identifier: Apache-2.0
#include "capacity.h"

namespace mlakv::tool {

std::vector<Capacity> capacities(std::uint64_t kv_memory, int layers) {
  const auto bf16_bytes = static_cast<double>(format_info(Format::kBf16).record_bytes);
  std::vector<Capacity> out;
  for (const FormatInfo& info : formats()) {
    const std::int64_t per_token = static_cast<std::int64_t>(layers) * info.record_bytes;
    const std::uint64_t tokens = kv_memory / static_cast<std::uint64_t>(per_token);
    out.push_back(
        {info.format, info.record_bytes, per_token, tokens, tokens / kSequenceTokens, bf16_bytes / info.record_bytes});
  }
  return out;
}

}  // namespace mlakv::tool
