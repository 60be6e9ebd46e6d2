// SPDX-License-Identifier: Apache-2.0
// CPU writer: one codec call per token whose slot is in range.
#include <cstring>

#include "cpu/cpu_backend.h"
#include "cpu/parallel_for.h"
#include "dispatch/visit_codec.h"

namespace mlakv::cpu {
namespace {

// The DeepSeek V4 family: the token's data row and scale row (in their
// regions of a block-planar page, or both in the token's record), each encoded
// locally and stored once.
template <class Codec, codec::InputDtype kDtype>
void write_rows(const params::WriteParams& p) {
  parallel_for(p.num_tokens, [&p](std::int64_t t) {
    const std::int64_t slot = p.slot_mapping[t];
    if (!params::slot_in_range(p.cache, slot)) return;
    std::uint16_t nope[Codec::kNope];
    std::uint16_t rope[Codec::kRope];
    std::memcpy(nope, p.kv_c + t * p.kv_c_stride_bytes, sizeof(nope));
    std::memcpy(rope, p.k_pe + t * p.k_pe_stride_bytes, sizeof(rope));
    std::uint8_t data_row[Codec::kDataRow.bytes];
    std::uint8_t scale_row[Codec::kScaleRow.bytes];
    Codec::template encode_token<kDtype>(nope, rope, data_row, scale_row);
    const params::PagePosition at = params::page_position(p.cache, slot);
    std::memcpy(params::field_address(p.cache, at, Codec::kDataRow.region, Codec::kDataRow.offset), data_row,
                sizeof(data_row));
    std::memcpy(params::field_address(p.cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset), scale_row,
                sizeof(scale_row));
  });
}

}  // namespace

void write_records(const params::WriteParams& p) {
  if (codec::is_part_coded(p.format)) {
    codec::visit_part_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) {
      codec::visit_input_dtype(p.dtype,
                               [&p]<codec::InputDtype kDtype>(std::integral_constant<codec::InputDtype, kDtype>) {
                                 write_rows<Codec, kDtype>(p);
                               });
    });
    return;
  }
  codec::visit_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) {
    codec::visit_input_dtype(p.dtype,
                             [&p]<codec::InputDtype kDtype>(std::integral_constant<codec::InputDtype, kDtype>) {
                               parallel_for(p.num_tokens, [&p](std::int64_t t) {
                                 const std::int64_t slot = p.slot_mapping[t];
                                 if (!params::slot_in_range(p.cache, slot)) return;
                                 // Copy the row out so the codec reads aligned 16-bit values whatever the input stride.
                                 std::uint16_t kv_c[codec::kLatentDim];
                                 std::uint16_t k_pe[codec::kRopeDim];
                                 std::memcpy(kv_c, p.kv_c + t * p.kv_c_stride_bytes, sizeof(kv_c));
                                 std::memcpy(k_pe, p.k_pe + t * p.k_pe_stride_bytes, sizeof(k_pe));
                                 // Encode into a local record and store it once, so a record is never half-written.
                                 alignas(16) std::uint8_t record[Codec::Spec::kRecordBytes];
                                 codec::encode_record<Codec, kDtype>(kv_c, k_pe, p.encode, record);
                                 std::memcpy(params::record_address(p.cache, slot), record, sizeof(record));
                               });
                             });
  });
}

}  // namespace mlakv::cpu
