// SPDX-License-Identifier: Apache-2.0
// The public writers and readers: resolve the format, validate, run the backend
// of the arrays' device.
#include "mlakv/kv_cache.h"

#include <string>

#include "api/dispatch.h"
#include "api/resolve_format.h"
#include "api/validate.h"
#include "cpu/cpu_backend.h"
#include "mlakv/readers.h"
#if MLAKV_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace mlakv {
namespace {

void run_cpu(const kernels::WriteParams& params) { cpu::write_records(params); }
void run_cpu(const kernels::GatherParams& params) { cpu::gather_records(params); }
#if MLAKV_WITH_CUDA
cudaError_t run_cuda(const kernels::WriteParams& params, StreamHandle stream) {
  return cuda::write_records(params, stream);
}
cudaError_t run_cuda(const kernels::GatherParams& params, StreamHandle stream) {
  return cuda::gather_records(params, stream);
}
#endif

// Runs validated params on the backend of the arrays' device; `items` = 0 is a no-op.
template <class Params>
void run(const api::Check& check, const Params& params, std::int64_t items, const Device& device, StreamHandle stream) {
  if (items == 0) return;
#if MLAKV_WITH_CUDA
  api::run_on_device(
      check, device, [&] { run_cpu(params); }, [&] { return run_cuda(params, stream); });
#else
  (void)stream;
  api::run_on_device(
      check, device, [&] { run_cpu(params); }, [] { return 0; });
#endif
}

void run_write(const api::Check& check, const kernels::WriteParams& params, const Device& device, StreamHandle stream) {
  run(check, params, params.num_tokens, device, stream);
}

void run_gather(const api::Check& check, const kernels::GatherParams& params, const Device& device,
                StreamHandle stream) {
  run(check, params, params.num_rows, device, stream);
}

}  // namespace

void write_records(Format format, const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                   const TensorView& slot_mapping, const TensorView* scale, StreamHandle stream) {
  const api::Check check("write_records", format_info(format).id);
  run_write(check, api::validate_write(check, format, kv_c, k_pe, kv_cache, slot_mapping, scale), kv_c.device, stream);
}

void concat_and_cache_mla(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                          const TensorView& slot_mapping, std::string_view kv_cache_dtype, const TensorView* scale,
                          StreamHandle stream) {
  api::Check check("concat_and_cache_mla", kv_cache_dtype);
  // The record width tells an engine name's records apart (upstream vLLM's
  // nvfp4_ds_mla is 352 bytes, the B12X backend's 432); "auto" follows kv_c.
  const std::int64_t record_bytes = kv_cache.ndim == 3 ? kv_cache.shape[2] : 0;
  const Format format = api::resolve_format(check, "kv_cache", kv_cache_dtype, record_bytes, false, false,
                                            kv_c.dtype == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16);
  check.set_format(format_info(format).id);
  run_write(check,
            api::validate_write(check, format, kv_c, api::squeeze_middle_unit_dim(k_pe), kv_cache,
                                api::flatten_column(slot_mapping), scale),
            kv_c.device, stream);
}

void concat_and_cache_nvfp4_mla_fp8_rope(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache,
                                         const TensorView& slot_mapping, const TensorView* scale, bool per_token_scale,
                                         StreamHandle stream) {
  const Format format = per_token_scale ? Format::kNvfp4DsMlaFp8RopePts : Format::kNvfp4DsMlaFp8Rope;
  const api::Check check("concat_and_cache_nvfp4_mla_fp8_rope", format_info(format).id);
  run_write(check, api::validate_write(check, format, kv_c, k_pe, kv_cache, slot_mapping, scale), kv_c.device, stream);
}

void gather_records(Format format, const TensorView& kv_cache, const TensorView& slots, const TensorView& kv_c_out,
                    const TensorView& k_pe_out, const GatherOptions& options, StreamHandle stream) {
  const api::Check check("gather_records", format_info(format).id);
  run_gather(check, api::validate_gather(check, format, kv_cache, slots, kv_c_out, k_pe_out, options), kv_cache.device,
             stream);
}

void gather_records_paged(Format format, const TensorView& kv_cache, const TensorView& block_table,
                          const TensorView& seq_lens, const TensorView& cu_seq_lens, const TensorView& kv_c_out,
                          const TensorView& k_pe_out, const GatherOptions& options, StreamHandle stream) {
  const api::Check check("gather_records_paged", format_info(format).id);
  run_gather(check,
             api::validate_gather_paged(check, format, kv_cache, block_table, seq_lens, cu_seq_lens, kv_c_out, k_pe_out,
                                        options),
             kv_cache.device, stream);
}

}  // namespace mlakv
