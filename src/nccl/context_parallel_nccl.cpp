// SPDX-License-Identifier: Apache-2.0
// The collective step over NCCL: the partials move by ncclAllGather or grouped
// ncclSend/ncclRecv into the caller's workspace, then the public N-way merge
// runs on the same stream. Host-side only: NCCL, cudaMemcpy2DAsync and the merge.
#include "mlakv/context_parallel_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "api/check.h"
#include "api/rules.h"
#include "api/validate_context_parallel.h"
#include "mlakv/context_parallel.h"

namespace mlakv {
namespace {

using api::device_string;
using api::shape_string;
using api::strides_string;

constexpr std::int64_t kAlign = 256;  // each workspace region starts on a 256-byte boundary

// Saturating: a caller's absurd shape gives a size no workspace has, never a wrapped one.
std::int64_t aligned(std::int64_t bytes) { return api::saturating_add(bytes, kAlign - 1) / kAlign * kAlign; }

std::int64_t product(std::initializer_list<std::int64_t> factors) {
  std::int64_t p = 1;
  for (const std::int64_t f : factors) p = api::saturating_mul(p, f);
  return p;
}

using api::str;

struct Step {
  std::int64_t world, rank, rows, heads, width, element;
  ncclDataType_t type;
};

bool contiguous(const TensorView& v) {
  std::int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != stride) return false;
    stride *= v.shape[d];
  }
  return true;
}

// Everything is checked before the first NCCL call; merge_attention_states checks the outputs again.
Step validate(const api::Check& check, const TensorView& out, const TensorView& lse, const TensorView& workspace,
              const TensorView& merged_out, const TensorView& merged_lse, NcclCommHandle comm, bool sharded) {
  check.require(comm != nullptr, ErrorCode::kValue, "comm", "must be an NCCL communicator", "null");
  int world = 0, rank = 0;
  check.require(ncclCommCount(comm, &world) == ncclSuccess && ncclCommUserRank(comm, &rank) == ncclSuccess,
                ErrorCode::kBackend, "comm", "must be an initialized NCCL communicator", "an NCCL error");
  for (const auto& [name, v] : {std::pair<const char*, const TensorView*>{"out", &out},
                                {"lse", &lse},
                                {"workspace", &workspace},
                                {"merged_out", &merged_out},
                                {"merged_lse", &merged_lse}}) {
    check.require(v->device.type == DeviceType::kCuda && v->device == out.device, ErrorCode::kDevice, name,
                  "must be on out's CUDA device", device_string(v->device));
  }
  check.require(out.dtype == DType::kBFloat16 || out.dtype == DType::kFloat32, ErrorCode::kDtype, "out",
                "dtype must be bf16 or float32", dtype_name(out.dtype));
  check.require(out.ndim == 3 && contiguous(out), ErrorCode::kLayout, "out", "must be a contiguous (R, H, D) array",
                shape_string(out) + " strides " + strides_string(out));
  const Step s{world,
               rank,
               out.shape[0],
               out.shape[1],
               out.shape[2],
               out.dtype == DType::kFloat32 ? 4 : 2,
               out.dtype == DType::kFloat32 ? ncclFloat32 : ncclBfloat16};
  check.require(lse.dtype == DType::kFloat32 && lse.ndim == 2 && lse.shape[0] == s.rows && lse.shape[1] == s.heads &&
                    contiguous(lse),
                ErrorCode::kShape, "lse",
                "must be a contiguous float32 (R, H) = (" + str(s.rows) + ", " + str(s.heads) + ") array",
                shape_string(lse));
  if (sharded) {
    check.require(s.heads % world == 0, ErrorCode::kShape, "out",
                  "heads (dim 1) must be a multiple of the communicator's size " + str(world), str(s.heads));
  }
  check.require(workspace.dtype == DType::kUInt8 && workspace.ndim == 1 && contiguous(workspace), ErrorCode::kLayout,
                "workspace", "must be a contiguous 1-D uint8 buffer", shape_string(workspace));
  const auto needed =
      static_cast<std::int64_t>(merge_across_ranks_workspace_size(s.rows, s.heads, s.width, out.dtype, world, sharded));
  check.require(workspace.shape[0] >= needed, ErrorCode::kShape, "workspace",
                "must hold merge_across_ranks_workspace_size() = " + str(needed) + " bytes",
                str(workspace.shape[0]) + " bytes");
  check.require(
      reinterpret_cast<std::uintptr_t>(workspace.data) % kAlign == 0, ErrorCode::kAlignment, "workspace",
      "base must be " + str(kAlign) + "-byte aligned",
      "address % 256 = " + str(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(workspace.data) % kAlign)));
  return s;
}

void require_ok(const api::Check& check, ncclResult_t status) {
  check.require(status == ncclSuccess, ErrorCode::kBackend, "comm", "NCCL reported an error",
                ncclGetErrorString(status));
}

void require_ok(const api::Check& check, cudaError_t status) {
  if (status == cudaSuccess) return;
  cudaGetLastError();
  check.fail(ErrorCode::kBackend, "stream", "the CUDA runtime reported an error",
             std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
}

TensorView region(void* base, DType dtype, std::initializer_list<std::int64_t> shape, Device device) {
  TensorView v = make_view(base, dtype, shape);
  v.device = device;
  return v;
}

}  // namespace

