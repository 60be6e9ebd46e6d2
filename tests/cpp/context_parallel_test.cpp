// SPDX-License-Identifier: Apache-2.0
// Context-parallel decode on the CPU, N ranks simulated in one process: the
// local slots of vLLM's interleaved layout, the N-way merge, and per-rank
// decode + merge against one decode over the whole cache, for every format.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "context_parallel_support.h"

namespace mlakv::test {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int64_t kHeads = 16;

struct Partial {
  std::vector<std::uint16_t> out;  // [R, H, 512] bf16
  std::vector<float> lse;          // [R, H]
};

Partial decode(Format format, TensorView cache, float k_scale, std::vector<std::uint16_t>& q, std::int64_t rows,
               std::vector<std::int32_t>& slots, std::int64_t topk) {
  Partial p{std::vector<std::uint16_t>(static_cast<std::size_t>(rows * kHeads * 512), 0xFFFF),
            std::vector<float>(static_cast<std::size_t>(rows * kHeads), 12345.0f)};
  SparseDecodeOptions options;
  const TensorView scale = make_view(&k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  sparse_mla_decode(format, make_view(q.data(), DType::kBFloat16, {rows, kHeads, 576}), cache,
                    make_view(slots.data(), DType::kInt32, {rows, topk}),
                    make_view(p.out.data(), DType::kBFloat16, {rows, kHeads, 512}),
                    make_view(p.lse.data(), DType::kFloat32, {rows, kHeads}), options);
  return p;
}

std::vector<std::int32_t> local_slots(ShardedSequence& s, std::int64_t rank, std::vector<std::int32_t>& positions,
                                      std::int64_t rows, std::int64_t topk) {
  std::vector<std::int32_t> req(static_cast<std::size_t>(rows), 1);
  std::vector<std::int32_t> out(positions.size(), 77);
  dcp_local_slots(make_view(positions.data(), DType::kInt32, {rows, topk}),
                  make_view(req.data(), DType::kInt32, {rows}), s.table_view(rank),
                  make_view(out.data(), DType::kInt32, {rows, topk}), s.layout(rank));
  return out;
}

// Every rank decodes its share of `positions`; the N partials are merged.
struct ShardedResult {
  std::vector<Partial> partials;
  Partial merged;
};

ShardedResult sharded_decode(ShardedSequence& s, std::vector<std::uint16_t>& q, std::int64_t rows,
                             std::vector<std::int32_t>& positions, std::int64_t topk) {
  ShardedResult result;
  std::vector<std::uint16_t> outs;
  std::vector<float> lses;
  for (std::int64_t j = 0; j < s.world; ++j) {
    auto slots = local_slots(s, j, positions, rows, topk);
    result.partials.push_back(decode(s.format, s.shard_view(j), s.k_scale, q, rows, slots, topk));
    outs.insert(outs.end(), result.partials.back().out.begin(), result.partials.back().out.end());
    lses.insert(lses.end(), result.partials.back().lse.begin(), result.partials.back().lse.end());
  }
  result.merged = {std::vector<std::uint16_t>(static_cast<std::size_t>(rows * kHeads * 512), 0xFFFF),
                   std::vector<float>(static_cast<std::size_t>(rows * kHeads), 12345.0f)};
  merge_attention_states(make_view(outs.data(), DType::kBFloat16, {s.world, rows, kHeads, 512}),
                         make_view(lses.data(), DType::kFloat32, {s.world, rows, kHeads}),
                         make_view(result.merged.out.data(), DType::kBFloat16, {rows, kHeads, 512}),
                         make_view(result.merged.lse.data(), DType::kFloat32, {rows, kHeads}));
  return result;
}

// The documented tolerance (docs/context_parallel.md): each partial is
// rounded to bf16 (2^-9 of its own magnitude) before the merge, and merged and
// whole are each rounded once more, so per element
//   |merged - whole| <= 2^-7 |whole| + 2^-8 max_j |partial_j|,
// and lse within 1e-5 relative (float32 sums of e^(score - max)).
void expect_merged_equals_whole(const ShardedResult& sharded, const Partial& whole, const std::string& what) {
  int reported = 0;
  for (std::size_t i = 0; i < whole.out.size() && reported < 5; ++i) {
    float partial_scale = 0.0f;
    for (const Partial& p : sharded.partials) partial_scale = std::max(partial_scale, std::fabs(widen(p.out[i])));
    const float w = widen(whole.out[i]);
    const float m = widen(sharded.merged.out[i]);
    if (!(std::fabs(m - w) <= std::ldexp(std::fabs(w), -7) + std::ldexp(partial_scale, -8))) {
      ADD_FAILURE() << what << ": out[" << i << "] merged " << m << ", whole " << w << ", largest partial "
                    << partial_scale;
      ++reported;
    }
  }
  for (std::size_t i = 0; i < whole.lse.size(); ++i) {
    ASSERT_NEAR(sharded.merged.lse[i], whole.lse[i], 1e-5f * std::max(1.0f, std::fabs(whole.lse[i])))
        << what << " lse " << i;
  }
}

TEST(dcp_local_slots, every_position_is_on_exactly_one_rank_at_its_dense_place_in_vllms_layout) {
  for (const std::int64_t world : {1, 2, 3, 4, 8}) {
    for (const std::int64_t interleave : {1, 2, 16, 64}) {
      ShardedSequence s(Format::kFp8E4m3, 1000, world, interleave, 1);
      std::vector<std::int32_t> positions(static_cast<std::size_t>(s.tokens));
      for (std::int64_t t = 0; t < s.tokens; ++t) positions[t] = static_cast<std::int32_t>(t);
      std::vector<int> owners(positions.size(), 0);
      for (std::int64_t j = 0; j < world; ++j) {
        const auto slots = local_slots(s, j, positions, 1, s.tokens);
        for (std::int64_t t = 0; t < s.tokens; ++t) {
          if (slots[t] < 0) continue;
          ++owners[t];
          ASSERT_EQ(s.owner[t], j) << "N=" << world << " I=" << interleave << " position " << t;
          ASSERT_EQ(slots[t], s.local[t]) << "N=" << world << " I=" << interleave << " position " << t;
        }
      }
      for (std::int64_t t = 0; t < s.tokens; ++t) ASSERT_EQ(owners[t], 1) << "position " << t;
    }
  }
}

TEST(dcp_local_slots, positions_outside_the_table_and_unknown_requests_give_minus_one) {
  ShardedSequence s(Format::kFp8E4m3, 256, 2, 1, 1);  // table width 2: positions < 256
  std::vector<std::int32_t> positions = {-1, -7, 256, 100000, 0, 1};
  std::vector<std::int32_t> req = {1, 1, 1, 1, 2, -1};
  std::vector<std::int32_t> out(6, 77);
  dcp_local_slots(make_view(positions.data(), DType::kInt32, {6, 1}), make_view(req.data(), DType::kInt32, {6}),
                  s.table_view(0), make_view(out.data(), DType::kInt32, {6, 1}), s.layout(0));
  EXPECT_EQ(out, std::vector<std::int32_t>(6, -1));
  // A negative block id (an unallocated block) gives -1 too.
  s.tables[0][s.table_width] = -1;
  positions = {0, 0, 0, 0, 0, 0};
  req = {1, 1, 1, 1, 1, 0};
  dcp_local_slots(make_view(positions.data(), DType::kInt32, {6, 1}), make_view(req.data(), DType::kInt32, {6}),
                  s.table_view(0), make_view(out.data(), DType::kInt32, {6, 1}), s.layout(0));
  EXPECT_EQ(out, std::vector<std::int32_t>({-1, -1, -1, -1, -1, 0}));
}

TEST(context_parallel_decode, per_rank_decode_and_merge_equals_the_whole_cache_for_every_format_and_world_size) {
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the decode reads the 512 + 64 token-major formats only
    for (const std::int64_t world : {1, 2, 3, 4, 8}) {
      const std::int64_t interleave = world == 3 ? 2 : 1;
      ShardedSequence s(info.format, 1500, world, interleave, 3 + world);
      const std::int64_t rows = 2, topk = 96;
      auto q = random_queries(rows, kHeads, 11);
      auto positions = random_positions(rows, topk, s.tokens, 5);
      positions[7] = -1;  // no entry: nothing on any rank
      const Partial whole = decode(s.format, s.whole_view(), s.k_scale, q, rows, positions, topk);
      const ShardedResult sharded = sharded_decode(s, q, rows, positions, topk);
      expect_merged_equals_whole(sharded, whole, std::string(info.id) + " N=" + std::to_string(world));
    }
  }
}

TEST(context_parallel_decode, a_row_whose_entries_all_live_on_one_rank_equals_that_rank_and_the_whole_exactly) {
  for (const std::int64_t world : {2, 3, 4, 8}) {
    ShardedSequence s(Format::kNvfp4Fp8DsMla, 2048, world, 1, 9);
    const std::int64_t rows = 1, topk = 64, home = world - 1;
    std::vector<std::int32_t> positions;
    for (std::int64_t t = 0; t < s.tokens && static_cast<std::int64_t>(positions.size()) < topk; ++t) {
      if (s.owner[t] == home) positions.push_back(static_cast<std::int32_t>(t));
    }
    ASSERT_EQ(static_cast<std::int64_t>(positions.size()), topk);
    auto q = random_queries(rows, kHeads, 2);
    const Partial whole = decode(s.format, s.whole_view(), s.k_scale, q, rows, positions, topk);
    const ShardedResult sharded = sharded_decode(s, q, rows, positions, topk);
    // The home rank decodes the same records in the same order: the whole's bits; the others own nothing.
    EXPECT_EQ(sharded.partials[home].out, whole.out) << "N=" << world;
    EXPECT_EQ(sharded.partials[home].lse, whole.lse) << "N=" << world;
    for (std::int64_t j = 0; j < world - 1; ++j) {
      EXPECT_EQ(sharded.partials[j].lse, std::vector<float>(whole.lse.size(), kNegInf)) << "rank " << j;
      EXPECT_EQ(sharded.partials[j].out, std::vector<std::uint16_t>(whole.out.size(), 0)) << "rank " << j;
    }
    // A single partial of weight e^0 = 1 passes through the merge unchanged.
    EXPECT_EQ(sharded.merged.out, whole.out) << "N=" << world;
    EXPECT_EQ(sharded.merged.lse, whole.lse) << "N=" << world;
  }
}

TEST(context_parallel_decode, a_row_no_rank_owns_gives_zeros_and_minus_infinity) {
  ShardedSequence s(Format::kFp8DsMla, 512, 4, 1, 2);
  const std::int64_t rows = 2, topk = 8;
  std::vector<std::int32_t> positions = {0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, -1, 9999, -1, -1, -1};
  auto q = random_queries(rows, kHeads, 3);
  const ShardedResult sharded = sharded_decode(s, q, rows, positions, topk);
  for (std::int64_t h = 0; h < kHeads; ++h) {
    EXPECT_TRUE(std::isfinite(sharded.merged.lse[h]));
    EXPECT_EQ(sharded.merged.lse[kHeads + h], kNegInf);
  }
  for (std::size_t i = kHeads * 512; i < sharded.merged.out.size(); ++i) ASSERT_EQ(sharded.merged.out[i], 0) << i;
}

// The N-way merge on hand-made partials (float32 [N, R, H, D]).
struct Stack {
  std::int64_t parts, rows, heads, width;
  std::vector<float> outs, lses, out, lse;
  Stack(std::int64_t n, std::int64_t r, std::int64_t h, std::int64_t d, std::uint64_t seed)
      : parts(n), rows(r), heads(h), width(d) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    outs.resize(static_cast<std::size_t>(n * r * h * d));
    lses.resize(static_cast<std::size_t>(n * r * h));
    for (auto& v : outs) v = normal(rng);
    for (auto& v : lses) v = 4.0f * normal(rng);
    out.assign(static_cast<std::size_t>(r * h * d), 99.0f);
    lse.assign(static_cast<std::size_t>(r * h), 99.0f);
  }
  void merge() {
    merge_attention_states(make_view(outs.data(), DType::kFloat32, {parts, rows, heads, width}),
                           make_view(lses.data(), DType::kFloat32, {parts, rows, heads}),
                           make_view(out.data(), DType::kFloat32, {rows, heads, width}),
                           make_view(lse.data(), DType::kFloat32, {rows, heads}));
  }
};

