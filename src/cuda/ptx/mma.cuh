// SPDX-License-Identifier: Apache-2.0
// The tensor-core primitives of the attention kernels (sm_80+ PTX that every
// architecture of this build runs): ldmatrix from shared memory, the bf16
// m16n8k16 mma with float32 accumulators, and asynchronous copies to shared memory.
#pragma once

#include <cstdint>

#include "cuda/ptx/shared_address.cuh"

namespace mlakv::cuda {

/// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  const std::uint32_t address = shared_address(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// Two 8x8 b16 matrices; lanes 0-15 give the row addresses.
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], const void* row) {
  const std::uint32_t address = shared_address(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}

/// The same, each matrix transposed (a row-major [k][n] tile as a "col" B operand).
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
  const std::uint32_t address = shared_address(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/// d += a (16x16, row) * b (16x8, col), bf16 inputs, float32 accumulate.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                               std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// The 8x8 b16 matrix the warp holds (lane l: row l / 4, columns 2 (l % 4) and
/// 2 (l % 4) + 1) transposed, in the same layout: a key fragment whose pairs run
/// along dims becomes a value fragment whose pairs run along tokens.
__device__ __forceinline__ std::uint32_t transpose_8x8(std::uint32_t m) {
  std::uint32_t t;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(t) : "r"(m));
  return t;
}

/// 16 bytes global -> shared without passing through registers (cached in L2 only).
__device__ __forceinline__ void copy_async16(void* smem, const void* global) {
  const std::uint32_t address = shared_address(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
}

/// The same, or 16 zero bytes written to `smem` (and nothing read) when !copy;
/// `global` must still be a valid address.
__device__ __forceinline__ void copy_async16_or_zero(void* smem, const void* global, bool copy) {
  const std::uint32_t address = shared_address(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(copy ? 16 : 0));
}

/// Closes the group of cp.async issued since the last commit.
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/// Waits until at most kPending of this thread's cp.async groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

/// Waits for every cp.async this thread issued.
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace mlakv::cuda
