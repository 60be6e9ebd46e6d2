// SPDX-License-Identifier: Apache-2.0
// CPU reader: decodes the record at each slot; out-of-range slots read as zeros.
#include <algorithm>

#include "codec/codecs.h"
#include "cpu/cpu_backend.h"
#include "cpu/parallel_for.h"

namespace mlakv::cpu {

void gather_records(const kernels::GatherParams& p) {
  codec::visit_codec(p.format, [&p]<class Codec>(codec::Tag<Codec>) {
    parallel_for(p.num_slots, [&p](std::int64_t n) {
      float* kv_c = p.kv_c_out + n * p.stride_kv_c_out;
      float* k_pe = p.k_pe_out + n * p.stride_k_pe_out;
      const std::int64_t slot = p.slots[n];
      if (!kernels::slot_in_range(p.cache, slot)) {
        std::fill_n(kv_c, codec::kLatentDim, 0.0f);
        std::fill_n(k_pe, codec::kRopeDim, 0.0f);
        return;
      }
      codec::decode_record<Codec>(kernels::record_address(p.cache, slot), p.decode, kv_c, k_pe);
    });
  });
}

}  // namespace mlakv::cpu
