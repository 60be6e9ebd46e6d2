// SPDX-License-Identifier: Apache-2.0
// A copy of host data on the device the tool runs on: host memory, or CUDA memory.
#pragma once

#include <cstddef>
#include <string>

#include "mlakv/tensor_view.h"

namespace mlakv::tool {

/// Whether this build has the CUDA backend and this process sees a CUDA device.
bool cuda_device_available();

/// Resolves --device (cpu, cuda, auto); throws mlakv::Error naming the flag.
Device resolve_device(const std::string& flag);

class DeviceBuffer {
 public:
  DeviceBuffer(Device device, const void* host, std::size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  /// Waits for the device, then copies the buffer back.
  void copy_to_host(void* host) const;

 private:
  Device device_;
  std::size_t bytes_;
  void* data_ = nullptr;
};

}  // namespace mlakv::tool
