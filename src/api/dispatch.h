// SPDX-License-Identifier: Apache-2.0
// Runs validated params on the backend of the arrays' device: the CPU loops,
// or a CUDA launch on the arrays' device (restoring the caller's current
// device) whose error becomes an mlakv::Error.
#pragma once

#include <string>

#include "api/check.h"
#if MLAKV_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mlakv::api {

template <class Cpu, class Cuda>
void run_on_device(const Check& check, const Device& device, Cpu&& cpu, Cuda&& cuda) {
  if (device.type == DeviceType::kCpu) {
    cpu();
    return;
  }
#if MLAKV_WITH_CUDA
  int previous = 0;
  cudaError_t status = cudaGetDevice(&previous);
  if (status == cudaSuccess && previous != device.index) status = cudaSetDevice(device.index);
  if (status == cudaSuccess) status = cuda();
  if (previous != device.index) cudaSetDevice(previous);
  if (status != cudaSuccess) {
    cudaGetLastError();
    check.fail(ErrorCode::kBackend, "launch", "the CUDA runtime reported an error",
               std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
  }
#else
  (void)check;
  (void)cuda;
#endif
}

}  // namespace mlakv::api
