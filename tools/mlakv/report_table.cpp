// SPDX-License-Identifier: Apache-2.0
#include "report_table.h"

#include <fmt/core.h>

#include "mlakv/formats.h"
#include "mlakv/vocabulary.h"

namespace mlakv::tool {
namespace {

// "12.345" (a percentage), or "n/a" without the sparse-attention check.
std::string attention_percent(const FormatAccuracy& a) {
  return a.attention ? fmt::format("{:.3f}", 100.0 * a.attention->rel_rms) : "n/a";
}

}  // namespace

void print_table(const ModelBudget& budget, const Inputs& in, Device device, const std::vector<FormatRow>& rows,
                 std::size_t best, const std::string& reason, const std::string& attention_na) {
  const bool cuda = device.type == DeviceType::kCuda;
  const ModelPreset& model = budget.model;
  fmt::print("mlakv report: {} ({} {}layers, {} heads), KV memory {}, {} backend\n", model.name, model.layers,
             model.compressed() ? "" : "MLA ", model.heads, budget.budget_text, cuda ? "CUDA" : "CPU");
  if (model.compressed()) fmt::print("{}", compressed_note(model));
  if (attention_na.empty()) {
    fmt::print(
        "accuracy on {}; sparse attention: {} query rows x {} heads x {} selected tokens, sm_scale 1/sqrt({})\n\n",
        in.source, in.queries.rows, in.queries.heads, in.queries.topk, kQueryDim);
  } else {
    fmt::print("accuracy on {}; sparse attention: not available: {}\n\n", in.source, attention_na);
  }
  fmt::print("  {:<26} {:>5} {:>9} {:>14} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10} {:>10} {:>12} {:>11}", "format", "bytes",
             "KiB/token", "tokens", "128k seqs", "x bf16", "latent %", "rope %", "attn %", "write GB/s", "read GB/s",
             "write Mtok/s", "read Mtok/s");
  if (cuda) {
    fmt::print(" {:>8} {:>8}", "write/cp", "read/cp");
  }
  fmt::print("\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FormatRow& r = rows[i];
    const auto tokens = static_cast<double>(in.bf16.tokens);
    fmt::print(
        "{} {:<26} {:>5} {:>9.1f} {:>14} {:>9} {:>6.2f}x {:>9.3f} {:>9.3f} {:>9} {:>10.1f} {:>10.1f} {:>12.3f} "
        "{:>11.3f}",
        i == best ? '*' : ' ', format_info(r.capacity.format).id, r.capacity.record_bytes,
        r.capacity.bytes_per_token / 1024.0, r.capacity.tokens, r.capacity.sequences, r.capacity.tokens_vs_bf16,
        100.0 * r.accuracy.latent.rel_rms, 100.0 * r.accuracy.rope.rel_rms, attention_percent(r.accuracy),
        gbps(r.speed.write_bytes, r.speed.write_us), gbps(r.speed.read_bytes, r.speed.read_us),
        tokens / r.speed.write_us, tokens / r.speed.read_us);
    if (cuda) {
      fmt::print(" {:>7.2f}x {:>7.2f}x\n", fraction(r.speed.write_copy_us, r.speed.write_us),
                 fraction(r.speed.read_copy_us, r.speed.read_us));
    } else {
      fmt::print("\n");
    }
  }
  fmt::print("\n{}", bf16_baseline_note(model));
  if (attention_na.empty()) {
    fmt::print("'%' columns: relative RMS error against the bf16 inputs (attn: the sparse decode's output).\n");
  } else {
    fmt::print(
        "'%' columns: relative RMS error against the bf16 inputs (latent: the {} values of kv_c); attn: n/a, "
        "no sparse-attention check (above).\n",
        model.nope_dims);
  }
  for (const FormatRow& r : rows) {
    if (nonfinite(r) == 0) continue;
    const std::string attention = r.accuracy.attention
                                      ? fmt::format(", {} of {} attention outputs", r.accuracy.attention->nonfinite,
                                                    in.queries.rows * in.queries.heads * kValueDim)
                                      : "";
    fmt::print(
        "! {}: non-finite decoded or reference values (NaN/inf; '%' columns cover the finite ones): {} of {} "
        "latent, {} of {} rope{}{}\n",
        format_info(r.capacity.format).id, r.accuracy.latent.nonfinite, in.bf16.tokens * model.nope_dims,
        r.accuracy.rope.nonfinite, in.bf16.tokens * kRopeDim, attention,
        r.capacity.format == Format::kFp16 ? " (fp16 holds |x| <= 65504: larger inputs overflow)" : "");
  }
  if (best < rows.size()) {
    fmt::print("* recommended: {}: {}\n", format_info(rows[best].capacity.format).id, reason);
  } else {
    fmt::print("no recommendation: {}\n", reason);
  }
}

}  // namespace mlakv::tool
