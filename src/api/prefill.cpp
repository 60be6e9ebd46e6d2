// SPDX-License-Identifier: Apache-2.0
// The public sparse prefill: validate, then run the backend of the arrays' device.
#include "mlakv/prefill.h"

#include "api/dispatch.h"
#include "api/validate.h"
#include "mlakv/checks.h"

namespace mlakv {

void sparse_mla_prefill(Format format, const TensorView& q, const TensorView& kv_cache, const TensorView& indices,
                        const TensorView& out, const TensorView& lse, const SparsePrefillOptions& options,
                        StreamHandle stream) {
  const api::Check check("sparse_mla_prefill", format_info(format).id);
  const params::SparsePrefillParams params =
      api::validate_sparse_prefill(check, format, q, kv_cache, indices, out, lse, options);
  if (params.rows == 0 || params.heads == 0) return;
  api::run_on_device(check, q.device, stream, MLAKV_BACKENDS(sparse_mla_prefill, params));
}

void check_sparse_mla_prefill(Format format, const TensorView& q, const TensorView& kv_cache, const TensorView& indices,
                              const TensorView& out, const TensorView& lse, const SparsePrefillOptions& options) {
  const api::Check check("sparse_mla_prefill", format_info(format).id);
  (void)api::validate_sparse_prefill(check, format, q, kv_cache, indices, out, lse, options);
}

}  // namespace mlakv
