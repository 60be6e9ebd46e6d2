// SPDX-License-Identifier: Apache-2.0
// mlakv::Error: the one exception type every public call throws on bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace mlakv {

/// What kind of rule an input broke. Python maps kDtype to TypeError,
/// kUnsupported to NotImplementedError, kBackend to RuntimeError and every
/// other code to ValueError.
enum class ErrorCode {
  kDevice,       ///< tensors on different devices, or a device this build cannot use
  kDtype,        ///< element type not the one expected
  kShape,        ///< rank or extent not the one expected
  kLayout,       ///< strides: not innermost-contiguous, overlapping, negative
  kAlignment,    ///< base pointer or stride not aligned as the format requires
  kValue,        ///< an argument's value: unknown format string, missing scale, overflow
  kUnsupported,  ///< a valid request this build or backend does not implement
  kBackend,      ///< the CUDA runtime reported an error (launch failure, bad device)
};

/// The text names the function, the argument, what was expected and what was
/// given, e.g. "mlakv::concat_and_cache_mla(fp8_ds_mla): kv_cache: last dim
/// must be 656 (record bytes), got 576".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace mlakv
