// SPDX-License-Identifier: Apache-2.0
// `mlakv capacity`: how many tokens and 128k sequences each format fits in a KV
// memory budget (the capacity part of `mlakv report`, without measurements).
#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "capacity.h"
#include "commands.h"
#include "mlakv/formats.h"
#include "mlakv_support/json_text.h"
#include "model_options.h"

namespace mlakv::tool {
using support::json_number;
using support::json_string;
namespace {

void run_capacity(const ModelOptions& model, bool json) {
  const ModelBudget budget = resolve_budget(model);
  const std::vector<Capacity> caps = budget_capacities(budget);
  if (json) {
    std::string out = fmt::format(
        "{{\"model\": {{\"id\": {}, \"name\": {}, \"layers\": {}, \"heads\": {}{}}}, \"kv_memory\": {}, "
        "\"parallelism\": {}, \"bf16_record_bytes\": {}, \"formats\": [\n",
        json_string(budget.model.id), json_string(budget.model.name), budget.model.layers, budget.model.heads,
        compression_json(budget.model), budget.kv_memory, parallelism_json(budget), bf16_record_bytes(budget.model));
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
  if (budget.model.compressed()) fmt::print("{}", compressed_note(budget.model));
  fmt::print("{:<26} {:>5} {:>9} {:>14} {:>9} {:>7}\n", "format", "bytes", "KiB/token", "tokens", "128k seqs",
             "x bf16");
  for (const Capacity& c : caps) {
    fmt::print("{:<26} {:>5} {:>9.1f} {:>14} {:>9} {:>6.2f}x\n", format_info(c.format).id, c.record_bytes,
               c.bytes_per_token / 1024.0, c.tokens, c.sequences, c.tokens_vs_bf16);
  }
  fmt::print("{}", bf16_baseline_note(budget.model));
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
