// SPDX-License-Identifier: Apache-2.0
// mlakv._mlakv.MlaKvCacheWriter: the C++ engine seam
// (mlakv/mla_kv_cache_writer.h), bound once by mlakv.integrations.vllm at
// construction. update takes DLPack arrays (numpy bf16 as tagged uint16
// views); on torch tensors the adapter calls the op mla_kv_cache_writer_update
// (python/ops/op_table.h) instead.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <optional>
#include <string>
#include <string_view>

#include "mlakv/mla_kv_cache_writer.h"
#include "views.h"

namespace mlakv::python {
namespace {

using engine::MlaKvCacheWriter;
using Array = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;
using Tag = std::optional<std::string>;

void update(const MlaKvCacheWriter& writer, const Array& kv_c, const Tag& kv_c_tag, const Array& k_pe,
            const Tag& k_pe_tag, const OutArray& kv_cache, const Array& slot_mapping, std::string_view kv_cache_dtype,
            const std::optional<Array>& scale, std::uintptr_t stream) {
  const TensorView kv = to_view(kv_c, kv_c_tag), pe = to_view(k_pe, k_pe_tag);
  const TensorView cache = to_view(kv_cache), slots = to_view(slot_mapping);
  const std::optional<TensorView> s = scale ? std::optional<TensorView>(to_view(*scale)) : std::nullopt;
  nb::gil_scoped_release release;
  writer.update(kv, pe, cache, slots, kv_cache_dtype, pointer(s), to_stream(stream));
}

}  // namespace

void register_engine_seam(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<MlaKvCacheWriter>(m, "MlaKvCacheWriter")
      .def(
          "__init__",
          [](MlaKvCacheWriter* self, std::string kv_cache_dtype, bool fp8_rope, bool per_token_scale) {
            new (self) MlaKvCacheWriter({std::move(kv_cache_dtype), fp8_rope, per_token_scale});
          },
          "kv_cache_dtype"_a, "fp8_rope"_a, "per_token_scale"_a)
      .def_prop_ro("compact", &MlaKvCacheWriter::compact)
      .def("update", &update, "kv_c"_a, "kv_c_tag"_a.none(), "k_pe"_a, "k_pe_tag"_a.none(), "kv_cache"_a,
           "slot_mapping"_a, "kv_cache_dtype"_a, "scale"_a.none(), "stream"_a);
}

}  // namespace mlakv::python
