// SPDX-License-Identifier: Apache-2.0
// The device the tool runs on (--device); its buffers are mlakv::support::DeviceBuffer.
#pragma once

#include <string>

#include "mlakv/tensor_view.h"

namespace mlakv::tool {

/// Whether this build has the CUDA backend and this process sees a CUDA device.
bool cuda_device_available();

/// Resolves --device (cpu, cuda, auto); throws mlakv::Error naming the flag.
Device resolve_device(const std::string& flag);

}  // namespace mlakv::tool
