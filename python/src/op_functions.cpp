// SPDX-License-Identifier: Apache-2.0
// The op table's Python functions: for each op, mlakv._mlakv.<op> for the
// public functions (DLPack arrays, a numpy bfloat16 array as the pair (its
// uint16 view, "bf16"); the schema's arguments by position or keyword, then the
// outputs by name and the stream), and mlakv._mlakv.raw.<op> for mlakv.torch's
// Python kernels and fake implementations (the view tuples of raw_view; every
// argument positional in the schema's order, then the outputs, the stream and
// run, where run=False runs only the checks). _mlakv.op_table() describes the
// ops to mlakv.torch.
#include "op_functions.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "arguments.h"
#include "op_table.h"
#include "views.h"

namespace mlakv::python {
namespace {

using bindings::ArgType;
using bindings::Op;
using bindings::SchemaArgument;
using bindings::Value;

[[noreturn]] void signature_error(const Op& op, const std::string& what) {
  throw nb::type_error(("mlakv._mlakv." + std::string(op.name) + "(): " + what).c_str());
}

// A tuple argument the bindings build themselves: ScalarType? as (mlakv::DType's value, torch's spelling),
// Device as (is_cuda, index).
template <class T>
T pair_argument(const CallName& call, std::string_view name, nb::handle h, std::string_view rule) {
  try {
    const nb::tuple pair = nb::cast<nb::tuple>(h);
    if (pair.size() == 2) {
      if constexpr (std::is_same_v<T, bindings::DTypeArgument>) {
        return {static_cast<DType>(nb::cast<int>(pair[0])), nb::cast<std::string>(pair[1])};
      } else {
        return Device{nb::cast<bool>(pair[0]) ? DeviceType::kCuda : DeviceType::kCpu, nb::cast<int>(pair[1])};
      }
    }
  } catch (const nb::cast_error&) {
  } catch (const nb::python_error&) {
  }
  bindings::argument_error(call, ErrorCode::kDtype, name, rule, nb::cast<std::string>(nb::repr(h)));
}

// One argument's value; None is refused (by its conversion's type rule) unless the schema says `?`.
Value value_of(const CallName& call, const SchemaArgument& a, nb::handle h, bool raw, ImportedArrays& arrays) {
  if (h.is_none() && a.optional) return std::monostate{};
  switch (a.type) {
    case ArgType::kTensor:
      return raw ? raw_view(h) : tagged_array_argument(call, a.name, h, a.written, arrays);
    case ArgType::kString:
      return text_argument(call, a.name, h);
    case ArgType::kReal:
      return real_argument(call, a.name, h);
    case ArgType::kInt:
      return int_argument(call, a.name, h);
    case ArgType::kBool:
      return bool_argument(call, a.name, h);
    case ArgType::kDType:
      return pair_argument<bindings::DTypeArgument>(call, a.name, h, "must be the pair (mlakv DType, torch name)");
    case ArgType::kDevice:
      return pair_argument<Device>(call, a.name, h, "must be the pair (is_cuda, device index)");
  }
  return std::monostate{};
}

// Who the call's errors name: the op, and its first str argument (its format) when that is text.
CallName call_name(const Op& op, const std::vector<SchemaArgument>& schema, const std::vector<nb::handle>& given) {
  for (std::size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].type == ArgType::kString && given[i].is_valid()) return {op.name, text_of(given[i])};
  }
  return {op.name, std::nullopt};
}

// Where a keyword argument goes: a schema argument's or an output's slot; nullptr for neither.
nb::handle* keyword_slot(const Op& op, const std::vector<SchemaArgument>& schema, std::string_view name,
                         std::vector<nb::handle>& given, std::vector<nb::handle>& outputs) {
  for (std::size_t i = 0; i < schema.size(); ++i) {
    if (schema[i].name == name) return &given[i];
  }
  for (std::size_t i = 0; i < op.outputs.size(); ++i) {
    if (op.outputs[i].name == name) return &outputs[i];
  }
  return nullptr;
}

