// SPDX-License-Identifier: Apache-2.0
// Helpers of the GPU tests: device buffers, a skip when no device is present.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "mlakv/formats.h"
#include "mlakv/tensor_view.h"
#include "mlakv_support/device_buffer.h"

namespace mlakv::test {

inline bool cuda_device_present() {
  int count = 0;
  const bool present = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return present;
}

// GPU tests skip cleanly on machines without a CUDA device (CI).
#define MLAKV_REQUIRE_GPU()                                                      \
  do {                                                                           \
    if (!::mlakv::test::cuda_device_present()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

#define MLAKV_CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

/// Device memory holding a copy of a host vector (or `bytes` of fill): the
/// one buffer class of the tests, the tool and the benchmark.
using support::DeviceBuffer;

#ifdef __CUDACC__
/// Adds each running lane's `n` to *checked, one atomic per warp (1-D
/// blocks): a proof kernel counts the cases it compared so that its test can
/// assert the total, which a kernel whose threads all return early fails.
__device__ inline void count_checked(unsigned long long* checked, unsigned n) {
  const unsigned mask = __activemask();
  const unsigned total = __reduce_add_sync(mask, n);
  if (static_cast<int>(threadIdx.x % 32) == __ffs(static_cast<int>(mask)) - 1) {
    atomicAdd(checked, static_cast<unsigned long long>(total));
  }
}
#endif

/// The input dtype a parity test writes `f` with: the one its record stores
/// (bf16, fp16: the registry's policy), else `preferred`.
inline DType dtype_for(Format f, DType preferred) {
  const DType stored = format_info(f).policy.input_dtype;
  return stored != DType::kOther ? stored : preferred;
}

/// Slots first, first + 1, ..., first + n - 1.
inline std::vector<std::int64_t> iota_slots(std::int64_t n, std::int64_t first = 0) {
  std::vector<std::int64_t> s(static_cast<std::size_t>(n));
  std::iota(s.begin(), s.end(), first);
  return s;
}

/// The same view on the device: data moved by `offset` bytes into `buffer`.
inline TensorView on_device(TensorView host_view, const DeviceBuffer& buffer, std::size_t offset = 0) {
  host_view.data = buffer.get<std::uint8_t>() + offset;
  host_view.device = {DeviceType::kCuda, 0};
  return host_view;
}

}  // namespace mlakv::test
