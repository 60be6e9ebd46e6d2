// SPDX-License-Identifier: Apache-2.0
#include "report_json.h"

#include <fmt/core.h>

#include <cmath>

#include "mlakv/formats.h"
#include "mlakv/vocabulary.h"
#include "mlakv_support/json_text.h"

namespace mlakv::tool {
using support::json_number;
using support::json_string;
namespace {

// The attention fields of a format's JSON row: numbers, or null without the sparse-attention check.
struct AttentionJson {
  std::string rel_rms = "null", max_abs = "null", nonfinite = "null";
};
AttentionJson attention_json(const FormatAccuracy& a) {
  if (!a.attention) return {};
  return {json_number(a.attention->rel_rms), json_number(a.attention->max_abs), std::to_string(a.attention->nonfinite)};
}

}  // namespace

void print_json(const ModelBudget& budget, const Inputs& in, Device device, const ReportOptions& o,
                const std::vector<FormatRow>& rows, std::size_t best, const std::string& reason,
                const std::string& attention_na) {
  const bool compressed = budget.model.compressed();
  std::string out = "{\n";
  out += fmt::format("  \"model\": {{\"id\": {}, \"name\": {}, \"layers\": {}, \"heads\": {}{}}},\n",
                     json_string(budget.model.id), json_string(budget.model.name), budget.model.layers,
                     budget.model.heads, compression_json(budget.model));
  out += fmt::format("  \"kv_memory\": {},\n  \"parallelism\": {},\n  \"bf16_record_bytes\": {},\n", budget.kv_memory,
                     parallelism_json(budget), bf16_record_bytes(budget.model));
  out += fmt::format("  \"device\": {},\n  \"source\": {},\n",
                     json_string(device.type == DeviceType::kCuda ? "cuda" : "cpu"), json_string(in.source));
  if (attention_na.empty()) {
    out += fmt::format("  \"attention\": {{\"rows\": {}, \"heads\": {}, \"topk\": {}, \"sm_scale\": {}}},\n",
                       in.queries.rows, in.queries.heads, in.queries.topk,
                       json_number(1.0 / std::sqrt(double{kQueryDim})));
  } else {
    out += fmt::format("  \"attention\": {{\"available\": false, \"reason\": {}}},\n", json_string(attention_na));
  }
  out += fmt::format(
      "  \"max_attention_error\": {},\n  \"recommended\": {},\n  \"reason\": {},\n", json_number(o.max_attention_error),
      best < rows.size() ? json_string(format_info(rows[best].capacity.format).id) : "null", json_string(reason));
  out += "  \"formats\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FormatRow& r = rows[i];
    const Capacity& c = r.capacity;
    const AttentionJson attention = attention_json(r.accuracy);
    out += fmt::format(
        "    {{\"format\": {}, \"record_bytes\": {}, \"bytes_per_token\": {}, \"tokens\": {}, "
        "\"sequences_128k\": {}, \"tokens_vs_bf16\": {}, {}\"latent_rel_rms\": {}, \"latent_max_abs\": {}, "
        "\"rope_rel_rms\": {}, \"rope_max_abs\": {}, \"attention_rel_rms\": {}, \"attention_max_abs\": {}, "
        "\"write_gbps\": {}, \"read_gbps\": {}, \"write_tokens_per_s\": {}, \"read_tokens_per_s\": {}, "
        "\"write_fraction_of_copy\": {}, \"read_fraction_of_copy\": {}, \"latent_nonfinite\": {}, "
        "\"rope_nonfinite\": {}, \"attention_nonfinite\": {}}}{}\n",
        json_string(format_info(c.format).id), c.record_bytes, c.bytes_per_token, c.tokens, c.sequences,
        json_number(c.tokens_vs_bf16),
        compressed ? fmt::format("\"window_bytes_per_sequence\": {}, ", c.window_bytes_per_sequence) : "",
        json_number(r.accuracy.latent.rel_rms), json_number(r.accuracy.latent.max_abs),
        json_number(r.accuracy.rope.rel_rms), json_number(r.accuracy.rope.max_abs), attention.rel_rms,
        attention.max_abs, json_number(gbps(r.speed.write_bytes, r.speed.write_us)),
        json_number(gbps(r.speed.read_bytes, r.speed.read_us)), json_number(in.bf16.tokens / (r.speed.write_us * 1e-6)),
        json_number(in.bf16.tokens / (r.speed.read_us * 1e-6)),
        json_number(fraction(r.speed.write_copy_us, r.speed.write_us)),
        json_number(fraction(r.speed.read_copy_us, r.speed.read_us)), r.accuracy.latent.nonfinite,
        r.accuracy.rope.nonfinite, attention.nonfinite, i + 1 < rows.size() ? "," : "");
  }
  out += "  ]\n}\n";
  fmt::print("{}", out);
}

}  // namespace mlakv::tool
