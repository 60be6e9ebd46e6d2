// SPDX-License-Identifier: Apache-2.0
// CPU reader: decodes the record of each output row; rows without a valid slot are zeros.
#include "cpu/cpu_backend.h"
#include "cpu/parallel_for.h"
#include "dispatch/visit_codec.h"

namespace mlakv::cpu {
namespace {

template <class Out>
void store_row(const float* values, int n, Out* out) {
  for (int i = 0; i < n; ++i) {
    if constexpr (sizeof(Out) == sizeof(float)) {
      out[i] = codec::canonical_nan(values[i]);
    } else {
      out[i] = codec::encode_bf16(values[i]);
    }
  }
}

// The DeepSeek V4 family: the token's data row and scale row, decoded together.
template <class Out, class Codec>
void gather_rows(const params::GatherParams& p) {
  parallel_for(p.num_rows, [&p](std::int64_t row) {
    float nope[Codec::kNope] = {};
    float rope[Codec::kRope] = {};
    const std::int64_t slot = params::row_slot(p.source, p.cache, row);
    if (params::slot_in_range(p.cache, slot)) {
      const params::PagePosition at = params::page_position(p.cache, slot);
      Codec::decode_token(params::field_address(p.cache, at, Codec::kDataRow.region, Codec::kDataRow.offset),
                          params::field_address(p.cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset), nope,
                          rope);
    }
    store_row(nope, Codec::kNope, static_cast<Out*>(p.kv_c_out) + row * p.kv_c_out_stride_elems);
    store_row(rope, Codec::kRope, static_cast<Out*>(p.k_pe_out) + row * p.k_pe_out_stride_elems);
  });
}

template <class Out>
void gather(const params::GatherParams& p) {
  if (codec::is_part_coded(p.format)) {
    codec::visit_part_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) { gather_rows<Out, Codec>(p); });
    return;
  }
  codec::visit_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) {
    parallel_for(p.num_rows, [&p](std::int64_t row) {
      float kv_c[codec::kLatentDim] = {};
      float k_pe[codec::kRopeDim] = {};
      const std::int64_t slot = params::row_slot(p.source, p.cache, row);
      if (params::slot_in_range(p.cache, slot)) {
        codec::decode_record<Codec>(params::record_address(p.cache, slot), p.decode, kv_c, k_pe);
      }
      store_row(kv_c, codec::kLatentDim, static_cast<Out*>(p.kv_c_out) + row * p.kv_c_out_stride_elems);
      store_row(k_pe, codec::kRopeDim, static_cast<Out*>(p.k_pe_out) + row * p.k_pe_out_stride_elems);
    });
  });
}

}  // namespace

void gather_records(const params::GatherParams& p) {
  if (p.out_dtype == params::OutDtype::kFloat32) {
    gather<float>(p);
  } else {
    gather<std::uint16_t>(p);
  }
}

}  // namespace mlakv::cpu
