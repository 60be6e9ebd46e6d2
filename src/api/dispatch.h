// SPDX-License-Identifier: Apache-2.0
// Runs validated params on the backend of the arrays' device: the CPU loops,
// or a CUDA launch on the arrays' device (restoring the caller's current
// device) whose error becomes an mlakv::Error. The one place the API layer
// tells a CUDA build from a CPU-only one for a launch.
#pragma once

#include <string>

#include "api/check.h"
#include "cpu/cpu_backend.h"
#include "mlakv/stream.h"
#if MLAKV_WITH_CUDA
#include <cuda_runtime_api.h>

#include "cuda/cuda_backend.h"
#endif

/// Both backends' entry points of one operation, as run_on_device's last two
/// arguments: `cpu::operation(p)` and, in a CUDA build, `cuda::operation(p,
/// stream)`. A CPU-only build has no cuda:: backend; its validation refuses
/// arrays on a CUDA device, so no launch is ever asked of it there.
#if MLAKV_WITH_CUDA
#define MLAKV_BACKENDS(operation, p) \
  [&] { cpu::operation(p); }, [&](cudaStream_t launch_stream) { return cuda::operation(p, launch_stream); }
#else
#define MLAKV_BACKENDS(operation, p) [&] { cpu::operation(p); }, nullptr
#endif

namespace mlakv::api {

/// `cpu()` for arrays on the CPU; `cuda(stream)` on their CUDA device otherwise.
/// Callers pass MLAKV_BACKENDS(operation, params) as `cpu, cuda`.
template <class Cpu, class Cuda>
void run_on_device(const Check& check, const Device& device, StreamHandle stream, Cpu&& cpu, Cuda&& cuda) {
  if (device.type == DeviceType::kCpu) {
    cpu();
    return;
  }
#if MLAKV_WITH_CUDA
  int previous = 0;
  cudaError_t status = cudaGetDevice(&previous);
  if (status == cudaSuccess && previous != device.index) status = cudaSetDevice(device.index);
  if (status == cudaSuccess) status = cuda(stream);
  if (previous != device.index) cudaSetDevice(previous);
  if (status != cudaSuccess) {
    cudaGetLastError();
    check.fail(ErrorCode::kBackend, "launch", "the CUDA runtime reported an error",
               std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status));
  }
#else
  (void)check;
  (void)stream;
  (void)cuda;
#endif
}

}  // namespace mlakv::api
