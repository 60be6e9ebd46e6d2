// SPDX-License-Identifier: Apache-2.0
// GPU tests of the sparse MLA decode and the merge (label "gpu"; skipped
// without a device): CUDA against the CPU reference for every format, head
// count and entry count, with -1 / past-capacity / duplicate entries, topk_len
// and empty rows; with and without a workspace; graph capture; guard bytes
// around the cache stay untouched; the split-dims kernel's key fragment
// decode equals the codec's for every code and scale byte.
//
// Tolerance (the GPU weighs values with bf16 probabilities, as tensor cores
// take them, and sums in another order): |gpu - cpu| <= 2^-8 max|value| +
// 2^-8 |cpu| per output element, |gpu - cpu| <= 1e-3 max(1, |lse|).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "attention_support.h"
#include "codec/nvfp4.h"
#include "codec/nvfp4_fragment.h"
#include "cuda_support.h"

namespace mlakv::test {
namespace {

struct Problem {
  std::int64_t rows = 3;
  std::int64_t heads;
  std::int64_t topk;
  std::vector<std::uint16_t> q;
  std::vector<std::int32_t> indices;
  std::vector<std::int32_t> topk_len;
};

// Row 0: K random entries. Row 1: -1, past-capacity and duplicate entries,
// limited by topk_len. Row 2: nothing valid.
// With `repeats`, the three rows repeat (with other random slots) to make 3 * repeats rows.
Problem make_problem(std::int64_t heads, std::int64_t topk, std::int64_t capacity, std::uint64_t seed,
                     std::int64_t repeats = 1) {
  if (repeats > 1) {
    Problem all;
    all.rows = 0;
    for (std::int64_t i = 0; i < repeats; ++i) {
      Problem part = make_problem(heads, topk, capacity, seed + 1000 * static_cast<std::uint64_t>(i));
      all.rows += part.rows;
      all.q.insert(all.q.end(), part.q.begin(), part.q.end());
      all.indices.insert(all.indices.end(), part.indices.begin(), part.indices.end());
      all.topk_len.insert(all.topk_len.end(), part.topk_len.begin(), part.topk_len.end());
    }
    all.heads = heads;
    all.topk = topk;
    return all;
  }
  Problem p;
  p.heads = heads;
  p.topk = topk;
  p.q = random_queries(p.rows, heads, seed);
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(capacity - 1));
  p.indices.resize(static_cast<std::size_t>(p.rows * topk));
  for (std::int64_t i = 0; i < topk; ++i) p.indices[i] = slot(rng);
  for (std::int64_t i = 0; i < topk; ++i) {
    const std::int32_t special[] = {-1, static_cast<std::int32_t>(capacity), p.indices[0], 123456789};
    p.indices[topk + i] = i % 5 == 4 ? special[i % 4] : slot(rng);
    p.indices[2 * topk + i] = i % 2 == 0 ? -1 : static_cast<std::int32_t>(capacity + i);
  }
  p.topk_len = {static_cast<std::int32_t>(topk), static_cast<std::int32_t>(std::max<std::int64_t>(1, topk - 3)),
                static_cast<std::int32_t>(topk)};
  return p;
}

struct Result {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

Result run_cpu(AttentionCache& cache, Problem& p) {
  Result r{std::vector<std::uint16_t>(static_cast<std::size_t>(p.rows * p.heads * 512)),
           std::vector<float>(static_cast<std::size_t>(p.rows * p.heads))};
  SparseDecodeOptions options;
  const TensorView len = make_view(p.topk_len.data(), DType::kInt32, {p.rows});
  options.topk_len = &len;
  const TensorView scale = make_view(&cache.k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  sparse_mla_decode(cache.format, make_view(p.q.data(), DType::kBFloat16, {p.rows, p.heads, 576}), cache.view(),
                    make_view(p.indices.data(), DType::kInt32, {p.rows, p.topk}),
                    make_view(r.out.data(), DType::kBFloat16, {p.rows, p.heads, 512}),
                    make_view(r.lse.data(), DType::kFloat32, {p.rows, p.heads}), options);
  return r;
}

// The same decode on the GPU, with a workspace or without; with `graph`, captured and replayed.
Result run_cuda(AttentionCache& cache, Problem& p, bool workspace, bool graph = false) {
  DeviceBuffer d_cache(cache.bytes);
  DeviceBuffer d_q(p.q);
  DeviceBuffer d_indices(p.indices);
  DeviceBuffer d_len(p.topk_len);
  DeviceBuffer d_out(static_cast<std::size_t>(p.rows * p.heads * 512 * 2));
  DeviceBuffer d_lse(static_cast<std::size_t>(p.rows * p.heads * 4));
  const Device device{DeviceType::kCuda, 0};
  const std::size_t ws_bytes = sparse_mla_decode_workspace_size(p.rows, p.heads, p.topk, device);
  DeviceBuffer d_ws(ws_bytes);
  cudaMemset(d_out.get(), 0xFF, d_out.bytes());
  SparseDecodeOptions options;
  const TensorView len = on_device(make_view(nullptr, DType::kInt32, {p.rows}), d_len);
  options.topk_len = &len;
  const TensorView scale = make_view(&cache.k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  const TensorView ws = on_device(make_view(nullptr, DType::kUInt8, {static_cast<std::int64_t>(ws_bytes)}), d_ws);
  if (workspace) options.workspace = &ws;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const auto launch = [&] {
    sparse_mla_decode(cache.format, on_device(make_view(nullptr, DType::kBFloat16, {p.rows, p.heads, 576}), d_q),
                      on_device(cache.view(), d_cache),
                      on_device(make_view(nullptr, DType::kInt32, {p.rows, p.topk}), d_indices),
                      on_device(make_view(nullptr, DType::kBFloat16, {p.rows, p.heads, 512}), d_out),
                      on_device(make_view(nullptr, DType::kFloat32, {p.rows, p.heads}), d_lse), options, stream);
  };
  if (graph) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    launch();
    EXPECT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    cudaStreamSynchronize(stream);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
  } else {
    launch();
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  EXPECT_EQ(d_cache.download<std::uint8_t>(), cache.bytes) << "the decode wrote the cache";
  return {d_out.download<std::uint16_t>(), d_lse.download<float>()};
}

void expect_close(const Result& gpu, const Result& cpu, double value_scale, const std::string& what) {
  int reported = 0;
  for (std::size_t i = 0; i < cpu.out.size() && reported < 5; ++i) {
    const double g = widen(gpu.out[i]);
    const double c = widen(cpu.out[i]);
    if (!(std::fabs(g - c) <= std::ldexp(value_scale, -8) + std::ldexp(std::fabs(c), -8))) {
      ADD_FAILURE() << what << ": out[" << i << "] gpu " << g << " cpu " << c;
      ++reported;
    }
  }
  for (std::size_t i = 0; i < cpu.lse.size(); ++i) {
    if (std::isinf(cpu.lse[i])) {
      EXPECT_EQ(gpu.lse[i], cpu.lse[i]) << what << ": lse[" << i << "]";
    } else {
      EXPECT_NEAR(gpu.lse[i], cpu.lse[i], 1e-3 * std::max(1.0f, std::fabs(cpu.lse[i]))) << what << ": lse[" << i << "]";
    }
  }
}

// decode_group_fragment (y = 0) and decode_group_fragment_outer (y > 0, one
// pts outer scale each) against the codec's f32 decode, for every scale byte
// (x) and every 16-bit code pattern: pattern p fills codes 0..3, a different
// map of p codes 4..7 and each of the second word's, so every code meets every
// position and the pairs see mixed codes. A NaN value must come out NaN (any
// payload); outer scales the fast path refuses must be refused exactly when
// not below 2^120. Counts the values it checked.
__device__ const float kOuterScales[] = {1.0f,  0.0123f, 3.0e-9f,  7.5e11f,  1.0f / 2688.0f, 0x1p-140f,
                                         -0.0f, -5.5f,   0x1p119f, 0x1p120f, INFINITY,       NAN};
constexpr int kOuterScaleCount = 12;

__global__ void count_fragment_mismatches(unsigned long long* mismatches, unsigned long long* checked) {
  using namespace mlakv::codec;
  const auto sbyte = static_cast<std::uint8_t>(blockIdx.x);
  const bool with_outer = blockIdx.y > 0;
  const float outer = with_outer ? kOuterScales[blockIdx.y - 1] : 1.0f;
  const float s = decode_e4m3(sbyte);
  unsigned long long bad = 0, seen = 0;
  for (std::uint32_t pattern = threadIdx.x; pattern < 65536u; pattern += blockDim.x) {
    alignas(16) std::uint32_t words[2] = {pattern | (((pattern * 40503u) & 0xFFFFu) << 16),
                                          ((pattern ^ 0xA5C3u) & 0xFFFFu) | ((~pattern & 0xFFFFu) << 16)};
    const auto* codes = reinterpret_cast<const std::uint8_t*>(words);
    std::uint32_t pairs[8];
    float scale = kFragmentScale;
    if (with_outer) {
      const bool taken = decode_group_fragment_outer(codes, sbyte, outer, pairs);
      if (taken != (fabsf(outer) < 0x1p120f)) ++bad;
      ++seen;
      if (!taken) continue;
      scale = 1.0f;
    } else {
      decode_group_fragment(codes, sbyte, pairs);
    }
    float want[kNvfp4GroupSize];
    decode_nvfp4_group(codes, s, outer, want);
    for (int p = 0; p < 8; ++p) {
      for (int half = 0; half < 2; ++half) {
        const auto got = static_cast<std::uint16_t>(half == 0 ? pairs[p] & 0xFFFFu : pairs[p] >> 16);
        const float expected = want[fragment_dim(p, half)] * scale;
        const bool got_nan = (got & 0x7FFFu) > 0x7F80u;
        const bool ok = expected != expected ? got_nan : got == encode_bf16(expected);
        bad += ok ? 0 : 1;
        ++seen;
      }
    }
  }
  atomicAdd(mismatches, bad);
  atomicAdd(checked, seen);
}

TEST(cuda_key_fragment, nvfp4_fragment_decode_equals_the_codec_for_every_code_scale_byte_and_outer_scale) {
  MLAKV_REQUIRE_GPU();
  DeviceBuffer counts(2 * sizeof(unsigned long long));
  cudaMemset(counts.get(), 0, counts.bytes());
  auto* c = counts.get<unsigned long long>();
  count_fragment_mismatches<<<dim3(256, 1 + kOuterScaleCount), 256>>>(c, c + 1);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const auto host = counts.download<unsigned long long>();
  // Every scale byte and pattern: 16 values without an outer scale; a refusal
  // check plus 16 values for each of the 9 outer scales below 2^120, the refusal
  // check alone for the 3 others.
  EXPECT_EQ(host[1], 256ull * 65536ull * (16ull + 9ull * 17ull + 3ull));
  EXPECT_EQ(host[0], 0u);
}

TEST(cuda_key_fragment, fragment_dims_are_a_permutation_of_the_group) {
  unsigned seen = 0;
  for (int p = 0; p < 8; ++p) {
    for (int half = 0; half < 2; ++half) seen |= 1u << mlakv::codec::fragment_dim(p, half);
  }
  EXPECT_EQ(seen, 0xFFFFu);
}

TEST(cuda_sparse_mla_decode, matches_the_cpu_for_every_format_head_count_and_entry_count) {
  MLAKV_REQUIRE_GPU();
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the decode reads the 512 + 64 token-major formats only
    AttentionCache cache(info.format, 3000, 17);
    const double value_scale = max_abs_value(cache.keys());
    for (const std::int64_t heads : {1, 5, 16, 24, 32, 64, 128}) {
      for (const std::int64_t topk : {1, 7, 64, 2048}) {
        Problem p = make_problem(heads, topk, cache.capacity(), static_cast<std::uint64_t>(heads * 7 + topk));
        const Result cpu = run_cpu(cache, p);
        const std::string what = std::string(info.id) + " H=" + std::to_string(heads) + " K=" + std::to_string(topk);
        expect_close(run_cuda(cache, p, false), cpu, value_scale, what + " (no workspace)");
        expect_close(run_cuda(cache, p, true), cpu, value_scale, what + " (workspace)");
      }
    }
  }
}

TEST(cuda_sparse_mla_decode, odd_head_counts_and_long_rows_match_the_cpu) {
  MLAKV_REQUIRE_GPU();
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 9000, 3);
  const double value_scale = max_abs_value(cache.keys());
  for (const std::int64_t heads : {1, 5, 24}) {
    Problem p = make_problem(heads, 5000, cache.capacity(), 40 + heads);
    const Result cpu = run_cpu(cache, p);
    expect_close(run_cuda(cache, p, true), cpu, value_scale, "H=" + std::to_string(heads) + " K=5000");
  }
}

// More blocks than an H200 has SMs without a workspace (one block a row of
// 16 heads, 300 rows): the blocks that run after others on an SM, in the
// shared memory those left, match the CPU.
TEST(cuda_sparse_mla_decode, more_blocks_than_sms_match_the_cpu) {
  MLAKV_REQUIRE_GPU();
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 4000, 5);
  Problem p = make_problem(16, 200, cache.capacity(), 11, /*repeats=*/100);  // 300 rows
  const Result cpu = run_cpu(cache, p);
  expect_close(run_cuda(cache, p, false), cpu, max_abs_value(cache.keys()), "H=16 K=200 R=300");
}

TEST(cuda_sparse_mla_decode, blocks_of_64_heads_match_the_cpu) {
  MLAKV_REQUIRE_GPU();
  AttentionCache cache(Format::kNvfp4DsMlaFp8RopePts, 512, 8);
  const double value_scale = max_abs_value(cache.keys());
  for (const std::int64_t heads : {33, 64, 80}) {  // one partial block, one full, one full + partial
    Problem p = make_problem(heads, 200, cache.capacity(), 60 + heads);
    const Result cpu = run_cpu(cache, p);
    expect_close(run_cuda(cache, p, false), cpu, value_scale, "H=" + std::to_string(heads));
    expect_close(run_cuda(cache, p, true), cpu, value_scale, "H=" + std::to_string(heads) + " (workspace)");
  }
}

// On Hopper every record but pts takes the 64-key kernel's transposed
// products up to 32 heads (in blocks of 16 while a call has at most 12 of
// them, as the 36 rows of 5-16 heads here; else of 32); elsewhere, and for
// pts, with a few rows the shared-tile kernel runs (the tests above), and
// with at least a fifth as many rows as SMs (27 on an H200, the 36 here) the
// split-dims kernel up to 16 heads and on Hopper the 32-key warpgroup kernel
// for 17-32.
TEST(cuda_sparse_mla_decode, many_rows_of_up_to_32_heads_match_the_cpu_for_every_nvfp4_format) {
  MLAKV_REQUIRE_GPU();
  for (const Format format :
       {Format::kNvfp4DsMla, Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts, Format::kNvfp4Fp8DsMla}) {
    AttentionCache cache(format, 6000, 13);
    const double value_scale = max_abs_value(cache.keys());
    for (const std::int64_t heads : {1, 5, 16, 24, 32}) {
      for (const std::int64_t topk : {1, 7, 64, 600}) {
        Problem p = make_problem(heads, topk, cache.capacity(), 90 + heads + topk, /*repeats=*/12);  // 36 rows
        const Result cpu = run_cpu(cache, p);
        const std::string what = std::string(format_info(format).id) + " H=" + std::to_string(heads) +
                                 " K=" + std::to_string(topk) + " R=" + std::to_string(p.rows);
        expect_close(run_cuda(cache, p, false), cpu, value_scale, what);
        expect_close(run_cuda(cache, p, true), cpu, value_scale, what + " (workspace)");
      }
    }
  }
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 9000, 3);  // long rows over many tiles and splits
  Problem p = make_problem(16, 5000, cache.capacity(), 7, /*repeats=*/12);
  const Result cpu = run_cpu(cache, p);
  expect_close(run_cuda(cache, p, true), cpu, max_abs_value(cache.keys()), "H=16 K=5000 R=36");
  expect_close(run_cuda(cache, p, false), cpu, max_abs_value(cache.keys()), "H=16 K=5000 R=36 (no workspace)");
}

