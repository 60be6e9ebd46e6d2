// SPDX-License-Identifier: Apache-2.0
// The CPU backend: loops over the shared codecs. It is the bit-exact reference.
#pragma once

#include "params/attention_params.h"
#include "params/context_parallel.h"
#include "params/params.h"
#include "params/prefill_params.h"

namespace mlakv::cpu {

void write_records(const params::WriteParams& params);
void gather_records(const params::GatherParams& params);
void sparse_mla_decode(const params::SparseDecodeParams& params);
/// The decode's reference over every row (a prefill row is a decode row).
void sparse_mla_prefill(const params::SparsePrefillParams& params);
void merge_attention_states(const params::MergeParams& params);
void dcp_local_slots(const params::LocalSlotsParams& params);
void merge_attention_states(const params::StackedMergeParams& params);

}  // namespace mlakv::cpu
