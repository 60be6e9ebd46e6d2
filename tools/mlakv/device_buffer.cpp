// SPDX-License-Identifier: Apache-2.0
#include "device_buffer.h"

#include <cstdlib>
#include <cstring>

#include "mlakv/error.h"
#if MLAKV_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mlakv::tool {
namespace {

[[noreturn]] void cuda_failed(const char* what) { throw Error(ErrorCode::kBackend, std::string("--device: ") + what); }

}  // namespace

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

DeviceBuffer::DeviceBuffer(Device device, const void* host, std::size_t bytes) : device_(device), bytes_(bytes) {
  if (device_.type == DeviceType::kCpu) {
    data_ = std::malloc(bytes_ > 0 ? bytes_ : 1);
    if (data_ == nullptr) throw std::bad_alloc();
    if (host != nullptr) std::memcpy(data_, host, bytes_);
    return;
  }
#if MLAKV_WITH_CUDA
  if (cudaMalloc(&data_, bytes_ > 0 ? bytes_ : 16) != cudaSuccess) cuda_failed("cudaMalloc failed");
  if (host != nullptr && cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice) != cudaSuccess) {
    cuda_failed("cudaMemcpy to the device failed");
  }
#else
  cuda_failed("this build has no CUDA backend");
#endif
}

DeviceBuffer::~DeviceBuffer() {
  if (device_.type == DeviceType::kCpu) {
    std::free(data_);
    return;
  }
#if MLAKV_WITH_CUDA
  cudaFree(data_);
#endif
}

void DeviceBuffer::copy_to_host(void* host) const {
  if (device_.type == DeviceType::kCpu) {
    std::memcpy(host, data_, bytes_);
    return;
  }
#if MLAKV_WITH_CUDA
  if (cudaDeviceSynchronize() != cudaSuccess ||
      cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) {
    cuda_failed("copying results back failed");
  }
#endif
}

}  // namespace mlakv::tool
