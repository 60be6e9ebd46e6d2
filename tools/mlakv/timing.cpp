// SPDX-License-Identifier: Apache-2.0
#include "timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "mlakv/error.h"
#include "mlakv_support/device_buffer.h"
#if MLAKV_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mlakv::tool {
using support::DeviceBuffer;
namespace {

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

double median_us(Device device, int repeats, const std::function<void()>& run) {
  std::vector<double> us;
  run();  // warm-up: first touch, module load
  if (device.type == DeviceType::kCpu) {
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      run();
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    return median(us);
  }
#if MLAKV_WITH_CUDA
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start, nullptr);
    run();
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    us.push_back(1000.0 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (cudaGetLastError() != cudaSuccess) throw Error(ErrorCode::kBackend, "--device: timing on the GPU failed");
#endif
  return median(us);
}

double copy_us(Device device, std::size_t bytes, int repeats) {
  const std::size_t half = std::max<std::size_t>(16, bytes / 2);
  DeviceBuffer src(device, half);
  DeviceBuffer dst(device, half);
  return median_us(device, repeats, [&] {
#if MLAKV_WITH_CUDA
    cudaMemcpyAsync(dst.data(), src.data(), half, cudaMemcpyDeviceToDevice, nullptr);
#endif
  });
}

}  // namespace mlakv::tool
