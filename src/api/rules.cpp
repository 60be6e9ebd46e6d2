// SPDX-License-Identifier: Apache-2.0
// The argument rules every validator shares (api/rules.h): devices, dtypes,
// ranks, strides and extents, overlap, the cache, k_scale, slots and lengths.
#include "api/rules.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "api/validate.h"
#include "format/page.h"
#include "format/specs.h"
#if MLAKV_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace mlakv::api {

using format::kInputRowAlignment;

std::string str(std::int64_t v) { return std::to_string(v); }

namespace {

// The largest k_scale whose largest E4M3 code (448) still decodes to a finite float32.
constexpr float kMaxScale = 3.40282347e38f / 448.0f;

std::string fmt_float(float v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(v));
  return text;
}

}  // namespace

namespace {

std::string_view operation_name(Operation operation) {
  switch (operation) {
    case Operation::kWrite:
      return "write_records";
    case Operation::kRead:
      return "gather_records";
    case Operation::kDecode:
      return "sparse_mla_decode";
    case Operation::kPrefill:
      return "sparse_mla_prefill";
  }
  return "";
}

}  // namespace

void check_supported(const Check& check, Format format, const Device& device, Operation operation) {
  const Backend backend = device.type == DeviceType::kCuda ? Backend::kCuda : Backend::kCpu;
  if (supports(format, backend, operation)) return;
  std::string supported;
  for (const FormatInfo& info : formats()) {
    if (!supports(info.format, backend, operation)) continue;
    if (!supported.empty()) supported += ", ";
    supported += info.id;
  }
  check.fail(ErrorCode::kUnsupported, "format",
             "the " + std::string(backend_name(backend)) + " backend's " + std::string(operation_name(operation)) +
                 " supports " + (supported.empty() ? std::string("no format") : supported),
             format_info(format).id);
}

// Every tensor on one device, and one this build has a backend for.
Device check_devices(const Check& check, std::initializer_list<Named> tensors) {
  const Named& first = *tensors.begin();
  for (const Named& t : tensors) {
    MLAKV_REQUIRE(
        check, t.view->device == first.view->device, ErrorCode::kDevice, t.name,
        "must be on the same device as " + std::string(first.name) + " (" + device_string(first.view->device) + ")",
        device_string(t.view->device));
  }
  const Device& device = first.view->device;
  MLAKV_REQUIRE(check, device.type == DeviceType::kCpu || device.type == DeviceType::kCuda, ErrorCode::kDevice,
                first.name, "must be on the CPU or a CUDA device", device_string(device));
  if (device.type == DeviceType::kCuda) {
#if MLAKV_WITH_CUDA
    const int capability = cuda::device_capability(device.index);
    MLAKV_REQUIRE(check, capability > 0, ErrorCode::kDevice, first.name,
                  "must be on a CUDA device this process can use", device_string(device));
    MLAKV_REQUIRE(
        check, cuda::supports_capability(capability), ErrorCode::kUnsupported, first.name,
        "this build's CUDA kernels need compute capability 9.0 or newer (built for " + cuda::built_architectures() +
            ")",
        device_string(device) + " with compute capability " + str(capability / 10) + "." + str(capability % 10));
#else
    check.fail(ErrorCode::kUnsupported, first.name,
               "this build has no CUDA backend (built without nvcc); pass CPU arrays", device_string(device));
#endif
  }
  return device;
}

void check_dtype(const Check& check, std::string_view name, const TensorView& v, DType expected) {
  MLAKV_REQUIRE(check, v.dtype == expected, ErrorCode::kDtype, name,
                std::string("dtype must be ") + dtype_name(expected), dtype_name(v.dtype));
}

void check_rank(const Check& check, std::string_view name, const TensorView& v, int ndim, std::string_view expected) {
  MLAKV_REQUIRE(check, v.ndim == ndim, ErrorCode::kShape, name, "shape must be " + std::string(expected),
                shape_string(v));
}

bool is_empty(const TensorView& v) {
  for (int d = 0; d < v.ndim; ++d) {
    if (v.shape[d] == 0) return true;
  }
  return false;
}

// An empty view's strides mean nothing (numpy 2 gives (0, 0)), so only a non-empty view's are checked.
void check_strides_nonnegative(const Check& check, std::string_view name, const TensorView& v) {
  if (is_empty(v)) return;
  for (int d = 0; d < v.ndim; ++d) {
    MLAKV_REQUIRE(check, v.strides[d] >= 0, ErrorCode::kLayout, name, "strides must be non-negative",
                  "stride " + str(v.strides[d]) + " in dim " + str(d));
  }
}