// The records the warpgroup kernels take (at most 656 bytes a token).
constexpr Format kWarpgroupFormats[] = {Format::kFp8DsMla,   Format::kFp8E4m3,       Format::kNvfp4DsMlaFp8Rope,
                                        Format::kNvfp4DsMla, Format::kNvfp4Fp8DsMla, Format::kNvfp4DsMlaFp8RopePts};

// On Hopper these take a warpgroup kernel: 64-key tiles for the FP8 records
// and for the NVFP4 ones from 4 blocks of 64 heads, a row's two blocks
// sharing the decode in a cluster where it has two (crossover: 36 rows of
// 100 or 128 heads, the second of 100 with 28 past H; pts only there); 69
// rows of 40 or 64 run one block a row; 32-key tiles for pts at 40 and 64
// heads. Fewer rows take the transposed products (the next test).
TEST(cuda_sparse_mla_decode, many_rows_of_64_and_128_heads_match_the_cpu) {
  MLAKV_REQUIRE_GPU();
  // 64-key tiles (crossover at 100 and 128 heads, pts only there), pts on the 32-key ones at 40 and 64.
  for (const Format format : kWarpgroupFormats) {
    AttentionCache cache(format, 4096, 11);
    const double value_scale = max_abs_value(cache.keys());
    for (const std::int64_t heads : {40, 64, 100, 128}) {  // 40: a block with 24 heads past H
      const std::int64_t repeats = heads > 64 ? 12 : 23;   // 36 or 69 rows
      Problem p = make_problem(heads, 200, cache.capacity(), 80 + heads, repeats);
      const Result cpu = run_cpu(cache, p);
      const std::string what =
          std::string(format_info(format).id) + " H=" + std::to_string(heads) + " R=" + std::to_string(p.rows);
      expect_close(run_cuda(cache, p, false), cpu, value_scale, what);
      expect_close(run_cuda(cache, p, true), cpu, value_scale, what + " (workspace)");
    }
  }
  // Many tiles and splits a row: 33 rows of fp8_ds_mla (66 blocks: the 64-key tiles), 12 of the 368-byte records.
  for (const auto& [format, repeats] : {std::pair{Format::kFp8DsMla, 11}, std::pair{Format::kNvfp4DsMlaFp8Rope, 4}}) {
    AttentionCache cache(format, 9000, 5);
    Problem p = make_problem(128, 5000, cache.capacity(), 9, repeats);
    const Result cpu = run_cpu(cache, p);
    const std::string what = std::string(format_info(format).id) + " H=128 K=5000 R=" + std::to_string(p.rows);
    expect_close(run_cuda(cache, p, true), cpu, max_abs_value(cache.keys()), what + " (workspace)");
    expect_close(run_cuda(cache, p, false), cpu, max_abs_value(cache.keys()), what);
  }
}

