// SPDX-License-Identifier: Apache-2.0
// The public attention API: validate, then run the backend of the arrays' device.
#include "mlakv/attention.h"

#include "api/dispatch.h"
#include "api/validate.h"
#include "mlakv/checks.h"
#if MLAKV_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace mlakv {

std::size_t sparse_mla_decode_workspace_size(std::int64_t rows, std::int64_t heads, std::int64_t topk, Device device) {
#if MLAKV_WITH_CUDA
  if (device.type == DeviceType::kCuda && rows > 0 && heads > 0 && topk > 0) {
    return static_cast<std::size_t>(cuda::sparse_decode_workspace_bytes(rows, heads, topk, device.index));
  }
#else
  (void)rows;
  (void)heads;
  (void)topk;
  (void)device;
#endif
  return 0;
}

void sparse_mla_decode(Format format, const TensorView& q, const TensorView& kv_cache, const TensorView& indices,
                       const TensorView& out, const TensorView& lse, const SparseDecodeOptions& options,
                       StreamHandle stream) {
  const api::Check check("sparse_mla_decode", format_info(format).id);
  const params::SparseAttentionParams params =
      api::validate_sparse_decode(check, format, q, kv_cache, indices, out, lse, options);
  if (params.rows == 0 || params.heads == 0) return;
  api::run_on_device(check, q.device, stream, MLAKV_BACKENDS(sparse_mla_decode, params));
}

void merge_attention_states(const TensorView& out_a, const TensorView& lse_a, const TensorView& out_b,
                            const TensorView& lse_b, const TensorView& out, const TensorView& lse,
                            StreamHandle stream) {
  const api::Check check("merge_attention_states", "");
  const params::MergeParams params = api::validate_merge(check, out_a, lse_a, out_b, lse_b, out, lse);
  if (params.rows == 0 || params.heads == 0) return;
  api::run_on_device(check, out_a.device, stream, MLAKV_BACKENDS(merge_attention_states, params));
}

void check_sparse_mla_decode(Format format, const TensorView& q, const TensorView& kv_cache, const TensorView& indices,
                             const TensorView& out, const TensorView& lse, const SparseDecodeOptions& options) {
  const api::Check check("sparse_mla_decode", format_info(format).id);
  (void)api::validate_sparse_decode(check, format, q, kv_cache, indices, out, lse, options);
}

void check_merge_attention_states(const TensorView& out_a, const TensorView& lse_a, const TensorView& out_b,
                                  const TensorView& lse_b, const TensorView& out, const TensorView& lse) {
  const api::Check check("merge_attention_states", "");
  (void)api::validate_merge(check, out_a, lse_a, out_b, lse_b, out, lse);
}

}  // namespace mlakv