std::int64_t byte_span(const Check& check, std::string_view name, const TensorView& v) {
  for (int d = 0; d < v.ndim; ++d) {
    MLAKV_REQUIRE(check, v.shape[d] >= 0, ErrorCode::kShape, name, "extents must be non-negative", shape_string(v));
  }
  if (is_empty(v)) return 0;
  check_strides_nonnegative(check, name, v);
  // Offset of the last element + 1, times the element size, all in checked int64;
  // the address one past the end must not wrap either.
  std::int64_t last = 0;
  bool fits = true;
  for (int d = 0; d < v.ndim && fits; ++d) {
    std::int64_t step = 0;
    fits = !__builtin_mul_overflow(v.shape[d] - 1, v.strides[d], &step) && !__builtin_add_overflow(last, step, &last);
  }
  std::int64_t bytes = 0;
  fits = fits && !__builtin_add_overflow(last, std::int64_t{1}, &last) &&
         !__builtin_mul_overflow(last, std::int64_t{std::max(1, dtype_size(v.dtype))}, &bytes) &&
         reinterpret_cast<std::uintptr_t>(v.data) <= UINTPTR_MAX - static_cast<std::uintptr_t>(bytes);
  MLAKV_REQUIRE(check, fits, ErrorCode::kValue, name, "the bytes its shape and strides span must fit int64",
                shape_string(v) + " with strides " + strides_string(v));
  return bytes;
}

void check_data(const Check& check, std::string_view name, const TensorView& v) {
  const std::int64_t bytes = byte_span(check, name, v);
  MLAKV_REQUIRE(check, v.data != nullptr || bytes == 0, ErrorCode::kValue, name, "data pointer must not be null",
                "null");
}

namespace {

struct ByteRange {
  std::uintptr_t begin;
  std::uintptr_t end;
};

ByteRange byte_range(const Check& check, std::string_view name, const TensorView& v) {
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data);
  return {begin, begin + static_cast<std::uintptr_t>(byte_span(check, name, v))};
}

// Two [rows, width] views with the same row stride whose rows sit side by side
// (out[:, :512] and out[:, 512:]) share no byte although their ranges interleave.
bool interleaved_rows(const TensorView& a, const TensorView& b) {
  if (a.ndim != 2 || b.ndim != 2 || a.strides[1] != 1 || b.strides[1] != 1) return false;
  const std::int64_t stride = saturating_mul(a.strides[0], dtype_size(a.dtype));
  if (stride <= 0 || stride == INT64_MAX || stride != saturating_mul(b.strides[0], dtype_size(b.dtype))) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a.data);
  const auto pb = reinterpret_cast<std::uintptr_t>(b.data);
  const std::int64_t wa = saturating_mul(a.shape[1], dtype_size(a.dtype));
  const std::int64_t wb = saturating_mul(b.shape[1], dtype_size(b.dtype));
  const auto gap = static_cast<std::int64_t>((pb - pa) % static_cast<std::uintptr_t>(stride));  // b's column in a's row
  return pb >= pa ? (wa <= gap && saturating_add(gap, wb) <= stride) : interleaved_rows(b, a);
}

}  // namespace

bool same_view(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.dtype != b.dtype || a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.shape[d] != b.shape[d] || a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

void check_disjoint(const Check& check, const Named& arg, std::initializer_list<Named> others) {
  if (arg.view == nullptr) return;
  const ByteRange w = byte_range(check, arg.name, *arg.view);
  for (const Named& other : others) {
    if (other.view == nullptr) continue;
    const ByteRange o = byte_range(check, other.name, *other.view);
    const bool apart = w.begin == w.end || o.begin == o.end || w.end <= o.begin || o.end <= w.begin ||
                       interleaved_rows(*arg.view, *other.view);
    MLAKV_REQUIRE(check, apart, ErrorCode::kValue, arg.name,
                  "must not share memory with " + std::string(other.name) + " (inputs and outputs must not overlap)",
                  "overlapping byte ranges");
  }
}

// A [rows, width] matrix of 16-bit inputs: innermost-contiguous, 4-byte aligned rows (unless empty).
std::int64_t check_input_rows(const Check& check, std::string_view name, const TensorView& v, std::int64_t width,
                              std::int64_t tokens) {
  MLAKV_REQUIRE(check, v.shape[1] == width, ErrorCode::kShape, name, "shape must be (T, " + str(width) + ")",
                shape_string(v));
  MLAKV_REQUIRE(check, v.shape[0] >= tokens, ErrorCode::kShape, name,
                "must have at least T = len(slot_mapping) = " + str(tokens) + " rows", shape_string(v));
  check_strides_nonnegative(check, name, v);
  if (is_empty(v)) return 0;
  MLAKV_REQUIRE(check, v.strides[1] == 1 || width <= 1, ErrorCode::kLayout, name,
                "rows must be innermost-contiguous (stride 1)", "stride " + str(v.strides[1]));
  const std::int64_t row_bytes = saturating_mul(v.strides[0], dtype_size(v.dtype));
  MLAKV_REQUIRE(check, reinterpret_cast<std::uintptr_t>(v.data) % kInputRowAlignment == 0, ErrorCode::kAlignment, name,
                "base must be " + str(kInputRowAlignment) + "-byte aligned",
                "address % " + str(kInputRowAlignment) + " = " +
                    str(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(v.data) % kInputRowAlignment)));
  MLAKV_REQUIRE(check, row_bytes % kInputRowAlignment == 0, ErrorCode::kAlignment, name,
                "row stride must be a multiple of " + str(kInputRowAlignment) + " bytes (an even element count)",
                str(v.strides[0]) + " elements");
  return row_bytes;
}

