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

std::vector<Capability> capabilities() {
  static const std::vector<std::string> archs = cuda_archs();
  std::vector<Capability> caps;
  for (const FormatInfo& info : formats()) {
    caps.push_back(Capability{info.format, Backend::kCpu, "any", /*writer=*/true, /*reader=*/true});
    for (const std::string& arch : archs) {
      caps.push_back(Capability{info.format, Backend::kCuda, arch, /*writer=*/true, /*reader=*/true});
    }
  }
  return caps;
}

std::string_view backend_name(Backend backend) noexcept { return backend == Backend::kCpu ? "cpu" : "cuda"; }

}  // namespace mlakv
