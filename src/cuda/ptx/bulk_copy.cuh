// SPDX-License-Identifier: Apache-2.0
// Bulk copies global -> shared that complete on an mbarrier (sm_90+ PTX, which
// every architecture of this build runs): one instruction moves a whole record,
// and the waiting threads spin on the barrier's phase instead of on copies of
// their own, so one warp can gather for the whole block.
#pragma once

#include <cstdint>

#include "cuda/ptx/shared_address.cuh"

namespace mlakv::cuda {

/// Makes `barrier` expect one arrival per phase. Call from one thread, then
/// bulk_barrier_init_fence and a block barrier before any use.
__device__ __forceinline__ void bulk_barrier_init(std::uint64_t* barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(barrier)));
}

/// Makes `barrier` complete a phase after `arrivals` plain arrivals (a
/// producer-consumer handshake rather than a copy). Same rules as above.
__device__ __forceinline__ void barrier_init(std::uint64_t* barrier, std::uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(arrivals));
}

/// One plain arrival on `barrier`'s current phase (release: this thread's
/// earlier writes are visible to whoever waits for the phase).
__device__ __forceinline__ void barrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}

/// Makes initialized barriers visible to the copy engine.
__device__ __forceinline__ void bulk_barrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/// The phase's one arrival, announcing `bytes` of copies that complete on it.
__device__ __forceinline__ void bulk_barrier_expect(std::uint64_t* barrier, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}

/// Waits until the phase of parity `parity` (0 for the first use) completed.
__device__ __forceinline__ void bulk_barrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "mlakv_wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra mlakv_wait;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

/// Orders this thread's earlier shared-memory reads before later bulk copies
/// into the same bytes (the copies go through another proxy).
__device__ __forceinline__ void bulk_copy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
/// global to shared memory, completing on `barrier`'s current phase.
__device__ __forceinline__ void bulk_copy(void* smem, const void* global, std::uint32_t bytes, std::uint64_t* barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   shared_address(smem)),
               "l"(global), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
}

}  // namespace mlakv::cuda
