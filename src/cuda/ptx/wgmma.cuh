// SPDX-License-Identifier: Apache-2.0
// Warpgroup tensor-core primitives (sm_90a: wgmma is Hopper's arch-specific
// PTX; the code calling them is compiled only where __CUDA_ARCH_FEAT_SM90_ALL
// is defined). Operands live in shared memory as bf16 tiles in the 128-byte
// swizzle: a tile is stored as blocks of 64 columns (128 bytes a row), each
// block rows x 128 bytes with row r's 16-byte chunk c at chunk c ^ (r % 8), and
// every block starts 1024-byte aligned. The same stored tile is a K-major
// operand (rows = M or N, columns = K) and, transposed, an MN-major one
// (rows = K, columns = N); the descriptors below say which.
#pragma once

#include <cstdint>

#include "cuda/ptx/shared_address.cuh"

namespace mlakv::cuda::wgmma {

/// Byte offset of (row, col) in a swizzled bf16 tile whose 64-column blocks
/// are `block_bytes` apart (rows x 128).
__host__ __device__ constexpr int swizzled_offset(int row, int col, int block_bytes) {
  const int chunk = (col % 64) / 8;
  return (col / 64) * block_bytes + row * 128 + ((chunk ^ (row % 8)) * 16) + (col % 8) * 2;
}

/// Shared-memory matrix descriptor of a 128-byte-swizzled operand at `tile`
/// (its block 1024-byte aligned, advanced by at most 96 bytes along K):
/// leading and stride byte offsets as the PTX canonical layouts define them.
/// K-major: stride = 1024 (the next 8 rows), leading unused. MN-major: leading
/// = the next 64 columns' block, stride = 1024 (the next 8 K rows).
__device__ __forceinline__ std::uint64_t descriptor(const void* tile, std::uint32_t leading_bytes,
                                                    std::uint32_t stride_bytes) {
  const std::uint32_t address = shared_address(tile);
  return static_cast<std::uint64_t>((address & 0x3FFFFu) >> 4) |
         static_cast<std::uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16 |
         static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32 | std::uint64_t{1} << 62;
}

/// `desc` moved `bytes` on in shared memory (a multiple of 16), for the
/// steps of one operand: one add to the address field (address >> 4 in the
/// low 14 bits), which cannot carry into the next field as shared memory ends
/// below 256 KB. Cheaper than a descriptor per step, which the kernels issue
/// 40 times a tile.
__device__ __forceinline__ std::uint64_t advanced(std::uint64_t desc, int bytes) {
  const std::uint32_t low = static_cast<std::uint32_t>(desc) + static_cast<std::uint32_t>(bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | low;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Orders this warpgroup's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

/// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

/// Waits until at most kPending committed groups are in flight.
template <int kPending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

/// Keeps the compiler from moving accesses to `d` across the asynchronous wgmma.
template <int kN>
__device__ __forceinline__ void fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// d (64 x 16) += A (64 x 16) * B (16 x 16, K-major), both in shared memory:
/// A K-major, or MN-major with kAMnMajor; scale_d 0 overwrites d.
template <bool kAMnMajor = false>
__device__ __forceinline__ void mma_64x16(float (&d)[8], std::uint64_t a, std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7"
      "}, %8, %9, p, 1, 1, %11, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(scale_d), "n"(kAMnMajor ? 1 : 0));
}

/// d (64 x 32) += A (64 x 16) * B (16 x 32, K-major), both in shared memory:
/// A K-major, or MN-major with kAMnMajor; scale_d 0 overwrites d.
template <bool kAMnMajor = false>
__device__ __forceinline__ void mma_64x32(float (&d)[16], std::uint64_t a, std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, %16, %17, p, 1, 1, %19, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(scale_d), "n"(kAMnMajor ? 1 : 0));
}

/// d (64 x kN) += A * B for kN 16 or 32 (mma_64x16, mma_64x32).
template <int kN, bool kAMnMajor = false>
__device__ __forceinline__ void mma_64xn(float (&d)[kN / 2], std::uint64_t a, std::uint64_t b, int scale_d) {
  static_assert(kN == 16 || kN == 32, "the shapes wrapped here");
  if constexpr (kN == 16) {
    mma_64x16<kAMnMajor>(d, a, b, scale_d);
  } else {
    mma_64x32<kAMnMajor>(d, a, b, scale_d);
  }
}

/// Stores four 8 x 8 bf16 matrices transposed (stmatrix .trans): register i
/// holds matrix i's fragment (lane g = lane / 4: row g, columns 2 (lane % 4)
/// and + 1), and lanes 8 i..8 i + 7 give the addresses of its stored rows,
/// which are its columns: row r of the memory gets column r's 8 values.
__device__ __forceinline__ void store_matrices_transposed(const void* row, const std::uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(shared_address(row)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

/// d (64 x 64) += A (64 x 16, K-major) * B (16 x 64, K-major), both in shared memory;
/// scale_d 0 overwrites d.
__device__ __forceinline__ void mma_64x64(float (&d)[32], std::uint64_t a, std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(scale_d));
}

/// d (64 x 256) += A (64 x 16, K-major) * B (16 x 256, MN-major), both in shared memory;
/// scale_d 0 overwrites d.
__device__ __forceinline__ void mma_64x256_b_mn_major(float (&d)[128], std::uint64_t a, std::uint64_t b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),
        "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(scale_d));
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace mlakv::cuda::wgmma
