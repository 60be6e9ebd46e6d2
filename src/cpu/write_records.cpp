// SPDX-License-Identifier: Apache-2.0
// CPU writer: one codec call per token whose slot is in range.
#include <cstring>

#include "codec/codecs.h"
#include "cpu/cpu_backend.h"
#include "cpu/parallel_for.h"

namespace mlakv::cpu {

void write_records(const kernels::WriteParams& p) {
  codec::visit_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) {
    codec::visit_input_dtype(p.dtype,
                             [&p]<codec::InputDtype kDtype>(std::integral_constant<codec::InputDtype, kDtype>) {
                               parallel_for(p.num_tokens, [&p](std::int64_t t) {
                                 const std::int64_t slot = p.slot_mapping[t];
                                 if (!kernels::slot_in_range(p.cache, slot)) return;
                                 // Copy the row out so the codec reads aligned 16-bit values whatever the input stride.
                                 std::uint16_t kv_c[codec::kLatentDim];
                                 std::uint16_t k_pe[codec::kRopeDim];
                                 std::memcpy(kv_c, p.kv_c + t * p.stride_kv_c, sizeof(kv_c));
                                 std::memcpy(k_pe, p.k_pe + t * p.stride_k_pe, sizeof(k_pe));
                                 // Encode into a local record and store it once, so a record is never half-written.
                                 alignas(16) std::uint8_t record[Codec::Spec::kRecordBytes];
                                 codec::encode_record<Codec, kDtype>(kv_c, k_pe, p.encode, record);
                                 std::memcpy(kernels::record_address(p.cache, slot), record, sizeof(record));
                               });
                             });
  });
}

}  // namespace mlakv::cpu
