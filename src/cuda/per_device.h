// SPDX-License-Identifier: Apache-2.0
// The one per-device cache of the CUDA backend: a value read from the runtime
// once per device (an attribute, an opt-in already made) instead of on every
// launch, which would cost host time on every decode step.
#pragma once

#include <array>
#include <atomic>

namespace mlakv::cuda {

class PerDevice {
 public:
  /// Device `device`'s cached value, else `read()`, kept when non-zero (0 means
  /// "not known": a failed read is tried again next time). Lock-free: two
  /// threads that both read store the same value. Devices past kMaxDevices are
  /// read every time.
  template <class Read>
  int get(int device, Read&& read) {
    const bool cached = device >= 0 && device < kMaxDevices;
    if (cached) {
      if (const int value = values_[device].load(std::memory_order_relaxed); value != 0) return value;
    }
    const int value = read();
    if (cached && value != 0) values_[device].store(value, std::memory_order_relaxed);
    return value;
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::array<std::atomic<int>, kMaxDevices> values_{};
};

}  // namespace mlakv::cuda
