// SPDX-License-Identifier: Apache-2.0
// Every decoder on arbitrary record bytes: it never crashes and never reads
// outside the record (the record is a heap block of exactly record_bytes, so
// AddressSanitizer reports any read past it), both through the codec and
// through the public reader.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dispatch/visit_codec.h"
#include "fuzz_input.h"
#include "mlakv/mlakv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mlakv::fuzz::FuzzInput in(data, size);
  const mlakv::FormatInfo& info = mlakv::formats()[in.pick(mlakv::formats().size())];
  if (mlakv::codec::is_part_coded(info.format)) return 0;  // the 512 + 64 records only
  const bool fp16_rope = in.take<std::uint8_t>() & 1;
  float k_scale = in.take<float>();
  std::vector<std::uint8_t> record(static_cast<std::size_t>(info.record_bytes));
  for (std::uint8_t& b : record) b = in.take<std::uint8_t>();

  float kv_c[512];
  float k_pe[64];
  const mlakv::codec::DecodeParams params{
      k_scale, fp16_rope ? mlakv::codec::InputDtype::kFp16 : mlakv::codec::InputDtype::kBf16};
  mlakv::codec::visit_codec(info.format, [&]<class Codec>(mlakv::codec::Tag<Codec>) {
    mlakv::codec::decode_record<Codec>(record.data(), params, kv_c, k_pe);
  });

  // The public reader over a one-record cache, slots in and out of range.
  std::vector<std::int64_t> slots = {0, -1, 1, in.take<std::int64_t>()};
  std::vector<float> kv_out(slots.size() * 512);
  std::vector<float> pe_out(slots.size() * 64);
  const mlakv::TensorView scale = mlakv::make_view(&k_scale, mlakv::DType::kFloat32, {1});
  mlakv::GatherOptions options;
  options.scale = &scale;
  options.rope_dtype = fp16_rope ? mlakv::DType::kFloat16 : mlakv::DType::kBFloat16;
  const auto n = static_cast<std::int64_t>(slots.size());
  // A k_scale outside [FLT_MIN, FLT_MAX / 448] (0, negative, NaN, inf, subnormal, huge) must be refused.
  const bool scale_ok = std::isnormal(k_scale) && k_scale > 0.0f && k_scale <= FLT_MAX / 448.0f;
  bool accepted = true;
  try {
    mlakv::gather_records(info.format, mlakv::make_view(record.data(), mlakv::DType::kUInt8, {1, 1, info.record_bytes}),
                          mlakv::make_view(slots.data(), mlakv::DType::kInt64, {n}),
                          mlakv::make_view(kv_out.data(), mlakv::DType::kFloat32, {n, 512}),
                          mlakv::make_view(pe_out.data(), mlakv::DType::kFloat32, {n, 64}), options);
  } catch (const mlakv::Error&) {
    accepted = false;
  }
  if (accepted != scale_ok) std::abort();
  return 0;
}
