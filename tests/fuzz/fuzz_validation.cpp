// SPDX-License-Identifier: Apache-2.0
// The public writers on arbitrary shapes, strides, dtypes, alignments and
// slots. Every view describes memory the harness really owns (allocated to the
// view's extent), the cache sits between guard bytes, and the call must either
// throw mlakv::Error having changed nothing, or change only bytes inside the
// records of in-range slots. Three hostile moves on top: a null input with a
// huge shape (its element count past int64 or not), an input placed inside the
// cache (overlap), and empty inputs with zero strides (numpy 2's); the first
// two must be refused, the third accepted as a no-op when all else is valid.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "fuzz_input.h"
#include "mlakv/mlakv.h"

namespace {

using mlakv::DType;
using mlakv::TensorView;

constexpr std::int64_t kMaxBytes = std::int64_t{1} << 22;
constexpr std::size_t kGuard = 64;
constexpr std::uint8_t kSentinel = 0xA5;

void check(bool ok) {
  if (!ok) std::abort();
}

const DType kDtypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32,
                         DType::kUInt8,    DType::kInt64,   DType::kInt32};

// Shape and strides (elements) of up to 3 dims; returns false when the extent is too large or negative.
struct Geometry {
  TensorView view;
  std::int64_t extent_bytes = 0;
};

