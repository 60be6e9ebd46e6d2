// SPDX-License-Identifier: Apache-2.0
// What the writers do with slots, strides, views and entry points, in every format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::TensorView;
using namespace mlakv::test;

DType input_dtype_for(Format f) { return f == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16; }

struct Inputs {
  std::int64_t tokens;
  DType dtype;
  std::vector<std::uint16_t> kv_c, k_pe;
  Inputs(std::int64_t t, DType d, std::uint64_t seed, bool specials = false)
      : tokens(t),
        dtype(d),
        kv_c(random_inputs(static_cast<std::size_t>(t) * 512, d, seed, specials)),
        k_pe(random_inputs(static_cast<std::size_t>(t) * 64, d, seed + 1, specials)) {}
  TensorView kv_c_view() { return mlakv::make_view(kv_c.data(), dtype, {tokens, 512}); }
  TensorView k_pe_view() { return mlakv::make_view(k_pe.data(), dtype, {tokens, 64}); }
  // Token t alone, as the reference record for that token.
  std::vector<std::uint8_t> reference_record(Format f, std::int64_t t, float k_scale = 1.0f) const {
    std::vector<std::uint16_t> one_kv(kv_c.begin() + t * 512, kv_c.begin() + (t + 1) * 512);
    std::vector<std::uint16_t> one_pe(k_pe.begin() + t * 64, k_pe.begin() + (t + 1) * 64);
    return write_tokens(f, dtype, one_kv, one_pe, k_scale);
  }
};

float g_one = 1.0f;
const TensorView kScaleOne = mlakv::make_view(&g_one, DType::kFloat32, {1});

TEST(writer, writes_only_in_range_slots_and_leaves_guard_pages_untouched) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the DeepSeek V4 family: fp8_ds_mla_v4_test, v41_records_test
    SCOPED_TRACE(std::string(info.id));
    constexpr std::int64_t kBlocks = 3, kBlockSize = 64, kCapacity = kBlocks * kBlockSize;
    // Larger-than-dense strides: 16 spare bytes per slot, 32 per block.
    const std::int64_t stride_slot = info.record_bytes + 16;
    GuardedCache cache(kBlocks, kBlockSize, stride_slot, kBlockSize * stride_slot + 32);
    std::vector<std::int64_t> slots = {0, -1, kCapacity, 65, (std::int64_t{1} << 40) + 17, 130};
    Inputs in(static_cast<std::int64_t>(slots.size()), input_dtype_for(info.format), 7, /*specials=*/true);
    mlakv::write_records(info.format, in.kv_c_view(), in.k_pe_view(), cache.view(info.record_bytes),
                         mlakv::make_view(slots.data(), DType::kInt64, {6}), &kScaleOne);
    // Exactly the bytes of the records of slots 0, 65 and 130 may differ.
    for (std::size_t i : cache.changed_bytes()) {
      bool inside = false;
      for (std::int64_t s : {0, 65, 130}) {
        inside |= i >= cache.record_offset(s) && i < cache.record_offset(s) + info.record_bytes;
      }
      ASSERT_TRUE(inside) << "byte " << i << " outside the addressed records changed";
    }
    for (const auto& [token, slot] : {std::pair{0, 0}, std::pair{3, 65}, std::pair{5, 130}}) {
      const std::vector<std::uint8_t> record(
          cache.storage().begin() + static_cast<std::ptrdiff_t>(cache.record_offset(slot)),
          cache.storage().begin() + static_cast<std::ptrdiff_t>(cache.record_offset(slot) + info.record_bytes));
      EXPECT_EQ(first_difference(record, in.reference_record(info.format, token), info.record_bytes), "")
          << "slot " << slot;
    }
  }
}