TEST(cuda_sparse_mla_decode, rows_split_in_two_match_the_cpu) {
  MLAKV_REQUIRE_GPU();
  // 63 rows of 768 entries (12 tiles): with a workspace the split plan halves
  // each row (126 blocks), and the wide tiles merge the halves in a cluster of
  // the row's two blocks (cluster_merge.cuh), not through the workspace: in
  // blocks of 64 heads, and at 16 heads with the transposed products (blocks
  // of 32 heads, half of them past H). Every third row has no valid entry
  // (zeros and -inf from both halves).
  for (const auto& [format, heads] : {std::pair<Format, std::int64_t>{Format::kFp8DsMla, 64},
                                      {Format::kNvfp4DsMlaFp8Rope, 64},
                                      {Format::kNvfp4DsMlaFp8Rope, 16}}) {
    AttentionCache cache(format, 4096, 19);
    Problem p = make_problem(heads, 768, cache.capacity(), 50 + heads, /*repeats=*/21);
    const Result cpu = run_cpu(cache, p);
    const double value_scale = max_abs_value(cache.keys());
    const std::string what =
        std::string(format_info(format).id) + " H=" + std::to_string(heads) + " R=" + std::to_string(p.rows);
    expect_close(run_cuda(cache, p, true), cpu, value_scale, what + " (workspace)");
    expect_close(run_cuda(cache, p, false), cpu, value_scale, what);
  }
}

