// SPDX-License-Identifier: Apache-2.0
// `mlakv report`: for one model and KV memory budget, each format's capacity,
// accuracy (through the library's writers, readers and sparse decode) and
// speed on the chosen device, with a recommendation (`mlakv capacity`, the
// capacity part alone, is capacity_command.cpp). This file checks the flags
// and runs the steps; each step is its own file (report_inputs, measure,
// recommendation, report_table, report_json, report_plot).
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attention_check.h"
#include "capacity.h"
#include "commands.h"
#include "device_flag.h"
#include "flag_checks.h"
#include "format_row.h"
#include "host_memory.h"
#include "measure.h"
#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "model_options.h"
#include "progress.h"
#include "recommendation.h"
#include "report_inputs.h"
#include "report_json.h"
#include "report_options.h"
#include "report_plot.h"
#include "report_table.h"

namespace mlakv::tool {
namespace {

void run_report(const ReportOptions& options) {
  const ReportOptions& o = options;
  // Every flag is checked before any work starts.
  const ModelBudget budget = resolve_budget(o.model);
  const Device device = resolve_device(o.device);
  ReportOptions parsed = o;
  parsed.max_attention_error = parse_error_limit(o.max_attention_error_text);
  check_writable("--plot", o.plot);
  if (o.activations.empty() == false && o.tokens > 0) {
    throw Error(ErrorCode::kValue, "--tokens: cannot be combined with --activations (the tokens are kv_c.npy's rows)");
  }
  const std::int64_t tokens = o.tokens > 0 ? o.tokens : device.type == DeviceType::kCuda ? 262144 : 4096;
  const std::vector<Capacity> caps = budget_capacities(budget);
  const std::string attention_na = attention_unavailable(budget.model, caps, device);
  if (!o.plot.empty() && !attention_na.empty()) {
    throw Error(ErrorCode::kValue, fmt::format("--plot: draws each format's sparse-attention error, which {} has none "
                                               "of ({})",
                                               budget.model.id, attention_na));
  }
  const bool attention = attention_na.empty();
  if (o.activations.empty()) {
    // The tokens or the query rows, whichever need more, are named.
    const double token_bytes = kReportBytesPerToken * static_cast<double>(tokens);
    const double row_bytes = attention ? report_bytes_per_query_row(budget.model.heads, std::min(kTopk, tokens)) : 0.0;
    const double query_bytes = row_bytes * static_cast<double>(o.queries);
    if (query_bytes > token_bytes) {
      check_host_memory("--queries",
                        fmt::format("{} query rows x {} heads (with {} tokens)", o.queries, budget.model.heads, tokens),
                        o.queries, row_bytes, token_bytes, "use --queries {} or fewer");
    } else {
      check_host_memory("--tokens", fmt::format("{} tokens", tokens), tokens, kReportBytesPerToken, query_bytes,
                        "use --tokens {} or fewer");
    }
  } else {
    check_user_inputs_fit(o, budget.model, attention);
  }
  const int steps = 2 + 2 * static_cast<int>(caps.size());
  Progress progress(o.quiet, steps);

  progress.step(o.activations.empty() ? "generating synthetic activations" : "reading " + o.activations);
  const Inputs in = o.activations.empty() ? synthetic_inputs(o, tokens, budget.model, attention)
                                          : user_inputs(o, budget.model, attention);
  progress.step(attention ? "uploading inputs and computing the bf16 reference attention" : "uploading inputs");
  Measurement measurement(device, in.bf16, in.fp16, in.queries);
  std::vector<FormatRow> rows;
  const int repeats = device.type == DeviceType::kCuda ? 10 : 3;
  for (const Capacity& c : caps) {
    const std::string id(format_info(c.format).id);
    progress.step("accuracy of " + id);
    FormatRow row{c, measurement.accuracy(c.format), {}};
    progress.step("speed of " + id);
    row.speed = measurement.speed(c.format, repeats);
    rows.push_back(row);
  }
  progress.finish();
  std::string reason;
  const std::size_t best = recommend(rows, parsed.max_attention_error, attention_na, reason);
  // The plot first: a file that cannot be written fails the run before anything is printed.
  if (!o.plot.empty()) write_plot(o.plot, budget, rows, best, parsed.max_attention_error);
  if (o.json) {
    print_json(budget, in, device, parsed, rows, best, reason, attention_na);
  } else {
    print_table(budget, in, device, rows, best, reason, attention_na);
  }
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Which KV-cache format to run: capacity, accuracy and speed of each");
  auto o = std::make_shared<ReportOptions>();
  add_model_options(*cmd, o->model);
  cmd->add_option("--device", o->device, "cpu, cuda, or auto (cuda when a device is present)")->default_val("cpu");
  cmd->add_option("--tokens", o->tokens, "Synthetic tokens to measure (default 4096 on the CPU, 262144 on CUDA)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--queries", o->queries, "Query rows of the sparse-attention check")
      ->default_val(o->queries)
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--seed", o->seed, "Seed of the synthetic activations and queries")->check(seed_value());
  cmd->add_option("--activations", o->activations,
                  "Directory with kv_c.npy [T,512] (deepseek-v4-flash: [T,448]) and k_pe.npy [T,64] (float32/float16), "
                  "optional q.npy [R,H,576]");
  cmd->add_flag("--allow-nonfinite", o->allow_nonfinite,
                "Measure activations holding NaN/inf instead of refusing them (counted per format)");
  cmd->add_option("--max-attention-error", o->max_attention_error_text,
                  "Largest sparse-attention error (relative RMS) a recommended format may have: 2% or 0.02")
      ->default_val(o->max_attention_error_text);
  cmd->add_flag("--json", o->json, "Print JSON instead of the table");
  cmd->add_option("--plot", o->plot, "Write an SVG of bytes per token against attention error");
  cmd->add_flag("--quiet", o->quiet, "No progress line on stderr");
  cmd->callback([o] { run_report(*o); });
}

}  // namespace mlakv::tool
