// SPDX-License-Identifier: Apache-2.0
#include "capacity.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace mlakv::tool {
namespace {

// DeepSeek V4's layers by what they keep: "2 window-only, 21 ratio-4, 20 ratio-128".
std::string layer_kinds(const ModelPreset& model) {
  std::vector<std::pair<int, int>> counts;  // (ratio, layers)
  for (const int ratio : model.compress_ratios) {
    bool found = false;
    for (auto& [r, n] : counts) {
      if (r == ratio) ++n, found = true;
    }
    if (!found) counts.emplace_back(ratio, 1);
  }
  std::string text;
  for (const auto& [r, n] : counts) {
    if (!text.empty()) text += ", ";
    text += r == 0 ? fmt::format("{} window-only", n) : fmt::format("{} ratio-{}", n, r);
  }
  return text;
}

// Bytes of one page of a format: a token-major page is any number of records,
// a block-planar one holds kPlanarBlockSize tokens and its padding.
std::int64_t block_tokens(const FormatInfo& info) {
  return info.page.kind == PageKind::kTokenMajor ? 1 : kPlanarBlockSize;
}

// Every layer keeps every token: whole pages of all layers.
Capacity dense_capacity(const FormatInfo& info, std::uint64_t kv_memory, int layers, double bf16_bytes) {
  const std::int64_t block = block_tokens(info);
  const std::int64_t page = static_cast<std::int64_t>(layers) * page_bytes(info, block);
  const std::uint64_t tokens = kv_memory / static_cast<std::uint64_t>(page) * static_cast<std::uint64_t>(block);
  const std::int64_t per_token = page / block;  // exact for token-major pages; rounded down when padded
  return {info.format,
          info.record_bytes,
          per_token,
          tokens,
          tokens / kSequenceTokens,
          bf16_bytes * static_cast<double>(block * layers) / static_cast<double>(page),
          0,
          static_cast<std::uint64_t>(page)};
}

// DeepSeek V4's hybrid attention: per layer, the window's tokens plus one
// compressed entry per `ratio` tokens, each entry one record of the page.
Capacity compressed_capacity(const FormatInfo& info, std::uint64_t kv_memory, const ModelPreset& model,
                             double bf16_bytes) {
  const std::int64_t block = block_tokens(info);
  const double entry = static_cast<double>(page_bytes(info, block)) / static_cast<double>(block);
  double per_token = 0.0;  // amortized bytes per token of context, all layers
  for (const int ratio : model.compress_ratios) {
    if (ratio > 0) per_token += entry / ratio;
  }
  const auto window = static_cast<std::int64_t>(
      std::ceil(static_cast<double>(model.compress_ratios.size()) * model.sliding_window * entry));
  const auto memory = static_cast<double>(kv_memory);
  const double free = memory - static_cast<double>(window);
  std::uint64_t tokens = 0;
  if (free > 0.0) tokens = per_token > 0.0 ? static_cast<std::uint64_t>(std::floor(free / per_token)) : ~0ull;
  double sequence = static_cast<double>(window);  // one 128k-token sequence
  for (const int ratio : model.compress_ratios) {
    if (ratio <= 0) continue;
    const std::int64_t entries = kSequenceTokens / ratio;  // whole compressed entries
    sequence += static_cast<double>(entries) * entry;
  }
  return {info.format,
          info.record_bytes,
          std::llround(per_token),
          tokens,
          static_cast<std::uint64_t>(std::floor(memory / sequence)),
          bf16_bytes / entry,
          window,
          static_cast<std::uint64_t>(window) + static_cast<std::uint64_t>(std::max(1.0, std::ceil(per_token)))};
}

}  // namespace

std::vector<Capacity> capacities(std::uint64_t kv_memory, const ModelPreset& model) {
  const auto bf16_bytes = static_cast<double>(bf16_record_bytes(model));
  std::vector<Capacity> out;
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != model.nope_dims) continue;  // a format of another model geometry
    out.push_back(model.compressed() ? compressed_capacity(info, kv_memory, model, bf16_bytes)
                                     : dense_capacity(info, kv_memory, model.layers, bf16_bytes));
  }
  return out;
}

int bf16_record_bytes(const ModelPreset& model) { return 2 * (model.nope_dims + kRopeDim); }

std::string bf16_baseline_note(const ModelPreset& model) {
  return fmt::format("x bf16: tokens relative to bf16 records of the same {} + {} values ({} B per token per layer)\n",
                     model.nope_dims, kRopeDim, bf16_record_bytes(model));
}

// What the numbers of a compressed model count, and what they leave out.
std::string compressed_note(const ModelPreset& model) {
  return fmt::format(
      "{} layers: {}; each keeps its last {} tokens, a compressed layer also one entry per ratio tokens.\n"
      "bytes/token amortizes the compressed entries over the tokens (all layers); each sequence also holds\n"
      "the windows' {} x {} entries (window_bytes_per_sequence in --json). tokens: the longest sequence that\n"
      "fits. Not counted: the ratio-4 layers' indexer keys, the compressors' state, the MTP layer, and the\n"
      "tokens an engine keeps past the window (vLLM: window - 1 + a step's tokens, in whole pages).\n",
      model.layers, layer_kinds(model), model.sliding_window, model.layers, model.sliding_window);
}

std::string compression_json(const ModelPreset& model) {
  if (!model.compressed()) return "";
  std::string ratios;
  for (const int r : model.compress_ratios) ratios += (ratios.empty() ? "" : ", ") + std::to_string(r);
  return fmt::format(", \"sliding_window\": {}, \"compress_ratios\": [{}]", model.sliding_window, ratios);
}

}  // namespace mlakv::tool
