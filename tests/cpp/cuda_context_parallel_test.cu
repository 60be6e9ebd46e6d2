// SPDX-License-Identifier: Apache-2.0
// GPU tests of the context-parallel steps (label "gpu"; skipped without a
// device), N ranks simulated on one GPU: CUDA local slots equal the CPU's;
// the CUDA N-way merge matches the CPU's; per-rank CUDA decode + CUDA merge
// equals one CUDA decode over the whole cache for every format and N; the
// whole per-rank step (slots, decode, merge) replays in a CUDA graph.
//
// Tolerance: merge, |gpu - cpu| <= 2^-8 |cpu| + 1e-6 (a weight's expf may
// differ in its last bit, which can move a bf16 rounding); sharded vs whole,
// the CPU test's rule (docs/context_parallel.md) with the GPU decode's own
// tolerance added for each of the two decodes (2^-8 of the largest |value|
// plus 2^-8 relative, cuda_attention_test: the GPU weighs values with bf16
// probabilities), and lse within 1e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "context_parallel_support.h"
#include "cuda_support.h"

namespace mlakv::test {
namespace {

constexpr std::int64_t kHeads = 16;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Result {
  std::vector<std::uint16_t> out;
  std::vector<float> lse;
};

// One sharded sequence on the device: every rank's cache and table, the query and the positions.
struct DeviceRanks {
  ShardedSequence& s;
  std::int64_t rows, topk;
  DeviceBuffer whole, q, positions, req, outs, lses, out, lse, slots, k_scale;
  std::vector<std::unique_ptr<DeviceBuffer>> shards, tables;

  DeviceRanks(ShardedSequence& seq, std::vector<std::uint16_t>& host_q, std::vector<std::int32_t>& host_positions,
              std::int64_t r, std::int64_t k)
      : s(seq),
        rows(r),
        topk(k),
        whole(seq.whole),
        q(host_q),
        positions(host_positions),
        req(std::vector<std::int32_t>(static_cast<std::size_t>(r), 1)),
        outs(static_cast<std::size_t>(seq.world * r * kHeads * 512 * 2)),
        lses(static_cast<std::size_t>(seq.world * r * kHeads * 4)),
        out(static_cast<std::size_t>(r * kHeads * 512 * 2)),
        lse(static_cast<std::size_t>(r * kHeads * 4)),
        slots(static_cast<std::size_t>(seq.world * r * k * 4)),
        k_scale(std::vector<float>{seq.k_scale}) {
    for (std::int64_t j = 0; j < seq.world; ++j) {
      shards.push_back(std::make_unique<DeviceBuffer>(seq.shards[j]));
      tables.push_back(std::make_unique<DeviceBuffer>(seq.tables[j]));
    }
  }

  // fp8_e4m3's k_scale (the decode requires it; the other formats ignore it), on the device.
  SparseDecodeOptions decode_options() {
    scale_view = on_device(make_view(nullptr, DType::kFloat32, {1}), k_scale);
    SparseDecodeOptions options;
    options.decode.scale = &scale_view;
    return options;
  }
  TensorView scale_view;

  TensorView q_view() { return on_device(make_view(nullptr, DType::kBFloat16, {rows, kHeads, 576}), q); }
  TensorView slots_view(std::int64_t j) {
    return on_device(make_view(nullptr, DType::kInt32, {rows, topk}), slots,
                     static_cast<std::size_t>(j * rows * topk * 4));
  }

  // Every rank's step on `stream`: local slots, decode into its partial, then the N-way merge.
  void step(cudaStream_t stream) {
    const SparseDecodeOptions options = decode_options();
    const std::size_t out_bytes = static_cast<std::size_t>(rows * kHeads * 512 * 2);
    const std::size_t lse_bytes = static_cast<std::size_t>(rows * kHeads * 4);
    for (std::int64_t j = 0; j < s.world; ++j) {
      dcp_local_slots(on_device(make_view(nullptr, DType::kInt32, {rows, topk}), positions),
                      on_device(make_view(nullptr, DType::kInt32, {rows}), req), on_device(s.table_view(j), *tables[j]),
                      slots_view(j), s.layout(j), stream);
      sparse_mla_decode(s.format, q_view(), on_device(s.shard_view(j), *shards[j]), slots_view(j),
                        on_device(make_view(nullptr, DType::kBFloat16, {rows, kHeads, 512}), outs, j * out_bytes),
                        on_device(make_view(nullptr, DType::kFloat32, {rows, kHeads}), lses, j * lse_bytes), options,
                        stream);
    }
    merge_attention_states(on_device(make_view(nullptr, DType::kBFloat16, {s.world, rows, kHeads, 512}), outs),
                           on_device(make_view(nullptr, DType::kFloat32, {s.world, rows, kHeads}), lses),
                           on_device(make_view(nullptr, DType::kBFloat16, {rows, kHeads, 512}), out),
                           on_device(make_view(nullptr, DType::kFloat32, {rows, kHeads}), lse), stream);
  }