// Runs the op on the converted arguments, without the GIL; returns what its schema returns.
nb::object run_op(const Op& op, std::vector<Value> values, std::vector<TensorView> outputs, std::uintptr_t stream,
                  bool run) {
  const bindings::OpCall op_call(op, bindings::schema_arguments(op), std::move(values), std::move(outputs),
                                 to_stream(stream), run);
  std::int64_t result = 0;
  {
    nb::gil_scoped_release release;
    result = op.run(op_call);
  }
  return bindings::returns_int(op) ? nb::object(nb::int_(result)) : nb::none();
}

// _mlakv.<op>: binds the Python call to the schema (positional, then keywords, then the defaults).
nb::object call_function(const Op& op, nb::args args, nb::kwargs kwargs) {
  const std::vector<SchemaArgument>& schema = bindings::schema_arguments(op);
  std::vector<nb::handle> given(schema.size()), outputs(op.outputs.size());
  std::size_t positional = 0;
  while (positional < schema.size() && !schema[positional].keyword_only) ++positional;
  if (args.size() > positional) signature_error(op, "takes " + std::to_string(positional) + " positional arguments");
  for (std::size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  nb::handle stream;
  for (auto [key, item] : kwargs) {
    const std::optional<std::string_view> name = text_of(key);
    if (name == "stream") {
      stream = item;
    } else if (nb::handle* slot = name ? keyword_slot(op, schema, *name, given, outputs) : nullptr) {
      *slot = item;
    } else {
      signature_error(op, "unexpected keyword argument " + nb::cast<std::string>(nb::repr(key)));
    }
  }
  const CallName call = call_name(op, schema, given);
  ImportedArrays arrays;
  std::vector<Value> values;
  for (std::size_t i = 0; i < schema.size(); ++i) {
    if (given[i].is_valid()) {
      values.push_back(value_of(call, schema[i], given[i], false, arrays));
    } else if (!schema[i].default_text.empty()) {
      values.push_back(bindings::default_value(schema[i]));
    } else {
      signature_error(op, "missing argument '" + schema[i].name + "'");
    }
  }
  std::vector<TensorView> output_views;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_valid()) signature_error(op, "missing output '" + std::string(op.outputs[i].name) + "'");
    output_views.push_back(tagged_array_argument(call, op.outputs[i].name, outputs[i], true, arrays));
  }
  const std::uintptr_t handle = stream.is_valid() ? stream_argument(call, "stream", stream) : 0;
  return run_op(op, std::move(values), std::move(output_views), handle, true);
}

// _mlakv.raw.<op>: every argument positional, in the schema's order (mlakv.torch fills in the defaults),
// then the outputs, the stream and run: the per-call cost of mlakv.torch's Python kernels.
nb::object call_raw(const Op& op, nb::args args) {
  const std::vector<SchemaArgument>& schema = bindings::schema_arguments(op);
  const std::size_t count = schema.size() + op.outputs.size() + 2;
  if (args.size() != count) signature_error(op, "takes " + std::to_string(count) + " positional arguments");
  std::vector<nb::handle> given;
  for (std::size_t i = 0; i < schema.size(); ++i) given.push_back(args[i]);
  const CallName call = call_name(op, schema, given);
  ImportedArrays unused;  // views own nothing
  std::vector<Value> values;
  for (std::size_t i = 0; i < schema.size(); ++i) values.push_back(value_of(call, schema[i], args[i], true, unused));
  std::vector<TensorView> outputs;
  for (std::size_t i = 0; i < op.outputs.size(); ++i) outputs.push_back(raw_view(args[schema.size() + i]));
  return run_op(op, std::move(values), std::move(outputs), nb::cast<std::uintptr_t>(args[count - 2]),
                nb::cast<bool>(args[count - 1]));
}

