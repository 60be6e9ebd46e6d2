// SPDX-License-Identifier: Apache-2.0
// The public readers: validate, run the backend of the cache's device.
#include "mlakv/readers.h"

#include "api/dispatch.h"
#include "api/validate.h"
#include "mlakv/checks.h"

namespace mlakv {
namespace {

// Runs validated params on the backend of the cache's device; no rows is a no-op.
void run_gather(const api::Check& check, const params::GatherParams& params, const Device& device,
                StreamHandle stream) {
  if (params.num_rows == 0) return;
  api::run_on_device(check, device, stream, MLAKV_BACKENDS(gather_records, params));
}

}  // namespace

void gather_records(Format format, const TensorView& kv_cache, const TensorView& slots, const TensorView& kv_c_out,
                    const TensorView& k_pe_out, const GatherOptions& options, StreamHandle stream) {
  const api::Check check("gather_records", format_info(format).id);
  run_gather(check, api::validate_gather(check, format, kv_cache, slots, kv_c_out, k_pe_out, options), kv_cache.device,
             stream);
}

void check_gather_records(Format format, const TensorView& kv_cache, const TensorView& slots,
                          const TensorView& kv_c_out, const TensorView& k_pe_out, const GatherOptions& options) {
  const api::Check check("gather_records", format_info(format).id);
  (void)api::validate_gather(check, format, kv_cache, slots, kv_c_out, k_pe_out, options);
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

void check_gather_records_paged(Format format, const TensorView& kv_cache, const TensorView& block_table,
                                const TensorView& seq_lens, const TensorView& cu_seq_lens, const TensorView& kv_c_out,
                                const TensorView& k_pe_out, const GatherOptions& options) {
  const api::Check check("gather_records_paged", format_info(format).id);
  (void)api::validate_gather_paged(check, format, kv_cache, block_table, seq_lens, cu_seq_lens, kv_c_out, k_pe_out,
                                   options);
}

}  // namespace mlakv
