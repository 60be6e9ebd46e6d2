// SPDX-License-Identifier: Apache-2.0
// The op table (op_table.h): one entry per public operation.
#include "op_table.h"

#include <map>

#include "mlakv/vocabulary.h"
#include "run_functions.h"

namespace mlakv::bindings {

std::span<const Op> op_table() {
  // The decode's and the prefill's: out [R, H, 512] bf16 and lse [R, H] float32 for q [R, H, d_qk].
  static const std::vector<Output> attention_outputs = {
      {"out", {axis("q", 0), axis("q", 1), constant(kValueDim)}, fixed(DType::kBFloat16)},
      {"lse", {axis("q", 0), axis("q", 1)}, fixed(DType::kFloat32)}};
  static const std::vector<Op> ops = {
      // --- writers (the cache is written in place) ---
      {"concat_and_cache_mla",
       "concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, str kv_cache_dtype, "
       "Tensor? scale=None) -> ()",
       {},
       &run_concat_and_cache_mla},
      {"concat_and_cache_nvfp4_mla_fp8_rope",
       "concat_and_cache_nvfp4_mla_fp8_rope(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, "
       "Tensor? scale=None, bool per_token_scale=False) -> ()",
       {},
       &run_concat_and_cache_nvfp4_mla_fp8_rope},
      // the vLLM adapter's write through the engine seam (mlakv/mla_kv_cache_writer.h) of one configuration
      {"mla_kv_cache_writer_update",
       "mla_kv_cache_writer_update(Tensor kv_c, Tensor k_pe, Tensor(a!) kv_cache, Tensor slot_mapping, "
       "str kv_cache_dtype, Tensor? k_scale, str seam_kv_cache_dtype, bool fp8_rope, bool per_token_scale) -> ()",
       {},
       &run_mla_kv_cache_writer_update},
      // --- readers ---
      {"gather_records",
       "gather_records(str format, Tensor kv_cache, Tensor slots, *, Tensor? scale=None, str rope_dtype=\"bf16\", "
       "ScalarType? dtype=None) -> (Tensor, Tensor)",
       {{"kv_c", {axis("slots", 0), kFormatNope}, kReaderDType},
        {"k_pe", {axis("slots", 0), kFormatRope}, kReaderDType}},
       &run_gather_records},
      // the prefill layout: one [N, nope + rope] buffer the caller owns
      {"gather_records_out",
       "gather_records_out(str format, Tensor kv_cache, Tensor slots, Tensor(a!) out, *, Tensor? scale=None, "
       "str rope_dtype=\"bf16\") -> ()",
       {},
       &run_gather_records_out},
      {"gather_records_paged",
       "gather_records_paged(str format, Tensor kv_cache, Tensor block_table, Tensor seq_lens, Tensor cu_seq_lens, "
       "SymInt num_rows, *, Tensor? scale=None, str rope_dtype=\"bf16\", ScalarType? dtype=None) -> Tensor",
       {{"out", {int_argument("num_rows"), kFormatWidth}, kReaderDType}},
       &run_gather_records_paged},
      // --- attention ---
      {"sparse_mla_decode",
       "sparse_mla_decode(str format, Tensor q, Tensor kv_cache, Tensor indices, Tensor? topk_len=None, "
       "float? sm_scale=None, *, Tensor? scale=None, str rope_dtype=\"bf16\", Tensor(a!)? workspace=None, "
       "Tensor? attn_sink=None, str? extra_format=None, Tensor? extra_kv_cache=None, Tensor? extra_indices=None, "
       "Tensor? extra_topk_len=None) -> (Tensor, Tensor)",
       attention_outputs, &run_sparse_mla_decode},
      // the decode's semantics over many rows that share only the cache (mlakv/prefill.h): no workspace
      {"sparse_mla_prefill",
       "sparse_mla_prefill(str format, Tensor q, Tensor kv_cache, Tensor indices, Tensor? topk_len=None, "
       "float? sm_scale=None, Tensor? attn_sink=None, *, Tensor? scale=None, str rope_dtype=\"bf16\") "
       "-> (Tensor, Tensor)",
       attention_outputs, &run_sparse_mla_prefill},
      {"merge_attention_states",
       "merge_attention_states(Tensor out_a, Tensor lse_a, Tensor out_b, Tensor lse_b) -> (Tensor, Tensor)",
       {{"out", {slice("out_a", 0)}, like("out_a")}, {"lse", {slice("lse_a", 0)}, fixed(DType::kFloat32)}},
       &run_merge_attention_states},
      // a pure function of its arguments (and the device's SM count)
      {"sparse_mla_decode_workspace_size",
       "sparse_mla_decode_workspace_size(int rows, int heads, int topk, Device device) -> int",
       {},
       &run_sparse_mla_decode_workspace_size},
      // --- context parallel (mlakv/context_parallel.h) ---
      {"dcp_local_slots",
       "dcp_local_slots(Tensor indices, Tensor req_id, Tensor block_table, *, int world_size, int rank, "
       "int block_size, int interleave=1) -> Tensor",
       {{"local_slots", {slice("indices", 0)}, fixed(DType::kInt32)}},
       &run_dcp_local_slots},
      // the N-way merge: its own name, as the ops have no overloads
      {"merge_attention_states_stacked",
       "merge_attention_states_stacked(Tensor outs, Tensor lses) -> (Tensor, Tensor)",
       {{"out", {slice("outs", 1)}, like("outs")}, {"lse", {slice("outs", 1, 3)}, fixed(DType::kFloat32)}},
       &run_merge_attention_states_stacked},
  };
  return ops;
}

const std::vector<SchemaArgument>& schema_arguments(const Op& op) {
  static const std::map<const Op*, std::vector<SchemaArgument>> parsed = [] {
    std::map<const Op*, std::vector<SchemaArgument>> all;
    for (const Op& entry : op_table()) all.emplace(&entry, parse_arguments(entry.schema));
    return all;
  }();
  return parsed.at(&op);
}

}  // namespace mlakv::bindings
