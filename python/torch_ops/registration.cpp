// SPDX-License-Identifier: Apache-2.0
// torch.ops.mlakv in C++, produced from the op table (python/ops/op_table.h):
// each op's schema, and one boxed kernel for every op that reads the
// arguments off torch's stack, allocates the op's outputs on its first
// tensor's device, runs the op and pushes what the schema returns. An op with
// no tensor argument (the workspace size) is one CompositeExplicitAutograd
// kernel; the others are CPU and CUDA kernels (the views carry the device,
// the library dispatches on it). The fake implementations are mlakv/torch.py's.
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <vector>

#include "argument_errors.h"
#include "mlakv/formats.h"
#include "op_table.h"
#include "views.h"

namespace mlakv::torch_ops {
namespace {

using bindings::ArgType;
using bindings::CallName;
using bindings::Dims;
using bindings::Op;
using bindings::OutputDType;
using bindings::SchemaArgument;
using bindings::Value;

const Op& op_named(const c10::OperatorName& name) {
  const std::string_view op = std::string_view(name.name).substr(std::string_view("mlakv::").size());
  for (const Op& entry : bindings::op_table()) {
    if (entry.name == op) return entry;
  }
  throw std::logic_error("mlakv torch ops: no op " + name.name);
}

bool has_tensors(const Op& op) {
  const std::vector<SchemaArgument>& arguments = bindings::schema_arguments(op);
  return std::any_of(arguments.begin(), arguments.end(), [](const auto& a) { return a.type == ArgType::kTensor; });
}

// The writers' cache may be float8_e4m3fn: engines type an fp8 cache so (the same bytes).
Value value_of(const CallName& call, const SchemaArgument& a, const c10::IValue& v) {
  if (v.isNone()) return std::monostate{};
  switch (a.type) {
    case ArgType::kTensor:
      return view(v.toTensor(), a.written && a.name == "kv_cache");
    case ArgType::kString:
      return bindings::checked_text(call, a.name, v.toStringRef());
    case ArgType::kReal:
      return v.toDouble();
    case ArgType::kInt:
      return v.isSymInt() ? v.toSymInt().expect_int() : v.toInt();
    case ArgType::kBool:
      return v.toBool();
    case ArgType::kDType:
      return bindings::DTypeArgument{dtype_of(v.toScalarType()), dtype_name(v.toScalarType())};
    case ArgType::kDevice: {
      const at::Device d = v.toDevice();
      return Device{d.is_cuda() ? DeviceType::kCuda : DeviceType::kCpu, d.is_cuda() && d.has_index() ? d.index() : 0};
    }
  }
  return std::monostate{};
}

// The arguments by name, as the output rules read them.
struct Arguments {
  const std::vector<SchemaArgument>& schema;
  c10::ArrayRef<c10::IValue> values;
  const c10::IValue& operator[](std::string_view name) const {
    for (std::size_t i = 0; i < schema.size(); ++i) {
      if (schema[i].name == name) return values[i];
    }
    throw std::logic_error("mlakv torch ops: no argument " + std::string(name));
  }
  std::string format() const {
    for (std::size_t i = 0; i < schema.size(); ++i) {
      if (schema[i].name == "format") return values[i].toStringRef();
    }
    return "";
  }
  /// Who the op's argument errors name: the op, and its first str argument when that is text.
  CallName call_name(const Op& op) const {
    for (std::size_t i = 0; i < schema.size(); ++i) {
      if (schema[i].type != ArgType::kString || !values[i].isString()) continue;
      const std::string_view text = values[i].toStringRef();
      return {op.name, bindings::text_fault(text).empty() ? std::optional<std::string_view>(text) : std::nullopt};
    }
    return {op.name, std::nullopt};
  }
};

// "(2, 576)" or "(5,)": a shape as Python prints a tuple, as mlakv.torch's allocation errors show it.
std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// An output of the op; a size torch cannot allocate is refused naming the argument it comes from (its first
// dims' argument), as mlakv.torch's Python kernels and the Python functions' outputs are.
at::Tensor allocated(const CallName& call, const bindings::Output& output, const std::vector<std::int64_t>& shape,
                     at::ScalarType dtype, at::Device device) {
  try {
    return at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
  } catch (const c10::Error& e) {
    const auto from =
        std::find_if(output.shape.begin(), output.shape.end(), [](const Dims& d) { return !d.arg.empty(); });
    const std::string_view text = e.what_without_backtrace();
    bindings::argument_error(call, ErrorCode::kValue, from != output.shape.end() ? from->arg : output.name,
                             "cannot allocate a " + shape_text(shape) + " " + dtype_name(dtype) + " output",
                             text.substr(0, text.find('\n')));
  }
}

at::ScalarType scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return at::kBFloat16;
    case DType::kInt32:
      return at::kInt;
    default:
      return at::kFloat;
  }
}