// [T] int64, contiguous.
const std::int64_t* check_slots(const Check& check, std::string_view name, const TensorView& v) {
  check_dtype(check, name, v, DType::kInt64);
  check_rank(check, name, v, 1, "(T,)");
  MLAKV_REQUIRE(check, v.strides[0] == 1 || v.shape[0] <= 1, ErrorCode::kLayout, name, "must be contiguous (stride 1)",
                "stride " + str(v.strides[0]));
  check_data(check, name, v);
  return static_cast<const std::int64_t*>(v.data);
}

// [num_blocks, block_size, record_bytes] uint8 with non-overlapping records;
// for a block-planar format, the engines' view of packed pages: slot stride
// record_bytes, block stride at least block_size * record_bytes (the padded page).
params::CacheLayout check_cache(const Check& check, const FormatInfo& info, const TensorView& v, bool require_alignment,
                                std::string_view name) {
  check_dtype(check, name, v, DType::kUInt8);
  check_rank(check, name, v, 3, "(num_blocks, block_size, record_bytes)");
  MLAKV_REQUIRE(check, v.shape[2] == info.record_bytes, ErrorCode::kShape, name,
                "last dim must be " + str(info.record_bytes) + " (record bytes)", str(v.shape[2]));
  MLAKV_REQUIRE(check, v.shape[0] > 0, ErrorCode::kShape, name, "num_blocks must be > 0", shape_string(v));
  MLAKV_REQUIRE(check, v.shape[1] > 0, ErrorCode::kShape, name, "block_size must be > 0", shape_string(v));
  check_strides_nonnegative(check, name, v);
  MLAKV_REQUIRE(check, v.strides[2] == 1, ErrorCode::kLayout, name, "records must be innermost-contiguous (stride 1)",
                "stride " + str(v.strides[2]));
  const std::int64_t num_blocks = v.shape[0];
  const std::int64_t block_size = v.shape[1];
  const bool planar = info.page.kind == PageKind::kBlockPlanar;
  if (planar) {
    MLAKV_REQUIRE(check, block_size == 1 || v.strides[1] == info.record_bytes, ErrorCode::kLayout, name,
                  "slot stride must be " + str(info.record_bytes) +
                      " (a block-planar page: its rows are packed, region after region)",
                  str(v.strides[1]));
  }
  MLAKV_REQUIRE(check, block_size == 1 || v.strides[1] >= info.record_bytes, ErrorCode::kLayout, name,
                "slot stride must be >= " + str(info.record_bytes) + " (records must not overlap)", str(v.strides[1]));
  // Slots are int64 and so are byte offsets: the capacity and the last record's
  // end must both fit, or a large slot could wrap onto a small one.
  std::int64_t capacity = 0;
  std::int64_t block_span = 0;
  std::int64_t last_block = 0;
  std::int64_t end = 0;
  const bool fits = !__builtin_mul_overflow(num_blocks, block_size, &capacity) &&
                    !__builtin_mul_overflow(block_size - 1, v.strides[1], &block_span) &&
                    !__builtin_add_overflow(block_span, static_cast<std::int64_t>(info.record_bytes), &block_span) &&
                    !__builtin_mul_overflow(num_blocks - 1, v.strides[0], &last_block) &&
                    !__builtin_add_overflow(last_block, block_span, &end);
  MLAKV_REQUIRE(check, fits, ErrorCode::kValue, name,
                "slot capacity and byte extent must fit int64 (the writer's index type)", shape_string(v));
  MLAKV_REQUIRE(check, num_blocks == 1 || v.strides[0] >= block_span, ErrorCode::kLayout, name,
                "block stride must be >= " + str(block_span) + " (blocks must not overlap)", str(v.strides[0]));
  if (planar) {  // a block-planar page is its rows and its padding (docs/ABI.md): pages do not share it
    const std::int64_t page = page_bytes(info, block_size);
    MLAKV_REQUIRE(check, num_blocks == 1 || v.strides[0] >= page, ErrorCode::kLayout, name,
                  "block stride must be >= " + str(page) + " (mlakv::page_bytes: the padded page)", str(v.strides[0]));
  }
  check_data(check, name, v);
  if (require_alignment) {
    const auto align = static_cast<std::int64_t>(info.cache_alignment);
    const auto base = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(v.data) % info.cache_alignment);
    MLAKV_REQUIRE(check, base == 0, ErrorCode::kAlignment, name, "base must be " + str(align) + "-byte aligned",
                  "address % " + str(align) + " = " + str(base));
    // A block-planar page's slot stride is nominal: its rows start 16-byte aligned whatever it is.
    MLAKV_REQUIRE(check, v.strides[0] % align == 0 && (planar || v.strides[1] % align == 0), ErrorCode::kAlignment,
                  name,
                  planar ? "block stride must be a multiple of " + str(align) + " bytes"
                         : "block and slot strides must be multiples of " + str(align) + " bytes",
                  "(" + str(v.strides[0]) + ", " + str(v.strides[1]) + ")");
  }
  const format::PageRows rows =
      format::page_rows(info.page.kind, block_size, v.strides[1], info.page.data_row_bytes, info.page.scale_row_bytes);
  return params::make_cache_layout(static_cast<std::uint8_t*>(v.data), block_size, capacity, v.strides[0], v.strides[1],
                                   &rows);
}

