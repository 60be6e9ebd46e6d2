// SPDX-License-Identifier: Apache-2.0
// Argument rules of the attention API (sparse decode and prefill, merge).
#include <cmath>
#include <string>

#include "api/rules.h"
#include "api/validate.h"

namespace mlakv::api {
namespace {

// An [R, H, width] array: innermost-contiguous, heads and rows not overlapping.
void check_head_rows(const Check& check, std::string_view name, const TensorView& v, std::int64_t rows,
                     std::int64_t heads, std::int64_t width, std::string_view expected) {
  check_rank(check, name, v, 3, expected);
  MLAKV_REQUIRE(check, v.shape[0] == rows && v.shape[1] == heads && v.shape[2] == width, ErrorCode::kShape, name,
                "shape must be " + std::string(expected), shape_string(v));
  check_strides_nonnegative(check, name, v);
  MLAKV_REQUIRE(check, v.strides[2] == 1 || width <= 1 || is_empty(v), ErrorCode::kLayout, name,
                "must be innermost-contiguous (stride 1)", "stride " + str(v.strides[2]));
  MLAKV_REQUIRE(check, heads <= 1 || rows == 0 || v.strides[1] >= width, ErrorCode::kLayout, name,
                "head stride must be >= " + str(width) + " (heads must not overlap)", str(v.strides[1]));
  const std::int64_t row_span = saturating_add(saturating_mul(heads - 1, v.strides[1]), width);
  MLAKV_REQUIRE(check, rows <= 1 || heads == 0 || v.strides[0] >= row_span, ErrorCode::kLayout, name,
                "row stride must be >= " + str(row_span) + " (rows must not overlap)", str(v.strides[0]));
  check_data(check, name, v);
}

// [R, H] float32, entries not overlapping.
void check_lse(const Check& check, std::string_view name, const TensorView& v, std::int64_t rows, std::int64_t heads) {
  const std::string expected = "(R, H) = (" + str(rows) + ", " + str(heads) + ")";
  check_dtype(check, name, v, DType::kFloat32);
  check_rank(check, name, v, 2, expected);
  MLAKV_REQUIRE(check, v.shape[0] == rows && v.shape[1] == heads, ErrorCode::kShape, name, "shape must be " + expected,
                shape_string(v));
  check_strides_nonnegative(check, name, v);
  MLAKV_REQUIRE(check, heads <= 1 || rows == 0 || v.strides[1] >= 1, ErrorCode::kLayout, name,
                "heads must not overlap (stride >= 1)", str(v.strides[1]));
  MLAKV_REQUIRE(check,
                rows <= 1 || heads == 0 || v.strides[0] >= saturating_add(saturating_mul(heads - 1, v.strides[1]), 1),
                ErrorCode::kLayout, name, "rows must not overlap", "stride " + str(v.strides[0]));
  check_data(check, name, v);
}

// CUDA moves q in 16-byte pieces and out in bf16 pairs.
void check_cuda_alignment(const Check& check, std::string_view name, const TensorView& v, int elements) {
  if (is_empty(v)) return;
  const auto base = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(v.data) % (2 * elements));
  const std::int64_t bytes = 2 * elements;
  MLAKV_REQUIRE(check, base == 0, ErrorCode::kAlignment, name, "base must be " + str(bytes) + "-byte aligned on CUDA",
                "address % " + str(bytes) + " = " + str(base));
  MLAKV_REQUIRE(check, v.strides[0] % elements == 0 && v.strides[1] % elements == 0, ErrorCode::kAlignment, name,
                "row and head strides must be multiples of " + str(elements) + " elements on CUDA",
                "strides " + str(v.strides[0]) + " and " + str(v.strides[1]));
}

// [R, K] int32 indices, rows innermost-contiguous; returns K.
std::int64_t check_indices(const Check& check, std::string_view name, const TensorView& indices, std::int64_t rows) {
  check_dtype(check, name, indices, DType::kInt32);
  const std::string shape = "(R, K) with R = q rows = " + str(rows);
  check_rank(check, name, indices, 2, shape);
  MLAKV_REQUIRE(check, indices.shape[0] == rows, ErrorCode::kShape, name, "shape must be " + shape,
                shape_string(indices));
  const std::int64_t topk = indices.shape[1];
  check_strides_nonnegative(check, name, indices);
  MLAKV_REQUIRE(check, indices.strides[1] == 1 || topk <= 1 || rows == 0, ErrorCode::kLayout, name,
                "rows must be innermost-contiguous (stride 1)", "stride " + str(indices.strides[1]));
  check_data(check, name, indices);
  return topk;
}

// An optional [R] int32 of entry counts on the tensors' device.
const std::int32_t* check_topk_len(const Check& check, std::string_view name, const TensorView* topk_len,
                                   const Device& device, std::int64_t rows) {
  if (topk_len == nullptr) return nullptr;
  MLAKV_REQUIRE(check, topk_len->device == device, ErrorCode::kDevice, name,
                "must be on the same device as q (" + device_string(device) + ")", device_string(topk_len->device));
  return check_int32_vector(check, name, *topk_len, rows, "(R,) with R = q rows = " + str(rows));
}

// The DeepSeek V4 family's decode (d_qk 512, values all 512) against the V3.2-era one (576, values the latent).
bool is_v4_decode(const FormatInfo& info) { return info.geometry.nope_dims != kLatentDim; }
std::int64_t query_dims(const FormatInfo& info) { return info.geometry.nope_dims + info.geometry.rope_dims; }

// The rules of sparse attention rows, a decode's or a prefill's (`operation`:
// whose formats the backend must support); a prefill passes no workspace and
// no extra cache.
params::SparseDecodeParams validate_sparse_rows(const Check& check, Operation operation, Format format,
                                                const TensorView& q, const TensorView& kv_cache,
                                                const TensorView& indices, const TensorView& out, const TensorView& lse,
                                                const SparseDecodeOptions& options) {
  const Device device =
      check_devices(check, {{"q", &q}, {"kv_cache", &kv_cache}, {"indices", &indices}, {"out", &out}, {"lse", &lse}});
  const bool cuda = device.type == DeviceType::kCuda;
  // format: one the backend's operation reads
  check_supported(check, format, device, operation);
  const FormatInfo& info = format_info(format);
  const std::int64_t qk_dim = query_dims(info);
  const bool v4 = is_v4_decode(info);
  MLAKV_REQUIRE(check, v4 || options.attn_sink == nullptr, ErrorCode::kUnsupported, "attn_sink",
                "is read by the DeepSeek V4 family's decode only (d_qk 512)", info.id);
  MLAKV_REQUIRE(check, v4 || options.extra == nullptr, ErrorCode::kUnsupported, "extra_kv_cache",
                "is read by the DeepSeek V4 family's decode only (d_qk 512)", info.id);
  // q
  check_dtype(check, "q", q, DType::kBFloat16);
  const std::string q_shape = "(R, H, " + str(qk_dim) + ")" + (v4 ? " (DeepSeek V4: 448 NoPE + 64 RoPE)" : "");
  check_rank(check, "q", q, 3, q_shape);
  const std::int64_t rows = q.shape[0];
  const std::int64_t heads = q.shape[1];
  check_head_rows(check, "q", q, rows, heads, qk_dim, q_shape);
  const std::int64_t topk = check_indices(check, "indices", indices, rows);
  // outputs
  check_dtype(check, "out", out, DType::kBFloat16);
  const std::string out_shape =
      "(R, H, " + str(kValueDim) + ") = (" + str(rows) + ", " + str(heads) + ", " + str(kValueDim) + ")";
  check_head_rows(check, "out", out, rows, heads, kValueDim, out_shape);
  check_lse(check, "lse", lse, rows, heads);
  // options
  const std::int32_t* topk_len = check_topk_len(check, "topk_len", options.topk_len, device, rows);
  MLAKV_REQUIRE(check, std::isfinite(options.sm_scale), ErrorCode::kValue, "sm_scale",
                "must be finite (0: 1/sqrt(" + str(qk_dim) + "))", std::to_string(options.sm_scale));
  const float sm_scale = options.sm_scale != 0.0f ? options.sm_scale : 1.0f / std::sqrt(static_cast<float>(qk_dim));
  const params::CacheLayout cache = check_cache(check, format_info(format), kv_cache, cuda);
  const ScaleArg k_scale = read_scale(check, options.decode.scale, info.policy.needs_k_scale, device);
  const codec::DecodeParams decode = decode_params(check, options.decode, k_scale.value);
  // the DeepSeek V4 family's sink and extra cache
  const float* attn_sink = nullptr;
  std::int64_t attn_sink_stride = 0;
  if (options.attn_sink != nullptr) {
    const TensorView& sink = *options.attn_sink;
    MLAKV_REQUIRE(check, sink.device == device, ErrorCode::kDevice, "attn_sink",
                  "must be on the same device as q (" + device_string(device) + ")", device_string(sink.device));
    check_dtype(check, "attn_sink", sink, DType::kFloat32);
    MLAKV_REQUIRE(check, sink.ndim == 1 && sink.shape[0] == heads, ErrorCode::kShape, "attn_sink",
                  "shape must be (H,) with H = q heads = " + str(heads), shape_string(sink));
    check_strides_nonnegative(check, "attn_sink", sink);
    check_data(check, "attn_sink", sink);
    attn_sink = static_cast<const float*>(sink.data);
    attn_sink_stride = sink.strides[0];
  }
  params::ExtraKeySet extra{format, cache, nullptr, 0, nullptr, 0};
  const SparseDecodeExtraCache* x = options.extra;
  if (x != nullptr) {
    const FormatInfo& x_info = format_info(x->format);
    MLAKV_REQUIRE(check, is_v4_decode(x_info), ErrorCode::kUnsupported, "extra_format",
                  "must be a DeepSeek V4 family format (d_qk 512, as the main cache's " + std::string(info.id) + ")",
                  x_info.id);
    check_supported(check, x->format, device, Operation::kDecode);
    MLAKV_REQUIRE(check, x->kv_cache != nullptr, ErrorCode::kValue, "extra_kv_cache", "is required with an extra cache",
                  "none");
    MLAKV_REQUIRE(check, x->indices != nullptr, ErrorCode::kValue, "extra_indices", "is required with an extra cache",
                  "none");
    for (const Named& t : {Named{"extra_kv_cache", x->kv_cache}, Named{"extra_indices", x->indices}}) {
      MLAKV_REQUIRE(check, t.view->device == device, ErrorCode::kDevice, t.name,
                    "must be on the same device as q (" + device_string(device) + ")", device_string(t.view->device));
    }
    extra.format = x->format;
    extra.topk = check_indices(check, "extra_indices", *x->indices, rows);
    extra.indices = static_cast<const std::int32_t*>(x->indices->data);
    extra.indices_stride_row_elems = x->indices->strides[0];
    extra.topk_len = check_topk_len(check, "extra_topk_len", x->topk_len, device, rows);
    extra.cache = check_cache(check, x_info, *x->kv_cache, cuda, "extra_kv_cache");
  }
  if (cuda) {
    check_cuda_alignment(check, "q", q, 8);
    check_cuda_alignment(check, "out", out, 2);
  }
  void* workspace = nullptr;
  std::int64_t workspace_bytes = 0;
  if (options.workspace != nullptr) {  // the CPU ignores it, but checks it as CUDA does
    const TensorView& w = *options.workspace;
    MLAKV_REQUIRE(check, w.device == device, ErrorCode::kDevice, "workspace",
                  "must be on the same device as q (" + device_string(device) + ")", device_string(w.device));
    check_dtype(check, "workspace", w, DType::kUInt8);
    MLAKV_REQUIRE(check, w.ndim == 1 && (w.strides[0] == 1 || w.shape[0] <= 1), ErrorCode::kLayout, "workspace",
                  "must be a contiguous 1-D buffer", shape_string(w));
    const std::int64_t all_entries = topk + extra.topk;
    const auto needed = static_cast<std::int64_t>(sparse_mla_decode_workspace_size(rows, heads, all_entries, device));
    MLAKV_REQUIRE(check, w.shape[0] >= needed, ErrorCode::kShape, "workspace",
                  "must hold sparse_mla_decode_workspace_size(R, H, " + std::string(x ? "K + K_extra" : "K") +
                      ") = " + str(needed) + " bytes",
                  str(w.shape[0]) + " bytes");
    check_data(check, "workspace", w);
    const auto base = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(w.data) % 16);
    MLAKV_REQUIRE(check, base == 0, ErrorCode::kAlignment, "workspace", "base must be 16-byte aligned",
                  "address % 16 = " + str(base));
    workspace = w.data;
    workspace_bytes = w.shape[0];
  }
  // out, lse and the workspace are written while the others are read: no byte may be both.
  const Named inputs[] = {{"q", &q},
                          {"kv_cache", &kv_cache},
                          {"indices", &indices},
                          {"topk_len", options.topk_len},
                          {"scale", options.decode.scale},
                          {"attn_sink", options.attn_sink},
                          {"extra_kv_cache", x ? x->kv_cache : nullptr},
                          {"extra_indices", x ? x->indices : nullptr},
                          {"extra_topk_len", x ? x->topk_len : nullptr}};
  const Named written[] = {{"out", &out}, {"lse", &lse}, {"workspace", workspace ? options.workspace : nullptr}};
  for (int w = 0; w < 3; ++w) {
    if (written[w].view == nullptr) continue;
    for (const Named& input : inputs) check_disjoint(check, written[w], {input});
    for (int o = w + 1; o < 3; ++o) check_disjoint(check, written[w], {written[o]});
  }
  return params::SparseDecodeParams{format,
                                    cache,
                                    decode,
                                    k_scale.device,
                                    static_cast<const std::uint16_t*>(q.data),
                                    q.strides[0],
                                    q.strides[1],
                                    static_cast<const std::int32_t*>(indices.data),
                                    indices.strides[0],
                                    topk_len,
                                    rows,
                                    heads,
                                    topk,
                                    sm_scale,
                                    static_cast<std::uint16_t*>(out.data),
                                    out.strides[0],
                                    out.strides[1],
                                    static_cast<float*>(lse.data),
                                    lse.strides[0],
                                    lse.strides[1],
                                    workspace,
                                    workspace_bytes,
                                    qk_dim,
                                    attn_sink,
                                    attn_sink_stride,
                                    extra};
}

}  // namespace