TEST(merge_attention_states_n_way, equals_the_lse_weighted_mean_in_double) {
  for (const std::int64_t n : {1, 2, 3, 4, 8}) {
    Stack s(n, 3, 5, 7, 40 + n);
    s.lses[1] = kNegInf;  // partial 0 of (row 0, head 1) contributes nothing
    s.merge();
    for (std::int64_t i = 0; i < s.rows * s.heads; ++i) {
      double m = -INFINITY;
      for (std::int64_t j = 0; j < n; ++j) m = std::max(m, double{s.lses[j * s.rows * s.heads + i]});
      if (m == -INFINITY) {  // every partial -inf (N = 1, row 0 head 1): zeros and -inf
        for (std::int64_t d = 0; d < s.width; ++d) ASSERT_EQ(s.out[i * s.width + d], 0.0f);
        ASSERT_EQ(s.lse[i], kNegInf);
        continue;
      }
      double sum = 0.0;
      for (std::int64_t j = 0; j < n; ++j) sum += std::exp(s.lses[j * s.rows * s.heads + i] - m);
      for (std::int64_t d = 0; d < s.width; ++d) {
        double acc = 0.0;
        for (std::int64_t j = 0; j < n; ++j) {
          const double w = std::exp(s.lses[j * s.rows * s.heads + i] - m);
          if (w > 0.0) acc += w * s.outs[(j * s.rows * s.heads + i) * s.width + d];
        }
        ASSERT_NEAR(s.out[i * s.width + d], acc / sum, 1e-5 * (1.0 + std::fabs(acc / sum))) << "N=" << n;
      }
      ASSERT_NEAR(s.lse[i], m + std::log(sum), 1e-5 * (1.0 + std::fabs(m))) << "N=" << n;
    }
  }
}

