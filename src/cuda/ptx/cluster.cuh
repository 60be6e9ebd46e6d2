// SPDX-License-Identifier: Apache-2.0
// Thread-block-cluster primitives (sm_90 PTX): a block's view of its peer's
// shared memory and barriers (shared::cluster addresses), stores that
// complete on the peer's barrier, and the cluster-wide barrier. The decode
// kernels use them to share decoded key tiles between the two blocks of a
// cluster, which read the same records for different heads.
#pragma once

#include <cstdint>

#include "cuda/ptx/shared_address.cuh"

namespace mlakv::cuda::cluster {

/// This block's rank within its cluster.
__device__ __forceinline__ std::uint32_t rank() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

/// The shared::cluster address of `local`'s counterpart in block `block` of
/// the cluster (blocks of one kernel lay out their shared memory alike).
__device__ __forceinline__ std::uint32_t peer_address(const void* local, std::uint32_t block) {
  std::uint32_t address;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(address) : "r"(shared_address(local)), "r"(block));
  return address;
}

/// A float, and 4 floats (16-byte aligned), at `address` (shared::cluster).
/// Volatile: the loads stay after the cluster barrier that makes them safe.
__device__ __forceinline__ float load(std::uint32_t address) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(address));
  return v;
}
__device__ __forceinline__ float4 load4(std::uint32_t address) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(address));
  return v;
}

/// Every thread of the cluster arrives (release) and waits for all (acquire):
/// the peers' barriers are initialized before any remote use, and no block
/// leaves while a peer may still arrive on its barriers.
__device__ __forceinline__ void sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

/// Stores 16 bytes at `address` (shared::cluster, 16-byte aligned), counted
/// as 16 transaction bytes on `barrier` (an mbarrier in the same block). No
/// memory clobber: the store reads registers only, and it stays in order with
/// the barrier operations (volatile asm) that bracket it, while the compiler
/// may move the decoder's global loads of later records above it.
__device__ __forceinline__ void store_async(std::uint32_t address, uint4 v, std::uint32_t barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(address),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(barrier));
}

/// The same for 4 bytes.
__device__ __forceinline__ void store_async(std::uint32_t address, std::uint32_t v, std::uint32_t barrier) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(address), "r"(v),
               "r"(barrier));
}

/// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
/// this block's shared memory at `local` to `address` (shared::cluster, a
/// peer block's), counted as transaction bytes on `barrier` (an mbarrier in
/// that peer block). One instruction for what st.async would store 16 bytes
/// at a time. The copy reads `local` through the async proxy: the stores
/// that wrote it must be fenced (fence.proxy.async) before it is issued.
__device__ __forceinline__ void copy_to_peer(std::uint32_t address, const void* local, std::uint32_t bytes,
                                             std::uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(address),
      "r"(shared_address(local)), "r"(bytes), "r"(barrier)
      : "memory");
}

/// One arrival on a peer block's mbarrier. Release at CTA scope, as for a
/// local arrival: what it orders before the peer's waiters is this thread's
/// completed wgmma reads of the peer's tile copy (waited for), and shared
/// memory is not held in the L1 that a cluster-scope fence would flush
/// (a cluster-scope release and acquire cost a membar and an L1
/// invalidation a wait: ncu counted 1.3 million of those on one launch).
__device__ __forceinline__ void arrive(std::uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

}  // namespace mlakv::cuda::cluster