  Result merged() { return {out.download<std::uint16_t>(), lse.download<float>()}; }

  Result whole_decode() {
    DeviceBuffer w_out(out.bytes()), w_lse(lse.bytes());
    sparse_mla_decode(s.format, q_view(), on_device(s.whole_view(), whole),
                      on_device(make_view(nullptr, DType::kInt32, {rows, topk}), positions),
                      on_device(make_view(nullptr, DType::kBFloat16, {rows, kHeads, 512}), w_out),
                      on_device(make_view(nullptr, DType::kFloat32, {rows, kHeads}), w_lse), decode_options());
    cudaDeviceSynchronize();
    return {w_out.download<std::uint16_t>(), w_lse.download<float>()};
  }
};

TEST(cuda_dcp_local_slots, matches_the_cpu_for_every_world_size_and_interleave) {
  MLAKV_REQUIRE_GPU();
  for (const std::int64_t world : {1, 2, 3, 4, 8}) {
    for (const std::int64_t interleave : {1, 4, 64}) {
      ShardedSequence s(Format::kFp8E4m3, 3000, world, interleave, 1);
      const std::int64_t rows = 5, topk = 700;
      auto positions = random_positions(rows, topk, s.tokens + 200, 3);  // some past the table
      positions[0] = -1;
      std::vector<std::int32_t> req = {1, 1, 0, 2, 1};  // 2: no such table row
      for (std::int64_t j = 0; j < world; ++j) {
        std::vector<std::int32_t> cpu(positions.size(), 77);
        const TensorView p_view = make_view(positions.data(), DType::kInt32, {rows, topk});
        const TensorView r_view = make_view(req.data(), DType::kInt32, {rows});
        const TensorView o_view = make_view(cpu.data(), DType::kInt32, {rows, topk});
        dcp_local_slots(p_view, r_view, s.table_view(j), o_view, s.layout(j));
        DeviceBuffer d_positions(positions), d_req(req), d_table(s.tables[j]), d_out(cpu.size() * 4);
        dcp_local_slots(on_device(p_view, d_positions), on_device(r_view, d_req), on_device(s.table_view(j), d_table),
                        on_device(o_view, d_out), s.layout(j));
        MLAKV_CUDA_OK(cudaDeviceSynchronize());
        ASSERT_EQ(d_out.download<std::int32_t>(), cpu) << "N=" << world << " I=" << interleave << " rank " << j;
      }
    }
  }
}

TEST(cuda_merge_attention_states_n_way, matches_the_cpu_in_bf16_and_float32) {
  MLAKV_REQUIRE_GPU();
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::int64_t parts : {1, 2, 3, 4, 8}) {
    const std::int64_t rows = 5, heads = 12, width = 512;
    for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      const int size = dtype_size(dtype);
      std::vector<std::uint8_t> outs(static_cast<std::size_t>(parts * rows * heads * width * size));
      for (std::size_t i = 0; i < outs.size() / size; ++i) {
        const float v = normal(rng);
        if (dtype == DType::kFloat32) {
          std::memcpy(outs.data() + 4 * i, &v, 4);
        } else {
          const std::uint16_t b = round_bf16(v);
          std::memcpy(outs.data() + 2 * i, &b, 2);
        }
      }
      std::vector<float> lses(static_cast<std::size_t>(parts * rows * heads));
      for (std::size_t i = 0; i < lses.size(); ++i) lses[i] = i % 5 == 0 ? kNegInf : 3.0f * normal(rng);
      for (std::int64_t n = 0; n < parts; ++n) lses[n * rows * heads + 7] = kNegInf;  // (row 0, head 7): all -inf
      std::vector<std::uint8_t> out(static_cast<std::size_t>(rows * heads * width * size));
      std::vector<float> lse(static_cast<std::size_t>(rows * heads));
      const TensorView outs_view = make_view(outs.data(), dtype, {parts, rows, heads, width});
      const TensorView lses_view = make_view(lses.data(), DType::kFloat32, {parts, rows, heads});
      const TensorView out_view = make_view(out.data(), dtype, {rows, heads, width});
      const TensorView lse_view = make_view(lse.data(), DType::kFloat32, {rows, heads});
      merge_attention_states(outs_view, lses_view, out_view, lse_view);
      DeviceBuffer d_outs(outs), d_lses(lses), d_out(out.size()), d_lse(lse.size() * 4);
      merge_attention_states(on_device(outs_view, d_outs), on_device(lses_view, d_lses), on_device(out_view, d_out),
                             on_device(lse_view, d_lse));
      MLAKV_CUDA_OK(cudaDeviceSynchronize());
      const auto gpu_lse = d_lse.download<float>();
      for (std::size_t i = 0; i < lse.size(); ++i) {
        if (std::isinf(lse[i])) {
          ASSERT_EQ(gpu_lse[i], lse[i]) << i;
        } else {
          ASSERT_NEAR(gpu_lse[i], lse[i], 1e-5f * std::max(1.0f, std::fabs(lse[i]))) << i;
        }
      }
      const auto gpu_out = d_out.download<std::uint8_t>();
      for (std::size_t i = 0; i < out.size() / size; ++i) {
        const float g = element_as_float(gpu_out, dtype, i), c = element_as_float(out, dtype, i);
        ASSERT_NEAR(g, c, std::ldexp(std::fabs(c), -8) + 1e-6f) << "N=" << parts << " element " << i;
      }
    }
  }
}

