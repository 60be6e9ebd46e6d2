// SPDX-License-Identifier: Apache-2.0
// What this build can do: formats x backends x architectures.
#pragma once

#include <string_view>
#include <vector>

#include "mlakv/formats.h"

namespace mlakv {

enum class Backend { kCpu, kCuda };

struct Capability {
  Format format;
  Backend backend;
  std::string_view arch;  ///< "any" for the CPU; "sm_90", "sm_100a", "sm_120a" (machine code) or
                          ///< "compute_90" (PTX, JIT-compiled for newer GPUs) for CUDA
  bool writer;
  bool reader;
};

/// Engines check this at start-up instead of failing at the first write.
std::vector<Capability> capabilities();
std::string_view backend_name(Backend backend) noexcept;

}  // namespace mlakv
