// SPDX-License-Identifier: Apache-2.0
// torch.ops.mlakv's attention in C++: sparse_mla_decode (new out and lse),
// merge_attention_states and sparse_mla_decode_workspace_size.
#include "mlakv/attention.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "mlakv/error.h"
#include "sparse_decode_extra.h"
#include "views.h"

namespace mlakv::torch_ops {
namespace {

std::tuple<at::Tensor, at::Tensor> sparse_mla_decode_op(
    c10::string_view format, const at::Tensor& q, const at::Tensor& kv_cache, const at::Tensor& indices,
    const std::optional<at::Tensor>& topk_len, std::optional<double> sm_scale, const std::optional<at::Tensor>& scale,
    c10::string_view rope_dtype, const std::optional<at::Tensor>& workspace, const std::optional<at::Tensor>& attn_sink,
    std::optional<c10::string_view> extra_format, const std::optional<at::Tensor>& extra_kv_cache,
    const std::optional<at::Tensor>& extra_indices, const std::optional<at::Tensor>& extra_topk_len) {
  return translated([&] {
    const std::int64_t rows = q.dim() >= 1 ? q.size(0) : 0, heads = q.dim() >= 2 ? q.size(1) : 0;
    at::Tensor out = at::empty({rows, heads, kValueDim}, at::TensorOptions().dtype(at::kBFloat16).device(q.device()));
    at::Tensor lse = at::empty({rows, heads}, at::TensorOptions().dtype(at::kFloat).device(q.device()));
    const Format parsed = parse_format(text(format));
    const std::optional<TensorView> lens = optional_view(topk_len), s = optional_view(scale);
    const std::optional<TensorView> ws = optional_view(workspace), sink = optional_view(attn_sink);
    const bindings::ExtraCacheArguments extra_arguments{
        extra_format ? std::optional<std::string_view>(text(*extra_format)) : std::nullopt,
        optional_view(extra_kv_cache), optional_view(extra_indices), optional_view(extra_topk_len)};
    const std::optional<SparseDecodeExtraCache> extra = bindings::extra_cache(text(format), extra_arguments);
    SparseDecodeOptions options;
    options.sm_scale = sm_scale ? static_cast<float>(*sm_scale) : 0.0f;
    options.topk_len = pointer(lens);
    options.decode = gather_options(s, rope_dtype);
    options.workspace = pointer(ws);
    options.attn_sink = pointer(sink);
    options.extra = extra ? &*extra : nullptr;
    sparse_mla_decode(parsed, view(q), view(kv_cache), view(indices), view(out), view(lse), options, stream(q));
    return std::make_tuple(out, lse);
  });
}

std::tuple<at::Tensor, at::Tensor> merge_attention_states_op(const at::Tensor& out_a, const at::Tensor& lse_a,
                                                             const at::Tensor& out_b, const at::Tensor& lse_b) {
  return translated([&] {
    at::Tensor out = at::empty(out_a.sizes(), at::TensorOptions().dtype(out_a.scalar_type()).device(out_a.device()));
    at::Tensor lse = at::empty(lse_a.sizes(), at::TensorOptions().dtype(at::kFloat).device(out_a.device()));
    merge_attention_states(view(out_a), view(lse_a), view(out_b), view(lse_b), view(out), view(lse), stream(out_a));
    return std::make_tuple(out, lse);
  });
}

// A pure function of its arguments (and the device's SM count): no tensors, so
// one CompositeExplicitAutograd kernel serves every backend and tracing.
std::int64_t sparse_mla_decode_workspace_size_op(std::int64_t rows, std::int64_t heads, std::int64_t topk,
                                                 at::Device device) {
  return translated([&] {
    const std::pair<const char*, std::int64_t> values[] = {{"rows", rows}, {"heads", heads}, {"topk", topk}};
    for (const auto& [name, value] : values) {
      if (value < 0 || value >= (std::int64_t{1} << 31)) {
        throw Error(ErrorCode::kValue, std::string("mlakv::sparse_mla_decode_workspace_size: ") + name +
                                           ": must be in [0, 2^31), got " + std::to_string(value));
      }
    }
    const Device where = device.is_cuda() ? Device{DeviceType::kCuda, device.has_index() ? device.index() : 0}
                                          : Device{DeviceType::kCpu, 0};
    return static_cast<std::int64_t>(sparse_mla_decode_workspace_size(rows, heads, topk, where));
  });
}

}  // namespace
}  // namespace mlakv::torch_ops

TORCH_LIBRARY_FRAGMENT(mlakv, m) {
  m.def(
      "sparse_mla_decode(str format, Tensor q, Tensor kv_cache, Tensor indices, Tensor? topk_len=None, "
      "float? sm_scale=None, *, Tensor? scale=None, str rope_dtype=\"bf16\", Tensor(a!)? workspace=None, "
      "Tensor? attn_sink=None, str? extra_format=None, Tensor? extra_kv_cache=None, Tensor? extra_indices=None, "
      "Tensor? extra_topk_len=None) -> (Tensor, Tensor)");
  m.def("merge_attention_states(Tensor out_a, Tensor lse_a, Tensor out_b, Tensor lse_b) -> (Tensor, Tensor)");
  m.def("sparse_mla_decode_workspace_size(int rows, int heads, int topk, Device device) -> int");
}

TORCH_LIBRARY_IMPL(mlakv, CPU, m) {
  m.impl("sparse_mla_decode", &mlakv::torch_ops::sparse_mla_decode_op);
  m.impl("merge_attention_states", &mlakv::torch_ops::merge_attention_states_op);
}

TORCH_LIBRARY_IMPL(mlakv, CUDA, m) {
  m.impl("sparse_mla_decode", &mlakv::torch_ops::sparse_mla_decode_op);
  m.impl("merge_attention_states", &mlakv::torch_ops::merge_attention_states_op);
}

TORCH_LIBRARY_IMPL(mlakv, CompositeExplicitAutograd, m) {
  m.impl("sparse_mla_decode_workspace_size", &mlakv::torch_ops::sparse_mla_decode_workspace_size_op);
}