// ABI.md: a NaN input never raises an amax. A signalling NaN must behave as a
// quiet one (x86's fmaxf would let it through).
TEST(writer, signalling_nan_inputs_give_the_bytes_of_quiet_nan_inputs) {
  for (const Format f : {Format::kFp8E4m3, Format::kFp8DsMla, Format::kNvfp4DsMla, Format::kNvfp4DsMlaFp8Rope,
                         Format::kNvfp4DsMlaFp8RopePts, Format::kNvfp4Fp8DsMla}) {
    // Formats that store k_pe verbatim keep the NaN's bits there: only the latent gets NaNs.
    const bool rope_quantized = f != Format::kFp8DsMla && f != Format::kNvfp4DsMla;
    for (const DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      const std::uint16_t snan = dtype == DType::kBFloat16 ? 0x7F81 : 0x7C01;
      const std::uint16_t qnan = dtype == DType::kBFloat16 ? 0x7FC1 : 0x7E01;
      Inputs in(2, dtype, 77);
      auto signalling = in;
      for (int i : {3, 17, 130, 511, 600}) signalling.kv_c[i] = snan;
      if (rope_quantized) signalling.k_pe[5] = signalling.k_pe[70] = snan;
      auto quiet = signalling;
      for (auto* v : {&quiet.kv_c, &quiet.k_pe}) std::replace(v->begin(), v->end(), snan, qnan);
      EXPECT_EQ(write_tokens(f, dtype, signalling.kv_c, signalling.k_pe),
                write_tokens(f, dtype, quiet.kv_c, quiet.k_pe))
          << mlakv::format_info(f).id << " " << mlakv::dtype_name(dtype);
    }
  }
}

TEST(writer, empty_slot_mapping_changes_nothing) {
  GuardedCache cache(2, 16, 368, 16 * 368);
  Inputs in(0, DType::kBFloat16, 1);
  std::int64_t no_slot = 0;
  mlakv::concat_and_cache_nvfp4_mla_fp8_rope(in.kv_c_view(), in.k_pe_view(), cache.view(368),
                                             mlakv::make_view(&no_slot, DType::kInt64, {0}));
  EXPECT_TRUE(cache.unchanged());
}

TEST(writer, uses_only_the_first_t_rows_and_honours_row_strides) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the DeepSeek V4 family: fp8_ds_mla_v4_test, v41_records_test
    SCOPED_TRACE(std::string(info.id));
    const DType dtype = input_dtype_for(info.format);
    Inputs dense(4, dtype, 11);
    // The same 4 tokens in buffers with padded rows, plus 2 extra rows that must not be read.
    constexpr std::int64_t kKvStride = 520, kPeStride = 72;
    std::vector<std::uint16_t> kv_c(6 * kKvStride, 0x7FC0), k_pe(6 * kPeStride, 0x7FC0);
    for (int t = 0; t < 4; ++t) {
      std::memcpy(&kv_c[t * kKvStride], &dense.kv_c[t * 512], 512 * 2);
      std::memcpy(&k_pe[t * kPeStride], &dense.k_pe[t * 64], 64 * 2);
    }
    TensorView kv_view = mlakv::make_view(kv_c.data(), dtype, {6, 512});
    kv_view.strides[0] = kKvStride;
    TensorView pe_view = mlakv::make_view(k_pe.data(), dtype, {6, 64});
    pe_view.strides[0] = kPeStride;
    std::vector<std::uint8_t> cache(4 * info.record_bytes);
    std::vector<std::int64_t> slots = {0, 1, 2, 3};
    mlakv::write_records(info.format, kv_view, pe_view,
                         mlakv::make_view(cache.data(), DType::kUInt8, {1, 4, info.record_bytes}),
                         mlakv::make_view(slots.data(), DType::kInt64, {4}), &kScaleOne);
    EXPECT_EQ(first_difference(cache, write_tokens(info.format, dtype, dense.kv_c, dense.k_pe), info.record_bytes), "");
  }
}

TEST(writer, many_tokens_in_parallel_match_token_by_token_writes) {
  for (const Format f : {Format::kFp8DsMla, Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts}) {
    Inputs in(3000, DType::kBFloat16, 5, /*specials=*/true);
    const auto all = write_tokens(f, in.dtype, in.kv_c, in.k_pe);
    const int bytes = mlakv::format_info(f).record_bytes;
    for (std::int64_t t = 0; t < in.tokens; t += 373) {
      const std::vector<std::uint8_t> record(all.begin() + t * bytes, all.begin() + (t + 1) * bytes);
      ASSERT_EQ(first_difference(record, in.reference_record(f, t), bytes), "") << "token " << t;
    }
    EXPECT_EQ(all, write_tokens(f, in.dtype, in.kv_c, in.k_pe)) << "a second run must give the same bytes";
  }
}

