// SPDX-License-Identifier: Apache-2.0
// GPU tests of the sparse MLA prefill (label "gpu"; skipped without a
// device): CUDA against the CPU reference (the decode's) for every format the
// CUDA prefill reads, over head counts {1, 16, 64, 80, 128}, query rows
// {1, 7, 300} and entries a row {1, 64, 2048, 5000}, with -1 and
// past-capacity entries, topk_len that ends a row mid-tile and a row with
// nothing valid; graph capture replays the eager result bit for bit; the
// cache is never written.
//
// Tolerance (as the decode's: the GPU weighs values with bf16 probabilities
// and sums in another order): |gpu - cpu| <= 2^-8 max|value| + 2^-8 |cpu| per
// output element, |gpu - cpu| <= 1e-3 max(1, |lse|).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_support.h"
#include "cuda_support.h"

namespace mlakv::test {
namespace {

struct Rows {
  std::int64_t rows;
  std::int64_t heads;
  std::int64_t topk;
  std::vector<std::uint16_t> q;
  std::vector<std::int32_t> indices;
  std::vector<std::int32_t> topk_len;
};

// Every row random entries; where there are more rows, row 1 has -1 and
// past-capacity entries among them and a topk_len that ends it mid-tile,
// row 2 nothing valid, and every seventh row a topk_len of a few entries.
Rows make_rows(std::int64_t rows, std::int64_t heads, std::int64_t topk, std::int64_t capacity, std::uint64_t seed) {
  Rows r{rows, heads, topk, random_queries(rows, heads, seed), {}, {}};
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<std::int32_t> slot(0, static_cast<std::int32_t>(capacity - 1));
  r.indices.resize(static_cast<std::size_t>(rows * topk));
  for (auto& i : r.indices) i = slot(rng);
  r.topk_len.assign(static_cast<std::size_t>(rows), static_cast<std::int32_t>(topk));
  if (rows > 1) {
    for (std::int64_t i = 0; i < topk; i += 3) r.indices[topk + i] = i % 2 == 0 ? -1 : static_cast<int>(capacity + i);
    r.topk_len[1] = static_cast<std::int32_t>(std::max<std::int64_t>(1, topk - 37));
  }
  if (rows > 2) {
    for (std::int64_t i = 0; i < topk; ++i) r.indices[2 * topk + i] = -1;
  }
  for (std::int64_t row = 3; row < rows; row += 7) r.topk_len[row] = static_cast<std::int32_t>(std::min(topk, row));
  return r;
}

struct Result {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

Result run_cpu(AttentionCache& cache, Rows& r) {
  Result res{std::vector<std::uint16_t>(static_cast<std::size_t>(r.rows * r.heads * 512)),
             std::vector<float>(static_cast<std::size_t>(r.rows * r.heads))};
  SparsePrefillOptions options;
  const TensorView len = make_view(r.topk_len.data(), DType::kInt32, {r.rows});
  options.topk_len = &len;
  const TensorView scale = make_view(&cache.k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  sparse_mla_prefill(cache.format, make_view(r.q.data(), DType::kBFloat16, {r.rows, r.heads, 576}), cache.view(),
                     make_view(r.indices.data(), DType::kInt32, {r.rows, r.topk}),
                     make_view(res.out.data(), DType::kBFloat16, {r.rows, r.heads, 512}),
                     make_view(res.lse.data(), DType::kFloat32, {r.rows, r.heads}), options);
  return res;
}

// The same prefill on the GPU; with `graph`, captured once and replayed twice.
Result run_cuda(AttentionCache& cache, Rows& r, bool graph = false) {
  DeviceBuffer d_cache(cache.bytes);
  DeviceBuffer d_q(r.q);
  DeviceBuffer d_indices(r.indices);
  DeviceBuffer d_len(r.topk_len);
  DeviceBuffer d_out(static_cast<std::size_t>(r.rows * r.heads * 512 * 2));
  DeviceBuffer d_lse(static_cast<std::size_t>(r.rows * r.heads * 4));
  cudaMemset(d_out.get(), 0xFF, d_out.bytes());
  SparsePrefillOptions options;
  const TensorView len = on_device(make_view(nullptr, DType::kInt32, {r.rows}), d_len);
  options.topk_len = &len;
  const TensorView scale = make_view(&cache.k_scale, DType::kFloat32, {1});
  options.decode.scale = &scale;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const auto launch = [&] {
    sparse_mla_prefill(cache.format, on_device(make_view(nullptr, DType::kBFloat16, {r.rows, r.heads, 576}), d_q),
                       on_device(cache.view(), d_cache),
                       on_device(make_view(nullptr, DType::kInt32, {r.rows, r.topk}), d_indices),
                       on_device(make_view(nullptr, DType::kBFloat16, {r.rows, r.heads, 512}), d_out),
                       on_device(make_view(nullptr, DType::kFloat32, {r.rows, r.heads}), d_lse), options, stream);
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
  EXPECT_EQ(d_cache.download<std::uint8_t>(), cache.bytes) << "the prefill wrote the cache";
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
  reported = 0;
  for (std::size_t i = 0; i < cpu.lse.size() && reported < 5; ++i) {
    const bool ok = std::isinf(cpu.lse[i])
                        ? gpu.lse[i] == cpu.lse[i]
                        : std::fabs(gpu.lse[i] - cpu.lse[i]) <= 1e-3 * std::max(1.0f, std::fabs(cpu.lse[i]));
    if (!ok) {
      ADD_FAILURE() << what << ": lse[" << i << "] gpu " << gpu.lse[i] << " cpu " << cpu.lse[i];
      ++reported;
    }
  }
}

// The 512 + 64 formats the CUDA prefill reads (the V3.2-era records; the DeepSeek V4
// family's prefill rows run the V4 decode's kernel, which cuda_v4_decode_test holds to the CPU).
std::vector<Format> prefill_formats() {
  std::vector<Format> all;
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims == 512 && supports(info.format, Backend::kCuda, Operation::kPrefill)) {
      all.push_back(info.format);
    }
  }
  return all;
}

void expect_matches_cpu(Format format, std::int64_t rows, std::int64_t heads, std::int64_t topk, std::uint64_t seed) {
  AttentionCache cache(format, 8192, seed);
  Rows r = make_rows(rows, heads, topk, cache.capacity(), seed + 7);
  const Result gpu = run_cuda(cache, r);
  const Result cpu = run_cpu(cache, r);
  expect_close(gpu, cpu, max_abs_value(cache.keys()),
               std::string(format_info(format).id) + " s_q=" + std::to_string(rows) + " H=" + std::to_string(heads) +
                   " topk=" + std::to_string(topk));
}

TEST(cuda_sparse_mla_prefill, matches_the_cpu_for_every_format_at_64_heads_and_2048_entries) {
  MLAKV_REQUIRE_GPU();
  for (const Format f : prefill_formats()) expect_matches_cpu(f, 7, 64, 2048, 1);
}

TEST(cuda_sparse_mla_prefill, matches_the_cpu_for_every_format_at_one_head_and_one_entry) {
  MLAKV_REQUIRE_GPU();
  for (const Format f : prefill_formats()) expect_matches_cpu(f, 1, 1, 1, 2);
  for (const Format f : prefill_formats()) expect_matches_cpu(f, 7, 1, 64, 3);
}

TEST(cuda_sparse_mla_prefill, matches_the_cpu_for_every_format_at_300_rows_of_16_heads) {
  MLAKV_REQUIRE_GPU();
  for (const Format f : prefill_formats()) expect_matches_cpu(f, 300, 16, 64, 4);
}

TEST(cuda_sparse_mla_prefill, matches_the_cpu_at_128_heads_and_5000_entries) {
  MLAKV_REQUIRE_GPU();
  for (const Format f : {Format::kFp8DsMla, Format::kNvfp4DsMlaFp8Rope, Format::kNvfp4DsMlaFp8RopePts}) {
    expect_matches_cpu(f, 7, 128, 5000, 5);
  }
}

TEST(cuda_sparse_mla_prefill, matches_the_cpu_at_300_rows_of_64_heads) {
  MLAKV_REQUIRE_GPU();
  for (const Format f : {Format::kFp8DsMla, Format::kNvfp4DsMla}) expect_matches_cpu(f, 300, 64, 64, 6);
}

TEST(cuda_sparse_mla_prefill, a_partial_block_of_heads_matches_the_cpu) {
  MLAKV_REQUIRE_GPU();
  for (const Format f : {Format::kFp8DsMla, Format::kNvfp4Fp8DsMla}) expect_matches_cpu(f, 7, 80, 300, 7);
}

TEST(cuda_sparse_mla_prefill, replays_in_a_cuda_graph) {
  MLAKV_REQUIRE_GPU();
  AttentionCache cache(Format::kFp8DsMla, 4096, 8);
  Rows r = make_rows(7, 128, 2048, cache.capacity(), 9);
  const Result eager = run_cuda(cache, r);
  const Result replayed = run_cuda(cache, r, /*graph=*/true);
  EXPECT_EQ(eager.out, replayed.out);
  EXPECT_EQ(eager.lse, replayed.lse);
}

}  // namespace
}  // namespace mlakv::test