TEST(cuda_context_parallel_decode, per_rank_decode_and_merge_equals_the_whole_cache_for_every_format_and_world_size) {
  MLAKV_REQUIRE_GPU();
  for (const FormatInfo& info : formats()) {
    if (info.geometry.nope_dims != 512) continue;  // the decode reads the 512 + 64 token-major formats only
    for (const std::int64_t world : {1, 2, 3, 4, 8}) {
      ShardedSequence s(info.format, 4096, world, world == 3 ? 2 : 1, 7 + world);
      const std::int64_t rows = 4, topk = 2048;
      auto q = random_queries(rows, kHeads, 5);
      auto positions = random_positions(rows, topk, s.tokens, 6);
      for (std::int64_t i = 0; i < topk; ++i) positions[3 * topk + i] = -1;  // row 3: nothing on any rank
      DeviceRanks ranks(s, q, positions, rows, topk);
      ranks.step(nullptr);
      MLAKV_CUDA_OK(cudaDeviceSynchronize());
      const Result merged = ranks.merged();
      const Result whole = ranks.whole_decode();
      const auto partials = ranks.outs.download<std::uint16_t>();
      const std::size_t per_rank = merged.out.size();
      int reported = 0;
      for (std::size_t i = 0; i < merged.out.size() && reported < 5; ++i) {
        float partial_scale = 0.0f;
        for (std::int64_t j = 0; j < world; ++j) {
          partial_scale = std::max(partial_scale, std::fabs(widen(partials[j * per_rank + i])));
        }
        const float w = widen(whole.out[i]), m = widen(merged.out[i]);
        const float tol =
            std::ldexp(std::fabs(w), -5) + std::ldexp(partial_scale, -8) + std::ldexp(s.max_abs_latent, -7);
        if (!(std::fabs(m - w) <= tol)) {
          ADD_FAILURE() << info.id << " N=" << world << ": out[" << i << "] merged " << m << ", whole " << w;
          ++reported;
        }
      }
      for (std::size_t i = 0; i < merged.lse.size(); ++i) {
        if (std::isinf(whole.lse[i])) {
          ASSERT_EQ(merged.lse[i], kNegInf) << info.id << " N=" << world << " lse " << i;
        } else {
          ASSERT_NEAR(merged.lse[i], whole.lse[i], 1e-3f * std::max(1.0f, std::fabs(whole.lse[i])))
              << info.id << " N=" << world << " lse " << i;
        }
      }
    }
  }
}

TEST(cuda_context_parallel_decode, the_per_rank_step_replays_in_a_cuda_graph) {
  MLAKV_REQUIRE_GPU();
  ShardedSequence s(Format::kNvfp4DsMlaFp8Rope, 8192, 4, 1, 2);
  const std::int64_t rows = 16, topk = 2048;
  auto q = random_queries(rows, kHeads, 8);
  auto positions = random_positions(rows, topk, s.tokens, 9);
  DeviceRanks ranks(s, q, positions, rows, topk);
  ranks.step(nullptr);
  MLAKV_CUDA_OK(cudaDeviceSynchronize());
  const Result eager = ranks.merged();
  cudaMemset(ranks.out.get(), 0, ranks.out.bytes());
  cudaMemset(ranks.lse.get(), 0, ranks.lse.bytes());
  cudaStream_t stream = nullptr;
  MLAKV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MLAKV_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ranks.step(stream);
  MLAKV_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  MLAKV_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  MLAKV_CUDA_OK(cudaGraphLaunch(exec, stream));
  MLAKV_CUDA_OK(cudaStreamSynchronize(stream));
  const Result replayed = ranks.merged();
  EXPECT_EQ(replayed.out, eager.out);
  EXPECT_EQ(replayed.lse, eager.lse);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace mlakv::test
