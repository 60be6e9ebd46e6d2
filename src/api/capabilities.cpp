// SPDX-License-Identifier: Apache-2.0
#include "mlakv/capabilities.h"

namespace mlakv {

std::vector<Capability> capabilities() {
  std::vector<Capability> caps;
  for (const FormatInfo& info : formats()) {
    caps.push_back(Capability{info.format, Backend::kCpu, "any", /*writer=*/true, /*reader=*/true});
  }
  return caps;
}

std::string_view backend_name(Backend backend) noexcept { return backend == Backend::kCpu ? "cpu" : "cuda"; }

}  // namespace mlakv
