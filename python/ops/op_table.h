// SPDX-License-Identifier: Apache-2.0
// The op table: one declaration per public operation (its name, its torch
// schema, the outputs its torch op allocates, its implementation), from which
// every binding is produced: the nanobind functions mlakv._mlakv.<op> and the
// raw entry points mlakv._mlakv.raw.<op> (python/src/op_functions.cpp), the C++
// torch registrations (python/torch_ops/registration.cpp) and the Python ones
// (python/mlakv/torch.py, which reads the table through _mlakv.op_table()).
// Adding an op is one entry in op_table.cpp plus its run function.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "op_call.h"

namespace mlakv::bindings {

/// A run of dims of an output, read off the call's arguments (so that a
/// traced call's outputs have its symbolic sizes).
struct Dims {
  enum class From {
    kConstant,     ///< `value`
    kAxis,         ///< dim `first` of tensor `arg` (0 when it has fewer dims)
    kSlice,        ///< dims [first, last) of tensor `arg`, as Python slices them (last -1: to the end)
    kInt,          ///< int argument `arg` (which must be >= 0)
    kFormatNope,   ///< the NoPE values of a token of the `format` argument (512, or 448 for DeepSeek V4)
    kFormatRope,   ///< its RoPE values (64)
    kFormatWidth,  ///< both
  };
  From from;
  std::string_view arg = {};
  int first = 0;
  int last = 0;
  std::int64_t value = 0;
};

constexpr Dims constant(std::int64_t value) { return {Dims::From::kConstant, {}, 0, 0, value}; }
constexpr Dims axis(std::string_view tensor, int dim) { return {Dims::From::kAxis, tensor, dim}; }
constexpr Dims slice(std::string_view tensor, int first, int last = -1) {
  return {Dims::From::kSlice, tensor, first, last};
}
constexpr Dims int_argument(std::string_view name) { return {Dims::From::kInt, name}; }
inline constexpr Dims kFormatNope{Dims::From::kFormatNope};
inline constexpr Dims kFormatRope{Dims::From::kFormatRope};
inline constexpr Dims kFormatWidth{Dims::From::kFormatWidth};

/// An output's dtype: a fixed one, a tensor argument's, or the readers'
/// `dtype` argument (float32 or bfloat16; None: float32).
struct OutputDType {
  enum class From { kConstant, kLike, kReaderDType };
  From from;
  DType dtype = DType::kOther;
  std::string_view arg = {};
};

constexpr OutputDType fixed(DType dtype) { return {OutputDType::From::kConstant, dtype}; }
constexpr OutputDType like(std::string_view tensor) { return {OutputDType::From::kLike, DType::kOther, tensor}; }
inline constexpr OutputDType kReaderDType{OutputDType::From::kReaderDType, DType::kFloat32, "dtype"};

/// A tensor the torch op allocates (on its first tensor argument's device)
/// and returns; the nanobind functions take it as a keyword argument instead.
struct Output {
  std::string_view name;
  std::vector<Dims> shape;
  OutputDType dtype;
};

struct Op {
  std::string_view name;
  /// torch's schema: the arguments (names, types, defaults, keyword-only
  /// ones after `*`), what the op writes (`Tensor(a!)`) and what it returns.
  const char* schema;
  std::vector<Output> outputs;
  /// The implementation: the library call on the call's views (or its
  /// checks only, when !call.run()); returns the value of an op whose schema
  /// returns an int, else 0.
  std::int64_t (*run)(const OpCall& call);
};

/// Every op, in the order the bindings list them.
std::span<const Op> op_table();
/// Whether the op's schema returns an int (Op::run's value) rather than its outputs.
inline bool returns_int(const Op& op) { return std::string_view(op.schema).ends_with("-> int"); }
/// An op's schema arguments, parsed once.
const std::vector<SchemaArgument>& schema_arguments(const Op& op);

}  // namespace mlakv::bindings
