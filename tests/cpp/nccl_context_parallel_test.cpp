// SPDX-License-Identifier: Apache-2.0
// The collective step over NCCL (label "gpu"; built when NCCL is found):
// one communicator rank per visible GPU (ncclCommInitAll, one host thread per
// rank). Every rank's partial is made up on the host; merge_across_ranks must
// give the CPU N-way merge of all of them, merge_across_ranks_sharded its
// rank's heads, and a captured CUDA graph of the step the same bytes. With
// one GPU the communicator has one rank (the step is then a copy through the
// merge); the multi-rank cases skip below 2 GPUs.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "cuda_support.h"
#include "mlakv/context_parallel.h"
#include "mlakv/context_parallel_nccl.h"
#include "test_support.h"

namespace mlakv::test {
namespace {

int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  cudaGetLastError();
  return count;
}

// N partials [N, R, H, 64] float32 with lse, some -inf, made up on the host.
struct Partials {
  std::int64_t world, rows, heads, width = 64;
  std::vector<float> outs, lses;
  Partials(std::int64_t n, std::int64_t r, std::int64_t h) : world(n), rows(r), heads(h) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    outs.resize(static_cast<std::size_t>(n * r * h * width));
    lses.resize(static_cast<std::size_t>(n * r * h));
    for (auto& v : outs) v = normal(rng);
    for (std::size_t i = 0; i < lses.size(); ++i) lses[i] = i % 3 == 0 ? -INFINITY : 2.0f * normal(rng);
  }
  std::size_t per_rank() const { return static_cast<std::size_t>(rows * heads * width); }
};

// Runs `step(rank, stream)` on every GPU's thread after creating the communicators.
template <class Step>
void on_every_rank(int world, Step&& step) {
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(world));
  std::vector<int> devices(static_cast<std::size_t>(world));
  for (int i = 0; i < world; ++i) devices[i] = i;
  ASSERT_EQ(ncclCommInitAll(comms.data(), world, devices.data()), ncclSuccess);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      cudaSetDevice(rank);
      step(rank, comms[rank]);
    });
  }
  for (auto& t : threads) t.join();
  for (auto comm : comms) ncclCommDestroy(comm);
}

