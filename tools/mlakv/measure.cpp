// SPDX-License-Identifier: Apache-2.0
#include "measure.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "mlakv/attention.h"
#include "mlakv/readers.h"
#include "mlakv/writers.h"
#include "mlakv_support/device_buffer.h"
#include "timing.h"

namespace mlakv::tool {
using support::DeviceBuffer;
namespace {

constexpr std::int64_t kBlockSize = 64;
constexpr int kRope = kRopeDim;
constexpr int kKey = kQueryDim;  // the decode's query and key width (512 + 64)
constexpr float kQueryFocus = 15.0f;

// CUDA's own bf16 conversions, as the library's codecs (host rounding maps NaN to 0x7FFF).
float widen_bf16(std::uint16_t bits) { return __bfloat162float(__ushort_as_bfloat16(bits)); }
std::uint16_t round_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

// K distinct tokens of [0, tokens) per row, in random order.
std::vector<std::int32_t> select_tokens(std::int64_t rows, std::int64_t tokens, std::int64_t topk,
                                        std::mt19937_64& rng) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(tokens));
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::int32_t> indices;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::shuffle(all.begin(), all.end(), rng);
    indices.insert(indices.end(), all.begin(), all.begin() + topk);
  }
  return indices;
}

// The bytes a cache of `nope_dims` formats needs per 64-token page: the
// largest padded page among them (each format's view keeps its own stride).
std::int64_t largest_page(int nope_dims) {
  std::int64_t largest = 0;
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims == nope_dims) largest = std::max(largest, page_bytes(info, kBlockSize));
  }
  return largest;
}

}  // namespace

ErrorStats error_stats(const std::vector<float>& ref, const std::vector<float>& got) {
  double err2 = 0.0, ref2 = 0.0, max_abs = 0.0;
  std::int64_t nonfinite = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(ref[i])) {
      ++nonfinite;
      continue;
    }
    const double d = static_cast<double>(got[i]) - ref[i];
    err2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
    max_abs = std::max(max_abs, std::abs(d));
  }
  return {ref2 > 0.0 ? std::sqrt(err2 / ref2) : std::sqrt(err2), max_abs, nonfinite};
}

Queries make_queries(const Activations& bf16, std::int64_t rows, std::int64_t heads, std::int64_t topk,
                     std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x51ED5EEDull);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Queries q{rows, heads, topk, {}, select_tokens(rows, bf16.tokens, topk, rng)};
  const int nope = bf16.nope_dims;
  const int dims = nope + kRope;  // a key: kv_c ++ k_pe
  q.q.resize(static_cast<std::size_t>(rows * heads * dims));
  std::uniform_int_distribution<std::int64_t> pick(0, topk - 1);
  std::vector<float> key(static_cast<std::size_t>(dims));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t token = q.indices[r * topk + pick(rng)];
      double norm2 = 0.0;
      for (int d = 0; d < dims; ++d) {
        key[d] = d < nope ? bf16.kv_c_f32[token * nope + d] : bf16.k_pe_f32[token * kRope + d - nope];
        norm2 += static_cast<double>(key[d]) * key[d];
      }
      const float scale = norm2 > 0.0 ? kQueryFocus / static_cast<float>(std::sqrt(norm2)) : 0.0f;
      for (int d = 0; d < dims; ++d) {
        q.q[(r * heads + h) * dims + d] = round_bf16(scale * key[d] + normal(rng));
      }
    }
  }
  return q;
}

Queries user_queries(const std::vector<float>& values, std::int64_t rows, std::int64_t heads, std::int64_t tokens,
                     std::int64_t topk, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x51ED5EEDull);
  Queries q{rows, heads, topk, std::vector<std::uint16_t>(values.size()), select_tokens(rows, tokens, topk, rng)};
  for (std::size_t i = 0; i < values.size(); ++i) q.q[i] = round_bf16(values[i]);
  return q;
}

