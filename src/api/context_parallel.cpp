// SPDX-License-Identifier: Apache-2.0
// The public context-parallel steps: validate, then run the backend of the arrays' device.
#include "mlakv/context_parallel.h"

#include "api/dispatch.h"
#include "api/validate_context_parallel.h"
#include "mlakv/checks.h"

namespace mlakv {

void dcp_local_slots(const TensorView& indices, const TensorView& req_id, const TensorView& block_table,
                     const TensorView& local_slots, const ContextParallelLayout& layout, StreamHandle stream) {
  const api::Check check("dcp_local_slots", "");
  const params::LocalSlotsParams params =
      api::validate_dcp_local_slots(check, indices, req_id, block_table, local_slots, layout);
  if (params.rows == 0 || params.topk == 0) return;
  api::run_on_device(check, indices.device, stream, MLAKV_BACKENDS(dcp_local_slots, params));
}

void merge_attention_states(const TensorView& outs, const TensorView& lses, const TensorView& out,
                            const TensorView& lse, StreamHandle stream) {
  const api::Check check("merge_attention_states", "");
  const params::StackedMergeParams params = api::validate_stacked_merge(check, outs, lses, out, lse);
  if (params.rows == 0 || params.heads == 0) return;
  api::run_on_device(check, outs.device, stream, MLAKV_BACKENDS(merge_attention_states, params));
}

void check_dcp_local_slots(const TensorView& indices, const TensorView& req_id, const TensorView& block_table,
                           const TensorView& local_slots, const ContextParallelLayout& layout) {
  const api::Check check("dcp_local_slots", "");
  (void)api::validate_dcp_local_slots(check, indices, req_id, block_table, local_slots, layout);
}

void check_merge_attention_states(const TensorView& outs, const TensorView& lses, const TensorView& out,
                                  const TensorView& lse) {
  const api::Check check("merge_attention_states", "");
  (void)api::validate_stacked_merge(check, outs, lses, out, lse);
}

}  // namespace mlakv
