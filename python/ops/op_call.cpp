// SPDX-License-Identifier: Apache-2.0
#include "op_call.h"

#include <stdexcept>

#include "op_table.h"

namespace mlakv::bindings {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

ArgType arg_type(std::string_view type, std::string_view schema) {
  if (type.starts_with("Tensor")) return ArgType::kTensor;
  if (type == "str") return ArgType::kString;
  if (type == "float") return ArgType::kReal;
  if (type == "int" || type == "SymInt") return ArgType::kInt;
  if (type == "bool") return ArgType::kBool;
  if (type == "ScalarType") return ArgType::kDType;
  if (type == "Device") return ArgType::kDevice;
  throw std::logic_error("op table: type '" + std::string(type) + "' of " + std::string(schema) + " is not bound");
}

}  // namespace

std::vector<SchemaArgument> parse_arguments(std::string_view schema) {
  const std::size_t open = schema.find('('), close = schema.rfind(") ->");
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    throw std::logic_error("op table: schema '" + std::string(schema) + "' is not name(arguments) -> returns");
  }
  std::vector<SchemaArgument> arguments;
  bool keyword_only = false;
  std::string_view rest = schema.substr(open + 1, close - open - 1);
  while (!trimmed(rest).empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trimmed(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item == "*") {
      keyword_only = true;
      continue;
    }
    const std::size_t space = item.find(' '), equals = item.find('=');
    std::string_view type = item.substr(0, space);
    const std::string_view name =
        item.substr(space + 1, equals == std::string_view::npos ? item.npos : equals - space - 1);
    const bool optional = type.ends_with('?');
    if (optional) type.remove_suffix(1);
    SchemaArgument argument{
        std::string(name), arg_type(type.substr(0, type.find('(')), schema),
        optional,          type.find("!") != std::string_view::npos,
        keyword_only,      equals == std::string_view::npos ? std::string() : std::string(item.substr(equals + 1))};
    arguments.push_back(std::move(argument));
  }
  return arguments;
}

Value default_value(const SchemaArgument& argument) {
  const std::string& text = argument.default_text;
  if (text == "None") return std::monostate{};
  if (text == "True" || text == "False") return text == "True";
  if (!text.empty() && text.front() == '"') return text.substr(1, text.size() - 2);
  return static_cast<std::int64_t>(std::stoll(text));
}

OpCall::OpCall(const Op& op, const std::vector<SchemaArgument>& arguments, std::vector<Value> values,
               std::vector<TensorView> outputs, StreamHandle stream, bool run)
    : op_(op),
      arguments_(arguments),
      values_(std::move(values)),
      outputs_(std::move(outputs)),
      stream_(stream),
      run_(run) {}

const Value& OpCall::value(std::string_view name) const {
  for (std::size_t i = 0; i < arguments_.size(); ++i) {
    if (arguments_[i].name == name) return values_.at(i);
  }
  throw std::logic_error("op table: " + std::string(op_.name) + " has no argument " + std::string(name));
}

const TensorView& OpCall::tensor(std::string_view name) const { return std::get<TensorView>(value(name)); }

const TensorView* OpCall::optional_tensor(std::string_view name) const { return std::get_if<TensorView>(&value(name)); }

std::string_view OpCall::text(std::string_view name) const { return std::get<std::string>(value(name)); }

std::optional<std::string_view> OpCall::optional_text(std::string_view name) const {
  const std::string* s = std::get_if<std::string>(&value(name));
  return s ? std::optional<std::string_view>(*s) : std::nullopt;
}

std::optional<double> OpCall::optional_real(std::string_view name) const {
  const double* x = std::get_if<double>(&value(name));
  return x ? std::optional<double>(*x) : std::nullopt;
}

std::int64_t OpCall::integer(std::string_view name) const { return std::get<std::int64_t>(value(name)); }

bool OpCall::flag(std::string_view name) const { return std::get<bool>(value(name)); }

Device OpCall::device(std::string_view name) const { return std::get<Device>(value(name)); }

}  // namespace mlakv::bindings