void stock_write(Inputs& in, TensorView k_pe, TensorView slots, std::vector<std::uint8_t>& cache, const char* dtype,
                 int record_bytes, const TensorView* scale = &kScaleOne) {
  mlakv::concat_and_cache_mla(in.kv_c_view(), k_pe,
                              mlakv::make_view(cache.data(), DType::kUInt8, {1, in.tokens, record_bytes}), slots, dtype,
                              scale);
}

TEST(concat_and_cache_mla, squeezes_k_pe_view_and_flattens_slot_column) {
  Inputs in(8, DType::kBFloat16, 3);
  std::vector<std::int64_t> slots = {7, 6, 5, 4, 3, 2, 1, 0};
  std::vector<std::uint8_t> flat(8 * 656), viewed(8 * 656);
  stock_write(in, in.k_pe_view(), mlakv::make_view(slots.data(), DType::kInt64, {8}), flat, "fp8_ds_mla", 656);
  stock_write(in, mlakv::make_view(in.k_pe.data(), DType::kBFloat16, {8, 1, 64}),
              mlakv::make_view(slots.data(), DType::kInt64, {8, 1}), viewed, "fp8_ds_mla", 656);
  EXPECT_EQ(flat, viewed);
  EXPECT_EQ(first_difference(std::vector<std::uint8_t>(flat.begin(), flat.begin() + 656),
                             in.reference_record(Format::kFp8DsMla, 7), 656),
            "");
}

TEST(concat_and_cache_nvfp4_mla_fp8_rope, takes_the_engines_k_pe_view_and_slot_column) {
  Inputs in(8, DType::kBFloat16, 4);
  std::vector<std::int64_t> slots = {7, 6, 5, 4, 3, 2, 1, 0};
  std::vector<std::uint8_t> flat(8 * 368), viewed(8 * 368);
  mlakv::concat_and_cache_nvfp4_mla_fp8_rope(in.kv_c_view(), in.k_pe_view(),
                                             mlakv::make_view(flat.data(), DType::kUInt8, {1, 8, 368}),
                                             mlakv::make_view(slots.data(), DType::kInt64, {8}));
  mlakv::concat_and_cache_nvfp4_mla_fp8_rope(in.kv_c_view(),
                                             mlakv::make_view(in.k_pe.data(), DType::kBFloat16, {8, 1, 64}),
                                             mlakv::make_view(viewed.data(), DType::kUInt8, {1, 8, 368}),
                                             mlakv::make_view(slots.data(), DType::kInt64, {8, 1}));
  EXPECT_EQ(flat, viewed);
}

// vLLM allocates the `auto` cache as [num_blocks, block_size, 576] in the model's
// dtype and fp8 caches as uint8 (or a float8 type): the same bytes either way.
TEST(concat_and_cache_mla, takes_a_16_bit_typed_cache_as_its_bytes) {
  Inputs in(8, DType::kBFloat16, 5);
  std::vector<std::int64_t> slots = {7, 6, 5, 4, 3, 2, 1, 0};
  const TensorView slot_view = mlakv::make_view(slots.data(), DType::kInt64, {8});
  std::vector<std::uint8_t> bytes(8 * 1152);
  std::vector<std::uint16_t> typed(8 * 576);
  mlakv::concat_and_cache_mla(in.kv_c_view(), in.k_pe_view(),
                              mlakv::make_view(bytes.data(), DType::kUInt8, {1, 8, 1152}), slot_view, "auto");
  mlakv::concat_and_cache_mla(in.kv_c_view(), in.k_pe_view(),
                              mlakv::make_view(typed.data(), DType::kBFloat16, {1, 8, 576}), slot_view, "auto");
  EXPECT_EQ(std::memcmp(bytes.data(), typed.data(), bytes.size()), 0);
  std::vector<std::int8_t> fp8_bytes(8 * 576);
  std::vector<std::uint8_t> fp8_want(8 * 576);
  mlakv::concat_and_cache_mla(in.kv_c_view(), in.k_pe_view(),
                              mlakv::make_view(fp8_want.data(), DType::kUInt8, {1, 8, 576}), slot_view, "fp8",
                              &kScaleOne);
  mlakv::concat_and_cache_mla(in.kv_c_view(), in.k_pe_view(),
                              mlakv::make_view(fp8_bytes.data(), DType::kInt8, {1, 8, 576}), slot_view, "fp8",
                              &kScaleOne);
  EXPECT_EQ(std::memcmp(fp8_want.data(), fp8_bytes.data(), fp8_want.size()), 0);
}

