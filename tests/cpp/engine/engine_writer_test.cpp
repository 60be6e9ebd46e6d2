// SPDX-License-Identifier: Apache-2.0
// The engine seam: bind once, disabled means untouched, fail closed, exact update semantics.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

using mlakv::DType;
using mlakv::TensorView;
using mlakv::engine::MlaKvCacheWriter;
using mlakv::engine::MlaKvCacheWriterConfig;

// What the fake writers saw.
struct Call {
  std::string writer;
  TensorView kv_c, k_pe, kv_cache, slot_mapping;
  std::string kv_cache_dtype;
  const TensorView* scale;
  bool per_token_scale;
};
std::vector<Call> g_calls;

void fake_stock(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache, const TensorView& slots,
                std::string_view dtype, const TensorView* scale, mlakv::StreamHandle) {
  g_calls.push_back({"stock", kv_c, k_pe, kv_cache, slots, std::string(dtype), scale, false});
}

void fake_compact(const TensorView& kv_c, const TensorView& k_pe, const TensorView& kv_cache, const TensorView& slots,
                  const TensorView* scale, bool per_token_scale, mlakv::StreamHandle) {
  g_calls.push_back({"compact", kv_c, k_pe, kv_cache, slots, "", scale, per_token_scale});
}

// Counts how often the compact-writer entry is consulted.
class CountingRegistry : public mlakv::engine::WriterRegistry {
 public:
  explicit CountingRegistry(bool has_compact) : has_compact_(has_compact) {}
  mlakv::engine::StockWriter stock_writer() const override { return &fake_stock; }
  mlakv::engine::CompactWriter compact_writer() const override {
    ++compact_lookups;
    return has_compact_ ? &fake_compact : nullptr;
  }
  mutable int compact_lookups = 0;

 private:
  bool has_compact_;
};

class engine_writer : public ::testing::Test {
 protected:
  void SetUp() override { g_calls.clear(); }
  std::vector<std::uint16_t> kv = std::vector<std::uint16_t>(4 * 512);
  std::vector<std::uint16_t> pe = std::vector<std::uint16_t>(4 * 64);
  std::vector<std::uint8_t> cache = std::vector<std::uint8_t>(2 * 8 * 368);
  std::vector<std::int64_t> slots = {0, 1, 2, 3};
  float scale_value = 1.0f;
  TensorView kv_c = mlakv::make_view(kv.data(), DType::kBFloat16, {4, 512});
  TensorView k_pe3 = mlakv::make_view(pe.data(), DType::kBFloat16, {4, 1, 64});
  TensorView kv_cache = mlakv::make_view(cache.data(), DType::kUInt8, {2, 8, 368});
  TensorView slot_column = mlakv::make_view(slots.data(), DType::kInt64, {4, 1});
  TensorView scale = mlakv::make_view(&scale_value, DType::kFloat32, {1});
};

TEST_F(engine_writer, disabled_construction_never_consults_the_compact_writer) {
  CountingRegistry registry(true);
  MlaKvCacheWriter off({"nvfp4_ds_mla", false}, registry);
  MlaKvCacheWriter unset({"nvfp4_ds_mla"}, registry);
  MlaKvCacheWriter other_cache({"fp8_ds_mla", true}, registry);
  EXPECT_FALSE(off.compact() || unset.compact() || other_cache.compact());
  EXPECT_EQ(registry.compact_lookups, 0);
}

TEST_F(engine_writer, disabled_writer_calls_the_stock_writer_with_the_engine_dtype) {
  CountingRegistry registry(true);
  MlaKvCacheWriter w({"nvfp4_ds_mla", false}, registry);
  w.update(kv_c, k_pe3, kv_cache, slot_column, "nvfp4_ds_mla", &scale);
  ASSERT_EQ(g_calls.size(), 1u);
  EXPECT_EQ(g_calls[0].writer, "stock");
  EXPECT_EQ(g_calls[0].kv_cache_dtype, "nvfp4_ds_mla");
  EXPECT_EQ(g_calls[0].k_pe.ndim, 3);  // the stock writer squeezes for itself
  EXPECT_EQ(g_calls[0].scale, &scale);
  EXPECT_EQ(registry.compact_lookups, 0);
}

TEST_F(engine_writer, the_library_reads_no_environment_the_switch_is_the_callers) {
  CountingRegistry registry(true);
  setenv("KV_FP8_ROPE", "1", 1);  // the engine's policy, read by its adapter, not here
  const bool unset_on = MlaKvCacheWriter({"nvfp4_ds_mla"}, registry).compact();
  unsetenv("KV_FP8_ROPE");
  EXPECT_FALSE(unset_on);
  EXPECT_TRUE(MlaKvCacheWriter({"nvfp4_ds_mla", true}, registry).compact());
}

