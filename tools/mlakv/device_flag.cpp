// SPDX-License-Identifier: Apache-2.0
#include "device_flag.h"

#include "mlakv/error.h"
#if MLAKV_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mlakv::tool {

bool cuda_device_available() {
#if MLAKV_WITH_CUDA
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
#else
  return false;
#endif
}

Device resolve_device(const std::string& flag) {
  if (flag == "cpu") return {DeviceType::kCpu, 0};
  if (flag == "cuda" || flag == "auto") {
    if (cuda_device_available()) return {DeviceType::kCuda, 0};
    if (flag == "auto") return {DeviceType::kCpu, 0};
    throw Error(ErrorCode::kDevice, "--device: cuda requested but no CUDA device is available");
  }
  throw Error(ErrorCode::kValue, "--device: expected cpu, cuda or auto, got '" + flag + "'");
}

}  // namespace mlakv::tool