// The first `rows` rows of `p` (row-major q, indices and topk_len).
Problem first_rows(Problem p, std::int64_t rows) {
  p.rows = rows;
  p.q.resize(static_cast<std::size_t>(rows * p.heads * 576));  // 576 dims a head
  p.indices.resize(static_cast<std::size_t>(rows * p.topk));
  p.topk_len.resize(static_cast<std::size_t>(rows));
  return p;
}

// Rows of more than 32 heads too few for blocks of 64: on Hopper every record
// but pts takes the transposed products in blocks of 16 heads while the call
// has at most 12 of them (1 row of 40, 100 or 128 heads, 3 of 48 or 64), else
// for NVFP4 in blocks of 32 while it has at most 16 (2 rows of 100, 6 of 48,
// 4 of 128), each block decoding every record of its tiles; the FP8 records
// take the 64-key tiles there, pts the shared-tile kernel or with crossover
// (from 2 rows of 100 or 128) the 64-key tiles. 40 and 100 heads end in a
// partial block of 16 (and 100 in one of 32), 48 in 16 heads of a block of 32.
TEST(cuda_sparse_mla_decode, few_rows_of_more_than_32_heads_match_the_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format format : kWarpgroupFormats) {
    AttentionCache cache(format, 4096, 7);
    const double value_scale = max_abs_value(cache.keys());
    for (const auto& [heads, rows] : {std::pair<std::int64_t, std::int64_t>{40, 1},
                                      {100, 1},
                                      {128, 1},
                                      {48, 3},
                                      {64, 3},
                                      {100, 2},
                                      {48, 6},
                                      {128, 4}}) {
      Problem p = first_rows(make_problem(heads, 700, cache.capacity(), 30 + heads + rows, (rows + 2) / 3), rows);
      const Result cpu = run_cpu(cache, p);
      const std::string what =
          std::string(format_info(format).id) + " H=" + std::to_string(heads) + " R=" + std::to_string(rows);
      expect_close(run_cuda(cache, p, false), cpu, value_scale, what);
      expect_close(run_cuda(cache, p, true), cpu, value_scale, what + " (workspace)");
    }
  }
}