Geometry make(mlakv::fuzz::FuzzInput& in, DType dtype, int ndim, const std::int64_t* base_shape) {
  Geometry g;
  g.view.dtype = dtype;
  g.view.ndim = ndim;
  std::int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    const std::int64_t jitter = static_cast<std::int8_t>(in.take<std::uint8_t>()) % 3;  // -2..2
    g.view.shape[d] = std::max<std::int64_t>(0, base_shape[d] + (in.pick(4) == 0 ? jitter : 0));
    const std::int64_t pad = in.pick(8) == 0 ? static_cast<std::int8_t>(in.take<std::uint8_t>()) : 0;
    g.view.strides[d] = stride + pad;
    stride = std::max<std::int64_t>(1, g.view.strides[d] * std::max<std::int64_t>(1, g.view.shape[d]));
  }
  std::int64_t last = 0;
  for (int d = 0; d < ndim; ++d) {
    if (g.view.shape[d] == 0) return g;  // nothing addressable
    last += (g.view.shape[d] - 1) * std::max<std::int64_t>(0, g.view.strides[d]);
  }
  g.extent_bytes = (last + 1) * std::max(1, mlakv::dtype_size(dtype));
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mlakv::fuzz::FuzzInput in(data, size);
  const mlakv::FormatInfo& info = mlakv::formats()[in.pick(mlakv::formats().size())];
  const std::int64_t tokens = in.pick(6);
  const DType in_dtype = kDtypes[in.pick(4) == 0 ? in.pick(6) : in.pick(2)];
  const DType pe_dtype = in.pick(8) == 0 ? kDtypes[in.pick(6)] : in_dtype;

  const std::int64_t kv_shape[3] = {tokens, 512, 1};
  const std::int64_t pe_shape[3] = {tokens, in.pick(4) == 0 ? 1 : 64, 64};
  const std::int64_t cache_shape[3] = {static_cast<std::int64_t>(in.pick(4)), static_cast<std::int64_t>(in.pick(5)),
                                       info.record_bytes};
  const std::int64_t slot_shape[3] = {tokens, 1, 1};
  Geometry kv = make(in, in_dtype, in.pick(8) == 0 ? 3 : 2, kv_shape);
  Geometry pe = make(in, pe_dtype, in.pick(4) == 0 ? 3 : 2, pe_shape);
  Geometry cache = make(in, in.pick(16) == 0 ? DType::kInt32 : DType::kUInt8, in.pick(16) == 0 ? 2 : 3, cache_shape);
  Geometry slots = make(in, in.pick(16) == 0 ? DType::kInt32 : DType::kInt64, in.pick(8) == 0 ? 2 : 1, slot_shape);
  for (const Geometry* g : {&kv, &pe, &cache, &slots}) {
    if (g->extent_bytes > kMaxBytes) return 0;
  }

  // Owned memory with fuzzed misalignment (0..15 bytes) of each base.
  std::vector<std::uint8_t> kv_mem(static_cast<std::size_t>(kv.extent_bytes) + 32);
  std::vector<std::uint8_t> pe_mem(static_cast<std::size_t>(pe.extent_bytes) + 32);
  std::vector<std::uint8_t> slot_mem(static_cast<std::size_t>(slots.extent_bytes) + 32);
  std::vector<std::uint8_t> cache_mem(static_cast<std::size_t>(cache.extent_bytes) + 2 * kGuard + 32, kSentinel);
  for (std::uint8_t& b : kv_mem) b = in.take<std::uint8_t>();
  for (std::uint8_t& b : pe_mem) b = in.take<std::uint8_t>();
  for (std::uint8_t& b : slot_mem) b = in.take<std::uint8_t>();
  const auto aligned = [&](std::vector<std::uint8_t>& mem, std::size_t lead) {
    const auto addr = reinterpret_cast<std::uintptr_t>(mem.data()) + lead;
    const std::size_t to16 = (16 - addr % 16) % 16;
    return mem.data() + lead + to16 + (in.pick(8) == 0 ? in.pick(16) : 0);
  };
  kv.view.data = aligned(kv_mem, 0);
  pe.view.data = aligned(pe_mem, 0);
  slots.view.data = aligned(slot_mem, 0);
  cache.view.data = aligned(cache_mem, kGuard);
  const std::vector<std::uint8_t> before = cache_mem;

  TensorView* const inputs[3] = {&kv.view, &pe.view, &slots.view};
  bool must_refuse = false;
  switch (in.pick(8)) {
    case 0: {  // null data behind a huge shape: never read, always refused
      TensorView& v = *inputs[in.pick(3)];
      v.data = nullptr;
      v.shape[0] =
          in.pick(2) ? std::int64_t{1} << (40 + in.pick(23)) : static_cast<std::int64_t>(in.take<std::uint64_t>() >> 1);
      must_refuse = v.shape[0] > 0 && v.ndim > 0;
      for (int d = 1; d < v.ndim; ++d) must_refuse = must_refuse && v.shape[d] > 0;
      break;
    }
    case 1: {  // an input inside the cache being written
      TensorView& v = *inputs[in.pick(3)];
      const std::int64_t span = cache.extent_bytes;
      if (span > 0 && mlakv::numel(v) > 0) {
        v.data = static_cast<std::uint8_t*>(cache.view.data) +
                 in.pick(static_cast<unsigned>(std::min<std::int64_t>(span, 255)));
        must_refuse = true;
      }
      break;
    }
    case 2:  // empty views with zero strides
      for (TensorView* v : inputs) {
        if (mlakv::numel(*v) != 0) continue;
        for (int d = 0; d < v->ndim; ++d) v->strides[d] = 0;
      }
      break;
    default:
      break;
  }

  float k_scale = 1.0f;
  const TensorView scale = mlakv::make_view(&k_scale, DType::kFloat32, {1});
  bool accepted = true;
  try {
    switch (in.pick(3)) {
      case 0:
        mlakv::write_records(info.format, kv.view, pe.view, cache.view, slots.view, &scale);
        break;
      case 1:
        mlakv::concat_and_cache_mla(kv.view, pe.view, cache.view, slots.view, "nvfp4_ds_mla", &scale);
        break;
      default:
        mlakv::concat_and_cache_nvfp4_mla_fp8_rope(kv.view, pe.view, cache.view, slots.view, nullptr, in.pick(2));
    }
  } catch (const mlakv::Error&) {
    accepted = false;
  }
  if (!accepted) {
    check(cache_mem == before);
    return 0;
  }
  check(!must_refuse);
  // Accepted: only bytes of records addressed by in-range slots may differ.
  const auto* base = static_cast<const std::uint8_t*>(cache.view.data);
  const std::int64_t block_size = cache.view.shape[1];
  const std::int64_t capacity = cache.view.shape[0] * block_size;
  const std::int64_t record = cache.view.shape[2];
  std::vector<bool> allowed(cache_mem.size(), false);
  const auto* slot_values = static_cast<const std::int64_t*>(slots.view.data);
  for (std::int64_t t = 0; t < slots.view.shape[0]; ++t) {
    const std::int64_t s = slot_values[t * slots.view.strides[0]];
    if (s < 0 || s >= capacity) continue;
    const std::int64_t offset =
        (s / block_size) * cache.view.strides[0] + (s % block_size) * cache.view.strides[1] + (base - cache_mem.data());
    for (std::int64_t b = 0; b < record; ++b) allowed[static_cast<std::size_t>(offset + b)] = true;
  }
  for (std::size_t i = 0; i < cache_mem.size(); ++i) check(cache_mem[i] == before[i] || allowed[i]);
  return 0;
}