void run_step(int world, bool sharded, bool graph) {
  Partials p(world, 5, 4 * world);
  const std::int64_t heads_out = sharded ? p.heads / world : p.heads;
  // The CPU N-way merge of all partials: what every rank must get (its heads when sharded).
  std::vector<float> want(p.per_rank()), want_lse(static_cast<std::size_t>(p.rows * p.heads));
  merge_attention_states(make_view(p.outs.data(), DType::kFloat32, {world, p.rows, p.heads, p.width}),
                         make_view(p.lses.data(), DType::kFloat32, {world, p.rows, p.heads}),
                         make_view(want.data(), DType::kFloat32, {p.rows, p.heads, p.width}),
                         make_view(want_lse.data(), DType::kFloat32, {p.rows, p.heads}));
  std::vector<std::vector<float>> got(static_cast<std::size_t>(world)), got_lse(static_cast<std::size_t>(world));
  on_every_rank(world, [&](int rank, ncclComm_t comm) {
    std::vector<float> mine(p.outs.begin() + rank * p.per_rank(), p.outs.begin() + (rank + 1) * p.per_rank());
    std::vector<float> mine_lse(p.lses.begin() + rank * p.rows * p.heads,
                                p.lses.begin() + (rank + 1) * p.rows * p.heads);
    DeviceBuffer out(mine), lse(mine_lse), merged(static_cast<std::size_t>(p.rows * heads_out * p.width * 4)),
        merged_lse(static_cast<std::size_t>(p.rows * heads_out * 4)),
        workspace(merge_across_ranks_workspace_size(p.rows, p.heads, p.width, DType::kFloat32, world, sharded));
    const Device device{DeviceType::kCuda, rank};
    const auto on = [&](TensorView v) {
      v.device = device;
      return v;
    };
    const TensorView views[] = {
        on(make_view(out.get(), DType::kFloat32, {p.rows, p.heads, p.width})),
        on(make_view(lse.get(), DType::kFloat32, {p.rows, p.heads})),
        on(make_view(workspace.get(), DType::kUInt8, {static_cast<std::int64_t>(workspace.bytes())})),
        on(make_view(merged.get(), DType::kFloat32, {p.rows, heads_out, p.width})),
        on(make_view(merged_lse.get(), DType::kFloat32, {p.rows, heads_out}))};
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    const auto step = [&] {
      (sharded ? merge_across_ranks_sharded : merge_across_ranks)(views[0], views[1], views[2], views[3], views[4],
                                                                  comm, stream);
    };
    if (graph) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      step();
      cudaStreamEndCapture(stream, &g);
      cudaGraphInstantiate(&exec, g, 0);
      cudaGraphLaunch(exec, stream);
      cudaStreamSynchronize(stream);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
    } else {
      step();
      cudaStreamSynchronize(stream);
    }
    cudaStreamDestroy(stream);
    got[rank] = merged.download<float>();
    got_lse[rank] = merged_lse.download<float>();
  });
  for (int rank = 0; rank < world; ++rank) {
    const std::int64_t head0 = sharded ? rank * heads_out : 0;
    for (std::int64_t r = 0; r < p.rows; ++r) {
      for (std::int64_t h = 0; h < heads_out; ++h) {
        const float l = want_lse[r * p.heads + head0 + h];
        // The same merge arithmetic on the GPU: expf may differ from the host's in the last bit.
        if (std::isinf(l)) {
          ASSERT_EQ(got_lse[rank][r * heads_out + h], l);
        } else {
          ASSERT_NEAR(got_lse[rank][r * heads_out + h], l, 1e-5f * std::max(1.0f, std::fabs(l)));
        }
        for (std::int64_t d = 0; d < p.width; ++d) {
          const float w = want[(r * p.heads + head0 + h) * p.width + d];
          ASSERT_NEAR(got[rank][(r * heads_out + h) * p.width + d], w, 1e-5f * (1.0f + std::fabs(w)))
              << "rank " << rank << " row " << r << " head " << h;
        }
      }
    }
  }
}

TEST(nccl_merge_across_ranks, one_rank_gives_its_own_partial) {
  MLAKV_REQUIRE_GPU();
  run_step(1, false, false);
  run_step(1, true, false);
}

TEST(nccl_merge_across_ranks, every_rank_gets_the_merge_of_all_partials) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 or more CUDA devices";
  run_step(gpu_count() >= 4 ? 4 : 2, false, false);
}

TEST(nccl_merge_across_ranks, sharded_every_rank_gets_its_heads_of_the_merge) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 or more CUDA devices";
  run_step(gpu_count() >= 4 ? 4 : 2, true, false);
}

TEST(nccl_merge_across_ranks, both_steps_replay_in_a_cuda_graph) {
  MLAKV_REQUIRE_GPU();
  const int world = gpu_count() >= 4 ? 4 : gpu_count();
  run_step(world, false, true);
  run_step(world, true, true);
}

TEST(nccl_merge_across_ranks, a_null_communicator_is_rejected_before_any_call) {
  std::vector<float> out(4 * 2 * 64), lse(4 * 2);
  std::vector<std::uint8_t> workspace(1 << 16);
  TensorView views[] = {
      make_view(out.data(), DType::kFloat32, {4, 2, 64}), make_view(lse.data(), DType::kFloat32, {4, 2}),
      make_view(workspace.data(), DType::kUInt8, {1 << 16}), make_view(out.data(), DType::kFloat32, {4, 2, 64}),
      make_view(lse.data(), DType::kFloat32, {4, 2})};
  try {
    merge_across_ranks(views[0], views[1], views[2], views[3], views[4], nullptr, nullptr);
    ADD_FAILURE() << "accepted a null communicator";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "mlakv::merge_across_ranks: comm: must be an NCCL communicator, got null");
  }
}

}  // namespace
}  // namespace mlakv::test