std::size_t merge_across_ranks_workspace_size(std::int64_t rows, std::int64_t heads, std::int64_t width, DType dtype,
                                              std::int64_t world_size, bool sharded) {
  const std::int64_t element = dtype == DType::kFloat32 ? 4 : 2;
  if (!sharded) {
    return static_cast<std::size_t>(api::saturating_add(aligned(product({world_size, rows, heads, width, element})),
                                                        aligned(product({world_size, rows, heads, 4}))));
  }
  // Send and receive buffers of the same size: [N, R, H/N, D] and [N, R, H/N] each (N H/N = H).
  return static_cast<std::size_t>(api::saturating_add(product({aligned(product({rows, heads, width, element})), 2}),
                                                      product({aligned(product({rows, heads, 4})), 2})));
}

void merge_across_ranks(const TensorView& out, const TensorView& lse, const TensorView& workspace,
                        const TensorView& merged_out, const TensorView& merged_lse, NcclCommHandle comm,
                        StreamHandle stream) {
  const api::Check check("merge_across_ranks", "");
  const Step s = validate(check, out, lse, workspace, merged_out, merged_lse, comm, false);
  auto* base = static_cast<std::uint8_t*>(workspace.data);
  void* outs = base;
  void* lses = base + aligned(s.world * s.rows * s.heads * s.width * s.element);
  const TensorView outs_view = region(outs, out.dtype, {s.world, s.rows, s.heads, s.width}, out.device);
  const TensorView lses_view = region(lses, DType::kFloat32, {s.world, s.rows, s.heads}, out.device);
  // The merge's own checks (merged_out and merged_lse, apart from the workspace) before anything is enqueued.
  api::validate_stacked_merge(check, outs_view, lses_view, merged_out, merged_lse);
  require_ok(check, ncclGroupStart());
  require_ok(check,
             ncclAllGather(out.data, outs, static_cast<std::size_t>(s.rows * s.heads * s.width), s.type, comm, stream));
  require_ok(check,
             ncclAllGather(lse.data, lses, static_cast<std::size_t>(s.rows * s.heads), ncclFloat32, comm, stream));
  require_ok(check, ncclGroupEnd());
  merge_attention_states(outs_view, lses_view, merged_out, merged_lse, stream);
}

void merge_across_ranks_sharded(const TensorView& out, const TensorView& lse, const TensorView& workspace,
                                const TensorView& merged_out, const TensorView& merged_lse, NcclCommHandle comm,
                                StreamHandle stream) {
  const api::Check check("merge_across_ranks_sharded", "");
  const Step s = validate(check, out, lse, workspace, merged_out, merged_lse, comm, true);
  const std::int64_t per = s.heads / s.world;
  const std::int64_t out_bytes = aligned(s.rows * s.heads * s.width * s.element);
  const std::int64_t lse_bytes = aligned(s.rows * s.heads * 4);
  auto* send = static_cast<std::uint8_t*>(workspace.data);
  std::uint8_t* recv = send + out_bytes;
  std::uint8_t* send_lse = recv + out_bytes;
  std::uint8_t* recv_lse = send_lse + lse_bytes;
  const TensorView outs_view = region(recv, out.dtype, {s.world, s.rows, per, s.width}, out.device);
  const TensorView lses_view = region(recv_lse, DType::kFloat32, {s.world, s.rows, per}, out.device);
  api::validate_stacked_merge(check, outs_view, lses_view, merged_out, merged_lse);
  // Pack: rank j's heads of every row, contiguous ([N, R, H/N, D]), so each peer's share is one buffer.
  const auto chunk = static_cast<std::size_t>(per * s.width * s.element);
  const auto chunk_lse = static_cast<std::size_t>(per * 4);
  auto* stream_ = reinterpret_cast<cudaStream_t>(stream);
  for (std::int64_t j = 0; j < s.world; ++j) {
    require_ok(check,
               cudaMemcpy2DAsync(send + j * s.rows * chunk, chunk, static_cast<std::uint8_t*>(out.data) + j * chunk,
                                 static_cast<std::size_t>(s.heads * s.width * s.element), chunk,
                                 static_cast<std::size_t>(s.rows), cudaMemcpyDeviceToDevice, stream_));
    require_ok(check, cudaMemcpy2DAsync(send_lse + j * s.rows * chunk_lse, chunk_lse,
                                        static_cast<std::uint8_t*>(lse.data) + j * chunk_lse,
                                        static_cast<std::size_t>(s.heads * 4), chunk_lse,
                                        static_cast<std::size_t>(s.rows), cudaMemcpyDeviceToDevice, stream_));
  }
  const auto count = static_cast<std::size_t>(s.rows * per * s.width);
  const auto count_lse = static_cast<std::size_t>(s.rows * per);
  require_ok(check, ncclGroupStart());
  for (int peer = 0; peer < s.world; ++peer) {
    require_ok(check, ncclSend(send + peer * s.rows * chunk, count, s.type, peer, comm, stream));
    require_ok(check, ncclRecv(recv + peer * s.rows * chunk, count, s.type, peer, comm, stream));
    require_ok(check, ncclSend(send_lse + peer * s.rows * chunk_lse, count_lse, ncclFloat32, peer, comm, stream));
    require_ok(check, ncclRecv(recv_lse + peer * s.rows * chunk_lse, count_lse, ncclFloat32, peer, comm, stream));
  }
  require_ok(check, ncclGroupEnd());
  merge_attention_states(outs_view, lses_view, merged_out, merged_lse, stream);
}

}  // namespace mlakv