// The Python signature of an op's function: the schema's arguments, then the outputs and the stream
// (raw: all positional, and run).
std::string signature(const Op& op, bool raw) {
  static const char* const kTypes[] = {"object", "str", "float", "int", "bool", "tuple[int, str]", "tuple[bool, int]"};
  std::string text = "def " + std::string(op.name) + "(";
  bool keyword_only = false;
  for (const SchemaArgument& a : bindings::schema_arguments(op)) {
    if (a.keyword_only && !keyword_only && !raw) {
      text += "*, ";
      keyword_only = true;
    }
    text += a.name + ": " + kTypes[static_cast<int>(a.type)] + (a.optional ? " | None" : "");
    if (!a.default_text.empty() && !raw) text += " = " + a.default_text;
    text += ", ";
  }
  if (!keyword_only && !raw) text += "*, ";
  for (const bindings::Output& o : op.outputs) text += std::string(o.name) + ": object, ";
  text += raw ? "stream: int, run: bool" : "stream: int = 0";
  return text + ") -> " + (bindings::returns_int(op) ? "int" : "None");
}

// A schema default as a Python value.
nb::object default_object(const SchemaArgument& a) {
  const Value value = bindings::default_value(a);
  if (const auto* text = std::get_if<std::string>(&value)) return nb::str(text->c_str());
  if (const auto* flag = std::get_if<bool>(&value)) return nb::bool_(*flag);
  if (const auto* number = std::get_if<std::int64_t>(&value)) return nb::int_(*number);
  return nb::none();
}

// The table as mlakv.torch reads it: name, schema, the arguments (name, type, written, default) and
// each output's dims and dtype.
nb::list describe_table() {
  static const char* const kTypes[] = {"tensor", "str", "float", "int", "bool", "dtype", "device"};
  static const char* const kDims[] = {"constant", "axis", "slice", "int", "format_nope", "format_rope", "format_width"};
  static const char* const kDTypes[] = {"constant", "like", "reader_dtype"};
  nb::list ops;
  for (const Op& op : bindings::op_table()) {
    nb::list outputs;
    for (const bindings::Output& o : op.outputs) {
      nb::list shape;
      for (const bindings::Dims& d : o.shape) {
        shape.append(nb::make_tuple(kDims[static_cast<int>(d.from)], std::string(d.arg), d.first, d.last, d.value));
      }
      nb::dict output;
      output["name"] = std::string(o.name);
      output["shape"] = shape;
      output["dtype"] = nb::make_tuple(kDTypes[static_cast<int>(o.dtype.from)], static_cast<int>(o.dtype.dtype),
                                       std::string(o.dtype.arg));
      outputs.append(output);
    }
    nb::list arguments;
    for (const SchemaArgument& a : bindings::schema_arguments(op)) {
      nb::dict argument;
      argument["name"] = a.name;
      argument["type"] = kTypes[static_cast<int>(a.type)];
      argument["written"] = a.written;
      if (!a.default_text.empty()) argument["default"] = default_object(a);
      arguments.append(argument);
    }
    nb::dict entry;
    entry["name"] = std::string(op.name);
    entry["schema"] = std::string(op.schema);
    entry["arguments"] = arguments;
    entry["outputs"] = outputs;
    ops.append(entry);
  }
  return ops;
}

}  // namespace

void register_op_functions(nb::module_& m) {
  nb::module_ raw_module = m.def_submodule(
      "raw", "mlakv.torch's entry points: tensors as view tuples, all positional, run=False only checks");
  static std::deque<std::string> signatures;  // nanobind keeps the pointers
  for (const Op& op : bindings::op_table()) {
    m.def(
        op.name.data(), [&op](nb::args args, nb::kwargs kwargs) { return call_function(op, args, kwargs); },
        nb::sig(signatures.emplace_back(signature(op, false)).c_str()));
    raw_module.def(
        op.name.data(), [&op](nb::args args) { return call_raw(op, args); },
        nb::sig(signatures.emplace_back(signature(op, true)).c_str()));
  }
  m.def("op_table", &describe_table, "The op table (python/ops/op_table.h), as mlakv.torch registers it");
}

}  // namespace mlakv::python
