// SPDX-License-Identifier: Apache-2.0
// Every encoder on arbitrary 16-bit inputs (NaN, inf, subnormals, -0 included),
// checked against ABI.md's rules after decoding: finite inputs never decode to
// NaN or inf, nor past a format's saturation limit; a NaN input decodes as its
// format says; encoding is deterministic and never writes outside the record
// (an exact-size heap block).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dispatch/visit_codec.h"
#include "fuzz_input.h"
#include "mlakv/mlakv.h"

namespace {

using mlakv::Format;
using mlakv::codec::InputDtype;

void check(bool ok) {
  if (!ok) std::abort();  // the fuzzer reports the input
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mlakv::fuzz::FuzzInput in(data, size);
  const Format format = mlakv::formats()[in.pick(mlakv::formats().size())].format;
  if (mlakv::codec::is_part_coded(format)) return 0;  // the 512 + 64 records only
  const int record_bytes = mlakv::format_info(format).record_bytes;
  InputDtype dtype = in.take<std::uint8_t>() & 1 ? InputDtype::kFp16 : InputDtype::kBf16;
  if (format == Format::kBf16) dtype = InputDtype::kBf16;
  if (format == Format::kFp16) dtype = InputDtype::kFp16;
  float k_scale = std::ldexp(1.0f, static_cast<int>(in.pick(16)) - 8);  // a normal, positive k_scale
  std::uint16_t kv_c[512];
  std::uint16_t k_pe[64];
  for (std::uint16_t& v : kv_c) v = in.take<std::uint16_t>();
  for (std::uint16_t& v : k_pe) v = in.take<std::uint16_t>();

  std::vector<std::uint8_t> first(static_cast<std::size_t>(record_bytes));
  std::vector<std::uint8_t> second(static_cast<std::size_t>(record_bytes));
  float kv_out[512];
  float pe_out[64];
  mlakv::codec::visit_codec(format, [&]<class Codec>(mlakv::codec::Tag<Codec>) {
    mlakv::codec::visit_input_dtype(dtype, [&]<InputDtype kDtype>(std::integral_constant<InputDtype, kDtype>) {
      const mlakv::codec::EncodeParams params{k_scale};
      mlakv::codec::encode_record<Codec, kDtype>(kv_c, k_pe, params, first.data());
      mlakv::codec::encode_record<Codec, kDtype>(kv_c, k_pe, params, second.data());
      mlakv::codec::decode_record<Codec>(first.data(), mlakv::codec::DecodeParams{k_scale, kDtype}, kv_out, pe_out);
    });
  });
  check(first == second);

  const auto widen = [dtype](std::uint16_t b) {
    return dtype == InputDtype::kBf16 ? mlakv::codec::load_input<InputDtype::kBf16>(b)
                                      : mlakv::codec::load_input<InputDtype::kFp16>(b);
  };
  bool any_inf = false;
  bool any_nan = false;
  for (int i = 0; i < 576; ++i) {
    const float x = widen(i < 512 ? kv_c[i] : k_pe[i - 512]);
    any_inf |= std::isinf(x);
    any_nan |= std::isnan(x);
  }
  // Finite inputs: finite outputs, in every format, within each format's saturation limit.
  if (!any_inf && !any_nan) {
    for (float v : kv_out) check(std::isfinite(v));
    for (float v : pe_out) check(std::isfinite(v));
    if (format == Format::kFp8E4m3) {  // E4M3 saturates at 448: |decoded| <= 448 * k_scale
      for (float v : kv_out) check(std::fabs(v) <= 448.0f * k_scale);
      for (float v : pe_out) check(std::fabs(v) <= 448.0f * k_scale);
    }
    if (format == Format::kNvfp4Fp8DsMla) {  // unscaled E4M3 RoPE saturates at +-448
      for (float v : pe_out) check(std::fabs(v) <= 448.0f);
    }
    return 0;
  }
  if (any_inf) return 0;  // an inf makes a scale infinite: documented per format in docs/formats
  // NaN inputs without inf: what each format stores for them (ABI.md).
  for (int i = 0; i < 576; ++i) {
    const bool latent = i < 512;
    const float x = widen(latent ? kv_c[i] : k_pe[i - 512]);
    if (!std::isnan(x)) continue;
    const float y = latent ? kv_out[i] : pe_out[i - 512];
    switch (format) {
      case Format::kBf16:
      case Format::kFp16:
      case Format::kFp8E4m3:
        check(std::isnan(y));
        break;
      case Format::kFp8DsMla:
        check(std::isnan(y));
        break;  // latent E4M3 0x7F; RoPE kept verbatim
      case Format::kNvfp4DsMla:
      case Format::kNvfp4DsMlaFp8Rope:
      case Format::kNvfp4DsMlaFp8RopePts:
        // Latent NaN -> E2M1 0x7 (6 * scale, or 0 where the scale is 0); RoPE: bf16 NaN or E4M3 0x7F (0 if rs == 0).
        if (latent)
          check(std::isfinite(y) && y >= 0.0f);
        else
          check(std::isnan(y) || y == 0.0f);
        break;
      case Format::kNvfp4Fp8DsMla:
        // Latent NaN -> E2M1 0x7 (6 * scale, the scale never 0); RoPE NaN -> E4M3 0x7F.
        if (latent)
          check(std::isfinite(y) && y > 0.0f);
        else
          check(std::isnan(y));
        break;
      case Format::kFp8DsMlaV4:
      case Format::kFp8DsMlaV41:
      case Format::kNvfp4DsMlaV41:
      case Format::kFp8DsMlaV41Planar:
      case Format::kNvfp4DsMlaV41Planar:
        break;  // the DeepSeek V4 family: not reached (returned above)
    }
  }
  return 0;
}
