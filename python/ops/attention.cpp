// SPDX-License-Identifier: Apache-2.0
// The attention run functions: sparse_mla_decode (DeepSeek V4's sink and
// extra cache included), sparse_mla_prefill, merge_attention_states and the
// decode's workspace size.
#include "mlakv/attention.h"

#include <string>
#include <utility>

#include "gather_options.h"
#include "mlakv/checks.h"
#include "mlakv/error.h"
#include "mlakv/prefill.h"
#include "run_functions.h"
#include "sparse_decode_extra.h"

namespace mlakv::bindings {

std::int64_t run_sparse_mla_decode(const OpCall& c) {
  const Format format = parse_format(c.text("format"));
  const std::optional<SparseDecodeExtraCache> extra =
      extra_cache(c.text("format"), {c.optional_text("extra_format"), c.optional_tensor("extra_kv_cache"),
                                     c.optional_tensor("extra_indices"), c.optional_tensor("extra_topk_len")});
  SparseDecodeOptions options;
  options.sm_scale = static_cast<float>(c.optional_real("sm_scale").value_or(0.0));
  options.topk_len = c.optional_tensor("topk_len");
  options.decode = gather_options(c);
  options.workspace = c.optional_tensor("workspace");
  options.attn_sink = c.optional_tensor("attn_sink");
  options.extra = extra ? &*extra : nullptr;
  const TensorView &q = c.tensor("q"), &cache = c.tensor("kv_cache"), &indices = c.tensor("indices");
  if (!c.run()) {
    check_sparse_mla_decode(format, q, cache, indices, c.output(0), c.output(1), options);
  } else {
    sparse_mla_decode(format, q, cache, indices, c.output(0), c.output(1), options, c.stream());
  }
  return 0;
}

std::int64_t run_sparse_mla_prefill(const OpCall& c) {
  const Format format = parse_format(c.text("format"));
  SparsePrefillOptions options;
  options.sm_scale = static_cast<float>(c.optional_real("sm_scale").value_or(0.0));
  options.topk_len = c.optional_tensor("topk_len");
  options.decode = gather_options(c);
  options.attn_sink = c.optional_tensor("attn_sink");
  const TensorView &q = c.tensor("q"), &cache = c.tensor("kv_cache"), &indices = c.tensor("indices");
  if (!c.run()) {
    check_sparse_mla_prefill(format, q, cache, indices, c.output(0), c.output(1), options);
  } else {
    sparse_mla_prefill(format, q, cache, indices, c.output(0), c.output(1), options, c.stream());
  }
  return 0;
}

std::int64_t run_merge_attention_states(const OpCall& c) {
  const TensorView &a = c.tensor("out_a"), &lse_a = c.tensor("lse_a");
  const TensorView &b = c.tensor("out_b"), &lse_b = c.tensor("lse_b");
  if (!c.run()) {
    check_merge_attention_states(a, lse_a, b, lse_b, c.output(0), c.output(1));
  } else {
    merge_attention_states(a, lse_a, b, lse_b, c.output(0), c.output(1), c.stream());
  }
  return 0;
}

std::int64_t run_sparse_mla_decode_workspace_size(const OpCall& c) {
  const std::pair<const char*, std::int64_t> values[] = {
      {"rows", c.integer("rows")}, {"heads", c.integer("heads")}, {"topk", c.integer("topk")}};
  for (const auto& [name, value] : values) {
    if (value < 0 || value >= (std::int64_t{1} << 31)) {
      throw Error(ErrorCode::kValue, std::string("mlakv::sparse_mla_decode_workspace_size: ") + name +
                                         ": must be in [0, 2^31), got " + std::to_string(value));
    }
  }
  return static_cast<std::int64_t>(
      sparse_mla_decode_workspace_size(values[0].second, values[1].second, values[2].second, c.device("device")));
}

}  // namespace mlakv::bindings