TEST(merge_attention_states_n_way, the_order_of_the_partials_does_not_matter_within_rounding) {
  Stack s(4, 2, 3, 64, 5);
  s.merge();
  Stack r = s;
  const std::int64_t per_out = s.rows * s.heads * s.width, per_lse = s.rows * s.heads;
  for (std::int64_t j = 0; j < 4; ++j) {  // reversed
    std::copy_n(s.outs.begin() + (3 - j) * per_out, per_out, r.outs.begin() + j * per_out);
    std::copy_n(s.lses.begin() + (3 - j) * per_lse, per_lse, r.lses.begin() + j * per_lse);
  }
  r.merge();
  for (std::size_t i = 0; i < s.out.size(); ++i) ASSERT_NEAR(r.out[i], s.out[i], 1e-5f * (1 + std::fabs(s.out[i])));
  for (std::size_t i = 0; i < s.lse.size(); ++i) ASSERT_NEAR(r.lse[i], s.lse[i], 1e-5f * (1 + std::fabs(s.lse[i])));
}

TEST(merge_attention_states_n_way, minus_infinity_partials_contribute_nothing_even_when_their_out_is_nan) {
  Stack s(3, 1, 2, 4, 1);
  for (std::int64_t d = 0; d < 4; ++d) s.outs[d] = std::nanf("");  // partial 0, head 0
  s.lses = {kNegInf, kNegInf, kNegInf, kNegInf, 0.25f, kNegInf};   // [N, R, H]: partial 2 of head 0
  s.merge();
  for (std::int64_t d = 0; d < 4; ++d) EXPECT_EQ(s.out[d], s.outs[2 * 8 + d]);  // partial 2 alone
  EXPECT_EQ(s.lse[0], 0.25f);
  EXPECT_EQ(std::vector<float>(s.out.begin() + 4, s.out.end()), std::vector<float>(4, 0.0f));
  EXPECT_EQ(s.lse[1], kNegInf);
}