struct Measurement::Buffers {
  Device device;
  const Activations& bf16;
  const Activations& fp16;
  Queries queries;
  std::int64_t tokens;
  std::int64_t nope;  // kv_c values per token: 512 or 448
  std::int64_t num_blocks;
  float k_scale = 1.0f;
  DeviceBuffer kv_bf16, pe_bf16, kv_fp16, pe_fp16, slots, cache, kv_out, pe_out, rows, q, indices, out, lse;
  std::vector<float> reference;  // [R, H, 512]: the decode over bf16 records of the bf16 inputs (with queries)

  Buffers(Device d, const Activations& b, const Activations& f, const Queries& qs, const std::vector<std::int64_t>& s)
      : device(d),
        bf16(b),
        fp16(f),
        queries(qs),
        tokens(b.tokens),
        nope(b.nope_dims),
        num_blocks((b.tokens + kBlockSize - 1) / kBlockSize),
        kv_bf16(d, b.kv_c.size() * 2, b.kv_c.data()),
        pe_bf16(d, b.k_pe.size() * 2, b.k_pe.data()),
        kv_fp16(d, f.kv_c.size() * 2, f.kv_c.data()),
        pe_fp16(d, f.k_pe.size() * 2, f.k_pe.data()),
        slots(d, s.size() * sizeof(std::int64_t), s.data()),
        cache(d, static_cast<std::size_t>(num_blocks * largest_page(b.nope_dims))),
        kv_out(d, static_cast<std::size_t>(b.tokens) * b.nope_dims * sizeof(float)),
        pe_out(d, static_cast<std::size_t>(b.tokens) * kRope * sizeof(float)),
        rows(d, static_cast<std::size_t>(b.tokens) * (b.nope_dims + kRope) * 2),
        q(d, qs.q.size() * 2, qs.q.data()),
        indices(d, qs.indices.size() * sizeof(std::int32_t), qs.indices.data()),
        out(d, static_cast<std::size_t>(qs.rows * qs.heads * kValueDim * 2)),
        lse(d, static_cast<std::size_t>(qs.rows * qs.heads * sizeof(float))) {}

  TensorView on(const DeviceBuffer& buffer, TensorView view) const {
    view.data = buffer.data();
    view.device = device;
    return view;
  }

  // [num_blocks, 64, record_bytes] at the format's page stride (block-planar pages: padded).
  TensorView cache_view(Format format) const {
    const FormatInfo& info = format_info(format);
    TensorView view = on(cache, make_view(nullptr, DType::kUInt8, {num_blocks, kBlockSize, info.record_bytes}));
    view.strides[0] = page_bytes(info, kBlockSize);
    return view;
  }

  // fp16 inputs for the record that stores fp16 (its policy), bf16 for every other.
  static bool takes_fp16(Format format) { return format_info(format).policy.input_dtype == DType::kFloat16; }
  const Activations& inputs(Format format) const { return takes_fp16(format) ? fp16 : bf16; }

  void write(Format format) {
    const bool half = takes_fp16(format);
    const DType dtype = half ? DType::kFloat16 : DType::kBFloat16;
    const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
    write_records(format, on(half ? kv_fp16 : kv_bf16, make_view(nullptr, dtype, {tokens, nope})),
                  on(half ? pe_fp16 : pe_bf16, make_view(nullptr, dtype, {tokens, kRope})), cache_view(format),
                  on(slots, make_view(nullptr, DType::kInt64, {tokens})), &scale);
  }

  void read_rows(Format format) {
    const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
    GatherOptions options;
    options.scale = &scale;
    // The engines' rows: kv_c ++ k_pe, [T, 576] (or [T, 512] for the 448 + 64 formats).
    TensorView kv = on(rows, make_view(nullptr, DType::kBFloat16, {tokens, nope}));
    kv.strides[0] = nope + kRope;
    TensorView pe = kv;
    pe.data = static_cast<std::uint8_t*>(rows.data()) + 2 * nope;
    pe.shape[1] = kRope;
    gather_records(format, cache_view(format), on(slots, make_view(nullptr, DType::kInt64, {tokens})), kv, pe, options);
  }