TEST(concat_and_cache_mla, refuses_a_typed_cache_whose_last_dim_is_strided) {
  Inputs in(2, DType::kBFloat16, 6);
  std::vector<std::int64_t> slots = {0, 1};
  std::vector<std::uint16_t> typed(2 * 576 * 2);
  TensorView cache = mlakv::make_view(typed.data(), DType::kBFloat16, {1, 2, 576});
  cache.strides[2] = 2;
  cache.strides[1] = 1152;
  EXPECT_THROW(mlakv::concat_and_cache_mla(in.kv_c_view(), in.k_pe_view(), cache,
                                           mlakv::make_view(slots.data(), DType::kInt64, {2}), "auto"),
               mlakv::Error);
}

TEST(concat_and_cache_mla, engine_strings_select_their_records) {
  const std::pair<const char*, Format> cases[] = {{"fp8", Format::kFp8E4m3},
                                                  {"fp8_e4m3", Format::kFp8E4m3},
                                                  {"fp8_ds_mla", Format::kFp8DsMla},
                                                  {"nvfp4_ds_mla", Format::kNvfp4DsMla},
                                                  {"nvfp4_ds_mla", Format::kNvfp4Fp8DsMla},  // a 352-byte cache
                                                  {"nvfp4_fp8_ds_mla", Format::kNvfp4Fp8DsMla},
                                                  {"nvfp4_ds_mla_fp8_rope", Format::kNvfp4DsMlaFp8Rope},
                                                  {"nvfp4_ds_mla_fp8_rope_pts", Format::kNvfp4DsMlaFp8RopePts}};
  float k_scale = 0.25f;
  const TensorView scale = mlakv::make_view(&k_scale, DType::kFloat32, {1});
  for (const auto& [name, format] : cases) {
    Inputs in(3, DType::kBFloat16, 9);
    const int bytes = mlakv::format_info(format).record_bytes;
    std::vector<std::uint8_t> cache(3 * bytes);
    std::vector<std::int64_t> slots = {0, 1, 2};
    stock_write(in, in.k_pe_view(), mlakv::make_view(slots.data(), DType::kInt64, {3}), cache, name, bytes, &scale);
    EXPECT_EQ(first_difference(cache, write_tokens(format, in.dtype, in.kv_c, in.k_pe, k_scale), bytes), "") << name;
  }
}

TEST(concat_and_cache_mla, nvfp4_ds_mla_cache_of_neither_width_names_the_records_before_writing) {
  Inputs in(2, DType::kBFloat16, 5);
  std::vector<std::uint8_t> cache(2 * 368, 0xAB);
  std::vector<std::int64_t> slots = {0, 1};
  try {
    stock_write(in, in.k_pe_view(), mlakv::make_view(slots.data(), DType::kInt64, {2}), cache, "nvfp4_ds_mla", 368);
    ADD_FAILURE() << "a 368-byte cache under nvfp4_ds_mla without fp8_rope was written";
  } catch (const mlakv::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "mlakv::concat_and_cache_mla(nvfp4_ds_mla): kv_cache: record bytes must be those of one of the records "
              "kv_cache_dtype 'nvfp4_ds_mla' names here: nvfp4_ds_mla (432 B, B12X backend, KV_FP8_ROPE=0), "
              "nvfp4_fp8_ds_mla (352 B, upstream vLLM), fp8_ds_mla_v41_planar (528 B, vLLM, DeepSeek V4.1 "
              "sliding-window cache), nvfp4_ds_mla_v41_planar (288 B, vLLM, DeepSeek V4.1 compressed cache), got 368");
  }
  EXPECT_EQ(cache, std::vector<std::uint8_t>(2 * 368, 0xAB));
}

TEST(concat_and_cache_mla, auto_picks_the_record_of_the_input_dtype) {
  for (const auto& [dtype, format] :
       {std::pair{DType::kBFloat16, Format::kBf16}, std::pair{DType::kFloat16, Format::kFp16}}) {
    Inputs in(2, dtype, 4);
    std::vector<std::uint8_t> cache(2 * 1152);
    std::vector<std::int64_t> slots = {0, 1};
    stock_write(in, in.k_pe_view(), mlakv::make_view(slots.data(), DType::kInt64, {2}), cache, "auto", 1152, nullptr);
    EXPECT_EQ(cache, write_tokens(format, dtype, in.kv_c, in.k_pe));
  }
}

