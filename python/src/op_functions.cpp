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
#include <vector>

#include "op_table.h"
#include "views.h"

namespace mlakv::python {
namespace {

using bindings::ArgType;
using bindings::Op;
using bindings::SchemaArgument;
using bindings::Value;

[[noreturn]] void argument_error(const Op& op, const std::string& what) {
  throw nb::type_error(("mlakv._mlakv." + std::string(op.name) + "(): " + what).c_str());
}

// The arrays of one call, alive until it returns: an array imported from a DLPack capsule owns the
// tensor it describes (the capsule may be the only reference left), and frees it when destroyed.
struct ImportedArrays {
  std::deque<nb::ndarray<>> written;
  std::deque<nb::ndarray<nb::ro>> read;
};

// A tensor argument: an array, an (array, tag) pair, or (raw) a view tuple.
TensorView tensor_value(nb::handle h, bool raw, bool written, ImportedArrays& arrays) {
  if (raw) return raw_view(h);
  std::optional<std::string> tag;
  if (nb::isinstance<nb::tuple>(h)) {
    nb::tuple pair = nb::borrow<nb::tuple>(h);
    tag = nb::cast<std::string>(pair[1]);
    h = pair[0];
  }
  if (written) return to_view(arrays.written.emplace_back(nb::cast<nb::ndarray<>>(h)), tag);
  return to_view(arrays.read.emplace_back(nb::cast<nb::ndarray<nb::ro>>(h)), tag);
}

Value value_of(const SchemaArgument& a, nb::handle h, bool raw, ImportedArrays& arrays) {
  if (h.is_none()) return std::monostate{};
  switch (a.type) {
    case ArgType::kTensor:
      return tensor_value(h, raw, a.written, arrays);
    case ArgType::kString:
      return nb::cast<std::string>(h);
    case ArgType::kReal:
      return nb::cast<double>(h);
    case ArgType::kInt:
      return nb::cast<std::int64_t>(h);
    case ArgType::kBool:
      return nb::cast<bool>(h);
    case ArgType::kDType: {  // (mlakv::DType's value, torch's spelling)
      nb::tuple pair = nb::cast<nb::tuple>(h);
      return bindings::DTypeArgument{static_cast<DType>(nb::cast<int>(pair[0])), nb::cast<std::string>(pair[1])};
    }
    case ArgType::kDevice: {  // (is_cuda, index)
      nb::tuple pair = nb::cast<nb::tuple>(h);
      return Device{nb::cast<bool>(pair[0]) ? DeviceType::kCuda : DeviceType::kCpu, nb::cast<int>(pair[1])};
    }
  }
  return std::monostate{};
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
  if (args.size() > positional) argument_error(op, "takes " + std::to_string(positional) + " positional arguments");
  for (std::size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  std::uintptr_t stream = 0;
  for (auto [key, item] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    if (name == "stream") {
      stream = nb::cast<std::uintptr_t>(item);
    } else if (nb::handle* slot = keyword_slot(op, schema, name, given, outputs)) {
      *slot = item;
    } else {
      argument_error(op, "unexpected keyword argument '" + name + "'");
    }
  }
  ImportedArrays arrays;
  std::vector<Value> values;
  for (std::size_t i = 0; i < schema.size(); ++i) {
    if (given[i].is_valid()) {
      values.push_back(value_of(schema[i], given[i], false, arrays));
    } else if (!schema[i].default_text.empty()) {
      values.push_back(bindings::default_value(schema[i]));
    } else {
      argument_error(op, "missing argument '" + schema[i].name + "'");
    }
  }
  std::vector<TensorView> output_views;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_valid()) argument_error(op, "missing output '" + std::string(op.outputs[i].name) + "'");
    output_views.push_back(tensor_value(outputs[i], false, true, arrays));
  }
  return run_op(op, std::move(values), std::move(output_views), stream, true);
}

// _mlakv.raw.<op>: every argument positional, in the schema's order (mlakv.torch fills in the defaults),
// then the outputs, the stream and run: the per-call cost of mlakv.torch's Python kernels.
nb::object call_raw(const Op& op, nb::args args) {
  const std::vector<SchemaArgument>& schema = bindings::schema_arguments(op);
  const std::size_t count = schema.size() + op.outputs.size() + 2;
  if (args.size() != count) argument_error(op, "takes " + std::to_string(count) + " positional arguments");
  ImportedArrays unused;  // views own nothing
  std::vector<Value> values;
  for (std::size_t i = 0; i < schema.size(); ++i) values.push_back(value_of(schema[i], args[i], true, unused));
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