TEST(merge_attention_states_n_way, a_partial_with_a_nan_or_plus_infinity_lse_makes_the_merge_nan_as_the_two_way_merge) {
  for (const float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    Stack s(3, 1, 2, 4, 1);
    s.lses = {0.5f, 1.0f, bad, -2.0f, 0.25f, 3.0f};  // [N, R, H]: partial 1 of head 0 is bad
    s.merge();
    for (std::int64_t d = 0; d < 4; ++d) EXPECT_TRUE(std::isnan(s.out[d])) << bad << " dim " << d;
    EXPECT_TRUE(std::isnan(s.lse[0])) << bad;
    for (std::int64_t d = 4; d < 8; ++d) EXPECT_TRUE(std::isfinite(s.out[d])) << "head 1 is untouched";
    EXPECT_TRUE(std::isfinite(s.lse[1]));
    // The two-way merge of partial 0 and partial 1 of head 0 says the same.
    std::vector<float> a(s.outs.begin(), s.outs.begin() + 4), b(s.outs.begin() + 8, s.outs.begin() + 12);
    std::vector<float> la = {0.5f}, lb = {bad}, out(4), lse(1);
    const auto v3 = [](std::vector<float>& v) { return make_view(v.data(), DType::kFloat32, {1, 1, 4}); };
    const auto v2 = [](std::vector<float>& v) { return make_view(v.data(), DType::kFloat32, {1, 1}); };
    merge_attention_states(v3(a), v2(la), v3(b), v2(lb), v3(out), v2(lse));
    for (const float v : out) EXPECT_TRUE(std::isnan(v)) << bad;
    EXPECT_TRUE(std::isnan(lse[0])) << bad;
  }
}

