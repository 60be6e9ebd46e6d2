// SPDX-License-Identifier: Apache-2.0
// `mlakv capacity`: how many tokens and 128k sequences each format fits in a KV
// memory budget (the capacity part of `mlakv report`, without measurements).
#include <fmt/core.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capacity.h"
#include "commands.h"
#include "mlakv/formats.h"
#include "mlakv_support/json_text.h"
#include "report_options.h"

namespace mlakv::tool {
using support::json_number;
using support::json_string;
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

// What the numbers of a compressed model count, and what they leave out.
void print_compressed_note(const ModelPreset& model) {
  fmt::print(
      "{} layers: {}; each keeps its last {} tokens, a compressed layer also one entry per ratio tokens.\n"
      "bytes/token amortizes the compressed entries over the tokens (all layers); each sequence also holds\n"
      "the windows' {} x {} entries (window_bytes_per_sequence in --json). tokens: the longest sequence that\n"
      "fits. Not counted: the ratio-4 layers' indexer keys, the compressors' state, the MTP layer, and the\n"
      "tokens an engine keeps past the window (vLLM: window - 1 + a step's tokens, in whole pages).\n",
      model.layers, layer_kinds(model), model.sliding_window, model.layers, model.sliding_window);
}

void run_capacity(const ModelOptions& model, bool json) {
  const ModelBudget budget = resolve_budget(model);
  const std::vector<Capacity> caps = capacities(budget.kv_memory, budget.model);
  if (json) {
    std::string compression;
    if (budget.model.compressed()) {
      std::string ratios;
      for (const int r : budget.model.compress_ratios) ratios += (ratios.empty() ? "" : ", ") + std::to_string(r);
      compression =
          fmt::format(", \"sliding_window\": {}, \"compress_ratios\": [{}]", budget.model.sliding_window, ratios);
    }
    std::string out = fmt::format(
        "{{\"model\": {{\"id\": {}, \"name\": {}, \"layers\": {}, \"heads\": {}{}}}, \"kv_memory\": {}, "
        "\"formats\": [\n",
        json_string(budget.model.id), json_string(budget.model.name), budget.model.layers, budget.model.heads,
        compression, budget.kv_memory);
    for (std::size_t i = 0; i < caps.size(); ++i) {
      const Capacity& c = caps[i];
      out += fmt::format(
          "  {{\"format\": {}, \"record_bytes\": {}, \"bytes_per_token\": {}, \"tokens\": {}, \"sequences_128k\": {}, "
          "\"tokens_vs_bf16\": {}{}}}{}\n",
          json_string(format_info(c.format).id), c.record_bytes, c.bytes_per_token, c.tokens, c.sequences,
          json_number(c.tokens_vs_bf16),
          budget.model.compressed() ? fmt::format(", \"window_bytes_per_sequence\": {}", c.window_bytes_per_sequence)
                                    : "",
          i + 1 < caps.size() ? "," : "");
    }
    fmt::print("{}]}}\n", out);
    return;
  }
  fmt::print("{} ({} {}layers), KV memory {}\n", budget.model.name, budget.model.layers,
             budget.model.compressed() ? "" : "MLA ", budget.budget_text);
  if (budget.model.compressed()) print_compressed_note(budget.model);
  fmt::print("{:<26} {:>5} {:>9} {:>14} {:>9} {:>7}\n", "format", "bytes", "KiB/token", "tokens", "128k seqs",
             "x bf16");
  for (const Capacity& c : caps) {
    fmt::print("{:<26} {:>5} {:>9.1f} {:>14} {:>9} {:>6.2f}x\n", format_info(c.format).id, c.record_bytes,
               c.bytes_per_token / 1024.0, c.tokens, c.sequences, c.tokens_vs_bf16);
  }
}

}  // namespace

void add_capacity_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("capacity", "How many tokens each format fits in a KV memory budget");
  auto model = std::make_shared<ModelOptions>();
  auto json = std::make_shared<bool>(false);
  add_model_options(*cmd, *model);
  cmd->add_flag("--json", *json, "Print JSON instead of the table");
  cmd->callback([model, json] { run_capacity(*model, *json); });
}

}  // namespace mlakv::tool
