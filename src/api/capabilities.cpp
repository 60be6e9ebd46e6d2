// SPDX-License-Identifier: Apache-2.0
#include "mlakv/capabilities.h"

#include <sstream>
#include <string>

namespace mlakv {
namespace {

// MLAKV_CUDA_ARCHITECTURES: the CUDA targets of this build, e.g.
// "sm_90, sm_100a, sm_120a, compute_90" (absent without the CUDA backend).
std::vector<std::string> cuda_archs() {
  std::vector<std::string> archs;
#if MLAKV_WITH_CUDA
  std::stringstream list(MLAKV_CUDA_ARCHITECTURES);
  for (std::string arch; std::getline(list, arch, ',');) {
    if (arch.starts_with(' ')) arch.erase(0, 1);
    if (!arch.empty()) archs.push_back(arch);
  }
#endif
  return archs;
}

}  // namespace

// What the backends implement: both write and read every format (token-major
// records and block-planar pages, src/cpu/ and src/cuda/); the CPU's sparse
// decode (the reference) reads every format, the DeepSeek V4 family's with its
// sink and extra cache; the CUDA decode reads the token-major records of 512 +
// 64 values. The prefill's rows are decode rows: it reads what the decode reads.
bool supports(Format format, Backend backend, Operation operation) noexcept {
  if (backend == Backend::kCuda && !MLAKV_WITH_CUDA) return false;
  const FormatInfo& info = format_info(format);
  switch (operation) {
    case Operation::kWrite:
    case Operation::kRead:
      return true;
    case Operation::kDecode:
    case Operation::kPrefill:
      if (backend == Backend::kCpu) return true;
      return info.page.kind == PageKind::kTokenMajor && info.geometry.nope_dims == kLatentDim &&
             info.geometry.rope_dims == kRopeDim;
  }
  return false;
}

std::vector<Capability> capabilities() {
  static const std::vector<std::string> archs = cuda_archs();
  std::vector<Capability> caps;
  const auto capability = [](Format format, Backend backend, std::string_view arch) {
    return Capability{format,
                      backend,
                      arch,
                      supports(format, backend, Operation::kWrite),
                      supports(format, backend, Operation::kRead),
                      supports(format, backend, Operation::kDecode),
                      supports(format, backend, Operation::kPrefill)};
  };
  for (const FormatInfo& info : formats()) {
    caps.push_back(capability(info.format, Backend::kCpu, "any"));
    for (const std::string& arch : archs) caps.push_back(capability(info.format, Backend::kCuda, arch));
  }
  return caps;
}

std::string_view backend_name(Backend backend) noexcept { return backend == Backend::kCpu ? "cpu" : "cuda"; }

}  // namespace mlakv
