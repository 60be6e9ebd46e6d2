// SPDX-License-Identifier: Apache-2.0
#include "api/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include "api/rules.h"
#include "format/page.h"
#include "format/specs.h"
#if MLAKV_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace mlakv::api {

using format::kCacheAlignment;
using format::kInputRowAlignment;
using format::kLatentDim;
using format::kRopeDim;

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

namespace {

codec::InputDtype input_dtype(const Check& check, const TensorView& kv_c) {
  MLAKV_REQUIRE(check, kv_c.dtype == DType::kBFloat16 || kv_c.dtype == DType::kFloat16, ErrorCode::kDtype, "kv_c",
                "dtype must be bf16 or fp16", dtype_name(kv_c.dtype));
  return kv_c.dtype == DType::kBFloat16 ? codec::InputDtype::kBf16 : codec::InputDtype::kFp16;
}

}  // namespace

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

TensorView squeeze_middle_unit_dim(const TensorView& view) {
  if (view.ndim != 3 || view.shape[1] != 1) return view;
  TensorView squeezed = view;
  squeezed.ndim = 2;
  squeezed.shape[1] = view.shape[2];
  squeezed.strides[1] = view.strides[2];
  return squeezed;
}

TensorView flatten_column(const TensorView& view) {
  if (view.ndim != 2 || view.shape[1] != 1) return view;
  TensorView flat = view;
  flat.ndim = 1;
  return flat;
}

TensorView cache_as_bytes(const TensorView& view) {
  const int size = dtype_size(view.dtype);
  const bool typed = view.dtype == DType::kBFloat16 || view.dtype == DType::kFloat16 || view.dtype == DType::kInt8;
  if (!typed || view.ndim != 3 || view.strides[2] != 1) return view;
  TensorView bytes = view;
  bytes.dtype = DType::kUInt8;
  // A product past int64 leaves the typed view, which validation refuses by its dtype.
  for (int d = 0; d < 2; ++d) {
    if (__builtin_mul_overflow(view.strides[d], size, &bytes.strides[d])) return view;
  }
  if (__builtin_mul_overflow(view.shape[2], size, &bytes.shape[2])) return view;
  return bytes;
}

params::WriteParams validate_write(const Check& check, Format format, const TensorView& kv_c, const TensorView& k_pe,
                                   const TensorView& kv_cache, const TensorView& slot_mapping,
                                   const TensorView* scale) {
  const FormatInfo& info = format_info(format);
  const Device device = check_devices(
      check, {{"kv_c", &kv_c}, {"k_pe", &k_pe}, {"kv_cache", &kv_cache}, {"slot_mapping", &slot_mapping}});
  check_supported(check, format, device, Operation::kWrite);
  // dtype
  const codec::InputDtype dtype = input_dtype(check, kv_c);
  MLAKV_REQUIRE(check, k_pe.dtype == kv_c.dtype, ErrorCode::kDtype, "k_pe",
                std::string("dtype must match kv_c (") + dtype_name(kv_c.dtype) + ")", dtype_name(k_pe.dtype));
  if (info.policy.input_dtype != DType::kOther) {
    const DType record_dtype = info.policy.input_dtype;
    MLAKV_REQUIRE(check, kv_c.dtype == record_dtype, ErrorCode::kDtype, "kv_c",
                  std::string("dtype must be ") + dtype_name(record_dtype) + " (the record stores inputs verbatim)",
                  dtype_name(kv_c.dtype));
  }
  // shape, layout, alignment of each tensor
  const std::int64_t* slots = check_slots(check, "slot_mapping", slot_mapping);
  const std::int64_t tokens = slot_mapping.shape[0];
  const std::int64_t nope = info.geometry.nope_dims;  // 512 (the latent), 448 for DeepSeek V4
  const std::int64_t rope = info.geometry.rope_dims;
  check_rank(check, "kv_c", kv_c, 2, "(T, " + str(nope) + ")");
  check_rank(check, "k_pe", k_pe, 2, "(T, " + str(rope) + ")");
  const std::int64_t kv_c_stride_bytes = check_input_rows(check, "kv_c", kv_c, nope, tokens);
  const std::int64_t k_pe_stride_bytes = check_input_rows(check, "k_pe", k_pe, rope, tokens);
  check_data(check, "kv_c", kv_c);
  check_data(check, "k_pe", k_pe);
  const params::CacheLayout cache = check_cache(check, info, kv_cache, /*require_alignment=*/true);
  const ScaleArg k_scale = read_scale(check, scale, info.policy.needs_k_scale, device);
  // The cache is written while the others are read: no byte may be both.
  const Named written = {"kv_cache", &kv_cache};
  check_disjoint(check, {"kv_c", &kv_c}, {written});
  check_disjoint(check, {"k_pe", &k_pe}, {written});
  check_disjoint(check, {"slot_mapping", &slot_mapping}, {written});
  check_disjoint(check, {"scale", scale}, {written});
  return params::WriteParams{format,
                             dtype,
                             static_cast<const std::uint8_t*>(kv_c.data),
                             kv_c_stride_bytes,
                             static_cast<const std::uint8_t*>(k_pe.data),
                             k_pe_stride_bytes,
                             slots,
                             tokens,
                             cache,
                             codec::EncodeParams{k_scale.value},
                             k_scale.device};
}