TEST(cuda_sparse_mla_decode, replays_in_a_cuda_graph) {
  MLAKV_REQUIRE_GPU();
  AttentionCache cache(Format::kNvfp4DsMla, 4096, 5);
  for (const std::int64_t repeats : {1, 12}) {  // 3 rows (shared-tile kernel) and 36 (split-dims)
    Problem p = make_problem(32, 2048, cache.capacity(), 3, repeats);
    const Result eager = run_cuda(cache, p, true);
    const Result replayed = run_cuda(cache, p, true, /*graph=*/true);
    EXPECT_EQ(eager.out, replayed.out);
    EXPECT_EQ(eager.lse, replayed.lse);
  }
}

TEST(cuda_sparse_mla_decode, leaves_guard_bytes_around_the_cache_untouched) {
  MLAKV_REQUIRE_GPU();
  AttentionCache cache(Format::kNvfp4DsMlaFp8Rope, 256, 5);
  constexpr std::size_t kGuard = 4096;
  std::vector<std::uint8_t> host(kGuard + cache.bytes.size() + kGuard, 0xC5);
  std::copy(cache.bytes.begin(), cache.bytes.end(), host.begin() + kGuard);
  DeviceBuffer buffer(host);
  Problem p = make_problem(16, 64, cache.capacity(), 9);
  std::vector<std::uint16_t> out(static_cast<std::size_t>(p.rows * 16 * 512));
  DeviceBuffer d_q(p.q), d_indices(p.indices), d_out(out.size() * 2), d_lse(static_cast<std::size_t>(p.rows * 16 * 4));
  sparse_mla_decode(cache.format, on_device(make_view(nullptr, DType::kBFloat16, {p.rows, 16, 576}), d_q),
                    on_device(cache.view(), buffer, kGuard),
                    on_device(make_view(nullptr, DType::kInt32, {p.rows, p.topk}), d_indices),
                    on_device(make_view(nullptr, DType::kBFloat16, {p.rows, 16, 512}), d_out),
                    on_device(make_view(nullptr, DType::kFloat32, {p.rows, 16}), d_lse));
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(buffer.download<std::uint8_t>(), host);
}