TEST(concat_and_cache_nvfp4_mla_fp8_rope, per_token_scale_selects_the_pts_record) {
  Inputs in(16, DType::kBFloat16, 21);
  std::vector<std::int64_t> slots(16);
  for (int i = 0; i < 16; ++i) slots[i] = i;
  std::vector<std::uint8_t> fixed(16 * 368), pts(16 * 368);
  for (auto* cache : {&fixed, &pts}) {
    mlakv::concat_and_cache_nvfp4_mla_fp8_rope(in.kv_c_view(), in.k_pe_view(),
                                               mlakv::make_view(cache->data(), DType::kUInt8, {1, 16, 368}),
                                               mlakv::make_view(slots.data(), DType::kInt64, {16}), nullptr,
                                               /*per_token_scale=*/cache == &pts);
  }
  EXPECT_EQ(fixed, write_tokens(Format::kNvfp4DsMlaFp8Rope, in.dtype, in.kv_c, in.k_pe));
  EXPECT_EQ(pts, write_tokens(Format::kNvfp4DsMlaFp8RopePts, in.dtype, in.kv_c, in.k_pe));
  for (int t = 0; t < 16; ++t) {
    const std::uint8_t* a = fixed.data() + t * 368;
    const std::uint8_t* b = pts.data() + t * 368;
    // Same RoPE field and scale; the static record has zeros where pts keeps st.
    EXPECT_EQ(std::memcmp(a + 288, b + 288, 4), 0);
    EXPECT_EQ(std::memcmp(a + 304, b + 304, 64), 0);
    EXPECT_EQ(f32_bits(0.0f), a[292] | a[293] << 8 | a[294] << 16 | static_cast<std::uint32_t>(a[295]) << 24);
    EXPECT_NE(std::memcmp(a + 292, b + 292, 4), 0) << "token " << t;
    EXPECT_NE(std::memcmp(a + 256, b + 256, 32), 0) << "group scale bytes, token " << t;
  }
}

TEST(gather_records, decodes_written_records_and_zeros_out_of_range_slots) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the DeepSeek V4 family: fp8_ds_mla_v4_test, v41_records_test
    SCOPED_TRACE(std::string(info.id));
    const DType dtype = input_dtype_for(info.format);
    Inputs in(4, dtype, 13);
    auto cache = write_tokens(info.format, dtype, in.kv_c, in.k_pe);
    std::vector<std::int64_t> slots = {2, -1, 4, (std::int64_t{1} << 40) + 1, 0};
    std::vector<float> kv_out(5 * 512, 9.0f), pe_out(5 * 64, 9.0f);
    mlakv::GatherOptions options;
    options.scale = &kScaleOne;
    options.rope_dtype = dtype;
    mlakv::gather_records(info.format, mlakv::make_view(cache.data(), DType::kUInt8, {1, 4, info.record_bytes}),
                          mlakv::make_view(slots.data(), DType::kInt64, {5}),
                          mlakv::make_view(kv_out.data(), DType::kFloat32, {5, 512}),
                          mlakv::make_view(pe_out.data(), DType::kFloat32, {5, 64}), options);
    for (int n : {1, 2, 3}) {
      for (int i = 0; i < 512; ++i) ASSERT_EQ(f32_bits(kv_out[n * 512 + i]), 0u) << "row " << n;
      for (int i = 0; i < 64; ++i) ASSERT_EQ(f32_bits(pe_out[n * 64 + i]), 0u) << "row " << n;
    }
    // Rows 0 and 4 decode slots 2 and 0; lossless formats give the inputs back exactly.
    if (info.format == Format::kBf16 || info.format == Format::kFp16) {
      for (int i = 0; i < 512; ++i) {
        const float want = dtype == DType::kBFloat16
                               ? mlakv::codec::load_input<mlakv::codec::InputDtype::kBf16>(in.kv_c[2 * 512 + i])
                               : mlakv::codec::load_input<mlakv::codec::InputDtype::kFp16>(in.kv_c[2 * 512 + i]);
        ASSERT_EQ(kv_out[i], want) << i;
      }
    }
  }
}

}  // namespace