// Validation: a bad argument throws an Error naming it and writes nothing.
TEST(dcp_local_slots_validation, rejects_a_bad_layout_or_shape_and_writes_nothing) {
  ShardedSequence s(Format::kFp8E4m3, 256, 2, 1, 1);
  std::vector<std::int32_t> positions(8, 0), req(2, 1), out(8, 77);
  // The call, and check_dcp_local_slots (mlakv/checks.h: the torch op's fake), refuse alike.
  const auto run = [&](ContextParallelLayout layout, std::int64_t out_cols, const std::string& message) {
    const TensorView indices = make_view(positions.data(), DType::kInt32, {2, 4});
    const TensorView req_id = make_view(req.data(), DType::kInt32, {2});
    const TensorView local = make_view(out.data(), DType::kInt32, {2, out_cols});
    for (const bool checks_only : {false, true}) {
      try {
        if (checks_only) {
          check_dcp_local_slots(indices, req_id, s.table_view(0), local, layout);
        } else {
          dcp_local_slots(indices, req_id, s.table_view(0), local, layout);
        }
        ADD_FAILURE() << "accepted; expected: " << message;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), message);
      }
    }
    EXPECT_EQ(out, std::vector<std::int32_t>(8, 77));
  };
  run({2, 2, 1, 64}, 4, "mlakv::dcp_local_slots: layout.rank: must be in [0, world_size = 2), got 2");
  run({0, 0, 1, 64}, 4, "mlakv::dcp_local_slots: layout.world_size: must be in [1, 64], got 0");
  run({2, 0, 3, 64}, 4, "mlakv::dcp_local_slots: layout.interleave: must be >= 1 and divide block_size = 64, got 3");
  run({2, 0, 1, 64}, 3, "mlakv::dcp_local_slots: local_slots: shape must be (R, K) = (2, 4), got (2, 3)");
  // What the call accepts, the checks accept, writing nothing.
  check_dcp_local_slots(make_view(positions.data(), DType::kInt32, {2, 4}), make_view(req.data(), DType::kInt32, {2}),
                        s.table_view(0), make_view(out.data(), DType::kInt32, {2, 4}), {2, 0, 1, 64});
  EXPECT_EQ(out, std::vector<std::int32_t>(8, 77));
}

TEST(merge_attention_states_n_way_validation, rejects_mismatched_shapes_and_overlap_and_writes_nothing) {
  Stack s(2, 1, 2, 4, 1);
  const auto expect_rejected = [&](const TensorView& outs, const TensorView& lses, const TensorView& out,
                                   const std::string& message) {
    const TensorView lse = make_view(s.lse.data(), DType::kFloat32, {1, 2});
    for (const bool checks_only : {false, true}) {  // the call, and its checks alone (mlakv/checks.h)
      try {
        if (checks_only) {
          check_merge_attention_states(outs, lses, out, lse);
        } else {
          merge_attention_states(outs, lses, out, lse);
        }
        ADD_FAILURE() << "accepted; expected: " << message;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), message);
      }
    }
    EXPECT_EQ(s.out, std::vector<float>(8, 99.0f));
    EXPECT_EQ(s.lse, std::vector<float>(2, 99.0f));
  };
  const TensorView outs = make_view(s.outs.data(), DType::kFloat32, {2, 1, 2, 4});
  const TensorView lses = make_view(s.lses.data(), DType::kFloat32, {2, 1, 2});
  const TensorView out = make_view(s.out.data(), DType::kFloat32, {1, 2, 4});
  expect_rejected(outs, make_view(s.lses.data(), DType::kFloat32, {1, 1, 2}), out,
                  "mlakv::merge_attention_states: lses: shape must be (N, R, H) = (2, 1, 2), got (1, 1, 2)");
  expect_rejected(outs, lses, make_view(s.out.data(), DType::kBFloat16, {1, 2, 4}),
                  "mlakv::merge_attention_states: out: dtype must be float32, got bf16");
  expect_rejected(
      outs, lses, make_view(s.outs.data(), DType::kFloat32, {1, 2, 4}),
      "mlakv::merge_attention_states: out: must not share memory with outs (inputs and outputs must not overlap), "
      "got overlapping byte ranges");
  check_merge_attention_states(outs, lses, out, make_view(s.lse.data(), DType::kFloat32, {1, 2}));  // accepted
  EXPECT_EQ(s.out, std::vector<float>(8, 99.0f));
  EXPECT_EQ(s.lse, std::vector<float>(2, 99.0f));
}

}  // namespace
}  // namespace mlakv::test
