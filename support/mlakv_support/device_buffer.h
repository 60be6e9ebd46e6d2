// SPDX-License-Identifier: Apache-2.0
// The one buffer class of the tool, the GPU benchmark and the GPU tests: bytes
// on a device (host memory for the CPU, cudaMalloc for CUDA), optionally a
// copy of host data. Not part of the library: its callers own their memory.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "mlakv/error.h"
#include "mlakv/tensor_view.h"
#if MLAKV_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mlakv::support {

class DeviceBuffer {
 public:
  /// `bytes` on `device` (at least 16 are allocated, so an empty buffer has an
  /// address), filled from `host` when given. Throws mlakv::Error when the
  /// memory cannot be had or the build has no CUDA backend.
  DeviceBuffer(Device device, std::size_t bytes, const void* host = nullptr) : device_(device), bytes_(bytes) {
    if (device_.type == DeviceType::kCpu) {
      data_ = std::malloc(bytes_ > 0 ? bytes_ : 16);
      if (data_ == nullptr) throw std::bad_alloc();
      if (host != nullptr) std::memcpy(data_, host, bytes_);
      return;
    }
#if MLAKV_WITH_CUDA
    if (cudaMalloc(&data_, bytes_ > 0 ? bytes_ : 16) != cudaSuccess) failed("cudaMalloc failed");
    if (host != nullptr && bytes_ > 0 && cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(data_);
      failed("cudaMemcpy to the device failed");
    }
#else
    failed("this build has no CUDA backend");
#endif
  }
  /// `bytes` on CUDA device 0 (the benchmark's and the GPU tests' device).
  explicit DeviceBuffer(std::size_t bytes) : DeviceBuffer(kCuda0, bytes) {}
  /// A copy of `host` on CUDA device 0.
  template <class T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(kCuda0, host.size() * sizeof(T), host.data()) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (device_.type == DeviceType::kCpu) {
      std::free(data_);
      return;
    }
#if MLAKV_WITH_CUDA
    cudaFree(data_);
#endif
  }

  void* data() const { return data_; }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  bool ok() const { return data_ != nullptr; }

  /// Waits for the device, then copies the whole buffer to `host`.
  void copy_to_host(void* host) const {
    if (device_.type == DeviceType::kCpu) {
      std::memcpy(host, data_, bytes_);
      return;
    }
#if MLAKV_WITH_CUDA
    if (cudaDeviceSynchronize() != cudaSuccess ||
        cudaMemcpy(host, data_, bytes_, cudaMemcpyDeviceToHost) != cudaSuccess) {
      failed("copying results back failed");
    }
#endif
  }
  /// The buffer's contents as host values.
  template <class T>
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    copy_to_host(host.data());
    return host;
  }

 private:
  static constexpr Device kCuda0{DeviceType::kCuda, 0};
  [[noreturn]] static void failed(const char* what) {
    throw Error(ErrorCode::kBackend, std::string("device buffer: ") + what);
  }

  Device device_;
  std::size_t bytes_;
  void* data_ = nullptr;
};

}  // namespace mlakv::support
