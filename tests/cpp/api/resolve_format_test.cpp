// SPDX-License-Identifier: Apache-2.0
// resolve_format: every engine name and mlakv id with every record width and
// switch, the ambiguous names, and the errors that name the candidates.
#include <gtest/gtest.h>

#include <string>

#include "mlakv/error.h"
#include "mlakv/formats.h"

namespace {

using mlakv::DType;
using mlakv::Format;
using mlakv::resolve_format;

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const mlakv::Error& e) {
    EXPECT_EQ(e.code(), mlakv::ErrorCode::kValue);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(resolve_format, nvfp4_ds_mla_is_told_apart_by_the_record_width_and_the_switches) {
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 352), Format::kNvfp4Fp8DsMla);  // upstream vLLM
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 432), Format::kNvfp4DsMla);     // B12X, KV_FP8_ROPE=0
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 368, true), Format::kNvfp4DsMlaFp8Rope);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 0, true), Format::kNvfp4DsMlaFp8Rope);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 368, true, true), Format::kNvfp4DsMlaFp8RopePts);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 0, true, true), Format::kNvfp4DsMlaFp8RopePts);
  // per_token_scale picks among the fp8_rope records only.
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 432, false, true), Format::kNvfp4DsMla);
}

TEST(resolve_format, engine_names_with_one_record_resolve_at_its_width) {
  EXPECT_EQ(resolve_format("fp8", 576), Format::kFp8E4m3);
  EXPECT_EQ(resolve_format("fp8_e4m3", 576), Format::kFp8E4m3);
  EXPECT_EQ(resolve_format("fp8_ds_mla", 656), Format::kFp8DsMla);
  // Switches apply only to names with compact variants.
  EXPECT_EQ(resolve_format("fp8_ds_mla", 656, true, true), Format::kFp8DsMla);
}

// vLLM's, FlashMLA's and SGLang's fp8_ds_mla is the 656-byte record for
// DeepSeek V3.2 and the 584-byte block-planar page for DeepSeek V4.
TEST(resolve_format, fp8_ds_mla_of_a_deepseek_v4_cache_is_the_584_byte_page) {
  EXPECT_EQ(resolve_format("fp8_ds_mla", 584), Format::kFp8DsMlaV4);
  EXPECT_EQ(resolve_format("fp8_ds_mla_v4", 0), Format::kFp8DsMlaV4);
  EXPECT_EQ(error_of([] { resolve_format("fp8_ds_mla", 0); }),
            "mlakv::resolve_format(fp8_ds_mla): kv_cache_dtype: names several records, the cache's record width "
            "picks one of fp8_ds_mla (656 B, vLLM / FlashMLA), fp8_ds_mla_v4 (584 B, vLLM / FlashMLA / SGLang, "
            "DeepSeek V4), fp8_ds_mla_v41_planar (528 B, vLLM, DeepSeek V4.1 on SM100), got 'fp8_ds_mla' without a "
            "record width");
}

// vLLM's DeepSeek V4.1 caches (vllm-project/vllm b3ae0bb; fp8_ds_mla at 528
// bytes a token, nvfp4_ds_mla at 528 for its sliding-window cache and at 288
// for its compressed cache) and SGLang's KVLayout "v41" / "v41_fp4" (sglang
// 2005a30) are block-planar pages, not the token-major records FlashMLA reads:
// the names resolve to the planar formats; the token-major records are named
// by their mlakv ids only.
TEST(resolve_format, deepseek_v41_engine_names_are_the_block_planar_pages) {
  EXPECT_EQ(resolve_format("fp8_ds_mla", 528), Format::kFp8DsMlaV41Planar);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 528), Format::kFp8DsMlaV41Planar);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 288), Format::kNvfp4DsMlaV41Planar);
  EXPECT_EQ(resolve_format("v41", 0), Format::kFp8DsMlaV41Planar);
  EXPECT_EQ(resolve_format("v41_fp4", 288), Format::kNvfp4DsMlaV41Planar);
  EXPECT_EQ(resolve_format("v4", 584), Format::kFp8DsMlaV4);
  EXPECT_EQ(resolve_format("fp8_ds_mla_v41_planar", 0), Format::kFp8DsMlaV41Planar);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla_v41_planar", 288), Format::kNvfp4DsMlaV41Planar);
  EXPECT_EQ(resolve_format("fp8_ds_mla_v41", 0), Format::kFp8DsMlaV41);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla_v41", 0), Format::kNvfp4DsMlaV41);
  EXPECT_EQ(resolve_format("fp8_ds_mla_v41", 528), Format::kFp8DsMlaV41);
  EXPECT_EQ(resolve_format("nvfp4_ds_mla_v41", 288), Format::kNvfp4DsMlaV41);
  // The KV_FP8_ROPE switch selects the B12X backend's records, never vLLM's V4.1 pages.
  EXPECT_EQ(error_of([] { resolve_format("nvfp4_ds_mla", 288, true); }),
            "mlakv::resolve_format(nvfp4_ds_mla): record_bytes: must be 368 (nvfp4_ds_mla_fp8_rope), got 288");
  EXPECT_EQ(error_of([] { resolve_format("v41", 288); }),
            "mlakv::resolve_format(v41): record_bytes: must be 528 (fp8_ds_mla_v41_planar), got 288");
  // The V3-family widths still pick the V3-family records.
  EXPECT_EQ(resolve_format("nvfp4_ds_mla", 352), Format::kNvfp4Fp8DsMla);
  EXPECT_EQ(resolve_format("fp8_ds_mla", 656), Format::kFp8DsMla);
}

