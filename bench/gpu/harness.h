// SPDX-License-Identifier: Apache-2.0
// The timing harness: L2-flushed launches (median of `repeats`), CUDA-graph
// replays (per-launch time of a graph of many launches), and the copy
// reference for the same number of bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "mlakv/tensor_view.h"
#include "mlakv_support/device_buffer.h"

namespace mlakv_bench {

using mlakv::support::DeviceBuffer;

struct Timer {
  cudaEvent_t start, stop;
  Timer();
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
};

struct Bench {
  int sms = 0;
  DeviceBuffer flush_buffer{std::size_t{512} << 20};
  DeviceBuffer sink{16};
  cudaStream_t stream{};
  Timer timer;
  int repeats = 15;
  float k_scale = 1.0f;  // fp8_e4m3's scale in writer and reader runs
  mlakv::TensorView k_scale_view() { return mlakv::make_view(&k_scale, mlakv::DType::kFloat32, {1}); }
  Bench();

  void flush_l2();
  // Median microseconds of one launch, each after an L2 flush; rep picks the buffer set.
  double time_launches(const std::function<void(int rep)>& launch);
  // Microseconds per launch of a graph holding `launches` launches (rotating over sets).
  double time_graph(const std::function<void(int rep)>& launch, int launches);
  // The copy reference for `bytes` moved (bytes / 2 copied): the faster of memcpy and copy16.
  double copy_us(std::size_t bytes, int sets, bool graph, int launches = 64);
};

// Fills `d` with roughly normal bf16 values from `seed`, on the device.
void fill_bf16(Bench& b, const DeviceBuffer& d, std::uint32_t seed);

}  // namespace mlakv_bench
