// SPDX-License-Identifier: Apache-2.0
// CUDA writer and reader of the DeepSeek V4 family (block-planar V4 pages,
// token-major V4.1 records): one thread per (token, part) over the same part
// codec as the CPU reference; a part (a tile, or V4's RoPE and pad) writes or
// reads only its own bytes, which format::page_offset places in the token's
// data row and scale row.
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#include "dispatch/visit_codec.h"

namespace mlakv::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;

template <class Codec, codec::InputDtype kDtype>
__global__ void write_pages_kernel(const params::WriteParams p) {
  const std::int64_t job = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t token = job / Codec::kParts;
  if (token >= p.num_tokens) return;
  const std::int64_t slot = p.slot_mapping[token];
  if (!params::slot_in_range(p.cache, slot)) return;
  const params::PagePosition at = params::page_position(p.cache, slot);
  // Rows are 4-byte aligned (validated): read as 16-bit values.
  const auto* nope = reinterpret_cast<const std::uint16_t*>(p.kv_c + token * p.kv_c_stride_bytes);
  const auto* rope = reinterpret_cast<const std::uint16_t*>(p.k_pe + token * p.k_pe_stride_bytes);
  Codec::template encode_part<kDtype>(
      static_cast<int>(job % Codec::kParts), nope, rope,
      params::field_address(p.cache, at, Codec::kDataRow.region, Codec::kDataRow.offset),
      params::field_address(p.cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset));
}

template <class Codec, class Out>
__global__ void gather_pages_kernel(const params::GatherParams p) {
  const std::int64_t job = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t row = job / Codec::kParts;
  if (row >= p.num_rows) return;
  const int part = static_cast<int>(job % Codec::kParts);
  float values[Codec::kPartValues] = {};
  const std::int64_t slot = params::row_slot(p.source, p.cache, row);
  if (params::slot_in_range(p.cache, slot)) {
    const params::PagePosition at = params::page_position(p.cache, slot);
    Codec::decode_part(part, params::field_address(p.cache, at, Codec::kDataRow.region, Codec::kDataRow.offset),
                       params::field_address(p.cache, at, Codec::kScaleRow.region, Codec::kScaleRow.offset), values);
  }
  // Part p holds values [p * kPartValues, (p + 1) * kPartValues) of NoPE ++ RoPE.
  const int start = part * Codec::kPartValues;
  Out* out = start < Codec::kNope
                 ? static_cast<Out*>(p.kv_c_out) + row * p.kv_c_out_stride_elems + start
                 : static_cast<Out*>(p.k_pe_out) + row * p.k_pe_out_stride_elems + (start - Codec::kNope);
  for (int i = 0; i < Codec::kPartValues; ++i) {
    // The CPU reader's stores: one canonical f32 NaN, or bf16 with every NaN 0x7FFF.
    if constexpr (sizeof(Out) == sizeof(float)) {
      out[i] = codec::canonical_nan(values[i]);
    } else {
      out[i] = codec::encode_bf16(values[i]);
    }
  }
}

unsigned blocks_for(std::int64_t jobs) {
  return static_cast<unsigned>((jobs + kThreadsPerBlock - 1) / kThreadsPerBlock);
}

}  // namespace

cudaError_t write_pages(const params::WriteParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  return codec::visit_part_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    const unsigned blocks = blocks_for(p.num_tokens * Codec::kParts);
    if (p.dtype == codec::InputDtype::kBf16) {
      write_pages_kernel<Codec, codec::InputDtype::kBf16><<<blocks, kThreadsPerBlock, 0, stream>>>(p);
    } else {
      write_pages_kernel<Codec, codec::InputDtype::kFp16><<<blocks, kThreadsPerBlock, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

cudaError_t gather_pages(const params::GatherParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  return codec::visit_part_codec(p.format, [&]<class Codec>(codec::Tag<Codec>) {
    const unsigned blocks = blocks_for(p.num_rows * Codec::kParts);
    if (p.out_dtype == params::OutDtype::kFloat32) {
      gather_pages_kernel<Codec, float><<<blocks, kThreadsPerBlock, 0, stream>>>(p);
    } else {
      gather_pages_kernel<Codec, std::uint16_t><<<blocks, kThreadsPerBlock, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

}  // namespace mlakv::cuda
