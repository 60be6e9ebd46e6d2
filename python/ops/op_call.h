// SPDX-License-Identifier: Apache-2.0
// One call of an op as a binding hands it to the op's run function: the
// schema's arguments by name (defaults filled in), the outputs, the stream,
// and whether to run the library call or only its checks. Each binding turns
// its own arguments (DLPack arrays, view tuples, torch's IValues) into these
// values; the run functions see nothing of the binding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mlakv/stream.h"
#include "mlakv/tensor_view.h"

namespace mlakv::bindings {

/// A schema argument's type, as the bindings convert it.
enum class ArgType {
  kTensor,  ///< Tensor, Tensor(a!), and their optional forms
  kString,  ///< str, str?
  kReal,    ///< float?
  kInt,     ///< int, SymInt
  kBool,    ///< bool
  kDType,   ///< ScalarType? (the readers' output dtype)
  kDevice,  ///< Device
};

/// One argument of a schema: `<type> <name>[=<default>]`.
struct SchemaArgument {
  std::string name;
  ArgType type;
  bool optional;             ///< `?`: None is accepted
  bool written;              ///< `(a!)`: the op writes it
  bool keyword_only;         ///< after `*`
  std::string default_text;  ///< as the schema spells it ("None", "\"bf16\"", "False", "1"); empty: required
};

/// The arguments of a schema's text (the subset of torch's grammar the op table uses).
std::vector<SchemaArgument> parse_arguments(std::string_view schema);

/// A ScalarType? argument: mlakv's dtype and torch's spelling ("torch.float16"), for messages.
struct DTypeArgument {
  DType dtype;
  std::string name;
};

/// An argument's value; monostate: None.
using Value = std::variant<std::monostate, TensorView, std::string, double, std::int64_t, bool, DTypeArgument, Device>;

/// `default_text` as a value (None, a "string", True/False, an integer).
Value default_value(const SchemaArgument& argument);

struct Op;

class OpCall {
 public:
  /// `values` in the order of `arguments` (the op's parsed schema), `outputs` in the op's order.
  OpCall(const Op& op, const std::vector<SchemaArgument>& arguments, std::vector<Value> values,
         std::vector<TensorView> outputs, StreamHandle stream, bool run);

  const TensorView& tensor(std::string_view name) const;
  /// nullptr for None.
  const TensorView* optional_tensor(std::string_view name) const;
  std::string_view text(std::string_view name) const;
  std::optional<std::string_view> optional_text(std::string_view name) const;
  std::optional<double> optional_real(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  bool flag(std::string_view name) const;
  Device device(std::string_view name) const;
  /// The op's i-th output (Op::outputs).
  const TensorView& output(std::size_t index) const { return outputs_.at(index); }
  StreamHandle stream() const { return stream_; }
  /// false: run only the library call's checks (mlakv/checks.h).
  bool run() const { return run_; }

 private:
  const Value& value(std::string_view name) const;

  const Op& op_;
  const std::vector<SchemaArgument>& arguments_;
  std::vector<Value> values_;
  std::vector<TensorView> outputs_;
  StreamHandle stream_;
  bool run_;
};

}  // namespace mlakv::bindings
