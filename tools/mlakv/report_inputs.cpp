// SPDX-License-Identifier: Apache-2.0
#include "report_inputs.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "host_memory.h"
#include "mlakv/error.h"
#include "mlakv/vocabulary.h"
#include "npy.h"

namespace mlakv::tool {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

// "[3, 17]": the row-major index of element `flat` in `shape`.
std::string index_text(const std::vector<std::int64_t>& shape, std::size_t flat) {
  std::vector<std::int64_t> index(shape.size());
  auto rest = static_cast<std::int64_t>(flat);
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] > 0 ? rest % shape[d] : 0;
    rest = shape[d] > 0 ? rest / shape[d] : 0;
  }
  std::string text = "[";
  for (std::size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + "]";
}

// Non-finite activations measure nothing: refused naming the file, the array and the first bad index.
void check_finite(const ReportOptions& o, const std::string& file, const std::string& array, const NpyArray& a) {
  if (o.allow_nonfinite) return;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (std::isfinite(a.values[i])) continue;
    throw Error(ErrorCode::kValue,
                fmt::format("--activations: {}/{}: {}{} is {} (the first non-finite value); pass --allow-nonfinite "
                            "to measure how each format stores such values",
                            o.activations, file, array, index_text(a.shape, i), a.values[i]));
  }
}

// A stat, never an open: read_npy refuses FIFOs.
bool has_queries(const std::string& dir) {
  std::error_code missing;
  return std::filesystem::exists(dir + "/q.npy", missing);
}

}  // namespace

void check_user_inputs_fit(const ReportOptions& o, const ModelPreset& model, bool attention) {
  const NpyHeader kv = read_npy_header("--activations", o.activations + "/kv_c.npy");
  if (kv.shape.size() != 2) return;  // user_inputs refuses the shape, naming it
  const std::int64_t topk = std::min(kTopk, kv.shape[0]);
  double query_bytes = 0.0;
  if (attention && has_queries(o.activations)) {
    // q.npy's values as read (file bytes and float32), then the check's rows.
    const NpyHeader q = read_npy_header("--activations", o.activations + "/q.npy");
    query_bytes = 8.0 * static_cast<double>(q.count);
    if (q.shape.size() == 3) {
      query_bytes += report_bytes_per_query_row(q.shape[1], topk) * static_cast<double>(q.shape[0]);
    }
  } else if (attention) {
    query_bytes = report_bytes_per_query_row(model.heads, topk) * static_cast<double>(o.queries);
  }
  check_host_memory("--activations", fmt::format("the {} tokens of {}", kv.shape[0], o.activations), kv.shape[0],
                    kReportBytesPerToken, query_bytes,
                    "at most {} tokens fit: pass fewer rows of kv_c.npy and k_pe.npy");
}

Inputs synthetic_inputs(const ReportOptions& o, std::int64_t tokens, const ModelPreset& model, bool attention) {
  Inputs in{make_activations(tokens, model.nope_dims, DType::kBFloat16, o.seed),
            make_activations(tokens, model.nope_dims, DType::kFloat16, o.seed),
            {},
            fmt::format("{} synthetic tokens (seed {})", tokens, o.seed)};
  if (attention) in.queries = make_queries(in.bf16, o.queries, model.heads, std::min(kTopk, tokens), o.seed);
  return in;
}

Inputs user_inputs(const ReportOptions& o, const ModelPreset& model, bool attention) {
  const std::string dir = o.activations;
  const NpyArray kv = read_npy("--activations", dir + "/kv_c.npy");
  const NpyArray pe = read_npy("--activations", dir + "/k_pe.npy");
  const auto shape_error = [&](const std::string& file, const std::string& want) {
    throw Error(ErrorCode::kShape, "--activations: " + dir + "/" + file + ": shape must be " + want);
  };
  const int nope = model.nope_dims;
  if (kv.shape.size() != 2 || kv.shape[1] != nope || kv.shape[0] < 1) {
    shape_error("kv_c.npy",
                fmt::format("[T, {}] ({} stores {} + {} values per token: kv_c the {}), got {}", nope, model.name, nope,
                            kRopeDim, nope == kLatentDim ? "latent" : fmt::format("{} NoPE values", nope),
                            shape_text(kv.shape)));
  }
  const std::int64_t tokens = kv.shape[0];
  if (pe.shape.size() != 2 || pe.shape[0] != tokens || pe.shape[1] != kRopeDim) {
    shape_error("k_pe.npy", fmt::format("[T, {}] with T = {} (kv_c.npy's rows)", kRopeDim, tokens));
  }
  check_finite(o, "kv_c.npy", "kv_c", kv);
  check_finite(o, "k_pe.npy", "k_pe", pe);
  Inputs in{round_activations(kv.values, pe.values, tokens, nope, DType::kBFloat16),
            round_activations(kv.values, pe.values, tokens, nope, DType::kFloat16),
            {},
            fmt::format("{} tokens of {}", tokens, dir)};
  const std::int64_t topk = std::min(kTopk, tokens);
  const bool has_q = has_queries(dir);
  if (!attention) {
    if (has_q) in.source += " (its q.npy not read: no sparse-attention check)";
  } else if (has_q) {
    const NpyArray q = read_npy("--activations", dir + "/q.npy");
    if (q.shape.size() != 3 || q.shape[2] != kQueryDim || q.shape[0] < 1 || q.shape[1] < 1) {
      shape_error("q.npy", fmt::format("[R, H, {}]", kQueryDim));
    }
    check_finite(o, "q.npy", "q", q);
    in.queries = user_queries(q.values, q.shape[0], q.shape[1], tokens, topk, o.seed);
    in.source += " with its q.npy";
  } else {
    in.queries = make_queries(in.bf16, o.queries, model.heads, topk, o.seed);
  }
  return in;
}

}  // namespace mlakv::tool
