// SPDX-License-Identifier: Apache-2.0
// Each op's implementation (Op::run): reads its call's arguments, then runs
// the library call or, when !call.run(), only its checks.
#pragma once

#include <cstdint>

#include "op_call.h"

namespace mlakv::bindings {

std::int64_t run_concat_and_cache_mla(const OpCall& call);
std::int64_t run_concat_and_cache_nvfp4_mla_fp8_rope(const OpCall& call);
std::int64_t run_mla_kv_cache_writer_update(const OpCall& call);
std::int64_t run_gather_records(const OpCall& call);
std::int64_t run_gather_records_out(const OpCall& call);
std::int64_t run_gather_records_paged(const OpCall& call);
std::int64_t run_sparse_mla_decode(const OpCall& call);
std::int64_t run_sparse_mla_prefill(const OpCall& call);
std::int64_t run_merge_attention_states(const OpCall& call);
std::int64_t run_sparse_mla_decode_workspace_size(const OpCall& call);
std::int64_t run_dcp_local_slots(const OpCall& call);
std::int64_t run_merge_attention_states_stacked(const OpCall& call);

}  // namespace mlakv::bindings
