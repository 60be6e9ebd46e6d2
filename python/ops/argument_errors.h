// SPDX-License-Identifier: Apache-2.0
// The errors of arguments a binding cannot hand the library as they are, in
// the library's words ("mlakv::<op>(<format>): <name>: <rule>, got <got>",
// as mlakv/_checks.py's Call writes them), so that no binding answers with
// its own conversion error: nanobind's signature dump, a std::bad_cast, or a
// message cut short at a NUL the text carried into a C string.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mlakv/error.h"

namespace mlakv::bindings {

/// Who an argument error names: the op, and its format (the op's first str
/// argument) when that is text. The prefix is built only when an error is thrown.
struct CallName {
  std::string_view function;
  std::optional<std::string_view> format;
  /// "mlakv::<function>(<format>): ", or "mlakv::<function>: " without a format.
  std::string prefix() const;
};

/// Why `text` cannot reach the library as it is (a NUL would end its messages
/// early), else empty.
std::string_view text_fault(std::string_view text);

/// `text` as Python's repr writes a str: quoted, with control characters escaped ('fp8\x00').
std::string quoted(std::string_view text);

/// Throws mlakv::Error for argument `name` of `call` (kDtype: a TypeError, else a ValueError).
[[noreturn]] void argument_error(const CallName& call, ErrorCode code, std::string_view name, std::string_view rule,
                                 std::string_view got);

/// A str argument's text, or the library's error naming it.
std::string checked_text(const CallName& call, std::string_view name, std::string text);

}  // namespace mlakv::bindings
