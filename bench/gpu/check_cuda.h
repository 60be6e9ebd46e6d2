// SPDX-License-Identifier: Apache-2.0
// The benchmark's one failure policy: a CUDA error ends the run with the call
// that failed (a measurement after a failed call would time nothing).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(call)                                                                               \
  do {                                                                                                 \
    const cudaError_t status_ = (call);                                                                \
    if (status_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)
