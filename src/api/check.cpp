// SPDX-License-Identifier: Apache-2.0
#include "api/check.h"

namespace mlakv::api {

std::string shape_string(const TensorView& view) {
  std::string s = "(";
  for (int d = 0; d < view.ndim; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(view.shape[d]);
  }
  return s + (view.ndim == 1 ? ",)" : ")");
}

std::string strides_string(const TensorView& view) {
  std::string s = "(";
  for (int d = 0; d < view.ndim; ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(view.strides[d]);
  }
  return s + (view.ndim == 1 ? ",)" : ")");
}

std::string device_string(const Device& device) {
  switch (device.type) {
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kCuda:
      return "cuda:" + std::to_string(device.index);
    case DeviceType::kOther:
      break;
  }
  return "unknown device";
}

void Check::fail(ErrorCode code, std::string_view arg, std::string_view rule, std::string_view got) const {
  std::string text = "mlakv::";
  text += function_;
  if (!format_.empty()) {
    text += "(";
    text += format_;
    text += ")";
  }
  text += ": ";
  text += arg;
  text += ": ";
  text += rule;
  if (!got.empty()) {
    text += ", got ";
    text += got;
  }
  throw Error(code, text);
}

}  // namespace mlakv::api
