// SPDX-License-Identifier: Apache-2.0
// Readers: decode records back to float32 or bf16 (the prefill path: gather
// and upconvert). CPU arrays run on the CPU backend; CUDA arrays launch on
// `stream` without synchronizing or allocating.
#pragma once

#include "mlakv/formats.h"
#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv {

/// Options that only some formats consult.
struct GatherOptions {
  /// fp8_ds_mla stores k_pe's raw 16-bit values: which type they are.
  DType rope_dtype = DType::kBFloat16;
  /// fp8_e4m3 records hold v / k_scale: the [1] float32 k_scale to multiply
  /// back (CPU, or the cache's device); a CPU value must lie in
  /// [FLT_MIN, FLT_MAX / 448] (see write_records). Outputs must not share a
  /// byte with the cache, the slots, the scale or each other.
  const TensorView* scale = nullptr;
};

/// Decodes the records at flat `slots`. A slot outside [0, num_blocks *
/// block_size) (e.g. -1) yields zeros. Outputs are float32 or bf16 (both the
/// same); for one [N, 576] buffer pass its [:, :512] and [:, 512:] views.
void gather_records(Format format,
                    const TensorView& kv_cache,  // [num_blocks, block_size, record_bytes] uint8
                    const TensorView& slots,     // [N] int64, contiguous
                    const TensorView& kv_c_out,  // [N, 512] float32 | bf16, written
                    const TensorView& k_pe_out,  // [N, 64], kv_c_out's dtype, written
                    const GatherOptions& options = {}, StreamHandle stream = nullptr);

/// Decodes whole sequences through their block tables: output row
/// cu_seq_lens[b] + i, for i < seq_lens[b], is position i of sequence b, i.e.
/// slot block_table[b][i / block_size] * block_size + i % block_size. Rows no
/// sequence covers, and positions whose block id is out of range, are zeros.
void gather_records_paged(Format format,
                          const TensorView& kv_cache,     // [num_blocks, block_size, record_bytes] uint8
                          const TensorView& block_table,  // [B, max_blocks] int32
                          const TensorView& seq_lens,     // [B] int32
                          const TensorView& cu_seq_lens,  // [B + 1] int32, row offsets
                          const TensorView& kv_c_out,     // [rows, 512] float32 | bf16, written
                          const TensorView& k_pe_out,     // [rows, 64], written
                          const GatherOptions& options = {}, StreamHandle stream = nullptr);

}  // namespace mlakv