TEST_F(engine_writer, enabled_writer_binds_once_and_squeezes_and_flattens) {
  CountingRegistry registry(true);
  MlaKvCacheWriter w({"nvfp4_ds_mla", true}, registry);
  ASSERT_TRUE(w.compact());
  w.update(kv_c, k_pe3, kv_cache, slot_column, "nvfp4_ds_mla", &scale);
  w.update(kv_c, k_pe3, kv_cache, slot_column, "nvfp4_ds_mla", &scale);
  EXPECT_EQ(registry.compact_lookups, 1);
  ASSERT_EQ(g_calls.size(), 2u);
  const Call& c = g_calls[0];
  EXPECT_EQ(c.writer, "compact");
  EXPECT_EQ(c.k_pe.ndim, 2);
  EXPECT_EQ(c.k_pe.shape[1], 64);
  EXPECT_EQ(c.k_pe.strides[1], 1);
  EXPECT_EQ(c.slot_mapping.ndim, 1);
  EXPECT_EQ(c.slot_mapping.shape[0], 4);
  EXPECT_EQ(c.kv_c.data, kv_c.data);
  EXPECT_EQ(c.kv_cache.data, kv_cache.data);
  EXPECT_EQ(c.scale, &scale);
  EXPECT_FALSE(c.per_token_scale);
}

TEST_F(engine_writer, per_token_scale_reaches_the_compact_writer) {
  CountingRegistry registry(true);
  MlaKvCacheWriter({"nvfp4_ds_mla", true, true}, registry)
      .update(kv_c, k_pe3, kv_cache, slot_column, "nvfp4_ds_mla", nullptr);
  ASSERT_EQ(g_calls.size(), 1u);
  EXPECT_TRUE(g_calls[0].per_token_scale);
}

TEST_F(engine_writer, wrong_cache_dtype_fails_before_the_writer_runs) {
  CountingRegistry registry(true);
  MlaKvCacheWriter w({"nvfp4_ds_mla", true}, registry);
  try {
    w.update(kv_c, k_pe3, kv_cache, slot_column, "fp8", nullptr);
    FAIL() << "no error";
  } catch (const mlakv::Error& e) {
    EXPECT_EQ(std::string(e.what()), "KV_FP8_ROPE writer reached a non-NVFP4 cache: 'fp8'");
  }
  EXPECT_TRUE(g_calls.empty());
}

TEST_F(engine_writer, empty_cache_is_a_no_op_before_the_dtype_check) {
  CountingRegistry registry(true);
  MlaKvCacheWriter w({"nvfp4_ds_mla", true}, registry);
  TensorView empty = kv_cache;
  empty.shape[0] = 0;
  EXPECT_NO_THROW(w.update(kv_c, k_pe3, empty, slot_column, "fp8", nullptr));
  EXPECT_TRUE(g_calls.empty());
}

TEST_F(engine_writer, missing_compact_writer_fails_closed_with_the_targeted_message) {
  CountingRegistry registry(false);
  try {
    MlaKvCacheWriter w({"nvfp4_ds_mla", true}, registry);
    FAIL() << "no error";
  } catch (const mlakv::Error& e) {
    EXPECT_EQ(std::string(e.what()), std::string(mlakv::engine::kCompactUnavailable));
    EXPECT_EQ(e.code(), mlakv::ErrorCode::kUnsupported);
  }
}

TEST_F(engine_writer, both_call_sites_route_through_the_one_binding) {
  CountingRegistry registry(true);
  MlaKvCacheWriter w({"nvfp4_ds_mla", true}, registry);
  std::vector<std::uint8_t> scratch(16 * 368);
  const TensorView gathered = mlakv::make_view(scratch.data(), DType::kUInt8, {1, 16, 368});
  w.update(kv_c, k_pe3, kv_cache, slot_column, "nvfp4_ds_mla", nullptr);
  w.update_gathered(gathered, kv_c, k_pe3, slot_column, nullptr);
  ASSERT_EQ(g_calls.size(), 2u);
  EXPECT_EQ(g_calls[1].writer, "compact");
  EXPECT_EQ(g_calls[1].kv_cache.data, gathered.data);
  EXPECT_EQ(registry.compact_lookups, 1);
}

TEST_F(engine_writer, default_registry_writes_real_records) {
  auto kv_bits = mlakv::test::random_inputs(4 * 512, DType::kBFloat16, 5, false);
  auto pe_bits = mlakv::test::random_inputs(4 * 64, DType::kBFloat16, 6, false);
  kv_c.data = kv_bits.data();
  k_pe3.data = pe_bits.data();
  MlaKvCacheWriter({"nvfp4_ds_mla", true}).update(kv_c, k_pe3, kv_cache, slot_column, "nvfp4_ds_mla", nullptr);
  const auto want = mlakv::test::write_tokens(mlakv::Format::kNvfp4DsMlaFp8Rope, DType::kBFloat16, kv_bits, pe_bits);
  EXPECT_EQ(mlakv::test::first_difference(std::vector<std::uint8_t>(cache.begin(), cache.begin() + 4 * 368), want, 368),
            "");
}

}  // namespace