namespace {

struct Outputs {
  params::OutDtype dtype;
  void* kv_c;
  std::int64_t kv_c_stride_bytes;
  void* k_pe;
  std::int64_t k_pe_stride_bytes;
};

// [rows, 512] and [rows, 64] (the format's NoPE and RoPE widths), both float32 or both bf16, innermost-contiguous, rows
// not overlapping.
Outputs check_outputs(const Check& check, const FormatInfo& info, const TensorView& kv_c_out,
                      const TensorView& k_pe_out, std::int64_t rows, std::string_view rows_name) {
  MLAKV_REQUIRE(check, kv_c_out.dtype == DType::kFloat32 || kv_c_out.dtype == DType::kBFloat16, ErrorCode::kDtype,
                "kv_c_out", "dtype must be float32 or bf16", dtype_name(kv_c_out.dtype));
  MLAKV_REQUIRE(check, k_pe_out.dtype == kv_c_out.dtype, ErrorCode::kDtype, "k_pe_out",
                std::string("dtype must match kv_c_out (") + dtype_name(kv_c_out.dtype) + ")",
                dtype_name(k_pe_out.dtype));
  const Named views[2] = {{"kv_c_out", &kv_c_out}, {"k_pe_out", &k_pe_out}};
  const std::int64_t widths[2] = {info.geometry.nope_dims, info.geometry.rope_dims};
  for (int i = 0; i < 2; ++i) {
    const TensorView& v = *views[i].view;
    const std::string_view name = views[i].name;
    const std::string expected = "(N, " + str(widths[i]) + ") with N = " + std::string(rows_name) + " = " + str(rows);
    check_rank(check, name, v, 2, expected);
    MLAKV_REQUIRE(check, v.shape[0] == rows && v.shape[1] == widths[i], ErrorCode::kShape, name,
                  "shape must be " + expected, shape_string(v));
    check_strides_nonnegative(check, name, v);
    MLAKV_REQUIRE(check, v.strides[1] == 1 || is_empty(v), ErrorCode::kLayout, name,
                  "rows must be innermost-contiguous (stride 1)", "stride " + str(v.strides[1]));
    MLAKV_REQUIRE(check, rows <= 1 || v.strides[0] >= widths[i], ErrorCode::kLayout, name,
                  "row stride must be >= " + str(widths[i]) + " (rows must not overlap)", str(v.strides[0]));
    check_data(check, name, v);
  }
  const auto dtype = kv_c_out.dtype == DType::kFloat32 ? params::OutDtype::kFloat32 : params::OutDtype::kBf16;
  return {dtype, kv_c_out.data, kv_c_out.strides[0], k_pe_out.data, k_pe_out.strides[0]};
}

// The outputs are written while the inputs are read, and must not share a byte
// with them or with each other (out[:, :512] and out[:, 512:] do not).
void check_outputs_disjoint(const Check& check, const TensorView& kv_c_out, const TensorView& k_pe_out,
                            std::initializer_list<Named> inputs) {
  check_disjoint(check, {"kv_c_out", &kv_c_out}, inputs);
  check_disjoint(check, {"k_pe_out", &k_pe_out}, inputs);
  check_disjoint(check, {"k_pe_out", &k_pe_out}, {{"kv_c_out", &kv_c_out}});
}

params::GatherParams gather_params(Format format, const params::CacheLayout& cache, const params::RowSource& source,
                                   std::int64_t rows, const Outputs& out, const codec::DecodeParams& decode,
                                   const float* k_scale_device) {
  return params::GatherParams{
      format, cache,         source, rows, out.dtype, out.kv_c, out.kv_c_stride_bytes, out.k_pe, out.k_pe_stride_bytes,
      decode, k_scale_device};
}

}  // namespace

