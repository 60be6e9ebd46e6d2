// SPDX-License-Identifier: Apache-2.0
// What this build can do: formats x backends x architectures x operations.
// The public calls consult the same table before they dispatch.
#pragma once

#include <string_view>
#include <vector>

#include "mlakv/formats.h"

namespace mlakv {

enum class Backend { kCpu, kCuda };

/// The operations a backend implements per format.
enum class Operation {
  kWrite,    ///< concat_and_cache_* (write_records)
  kRead,     ///< gather_records, gather_records_paged
  kDecode,   ///< sparse_mla_decode
  kPrefill,  ///< sparse_mla_prefill
};

struct Capability {
  Format format;
  Backend backend;
  std::string_view arch;  ///< "any" for the CPU; "sm_90", "sm_100a", "sm_120a" (machine code) or
                          ///< "compute_90" (PTX, JIT-compiled for newer GPUs) for CUDA
  bool writer;            ///< supports(format, backend, Operation::kWrite)
  bool reader;            ///< supports(format, backend, Operation::kRead)
  bool decode;            ///< supports(format, backend, Operation::kDecode)
  bool prefill;           ///< supports(format, backend, Operation::kPrefill)
};

/// Engines check this at start-up instead of failing at the first write.
std::vector<Capability> capabilities();
/// Whether this build runs `operation` on `format` with `backend` (false for
/// kCuda in a build without the CUDA backend). A public call on a combination
/// it does not support throws mlakv::Error (kUnsupported) listing the formats
/// that backend supports for it.
bool supports(Format format, Backend backend, Operation operation) noexcept;
std::string_view backend_name(Backend backend) noexcept;

}  // namespace mlakv