TEST(resolve_format, auto_follows_the_input_dtype) {
  EXPECT_EQ(resolve_format("auto", 1152, false, false, DType::kBFloat16), Format::kBf16);
  EXPECT_EQ(resolve_format("auto", 1152, false, false, DType::kFloat16), Format::kFp16);
  EXPECT_EQ(resolve_format("auto", 0, false, false, DType::kFloat16), Format::kFp16);
  EXPECT_EQ(error_of([] { resolve_format("auto", 1152); }),
            "mlakv::resolve_format(auto): kv_cache_dtype: names several records of 1152 bytes: bf16 (1152 B, vLLM, "
            "bf16 model), fp16 (1152 B, vLLM, fp16 model), got 'auto'");
}

TEST(resolve_format, every_mlakv_id_names_its_own_format_at_its_width) {
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    if (info.id == "nvfp4_ds_mla" || info.id == "fp8_ds_mla") {  // also engine names: resolved as such
      EXPECT_EQ(resolve_format(info.id, info.record_bytes), info.format) << info.id;
      continue;
    }
    EXPECT_EQ(resolve_format(info.id, info.record_bytes), info.format) << info.id;
    EXPECT_EQ(resolve_format(info.id, 0), info.format) << info.id;
  }
}

TEST(resolve_format, every_engine_name_of_the_registry_resolves_to_its_format) {
  int names = 0;
  for (const mlakv::FormatInfo& info : mlakv::formats()) {
    for (const mlakv::EngineName& n : info.engine_names) {
      const DType input = info.format == Format::kFp16 ? DType::kFloat16 : DType::kBFloat16;
      EXPECT_EQ(resolve_format(n.kv_cache_dtype, info.record_bytes, n.fp8_rope, n.per_token_scale, input), info.format)
          << n.kv_cache_dtype << " for " << info.id;
      ++names;
    }
  }
  EXPECT_EQ(names, 16);
}

TEST(resolve_format, ambiguous_name_without_a_width_names_the_candidates) {
  EXPECT_EQ(error_of([] { resolve_format("nvfp4_ds_mla", 0); }),
            "mlakv::resolve_format(nvfp4_ds_mla): kv_cache_dtype: names several records, the cache's record width "
            "picks one of nvfp4_ds_mla (432 B, B12X backend, KV_FP8_ROPE=0), nvfp4_fp8_ds_mla (352 B, upstream "
            "vLLM), fp8_ds_mla_v41_planar (528 B, vLLM, DeepSeek V4.1 sliding-window cache), nvfp4_ds_mla_v41_planar "
            "(288 B, vLLM, DeepSeek V4.1 compressed cache), got 'nvfp4_ds_mla' without a record width");
}

TEST(resolve_format, width_of_no_candidate_names_the_candidates) {
  EXPECT_EQ(error_of([] { resolve_format("nvfp4_ds_mla", 368); }),
            "mlakv::resolve_format(nvfp4_ds_mla): record_bytes: record bytes must be those of one of the records "
            "kv_cache_dtype 'nvfp4_ds_mla' names here: nvfp4_ds_mla (432 B, B12X backend, KV_FP8_ROPE=0), "
            "nvfp4_fp8_ds_mla (352 B, upstream vLLM), fp8_ds_mla_v41_planar (528 B, vLLM, DeepSeek V4.1 "
            "sliding-window cache), nvfp4_ds_mla_v41_planar (288 B, vLLM, DeepSeek V4.1 compressed cache), got 368");
  EXPECT_EQ(error_of([] { resolve_format("nvfp4_ds_mla", 352, true); }),
            "mlakv::resolve_format(nvfp4_ds_mla): record_bytes: must be 368 (nvfp4_ds_mla_fp8_rope), got 352");
  EXPECT_EQ(error_of([] { resolve_format("fp8_ds_mla", 576); }),
            "mlakv::resolve_format(fp8_ds_mla): record_bytes: record bytes must be those of one of the records "
            "kv_cache_dtype 'fp8_ds_mla' names here: fp8_ds_mla (656 B, vLLM / FlashMLA), fp8_ds_mla_v4 (584 B, vLLM / "
            "FlashMLA / SGLang, DeepSeek V4), fp8_ds_mla_v41_planar (528 B, vLLM, DeepSeek V4.1 on SM100), got 576");
  EXPECT_EQ(error_of([] { resolve_format("nvfp4_fp8_ds_mla", 432); }),
            "mlakv::resolve_format(nvfp4_fp8_ds_mla): record_bytes: must be 352 (nvfp4_fp8_ds_mla), got 432");
  EXPECT_EQ(error_of([] { resolve_format("fp8", -1); }),
            "mlakv::resolve_format(fp8): record_bytes: must be >= 0 (0: not known), got -1");
}

TEST(resolve_format, unknown_name_lists_engine_names_and_format_ids) {
  EXPECT_EQ(error_of([] { resolve_format("nvfp4", 352); }),
            "mlakv::resolve_format(nvfp4): kv_cache_dtype: must be an engine name (auto, fp8, fp8_e4m3, fp8_ds_mla, "
            "nvfp4_ds_mla, v4, v41, v41_fp4) or an mlakv format id (bf16, fp16, fp8_e4m3, fp8_ds_mla, nvfp4_ds_mla, "
            "nvfp4_ds_mla_fp8_rope, nvfp4_ds_mla_fp8_rope_pts, nvfp4_fp8_ds_mla, fp8_ds_mla_v4, fp8_ds_mla_v41, "
            "nvfp4_ds_mla_v41, fp8_ds_mla_v41_planar, nvfp4_ds_mla_v41_planar), got 'nvfp4'");
}

}  // namespace