// k_scale: a 1-element float32 ((1,) or 0-d) on the CPU (read and checked now)
// or on the tensors' CUDA device (read by the kernel, so no host
// synchronization, and not checked). A CPU value must be a normal, finite,
// positive float32 with 448 * k_scale finite (fp8_e4m3's largest code decodes
// to 448 * k_scale): 0, -0, negatives, NaN, inf and subnormals have no meaning.
ScaleArg read_scale(const Check& check, const TensorView* scale, bool required, const Device& device) {
  constexpr std::string_view kName = "scale";
  if (scale == nullptr) {
    MLAKV_REQUIRE(check, !required, ErrorCode::kValue, kName, "this format requires k_scale, a 1-element float32",
                  "none");
    return {};
  }
  check_dtype(check, kName, *scale, DType::kFloat32);
  MLAKV_REQUIRE(check, scale->ndim == 0 || (scale->ndim == 1 && scale->shape[0] == 1), ErrorCode::kShape, kName,
                "shape must be (1,) or () (one k_scale)", shape_string(*scale));
  check_data(check, kName, *scale);
  if (scale->device.type == DeviceType::kCpu) {
    const float value = *static_cast<const float*>(scale->data);
    MLAKV_REQUIRE(check, std::isnormal(value) && value > 0.0f && value <= kMaxScale, ErrorCode::kValue, kName,
                  "must be a positive normal float32 with 448 * scale finite (" + fmt_float(1.17549435e-38f) +
                      " <= scale <= " + fmt_float(kMaxScale) + ")",
                  fmt_float(value));
    return {value, nullptr};
  }
  MLAKV_REQUIRE(check, scale->device == device, ErrorCode::kDevice, kName,
                "must be on the CPU or on the tensors' device (" + device_string(device) + ")",
                device_string(scale->device));
  return {1.0f, static_cast<const float*>(scale->data)};
}

codec::DecodeParams decode_params(const Check& check, const GatherOptions& options, float k_scale) {
  MLAKV_REQUIRE(check, options.rope_dtype == DType::kBFloat16 || options.rope_dtype == DType::kFloat16,
                ErrorCode::kDtype, "rope_dtype", "must be bf16 or fp16", dtype_name(options.rope_dtype));
  return {k_scale, options.rope_dtype == DType::kBFloat16 ? codec::InputDtype::kBf16 : codec::InputDtype::kFp16};
}

const std::int32_t* check_int32_vector(const Check& check, std::string_view name, const TensorView& v,
                                       std::int64_t length, std::string_view expected) {
  check_dtype(check, name, v, DType::kInt32);
  MLAKV_REQUIRE(check, v.ndim == 1 && v.shape[0] == length, ErrorCode::kShape, name,
                "shape must be " + std::string(expected), shape_string(v));
  MLAKV_REQUIRE(check, v.strides[0] == 1 || length <= 1, ErrorCode::kLayout, name, "must be contiguous (stride 1)",
                "stride " + str(v.strides[0]));
  check_data(check, name, v);
  return static_cast<const std::int32_t*>(v.data);
}

}  // namespace mlakv::api
