// SPDX-License-Identifier: Apache-2.0
// Writers: quantize tokens' latent and RoPE key into records of a paged cache.
// CPU arrays run on the CPU backend; CUDA arrays launch on `stream` without
// synchronizing or allocating (capturable in CUDA graphs).
#pragma once

#include <string_view>

#include "mlakv/formats.h"
#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv {

/// The engine's stock entry point (vLLM's `concat_and_cache_mla`).
/// Token t is written to flat slot slot_mapping[t] when 0 <= slot < num_blocks *
/// block_size; every other slot is skipped. All inputs are validated before
/// the first byte is written; a violation throws mlakv::Error.
///
/// kv_cache_dtype: "auto" (bf16 or fp16 record by input dtype), "fp8",
/// "fp8_e4m3", "fp8_ds_mla" (656 B; 584 B: DeepSeek V4's block-planar page,
/// kv_c [T, 448]), "nvfp4_ds_mla" (432 B), "nvfp4_fp8_ds_mla" (352 B).
/// scale: [1] float32 k_scale; required by "fp8"/"fp8_e4m3", ignored otherwise.
void concat_and_cache_mla(const TensorView& kv_c,          // [>=T, 512] bf16 | fp16
                          const TensorView& k_pe,          // [>=T, 64] or [>=T, 1, 64], kv_c's dtype
                          const TensorView& kv_cache,      // [num_blocks, block_size, record_bytes] uint8
                          const TensorView& slot_mapping,  // [T] or [T, 1] int64
                          std::string_view kv_cache_dtype,
                          const TensorView* scale = nullptr,  // [1] float32, CPU or the tensors' device
                          StreamHandle stream = nullptr);

/// The packaged compact writer: the 368-byte NVFP4 record with an FP8 RoPE
/// ("nvfp4_ds_mla_fp8_rope"), or its per-token-scale variant
/// ("nvfp4_ds_mla_fp8_rope_pts") when per_token_scale is true. scale is
/// accepted for signature parity and not consumed.
void concat_and_cache_nvfp4_mla_fp8_rope(const TensorView& kv_c,          // [>=T, 512] bf16 | fp16
                                         const TensorView& k_pe,          // [>=T, 64], kv_c's dtype
                                         const TensorView& kv_cache,      // [num_blocks, block_size, 368] uint8
                                         const TensorView& slot_mapping,  // [T] int64, contiguous
                                         const TensorView* scale = nullptr, bool per_token_scale = false,
                                         StreamHandle stream = nullptr);

/// Writes records of an explicit format; the two entry points above resolve
/// their arguments to a format and call this. k_pe must be 2-D here.
/// scale: [1] (or 0-d) float32 on the CPU or the tensors' device (then read by
/// the kernel, no synchronization); required by Format::kFp8E4m3, ignored
/// otherwise. A CPU scale, whatever the format, must be a positive normal
/// float32 with 448 * scale finite (FLT_MIN <= scale <= FLT_MAX / 448); 0, -0,
/// negatives, NaN, inf, subnormals and larger values are refused. A device
/// scale is not read on the host and so not checked.
/// Inputs (kv_c, k_pe, slot_mapping, scale) must not share a byte with
/// kv_cache; empty inputs are valid whatever their strides (no-op).
void write_records(Format format,
                   const TensorView& kv_c,          // [>=T, 512] bf16 | fp16
                   const TensorView& k_pe,          // [>=T, 64], kv_c's dtype
                   const TensorView& kv_cache,      // [num_blocks, block_size, record_bytes] uint8
                   const TensorView& slot_mapping,  // [T] int64, contiguous
                   const TensorView* scale = nullptr, StreamHandle stream = nullptr);

}  // namespace mlakv
