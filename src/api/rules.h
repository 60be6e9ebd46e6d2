// SPDX-License-Identifier: Apache-2.0
// The argument rules every validator shares (writers, readers, attention):
// each throws mlakv::Error through `check` naming the argument.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "api/check.h"
#include "mlakv/capabilities.h"
#include "mlakv/formats.h"
#include "mlakv/readers.h"
#include "params/params.h"

namespace mlakv::api {

std::string str(std::int64_t v);

/// a * b and a + b clamped to int64's range: stride arithmetic on caller-given
/// values never wraps (a clamped value then fails the rule it is compared in).
inline std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}
inline std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b < 0 ? INT64_MIN : INT64_MAX;
}

struct Named {
  std::string_view name;
  const TensorView* view;
};

/// Every tensor on one device, one this build has a backend for; returns it.
Device check_devices(const Check& check, std::initializer_list<Named> tensors);
/// The capability gate: `device`'s backend implements `operation` on `format`
/// (mlakv::supports), or kUnsupported listing the formats it does.
void check_supported(const Check& check, Format format, const Device& device, Operation operation);
void check_dtype(const Check& check, std::string_view name, const TensorView& v, DType expected);
void check_rank(const Check& check, std::string_view name, const TensorView& v, int ndim, std::string_view expected);
/// A view with a zero extent: valid whatever its strides (numpy 2 gives them as 0), and never read.
bool is_empty(const TensorView& v);
/// Strides of a non-empty view must be >= 0.
void check_strides_nonnegative(const Check& check, std::string_view name, const TensorView& v);
/// Bytes from the base to one past the last element (0 when empty); extents must be >= 0
/// and the span must fit int64 (checked, never wrapped).
std::int64_t byte_span(const Check& check, std::string_view name, const TensorView& v);
/// byte_span's checks, and a non-null data pointer unless the view is empty.
void check_data(const Check& check, std::string_view name, const TensorView& v);
/// Same base, dtype, shape and strides (an in-place argument).
bool same_view(const TensorView& a, const TensorView& b);
/// `arg` shares no byte with any of `others` (null views are skipped): inputs
/// and outputs of one call must not overlap.
void check_disjoint(const Check& check, const Named& arg, std::initializer_list<Named> others);

/// [num_blocks, block_size, record_bytes] uint8 with non-overlapping records
/// (16-byte aligned records when `require_alignment`, as CUDA loads them).
params::CacheLayout check_cache(const Check& check, const FormatInfo& info, const TensorView& v, bool require_alignment,
                                std::string_view name = "kv_cache");

struct ScaleArg {
  float value = 1.0f;
  const float* device = nullptr;  // a scale on the tensors' CUDA device, read by the kernel
};

/// k_scale: a 1-element float32 on the CPU (read now) or on the tensors' CUDA device.
ScaleArg read_scale(const Check& check, const TensorView* scale, bool required, const Device& device);

/// rope_dtype and k_scale of a reader.
codec::DecodeParams decode_params(const Check& check, const GatherOptions& options, float k_scale);

/// A [rows, width] matrix of 16-bit inputs (a writer's kv_c or k_pe) with at
/// least `tokens` rows: innermost-contiguous, 4-byte aligned rows (unless
/// empty); returns the row stride in bytes.
std::int64_t check_input_rows(const Check& check, std::string_view name, const TensorView& v, std::int64_t width,
                              std::int64_t tokens);

/// [T] int64 slots, contiguous.
const std::int64_t* check_slots(const Check& check, std::string_view name, const TensorView& v);

/// A 1-D int32 array of `length` elements, contiguous.
const std::int32_t* check_int32_vector(const Check& check, std::string_view name, const TensorView& v,
                                       std::int64_t length, std::string_view expected);

}  // namespace mlakv::api