// An output's dtype; the readers' `dtype` is float32 or bfloat16 (None: float32).
at::ScalarType output_dtype(const Op& op, const Arguments& args, const OutputDType& rule) {
  switch (rule.from) {
    case OutputDType::From::kConstant:
      return scalar_type(rule.dtype);
    case OutputDType::From::kLike:
      return args[rule.arg].toTensor().scalar_type();
    case OutputDType::From::kReaderDType:
      break;
  }
  const c10::IValue& dtype = args[rule.arg];
  if (dtype.isNone()) return at::kFloat;
  if (dtype.toScalarType() != at::kFloat && dtype.toScalarType() != at::kBFloat16) {
    type_error(op.name, args.format(), rule.arg, "must be torch.float32 or torch.bfloat16 (or None: torch.float32)",
               dtype_name(dtype.toScalarType()));
  }
  return dtype.toScalarType();
}

// An output's dims (mlakv/torch.py's _output_dims reads the same rules).
std::vector<std::int64_t> output_shape(const Op& op, const Arguments& args, const std::vector<Dims>& rules) {
  std::vector<std::int64_t> shape;
  for (const Dims& d : rules) {
    switch (d.from) {
      case Dims::From::kConstant:
        shape.push_back(d.value);
        break;
      case Dims::From::kAxis: {
        const at::Tensor& t = args[d.arg].toTensor();
        shape.push_back(d.first < t.dim() ? t.size(d.first) : 0);
        break;
      }
      case Dims::From::kSlice: {
        const std::vector<std::int64_t> sizes = args[d.arg].toTensor().sizes().vec();
        const auto end =
            static_cast<std::size_t>(d.last < 0 ? sizes.size() : std::min<std::size_t>(d.last, sizes.size()));
        for (std::size_t i = std::min<std::size_t>(d.first, end); i < end; ++i) shape.push_back(sizes[i]);
        break;
      }
      case Dims::From::kInt: {
        const c10::IValue& v = args[d.arg];
        const std::int64_t n = v.isSymInt() ? v.toSymInt().expect_int() : v.toInt();
        if (n < 0) value_error(op.name, args.format(), d.arg, "must be >= 0", std::to_string(n));
        shape.push_back(n);
        break;
      }
      case Dims::From::kFormatNope:
      case Dims::From::kFormatRope:
      case Dims::From::kFormatWidth: {
        const TokenGeometry g = widths(args.format());
        shape.push_back(d.from == Dims::From::kFormatNope   ? g.nope_dims
                        : d.from == Dims::From::kFormatRope ? g.rope_dims
                                                            : g.nope_dims + g.rope_dims);
        break;
      }
    }
  }
  return shape;
}

void kernel(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  translated([&] {
    const Op& op = op_named(handle.schema().operator_name());
    const std::vector<SchemaArgument>& schema = bindings::schema_arguments(op);
    const Arguments args{schema, torch::jit::last(*stack, schema.size())};
    const CallName call = args.call_name(op);
    std::vector<Value> values;
    const at::Tensor* first = nullptr;
    for (std::size_t i = 0; i < schema.size(); ++i) {
      values.push_back(value_of(call, schema[i], args.values[i]));
      if (first == nullptr && args.values[i].isTensor()) first = &args.values[i].toTensor();
    }
    std::vector<at::Tensor> outputs;
    std::vector<TensorView> output_views;
    for (const bindings::Output& o : op.outputs) {
      const at::ScalarType dtype = output_dtype(op, args, o.dtype);
      outputs.push_back(allocated(call, o, output_shape(op, args, o.shape), dtype, first->device()));
      output_views.push_back(view(outputs.back()));
    }
    const StreamHandle on = first != nullptr ? stream(*first) : nullptr;
    const std::int64_t result =
        op.run(bindings::OpCall(op, schema, std::move(values), std::move(output_views), on, true));
    torch::jit::drop(*stack, schema.size());
    for (at::Tensor& t : outputs) torch::jit::push(*stack, std::move(t));
    if (bindings::returns_int(op)) torch::jit::push(*stack, result);
  });
}

}  // namespace
}  // namespace mlakv::torch_ops

TORCH_LIBRARY_FRAGMENT(mlakv, m) {
  for (const mlakv::bindings::Op& op : mlakv::bindings::op_table()) m.def(op.schema);
}

TORCH_LIBRARY_IMPL(mlakv, CPU, m) {
  for (const mlakv::bindings::Op& op : mlakv::bindings::op_table()) {
    if (mlakv::torch_ops::has_tensors(op)) {
      m.impl(op.name.data(), torch::CppFunction::makeFromBoxedFunction<&mlakv::torch_ops::kernel>());
    }
  }
}

TORCH_LIBRARY_IMPL(mlakv, CUDA, m) {
  for (const mlakv::bindings::Op& op : mlakv::bindings::op_table()) {
    if (mlakv::torch_ops::has_tensors(op)) {
      m.impl(op.name.data(), torch::CppFunction::makeFromBoxedFunction<&mlakv::torch_ops::kernel>());
    }
  }
}

TORCH_LIBRARY_IMPL(mlakv, CompositeExplicitAutograd, m) {
  for (const mlakv::bindings::Op& op : mlakv::bindings::op_table()) {
    if (!mlakv::torch_ops::has_tensors(op)) {
      m.impl(op.name.data(), torch::CppFunction::makeFromBoxedFunction<&mlakv::torch_ops::kernel>());
    }
  }
}
