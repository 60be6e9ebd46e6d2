// SPDX-License-Identifier: Apache-2.0
// The op table's Python functions: for each op, mlakv._mlakv.<op> (DLPack
// arrays; a numpy bfloat16 array travels as the pair (its uint16 view, "bf16"))
// for the public functions, and mlakv._mlakv.raw.<op> (the view tuples of
// raw_view; run=False runs only the checks) for mlakv.torch's Python kernels
// and fake implementations. Both take the schema's arguments, then the
// outputs by name and the stream; _mlakv.op_table() describes the ops to
// mlakv.torch.
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

// Binds the Python call to the schema (positional, then keywords, then the defaults) and runs the op.
nb::object call(const Op& op, bool raw, nb::args args, nb::kwargs kwargs) {
  const std::vector<SchemaArgument>& schema = bindings::schema_arguments(op);
  std::vector<nb::handle> given(schema.size()), outputs(op.outputs.size());
  std::size_t positional = 0;
  while (positional < schema.size() && !schema[positional].keyword_only) ++positional;
  if (args.size() > positional) argument_error(op, "takes " + std::to_string(positional) + " positional arguments");
  for (std::size_t i = 0; i < args.size(); ++i) given[i] = args[i];
  std::uintptr_t stream = 0;
  bool run = true;
  for (auto [key, item] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    if (name == "stream") {
      stream = nb::cast<std::uintptr_t>(item);
    } else if (raw && name == "run") {
      run = nb::cast<bool>(item);
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
      values.push_back(value_of(schema[i], given[i], raw, arrays));
    } else if (!schema[i].default_text.empty()) {
      values.push_back(bindings::default_value(schema[i]));
    } else {
      argument_error(op, "missing argument '" + schema[i].name + "'");
    }
  }
  std::vector<TensorView> output_views;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].is_valid()) argument_error(op, "missing output '" + std::string(op.outputs[i].name) + "'");
    output_views.push_back(tensor_value(outputs[i], raw, true, arrays));
  }
  const bindings::OpCall op_call(op, schema, std::move(values), std::move(output_views), to_stream(stream), run);
  std::int64_t result = 0;
  {
    nb::gil_scoped_release release;
    result = op.run(op_call);
  }
  return bindings::returns_int(op) ? nb::object(nb::int_(result)) : nb::none();
}

// The Python signature of an op's function: the schema's arguments, then the outputs, the stream (and run).
std::string signature(const Op& op, bool raw) {
  static const char* const kTypes[] = {"object", "str", "float", "int", "bool", "tuple[int, str]", "tuple[bool, int]"};
  std::string text = "def " + std::string(op.name) + "(";
  bool keyword_only = false;
  for (const SchemaArgument& a : bindings::schema_arguments(op)) {
    if (a.keyword_only && !keyword_only) {
      text += "*, ";
      keyword_only = true;
    }
    text += a.name + ": " + kTypes[static_cast<int>(a.type)] + (a.optional ? " | None" : "");
    if (!a.default_text.empty()) text += " = " + a.default_text;
    text += ", ";
  }
  if (!keyword_only) text += "*, ";
  for (const bindings::Output& o : op.outputs) text += std::string(o.name) + ": object, ";
  text += std::string("stream: int = 0") + (raw ? ", run: bool = True" : "");
  return text + ") -> " + (bindings::returns_int(op) ? "int" : "None");
}

// The table as mlakv.torch reads it: name, schema and each output's dims and dtype.
nb::list describe_table() {
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
    nb::dict entry;
    entry["name"] = std::string(op.name);
    entry["schema"] = std::string(op.schema);
    entry["outputs"] = outputs;
    ops.append(entry);
  }
  return ops;
}

}  // namespace

void register_op_functions(nb::module_& m) {
  nb::module_ raw_module =
      m.def_submodule("raw", "mlakv.torch's entry points: tensors as view tuples, run=False only checks");
  static std::deque<std::string> signatures;  // nanobind keeps the pointers
  for (const Op& op : bindings::op_table()) {
    for (const bool raw : {false, true}) {
      const std::string& sig = signatures.emplace_back(signature(op, raw));
      (raw ? raw_module : m)
          .def(
              std::string(op.name).c_str(),
              [&op, raw](nb::args args, nb::kwargs kwargs) {
                return call(op, raw, std::move(args), std::move(kwargs));
              },
              nb::sig(sig.c_str()));
    }
  }
  m.def("op_table", &describe_table, "The op table (python/ops/op_table.h), as mlakv.torch registers it");
}

}  // namespace mlakv::python
