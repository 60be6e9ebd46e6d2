// SPDX-License-Identifier: Apache-2.0
#include "argument_errors.h"

#include <cstdio>

namespace mlakv::bindings {

std::string CallName::prefix() const {
  std::string text = "mlakv::" + std::string(function);
  if (format) text.append("(").append(*format).append(")");
  return text + ": ";
}

std::string_view text_fault(std::string_view text) {
  return text.find('\0') == std::string_view::npos ? std::string_view{} : "must not contain a NUL character";
}

std::string quoted(std::string_view text) {
  // Python's choice of quote: single, unless the text has one and no double quote.
  const char quote = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out.append(1, '\\').append(1, c);
    } else if (c == '\t' || c == '\n' || c == '\r') {
      out.append(c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r");
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out.append(escaped);
    } else {
      out.append(1, c);  // printable ASCII, or a byte of a UTF-8 sequence (repr keeps printable characters)
    }
  }
  return out.append(1, quote);
}

void argument_error(const CallName& call, ErrorCode code, std::string_view name, std::string_view rule,
                    std::string_view got) {
  std::string message = call.prefix();
  message.append(name).append(": ").append(rule).append(", got ").append(got);
  throw Error(code, message);
}

std::string checked_text(const CallName& call, std::string_view name, std::string text) {
  const std::string_view fault = text_fault(text);
  if (!fault.empty()) argument_error(call, ErrorCode::kValue, name, fault, quoted(text));
  return text;
}

}  // namespace mlakv::bindings
