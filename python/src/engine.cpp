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

#include "arguments.h"
#include "mlakv/mla_kv_cache_writer.h"
#include "views.h"

namespace mlakv::python {
namespace {

using engine::MlaKvCacheWriter;
using Tag = std::optional<std::string>;

// The arguments arrive as Python objects and are converted here (arguments.h), so that each one that
// cannot be is refused naming it, as mlakv.integrations.vllm's update names them.
void update(const MlaKvCacheWriter& writer, nb::handle kv_c, const Tag& kv_c_tag, nb::handle k_pe, const Tag& k_pe_tag,
            nb::handle kv_cache, nb::handle slot_mapping, nb::handle kv_cache_dtype, nb::handle scale,
            nb::handle stream) {
  const CallName call{"MlaKvCacheWriter.update", text_of(kv_cache_dtype)};
  const std::string dtype = text_argument(call, "kv_cache_dtype", kv_cache_dtype);
  ImportedArrays arrays;
  const TensorView kv = array_argument(call, "kv_c", kv_c, false, kv_c_tag, arrays);
  const TensorView pe = array_argument(call, "k_pe", k_pe, false, k_pe_tag, arrays);
  const TensorView cache = array_argument(call, "kv_cache", kv_cache, true, std::nullopt, arrays);
  const TensorView slots = array_argument(call, "slot_mapping", slot_mapping, false, std::nullopt, arrays);
  std::optional<TensorView> s;
  if (!scale.is_none()) s = array_argument(call, "scale", scale, false, std::nullopt, arrays);
  const StreamHandle on = to_stream(stream_argument(call, "stream", stream));
  nb::gil_scoped_release release;
  writer.update(kv, pe, cache, slots, dtype, pointer(s), on);
}

}  // namespace

void register_engine_seam(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<MlaKvCacheWriter>(m, "MlaKvCacheWriter")
      .def(
          "__init__",
          [](MlaKvCacheWriter* self, nb::handle kv_cache_dtype, bool fp8_rope, bool per_token_scale) {
            const CallName call{"MlaKvCacheWriter", text_of(kv_cache_dtype)};
            new (self)
                MlaKvCacheWriter({text_argument(call, "kv_cache_dtype", kv_cache_dtype), fp8_rope, per_token_scale});
          },
          "kv_cache_dtype"_a, "fp8_rope"_a, "per_token_scale"_a,
          nb::sig("def __init__(self, kv_cache_dtype: str, fp8_rope: bool, per_token_scale: bool) -> None"))
      .def_prop_ro("compact", &MlaKvCacheWriter::compact)
      // The signature the arguments' conversion enforces (arrays: any DLPack producer), not nb::handle's.
      .def("update", &update, "kv_c"_a.none(), "kv_c_tag"_a.none(), "k_pe"_a.none(), "k_pe_tag"_a.none(),
           "kv_cache"_a.none(), "slot_mapping"_a.none(), "kv_cache_dtype"_a.none(), "scale"_a.none(), "stream"_a.none(),
           nb::sig("def update(self, kv_c: object, kv_c_tag: str | None, k_pe: object, k_pe_tag: str | None, "
                   "kv_cache: object, slot_mapping: object, kv_cache_dtype: str, scale: object | None, "
                   "stream: int) -> None"));
}

}  // namespace mlakv::python
