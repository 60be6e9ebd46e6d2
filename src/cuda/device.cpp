// SPDX-License-Identifier: Apache-2.0
// Which devices this build's kernels run on.
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/per_device.h"

namespace mlakv::cuda {

int device_capability(int device) {
  static PerDevice capabilities;
  const int capability = capabilities.get(device, [device] {
    int major = 0;
    int minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
      return 0;
    }
    return major * 10 + minor;
  });
  return capability != 0 ? capability : -1;
}

// sm_90 machine code runs on 9.x; the compute_90 PTX JIT-compiles for every
// later device, so 9.0 and newer are supported (Blackwell 10.0 and 12.0 get
// their own machine code with the hardware E2M1 conversion).
bool supports_capability(int capability) { return capability >= 90; }

std::string built_architectures() { return MLAKV_CUDA_ARCHITECTURES; }

int multiprocessor_count(int device) {
  static PerDevice counts;
  const int count = counts.get(device, [device] {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      return 0;
    }
    return n;
  });
  return count > 0 ? count : 1;
}

}  // namespace mlakv::cuda