params::SparseDecodeParams validate_sparse_decode(const Check& check, Format format, const TensorView& q,
                                                  const TensorView& kv_cache, const TensorView& indices,
                                                  const TensorView& out, const TensorView& lse,
                                                  const SparseDecodeOptions& options) {
  return validate_sparse_rows(check, Operation::kDecode, format, q, kv_cache, indices, out, lse, options);
}

params::SparsePrefillParams validate_sparse_prefill(const Check& check, Format format, const TensorView& q,
                                                    const TensorView& kv_cache, const TensorView& indices,
                                                    const TensorView& out, const TensorView& lse,
                                                    const SparsePrefillOptions& options) {
  SparseDecodeOptions rows;
  rows.sm_scale = options.sm_scale;
  rows.topk_len = options.topk_len;
  rows.decode = options.decode;
  rows.attn_sink = options.attn_sink;
  return validate_sparse_rows(check, Operation::kPrefill, format, q, kv_cache, indices, out, lse, rows);
}

params::MergeParams validate_merge(const Check& check, const TensorView& out_a, const TensorView& lse_a,
                                   const TensorView& out_b, const TensorView& lse_b, const TensorView& out,
                                   const TensorView& lse) {
  check_devices(
      check,
      {{"out_a", &out_a}, {"lse_a", &lse_a}, {"out_b", &out_b}, {"lse_b", &lse_b}, {"out", &out}, {"lse", &lse}});
  MLAKV_REQUIRE(check, out_a.dtype == DType::kBFloat16 || out_a.dtype == DType::kFloat32, ErrorCode::kDtype, "out_a",
                "dtype must be bf16 or float32", dtype_name(out_a.dtype));
  check_dtype(check, "out_b", out_b, out_a.dtype);
  check_dtype(check, "out", out, out_a.dtype);
  check_rank(check, "out_a", out_a, 3, "(R, H, D)");
  const std::int64_t rows = out_a.shape[0];
  const std::int64_t heads = out_a.shape[1];
  const std::int64_t width = out_a.shape[2];
  const std::string shape = "(R, H, D) = (" + str(rows) + ", " + str(heads) + ", " + str(width) + ")";
  check_head_rows(check, "out_a", out_a, rows, heads, width, shape);
  check_head_rows(check, "out_b", out_b, rows, heads, width, shape);
  check_head_rows(check, "out", out, rows, heads, width, shape);
  check_lse(check, "lse_a", lse_a, rows, heads);
  check_lse(check, "lse_b", lse_b, rows, heads);
  check_lse(check, "lse", lse, rows, heads);
  // out and lse are written: each is one of the inputs exactly (in place), or shares no byte with any.
  const Named inputs[] = {{"out_a", &out_a}, {"lse_a", &lse_a}, {"out_b", &out_b}, {"lse_b", &lse_b}};
  for (const Named& written : {Named{"out", &out}, Named{"lse", &lse}}) {
    for (const Named& input : inputs) {
      if (!same_view(*written.view, *input.view)) check_disjoint(check, written, {input});
    }
  }
  check_disjoint(check, {"lse", &lse}, {{"out", &out}});
  const auto state = [](const TensorView& o, const TensorView& l) {
    return params::AttentionState{o.data,       o.strides[0], o.strides[1], static_cast<float*>(l.data),
                                  l.strides[0], l.strides[1]};
  };
  return params::MergeParams{
      out_a.dtype == DType::kFloat32, rows, heads, width, state(out_a, lse_a), state(out_b, lse_b), state(out, lse)};
}

}  // namespace mlakv::api
