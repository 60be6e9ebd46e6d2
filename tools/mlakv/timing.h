// SPDX-License-Identifier: Apache-2.0
// Timing on the device a command runs on: CUDA events on the legacy default
// stream, or the steady clock on the CPU.
#pragma once

#include <cstddef>
#include <functional>

#include "mlakv/tensor_view.h"

namespace mlakv::tool {

/// Median microseconds of `run` over `repeats` runs after one warm-up run.
double median_us(Device device, int repeats, const std::function<void()>& run);

/// Median microseconds of a device-to-device copy moving `bytes` (reading
/// half, writing half): the reference a kernel's bandwidth is compared to.
/// CUDA only.
double copy_us(Device device, std::size_t bytes, int repeats);

}  // namespace mlakv::tool
