// SPDX-License-Identifier: Apache-2.0
// Which devices this build's kernels run on.
#include <array>
#include <atomic>
#include <string>

#include "cuda/cuda_backend.h"

namespace mlakv::cuda {

namespace {
constexpr int kMaxDevices = 64;
// 0 = not read yet; reading an attribute needs no synchronization.
std::array<std::atomic<int>, kMaxDevices> g_capability{};
}  // namespace

int device_capability(int device) {
  if (device >= 0 && device < kMaxDevices) {
    if (const int cached = g_capability[device].load(std::memory_order_relaxed); cached != 0) return cached;
  }
  int major = 0;
  int minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
    return -1;
  }
  const int capability = major * 10 + minor;
  if (device >= 0 && device < kMaxDevices) g_capability[device].store(capability, std::memory_order_relaxed);
  return capability;
}

// sm_90 machine code runs on 9.x; the compute_90 PTX JIT-compiles for every
// later device, so 9.0 and newer are supported (Blackwell 10.0 and 12.0 get
// their own machine code with the hardware E2M1 conversion).
bool supports_capability(int capability) { return capability >= 90; }

std::string built_architectures() { return MLAKV_CUDA_ARCHITECTURES; }

int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, kMaxDevices> cache{};
  if (device >= 0 && device < kMaxDevices) {
    if (const int cached = cache[device].load(std::memory_order_relaxed); cached != 0) return cached;
  }
  int count = 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) {
    cudaGetLastError();
    return 1;
  }
  if (device >= 0 && device < kMaxDevices) cache[device].store(count, std::memory_order_relaxed);
  return count;
}

}  // namespace mlakv::cuda
