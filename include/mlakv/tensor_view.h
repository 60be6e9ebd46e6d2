// SPDX-License-Identifier: Apache-2.0
// TensorView: a non-owning description of a strided array, the currency of the public API.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace mlakv {

enum class DType : std::uint8_t {
  kBFloat16,
  kFloat16,
  kFloat32,
  kFloat64,
  kUInt8,
  kInt8,
  kUInt16,
  kInt16,
  kInt32,
  kInt64,
  kOther
};
enum class DeviceType : std::uint8_t { kCpu, kCuda, kOther };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr int kMaxDims = 4;

/// A view of memory owned by the caller (numpy, torch, CuPy, a C++ runtime).
/// Shapes and strides are in elements, as in DLPack; strides may exceed the
/// dense ones. No ownership, no lifetime: the view must outlive the call.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kOther;
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};
  Device device = {};
};

/// Number of elements: the product of the shape (1 for a 0-d view), 0 when any
/// extent is 0, -1 when an extent is negative, INT64_MAX when the product
/// overflows int64 (it never wraps).
std::int64_t numel(const TensorView& view) noexcept;

/// Bytes per element of a dtype (0 for kOther).
int dtype_size(DType dtype) noexcept;
/// "bf16", "fp16", "float32", "uint8", "int64", ...; "other" for kOther.
const char* dtype_name(DType dtype) noexcept;

/// A dense row-major view of `data`; a convenience for C++ callers and tests.
/// Throws mlakv::Error on a negative extent or an element count past int64.
TensorView make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape, Device device = {});

}  // namespace mlakv
