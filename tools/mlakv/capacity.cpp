// SPDX-License-Identifier: Apache-2.0
#include "capacity.h"

namespace mlakv::tool {

std::vector<Capacity> capacities(std::uint64_t kv_memory, int layers, int nope_dims) {
  const auto bf16_bytes = static_cast<double>(format_info(Format::kBf16).record_bytes);
  std::vector<Capacity> out;
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != nope_dims) continue;  // a format of another model geometry
    // Whole pages: a token-major page is any number of records, a block-planar
    // one holds kPlanarBlockSize tokens and its padding.
    const std::int64_t block = info.page.kind == PageKind::kTokenMajor ? 1 : kPlanarBlockSize;
    const std::int64_t page = static_cast<std::int64_t>(layers) * page_bytes(info, block);
    const std::uint64_t tokens = kv_memory / static_cast<std::uint64_t>(page) * static_cast<std::uint64_t>(block);
    const std::int64_t per_token = page / block;  // exact for token-major pages; rounded down when padded
    out.push_back({info.format, info.record_bytes, per_token, tokens, tokens / kSequenceTokens,
                   bf16_bytes * static_cast<double>(block * layers) / static_cast<double>(page)});
  }
  return out;
}

}  // namespace mlakv::tool