params::GatherParams validate_gather(const Check& check, Format format, const TensorView& kv_cache,
                                     const TensorView& slots, const TensorView& kv_c_out, const TensorView& k_pe_out,
                                     const GatherOptions& options) {
  const Device device = check_devices(
      check, {{"kv_cache", &kv_cache}, {"slots", &slots}, {"kv_c_out", &kv_c_out}, {"k_pe_out", &k_pe_out}});
  check_supported(check, format, device, Operation::kRead);
  const std::int64_t* slot_data = check_slots(check, "slots", slots);
  const std::int64_t rows = slots.shape[0];
  const Outputs out = check_outputs(check, format_info(format), kv_c_out, k_pe_out, rows, "len(slots)");
  // CUDA reads records with 16-byte loads.
  const params::CacheLayout cache = check_cache(check, format_info(format), kv_cache, device.type == DeviceType::kCuda);
  const ScaleArg k_scale = read_scale(check, options.scale, format_info(format).policy.needs_k_scale, device);
  check_outputs_disjoint(check, kv_c_out, k_pe_out,
                         {{"kv_cache", &kv_cache}, {"slots", &slots}, {"scale", options.scale}});
  params::RowSource source{};
  source.slots = slot_data;
  return gather_params(format, cache, source, rows, out, decode_params(check, options, k_scale.value), k_scale.device);
}

params::GatherParams validate_gather_paged(const Check& check, Format format, const TensorView& kv_cache,
                                           const TensorView& block_table, const TensorView& seq_lens,
                                           const TensorView& cu_seq_lens, const TensorView& kv_c_out,
                                           const TensorView& k_pe_out, const GatherOptions& options) {
  const Device device = check_devices(check, {{"kv_cache", &kv_cache},
                                              {"block_table", &block_table},
                                              {"seq_lens", &seq_lens},
                                              {"cu_seq_lens", &cu_seq_lens},
                                              {"kv_c_out", &kv_c_out},
                                              {"k_pe_out", &k_pe_out}});
  check_supported(check, format, device, Operation::kRead);
  check_dtype(check, "block_table", block_table, DType::kInt32);
  check_rank(check, "block_table", block_table, 2, "(B, max_blocks)");
  const std::int64_t batch = block_table.shape[0];
  check_strides_nonnegative(check, "block_table", block_table);
  MLAKV_REQUIRE(check, block_table.strides[1] == 1 || block_table.shape[1] <= 1, ErrorCode::kLayout, "block_table",
                "rows must be innermost-contiguous (stride 1)", "stride " + str(block_table.strides[1]));
  check_data(check, "block_table", block_table);
  params::RowSource source{};
  source.block_table = static_cast<const std::int32_t*>(block_table.data);
  source.block_table_stride_elems = block_table.strides[0];
  source.max_blocks = block_table.shape[1];
  source.batch = batch;
  source.seq_lens =
      check_int32_vector(check, "seq_lens", seq_lens, batch, "(B,) with B = block_table rows = " + str(batch));
  source.cu_seq_lens = check_int32_vector(check, "cu_seq_lens", cu_seq_lens, batch + 1,
                                          "(B + 1,) with B = block_table rows = " + str(batch));
  const std::int64_t rows = kv_c_out.ndim >= 1 ? kv_c_out.shape[0] : 0;
  const Outputs out = check_outputs(check, format_info(format), kv_c_out, k_pe_out, rows, "total rows");
  const params::CacheLayout cache = check_cache(check, format_info(format), kv_cache, device.type == DeviceType::kCuda);
  const ScaleArg k_scale = read_scale(check, options.scale, format_info(format).policy.needs_k_scale, device);
  check_outputs_disjoint(check, kv_c_out, k_pe_out,
                         {{"kv_cache", &kv_cache},
                          {"block_table", &block_table},
                          {"seq_lens", &seq_lens},
                          {"cu_seq_lens", &cu_seq_lens},
                          {"scale", options.scale}});
  return gather_params(format, cache, source, rows, out, decode_params(check, options, k_scale.value), k_scale.device);
}

}  // namespace mlakv::api
