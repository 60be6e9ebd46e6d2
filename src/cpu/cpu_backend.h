// SPDX-License-Identifier: Apache-2.0
// The CPU backend: loops over the shared codecs. It is the bit-exact reference.
#pragma once

#include "kernels/attention_params.h"
#include "kernels/context_parallel.h"
#include "kernels/params.h"

namespace mlakv::cpu {

void write_records(const kernels::WriteParams& params);
void gather_records(const kernels::GatherParams& params);
void sparse_mla_decode(const kernels::SparseDecodeParams& params);
void merge_attention_states(const kernels::MergeParams& params);
void dcp_local_slots(const kernels::LocalSlotsParams& params);
void merge_attention_states(const kernels::StackedMergeParams& params);

}  // namespace mlakv::cpu
