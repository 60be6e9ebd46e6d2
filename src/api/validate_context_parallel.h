// SPDX-License-Identifier: Apache-2.0
// Argument rules of the context-parallel steps (local slots, N-way merge).
#pragma once

#include "api/check.h"
#include "mlakv/context_parallel.h"
#include "params/context_parallel.h"

namespace mlakv::api {

params::LocalSlotsParams validate_dcp_local_slots(const Check& check, const TensorView& indices,
                                                  const TensorView& req_id, const TensorView& block_table,
                                                  const TensorView& local_slots, const ContextParallelLayout& layout);

params::StackedMergeParams validate_stacked_merge(const Check& check, const TensorView& outs, const TensorView& lses,
                                                  const TensorView& out, const TensorView& lse);

}  // namespace mlakv::api
