// SPDX-License-Identifier: Apache-2.0
// torch.ops.mlakv's readers in C++: gather_records (two new outputs),
// gather_records_out (the caller's [N, nope + rope] prefill buffer) and
// gather_records_paged. Argument checks the library does not make (the output
// dtype, out's shape, num_rows) read as mlakv/torch.py's do.
#include "mlakv/readers.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "views.h"

namespace mlakv::torch_ops {
namespace {

at::ScalarType output_dtype(std::string_view function, std::string_view format, std::optional<at::ScalarType> dtype,
                            at::ScalarType fallback) {
  if (!dtype) return fallback;
  if (*dtype != at::kFloat && *dtype != at::kBFloat16) {
    type_error(function, format, "dtype",
               "must be torch.float32 or torch.bfloat16 (or None: " + dtype_name(fallback) + ")", dtype_name(*dtype));
  }
  return *dtype;
}

std::int64_t rows_of(const at::Tensor& t) { return t.dim() >= 1 ? t.size(0) : 0; }

// Columns [start, start + width) of a 2-D view: the prefill layout's latent and RoPE parts.
TensorView columns(TensorView v, std::int64_t start, std::int64_t width, std::int64_t itemsize) {
  v.data = static_cast<char*>(v.data) + start * v.strides[1] * itemsize;
  v.shape[1] = width;
  return v;
}

std::tuple<at::Tensor, at::Tensor> gather_records_op(c10::string_view format, const at::Tensor& kv_cache,
                                                     const at::Tensor& slots, const std::optional<at::Tensor>& scale,
                                                     c10::string_view rope_dtype, std::optional<at::ScalarType> dtype) {
  return translated([&] {
    const at::ScalarType out_dtype = output_dtype("gather_records", text(format), dtype, at::kFloat);
    const TokenGeometry geometry = widths(text(format));
    const auto options = at::TensorOptions().dtype(out_dtype).device(kv_cache.device());
    at::Tensor kv_c = at::empty({rows_of(slots), geometry.nope_dims}, options);
    at::Tensor k_pe = at::empty({rows_of(slots), geometry.rope_dims}, options);
    const Format parsed = parse_format(text(format));
    const std::optional<TensorView> s = optional_view(scale);
    gather_records(parsed, view(kv_cache), view(slots), view(kv_c), view(k_pe), gather_options(s, rope_dtype),
                   stream(kv_cache));
    return std::make_tuple(kv_c, k_pe);
  });
}

void gather_records_out_op(c10::string_view format, const at::Tensor& kv_cache, const at::Tensor& slots,
                           const at::Tensor& out, const std::optional<at::Tensor>& scale, c10::string_view rope_dtype) {
  translated([&] {
    const TokenGeometry geometry = widths(text(format));
    const std::int64_t width = geometry.nope_dims + geometry.rope_dims, rows = rows_of(slots);
    if (out.dim() != 2 || out.size(1) != width || out.size(0) != rows) {
      value_error("gather_records", text(format), "out",
                  "shape must be (N, " + std::to_string(width) + ") with N = len(slots) = " + std::to_string(rows),
                  shape_text(out.sizes()));
    }
    const Format parsed = parse_format(text(format));
    const TensorView out_view = view(out);
    const std::optional<TensorView> s = optional_view(scale);
    gather_records(parsed, view(kv_cache), view(slots), columns(out_view, 0, geometry.nope_dims, out.element_size()),
                   columns(out_view, geometry.nope_dims, geometry.rope_dims, out.element_size()),
                   gather_options(s, rope_dtype), stream(kv_cache));
  });
}

at::Tensor gather_records_paged_op(c10::string_view format, const at::Tensor& kv_cache, const at::Tensor& block_table,
                                   const at::Tensor& seq_lens, const at::Tensor& cu_seq_lens, std::int64_t num_rows,
                                   const std::optional<at::Tensor>& scale, c10::string_view rope_dtype,
                                   std::optional<at::ScalarType> dtype) {
  return translated([&] {
    const at::ScalarType out_dtype = output_dtype("gather_records_paged", text(format), dtype, at::kFloat);
    if (num_rows < 0)
      value_error("gather_records_paged", text(format), "num_rows", "must be >= 0", std::to_string(num_rows));
    const TokenGeometry geometry = widths(text(format));
    at::Tensor out = at::empty({num_rows, geometry.nope_dims + geometry.rope_dims},
                               at::TensorOptions().dtype(out_dtype).device(kv_cache.device()));
    const Format parsed = parse_format(text(format));
    const TensorView out_view = view(out);
    const std::optional<TensorView> s = optional_view(scale);
    gather_records_paged(parsed, view(kv_cache), view(block_table), view(seq_lens), view(cu_seq_lens),
                         columns(out_view, 0, geometry.nope_dims, out.element_size()),
                         columns(out_view, geometry.nope_dims, geometry.rope_dims, out.element_size()),
                         gather_options(s, rope_dtype), stream(kv_cache));
    return out;
  });
}

}  // namespace
}  // namespace mlakv::torch_ops

TORCH_LIBRARY_FRAGMENT(mlakv, m) {
  m.def(
      "gather_records(str format, Tensor kv_cache, Tensor slots, *, Tensor? scale=None, str rope_dtype=\"bf16\", "
      "ScalarType? dtype=None) -> (Tensor, Tensor)");
  m.def(
      "gather_records_out(str format, Tensor kv_cache, Tensor slots, Tensor(a!) out, *, Tensor? scale=None, "
      "str rope_dtype=\"bf16\") -> ()");
  m.def(
      "gather_records_paged(str format, Tensor kv_cache, Tensor block_table, Tensor seq_lens, Tensor cu_seq_lens, "
      "SymInt num_rows, *, Tensor? scale=None, str rope_dtype=\"bf16\", ScalarType? dtype=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(mlakv, CPU, m) {
  m.impl("gather_records", &mlakv::torch_ops::gather_records_op);
  m.impl("gather_records_out", &mlakv::torch_ops::gather_records_out_op);
  m.impl("gather_records_paged", &mlakv::torch_ops::gather_records_paged_op);
}

TORCH_LIBRARY_IMPL(mlakv, CUDA, m) {
  m.impl("gather_records", &mlakv::torch_ops::gather_records_op);
  m.impl("gather_records_out", &mlakv::torch_ops::gather_records_out_op);
  m.impl("gather_records_paged", &mlakv::torch_ops::gather_records_paged_op);
}