  std::vector<float> attend(Format format) {
    const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
    SparseDecodeOptions options;
    options.decode.scale = &scale;
    const Queries& qs = queries;
    sparse_mla_decode(format, on(q, make_view(nullptr, DType::kBFloat16, {qs.rows, qs.heads, kKey})),
                      cache_view(format), on(indices, make_view(nullptr, DType::kInt32, {qs.rows, qs.topk})),
                      on(out, make_view(nullptr, DType::kBFloat16, {qs.rows, qs.heads, kValueDim})),
                      on(lse, make_view(nullptr, DType::kFloat32, {qs.rows, qs.heads})), options);
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(qs.rows * qs.heads * kValueDim));
    out.copy_to_host(bits.data());
    std::vector<float> values(bits.size());
    std::transform(bits.begin(), bits.end(), values.begin(), widen_bf16);
    return values;
  }
};

Measurement::Measurement(Device device, const Activations& bf16, const Activations& fp16, const Queries& queries) {
  std::vector<std::int64_t> slots(static_cast<std::size_t>(bf16.tokens));
  std::iota(slots.begin(), slots.end(), 0);
  buffers_ = std::make_unique<Buffers>(device, bf16, fp16, queries, slots);
  if (queries.rows == 0) return;  // no sparse-attention check
  buffers_->write(Format::kBf16);
  buffers_->reference = buffers_->attend(Format::kBf16);
}

Measurement::~Measurement() = default;

FormatAccuracy Measurement::accuracy(Format format) {
  Buffers& b = *buffers_;
  b.write(format);
  const TensorView scale = make_view(&b.k_scale, DType::kFloat32, {1});
  GatherOptions options;
  options.scale = &scale;
  options.rope_dtype = Buffers::takes_fp16(format) ? DType::kFloat16 : DType::kBFloat16;
  gather_records(format, b.cache_view(format), b.on(b.slots, make_view(nullptr, DType::kInt64, {b.tokens})),
                 b.on(b.kv_out, make_view(nullptr, DType::kFloat32, {b.tokens, b.nope})),
                 b.on(b.pe_out, make_view(nullptr, DType::kFloat32, {b.tokens, kRope})), options);
  std::vector<float> kv(static_cast<std::size_t>(b.tokens * b.nope));
  std::vector<float> pe(static_cast<std::size_t>(b.tokens) * kRope);
  b.kv_out.copy_to_host(kv.data());
  b.pe_out.copy_to_host(pe.data());
  const Activations& a = b.inputs(format);
  FormatAccuracy accuracy{error_stats(a.kv_c_f32, kv), error_stats(a.k_pe_f32, pe), std::nullopt};
  if (b.queries.rows > 0) accuracy.attention = error_stats(b.reference, b.attend(format));
  return accuracy;
}

FormatSpeed Measurement::speed(Format format, int repeats) {
  Buffers& b = *buffers_;
  const auto tokens = static_cast<double>(b.tokens);
  const double record = format_info(format).record_bytes;
  FormatSpeed s;
  const double row = 2.0 * static_cast<double>(b.nope + kRope);  // a token's 16-bit inputs or bf16 output row
  s.write_bytes = tokens * (row + 8.0 + record);
  s.read_bytes = tokens * (record + 8.0 + row);
  s.write_us = median_us(b.device, repeats, [&] { b.write(format); });
  s.read_us = median_us(b.device, repeats, [&] { b.read_rows(format); });
  if (b.device.type == DeviceType::kCuda) {
    s.write_copy_us = copy_us(b.device, static_cast<std::size_t>(s.write_bytes), repeats);
    s.read_copy_us = copy_us(b.device, static_cast<std::size_t>(s.read_bytes), repeats);
  }
  return s;
}

}  // namespace mlakv::tool