TEST(cuda_merge_attention_states, matches_the_cpu_in_bf16_and_float32) {
  MLAKV_REQUIRE_GPU();
  const std::int64_t rows = 4, heads = 8, width = 512;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const int size = dtype_size(dtype);
    std::vector<std::uint8_t> a(static_cast<std::size_t>(rows * heads * width * size));
    std::vector<std::uint8_t> b(a.size());
    for (std::size_t i = 0; i < a.size() / size; ++i) {
      const float va = normal(rng), vb = normal(rng);
      if (dtype == DType::kFloat32) {
        std::memcpy(a.data() + 4 * i, &va, 4);
        std::memcpy(b.data() + 4 * i, &vb, 4);
      } else {
        const std::uint16_t ba = round_bf16(va), bb = round_bf16(vb);
        std::memcpy(a.data() + 2 * i, &ba, 2);
        std::memcpy(b.data() + 2 * i, &bb, 2);
      }
    }
    std::vector<float> la(static_cast<std::size_t>(rows * heads)), lb(la.size());
    for (std::size_t i = 0; i < la.size(); ++i) {
      la[i] = 3.0f * normal(rng);
      lb[i] = i % 7 == 0 ? -std::numeric_limits<float>::infinity() : 3.0f * normal(rng);
    }
    la[5] = lb[5] = -std::numeric_limits<float>::infinity();
    std::vector<std::uint8_t> out(a.size());
    std::vector<float> lse(la.size());
    const auto v3 = [&](void* data) { return make_view(data, dtype, {rows, heads, width}); };
    const auto v2 = [&](void* data) { return make_view(data, DType::kFloat32, {rows, heads}); };
    merge_attention_states(v3(a.data()), v2(la.data()), v3(b.data()), v2(lb.data()), v3(out.data()), v2(lse.data()));
    DeviceBuffer da(a), db(b), dla(la), dlb(lb), dout(out.size()), dlse(lse.size() * 4);
    merge_attention_states(on_device(v3(nullptr), da), on_device(v2(nullptr), dla), on_device(v3(nullptr), db),
                           on_device(v2(nullptr), dlb), on_device(v3(nullptr), dout), on_device(v2(nullptr), dlse));
    MLAKV_CUDA_OK(cudaDeviceSynchronize());
    const auto gpu_lse = dlse.download<float>();
    for (std::size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(lse[i])) {
        EXPECT_EQ(gpu_lse[i], lse[i]);
      } else {
        EXPECT_NEAR(gpu_lse[i], lse[i], 1e-5f * std::max(1.0f, std::fabs(lse[i])));
      }
    }
    const auto gpu_out = dout.download<std::uint8_t>();
    for (std::size_t i = 0; i < out.size() / size; ++i) {
      const float g = element_as_float(gpu_out, dtype, i), c = element_as_float(out, dtype, i);
      // expf on the GPU and std::exp may differ in the last bit of a weight.
      ASSERT_NEAR(g, c, 1e-5f + std::ldexp(std::fabs(c), dtype == DType::kFloat32 ? -20 : -7)) << i;
    }
  }
}

}  // namespace
}  // namespace mlakv::test
