// SPDX-License-Identifier: Apache-2.0
// The interface every record codec implements, and the loads they share.
#pragma once

#include <cstdint>

#include "codec/element.h"
#include "format/specs.h"

namespace mlakv::codec {

using format::kLatentDim;
using format::kRopeDim;

/// Per-call values some formats consume.
struct EncodeParams {
  float k_scale = 1.0f;  ///< fp8_e4m3 stores E4M3(v / k_scale)
};

struct DecodeParams {
  float k_scale = 1.0f;                     ///< fp8_e4m3 multiplies back by k_scale
  InputDtype rope_dtype = InputDtype::kBf16;  ///< fp8_ds_mla keeps k_pe's raw bits
};

// A codec is a struct with
//   using Spec = format::Format...;
//   template <InputDtype D> static void encode(const uint16_t* kv_c /*[512]*/,
//       const uint16_t* k_pe /*[64]*/, const EncodeParams&, uint8_t* record);
//   static void decode(const uint8_t* record, const DecodeParams&,
//       float* kv_c /*[512]*/, float* k_pe /*[64]*/);
// encode writes every byte of the record, pads included.

template <InputDtype kDtype, int kN>
MLAKV_HD void load_inputs(const std::uint16_t* bits, float* out) {
MLAKV_UNROLL
  for (int i = 0; i < kN; ++i) out[i] = load_input<kDtype>(bits[i]);
}

MLAKV_HD void zero_bytes(std::uint8_t* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = 0;
}

}  // namespace mlakv::codec
