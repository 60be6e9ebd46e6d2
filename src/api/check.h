// SPDX-License-Identifier: Apache-2.0
// Check: raises mlakv::Error with the text "mlakv::<function>(<format>): <arg>: <rule>, got <value>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mlakv/error.h"
#include "mlakv/tensor_view.h"

namespace mlakv::api {

/// "(4096, 512)"
std::string shape_string(const TensorView& view);
/// "(512, 1)"
std::string strides_string(const TensorView& view);
std::string device_string(const Device& device);

/// `check.require(ok, ...)` whose rule and got texts are built only when `ok`
/// fails: the texts (shape and stride strings, concatenations) cost more host
/// time than the checks themselves on a one-token call.
#define MLAKV_REQUIRE(check, ok, code, arg, rule, got)     \
  do {                                                     \
    if (!(ok)) (check).fail((code), (arg), (rule), (got)); \
  } while (false)

class Check {
 public:
  Check(std::string_view function, std::string_view format) : function_(function), format_(format) {}

  void set_format(std::string_view format) { format_ = format; }

  [[noreturn]] void fail(ErrorCode code, std::string_view arg, std::string_view rule, std::string_view got) const;

  void require(bool ok, ErrorCode code, std::string_view arg, std::string_view rule, std::string_view got) const {
    if (!ok) fail(code, arg, rule, got);
  }

 private:
  std::string_view function_;
  std::string_view format_;
};

}  // namespace mlakv::api
