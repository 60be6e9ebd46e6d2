// SPDX-License-Identifier: Apache-2.0
// MLAKV_HD marks code compiled for both the CPU and the GPU (the page rule, the
// codecs). It sits in the lowest internal layer so that nothing includes upward.
#pragma once

#if defined(__CUDACC__)
#define MLAKV_HD __host__ __device__ __forceinline__
#else
#define MLAKV_HD inline
#endif

// Full unrolling matters on the GPU; host compilers choose for themselves.
#if defined(__CUDACC__)
#define MLAKV_UNROLL _Pragma("unroll")
#else
#define MLAKV_UNROLL
#endif
