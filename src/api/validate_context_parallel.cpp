// SPDX-License-Identifier: Apache-2.0
// Argument rules of the context-parallel steps: everything is checked before
// a backend writes a byte.
#include "api/validate_context_parallel.h"

#include <string>

#include "api/rules.h"

namespace mlakv::api {
namespace {

// Launch grids index threads with 32 bits: (rows x topk) and (rows x heads) stay below 2^31.
constexpr std::int64_t kMaxItems = std::int64_t{1} << 31;

// A 2-D int32 array with innermost-contiguous rows that do not overlap.
void check_int32_rows(const Check& check, std::string_view name, const TensorView& v, std::int64_t rows,
                      std::int64_t cols, std::string_view expected) {
  check_dtype(check, name, v, DType::kInt32);
  check_rank(check, name, v, 2, expected);
  check.require(v.shape[0] == rows && (cols < 0 || v.shape[1] == cols), ErrorCode::kShape, name,
                "shape must be " + std::string(expected), shape_string(v));
  check_strides_nonnegative(check, name, v);
  check.require(v.strides[1] == 1 || v.shape[1] <= 1 || is_empty(v), ErrorCode::kLayout, name,
                "rows must be innermost-contiguous (stride 1)", "stride " + str(v.strides[1]));
  check.require(v.strides[0] >= v.shape[1] || v.shape[0] <= 1 || is_empty(v), ErrorCode::kLayout, name,
                "rows must not overlap (row stride >= " + str(v.shape[1]) + ")", "stride " + str(v.strides[0]));
  check_data(check, name, v);
}

void check_layout(const Check& check, const ContextParallelLayout& layout) {
  check.require(layout.world_size >= 1 && layout.world_size <= params::kMaxMergeParts, ErrorCode::kValue,
                "layout.world_size", "must be in [1, " + str(params::kMaxMergeParts) + "]", str(layout.world_size));
  check.require(layout.rank >= 0 && layout.rank < layout.world_size, ErrorCode::kValue, "layout.rank",
                "must be in [0, world_size = " + str(layout.world_size) + ")", str(layout.rank));
  check.require(layout.block_size >= 1 && layout.block_size <= (std::int64_t{1} << 20), ErrorCode::kValue,
                "layout.block_size", "must be in [1, 2^20]", str(layout.block_size));
  check.require(layout.interleave >= 1 && layout.block_size % layout.interleave == 0, ErrorCode::kValue,
                "layout.interleave", "must be >= 1 and divide block_size = " + str(layout.block_size),
                str(layout.interleave));
}

}  // namespace

params::LocalSlotsParams validate_dcp_local_slots(const Check& check, const TensorView& indices,
                                                  const TensorView& req_id, const TensorView& block_table,
                                                  const TensorView& local_slots, const ContextParallelLayout& layout) {
  check_devices(
      check,
      {{"indices", &indices}, {"req_id", &req_id}, {"block_table", &block_table}, {"local_slots", &local_slots}});
  check_layout(check, layout);
  check_rank(check, "indices", indices, 2, "(R, K)");
  const std::int64_t rows = indices.shape[0];
  const std::int64_t topk = indices.shape[1];
  check_int32_rows(check, "indices", indices, rows, topk, "(R, K)");
  check.require(saturating_mul(rows, topk) < kMaxItems, ErrorCode::kShape, "indices", "R x K must be < 2^31",
                shape_string(indices));
  const std::string rows_text = "(R,) with R = indices rows = " + str(rows);
  const std::int32_t* req = check_int32_vector(check, "req_id", req_id, rows, rows_text);
  check_rank(check, "block_table", block_table, 2, "(num_reqs, max_blocks)");
  check_int32_rows(check, "block_table", block_table, block_table.shape[0], -1, "(num_reqs, max_blocks)");
  const std::string out_shape = "(R, K) = (" + str(rows) + ", " + str(topk) + ")";
  check_int32_rows(check, "local_slots", local_slots, rows, topk, out_shape);
  const Named written{"local_slots", &local_slots};
  check_disjoint(check, written, {{"indices", &indices}, {"req_id", &req_id}, {"block_table", &block_table}});
  return params::LocalSlotsParams{static_cast<const std::int32_t*>(indices.data),
                                  indices.strides[0],
                                  req,
                                  static_cast<const std::int32_t*>(block_table.data),
                                  block_table.strides[0],
                                  block_table.shape[0],
                                  block_table.shape[1],
                                  static_cast<std::int32_t*>(local_slots.data),
                                  local_slots.strides[0],
                                  rows,
                                  topk,
                                  layout.world_size,
                                  layout.rank,
                                  layout.interleave,
                                  layout.block_size};
}

params::StackedMergeParams validate_stacked_merge(const Check& check, const TensorView& outs, const TensorView& lses,
                                                  const TensorView& out, const TensorView& lse) {
  check_devices(check, {{"outs", &outs}, {"lses", &lses}, {"out", &out}, {"lse", &lse}});
  check.require(outs.dtype == DType::kBFloat16 || outs.dtype == DType::kFloat32, ErrorCode::kDtype, "outs",
                "dtype must be bf16 or float32", dtype_name(outs.dtype));
  check_dtype(check, "out", out, outs.dtype);
  check_dtype(check, "lses", lses, DType::kFloat32);
  check_dtype(check, "lse", lse, DType::kFloat32);
  check_rank(check, "outs", outs, 4, "(N, R, H, D)");
  const std::int64_t parts = outs.shape[0];
  const std::int64_t rows = outs.shape[1];
  const std::int64_t heads = outs.shape[2];
  const std::int64_t width = outs.shape[3];
  check.require(parts >= 1 && parts <= params::kMaxMergeParts, ErrorCode::kShape, "outs",
                "N (dim 0) must be in [1, " + str(params::kMaxMergeParts) + "]", shape_string(outs));
  check.require(saturating_mul(rows, heads) < kMaxItems, ErrorCode::kShape, "outs", "R x H must be < 2^31",
                shape_string(outs));
  check_strides_nonnegative(check, "outs", outs);
  check.require(outs.strides[3] == 1 || width <= 1 || is_empty(outs), ErrorCode::kLayout, "outs",
                "must be innermost-contiguous (stride 1)", "stride " + str(outs.strides[3]));
  check_data(check, "outs", outs);
  const std::string lses_shape = "(N, R, H) = (" + str(parts) + ", " + str(rows) + ", " + str(heads) + ")";
  check_rank(check, "lses", lses, 3, lses_shape);
  check.require(lses.shape[0] == parts && lses.shape[1] == rows && lses.shape[2] == heads, ErrorCode::kShape, "lses",
                "shape must be " + lses_shape, shape_string(lses));
  check_strides_nonnegative(check, "lses", lses);
  check_data(check, "lses", lses);
  const std::string out_shape = "(R, H, D) = (" + str(rows) + ", " + str(heads) + ", " + str(width) + ")";
  check_rank(check, "out", out, 3, out_shape);
  check.require(out.shape[0] == rows && out.shape[1] == heads && out.shape[2] == width, ErrorCode::kShape, "out",
                "shape must be " + out_shape, shape_string(out));
  check_strides_nonnegative(check, "out", out);
  check.require(out.strides[2] == 1 || width <= 1 || is_empty(out), ErrorCode::kLayout, "out",
                "must be innermost-contiguous (stride 1)", "stride " + str(out.strides[2]));
  check.require(heads <= 1 || rows == 0 || width == 0 || out.strides[1] >= width, ErrorCode::kLayout, "out",
                "head stride must be >= " + str(width) + " (heads must not overlap)", str(out.strides[1]));
  const std::int64_t row_span = saturating_add(saturating_mul(heads - 1, out.strides[1]), width);
  check.require(rows <= 1 || heads == 0 || width == 0 || out.strides[0] >= row_span, ErrorCode::kLayout, "out",
                "row stride must be >= " + str(row_span) + " (rows must not overlap)", str(out.strides[0]));
  check_data(check, "out", out);
  const std::string lse_shape = "(R, H) = (" + str(rows) + ", " + str(heads) + ")";
  check_rank(check, "lse", lse, 2, lse_shape);
  check.require(lse.shape[0] == rows && lse.shape[1] == heads, ErrorCode::kShape, "lse", "shape must be " + lse_shape,
                shape_string(lse));
  check_strides_nonnegative(check, "lse", lse);
  check.require(heads <= 1 || rows == 0 || lse.strides[1] >= 1, ErrorCode::kLayout, "lse",
                "heads must not overlap (stride >= 1)", str(lse.strides[1]));
  check.require(
      rows <= 1 || heads == 0 || lse.strides[0] >= saturating_add(saturating_mul(heads - 1, lse.strides[1]), 1),
      ErrorCode::kLayout, "lse", "rows must not overlap", "stride " + str(lse.strides[0]));
  check_data(check, "lse", lse);
  // The merge reads every partial of an element before writing it, but a
  // written byte that is also read by another (row, head) would race on CUDA.
  check_disjoint(check, {"out", &out}, {{"outs", &outs}, {"lses", &lses}, {"lse", &lse}});
  check_disjoint(check, {"lse", &lse}, {{"outs", &outs}, {"lses", &lses}});
  return params::StackedMergeParams{
      outs.dtype == DType::kFloat32,
      parts,
      rows,
      heads,
      width,
      outs.data,
      outs.strides[0],
      outs.strides[1],
      outs.strides[2],
      static_cast<const float*>(lses.data),
      lses.strides[0],
      lses.strides[1],
      lses.strides[2],
      params::AttentionState{out.data, out.strides[0], out.strides[1], static_cast<float*>(lse.data), lse.strides[0],
                             lse.strides[1]}};
}

}  // namespace mlakv::api
