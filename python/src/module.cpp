// SPDX-License-Identifier: Apache-2.0
// mlakv._mlakv: the nanobind module. It takes unconstrained DLPack arrays and
// lets mlakv's own validation reject bad input with its messages; the Python
// package (python/mlakv) wraps these functions with the public signatures.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "mlakv/mlakv.h"
#include "views.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mlakv::python {
namespace {

using Array = nb::ndarray<nb::ro>;  // read: inputs, slots, scale
using OutArray = nb::ndarray<>;     // written: caches and outputs
using Tag = std::optional<std::string>;

std::optional<TensorView> optional_view(const std::optional<Array>& array) {
  if (!array) return std::nullopt;
  return to_view(*array);
}

// A cudaStream_t passed from Python as an integer (torch's .cuda_stream, CuPy's .ptr).
StreamHandle to_stream(std::uintptr_t stream) { return reinterpret_cast<StreamHandle>(stream); }

GatherOptions gather_options(const std::optional<TensorView>& scale, const std::string& rope_dtype) {
  GatherOptions options;
  options.scale = scale ? &*scale : nullptr;
  options.rope_dtype = rope_dtype == "bf16" ? DType::kBFloat16 : rope_dtype == "fp16" ? DType::kFloat16 : DType::kOther;
  return options;
}

// The views of a writer call, converted while the GIL is held.
struct WriterViews {
  TensorView kv_c, k_pe, kv_cache, slot_mapping;
  std::optional<TensorView> scale;
  const TensorView* scale_ptr() const { return scale ? &*scale : nullptr; }
};

WriterViews writer_views(const Array& kv_c, const Tag& kv_c_tag, const Array& k_pe, const Tag& k_pe_tag,
                         const OutArray& kv_cache, const Array& slot_mapping, const std::optional<Array>& scale) {
  return {to_view(kv_c, kv_c_tag), to_view(k_pe, k_pe_tag), to_view(kv_cache), to_view(slot_mapping),
          optional_view(scale)};
}

void py_concat_and_cache_mla(const Array& kv_c, const Tag& kv_c_tag, const Array& k_pe, const Tag& k_pe_tag,
                             const OutArray& kv_cache, const Array& slot_mapping, const std::string& kv_cache_dtype,
                             const std::optional<Array>& scale, std::uintptr_t stream) {
  const WriterViews v = writer_views(kv_c, kv_c_tag, k_pe, k_pe_tag, kv_cache, slot_mapping, scale);
  nb::gil_scoped_release release;
  concat_and_cache_mla(v.kv_c, v.k_pe, v.kv_cache, v.slot_mapping, kv_cache_dtype, v.scale_ptr(), to_stream(stream));
}

void py_concat_and_cache_nvfp4_mla_fp8_rope(const Array& kv_c, const Tag& kv_c_tag, const Array& k_pe,
                                            const Tag& k_pe_tag, const OutArray& kv_cache, const Array& slot_mapping,
                                            const std::optional<Array>& scale, bool per_token_scale,
                                            std::uintptr_t stream) {
  const WriterViews v = writer_views(kv_c, kv_c_tag, k_pe, k_pe_tag, kv_cache, slot_mapping, scale);
  nb::gil_scoped_release release;
  concat_and_cache_nvfp4_mla_fp8_rope(v.kv_c, v.k_pe, v.kv_cache, v.slot_mapping, v.scale_ptr(), per_token_scale,
                                      to_stream(stream));
}

void py_gather_records(const std::string& format, const Array& kv_cache, const Array& slots, const OutArray& kv_c_out,
                       const OutArray& k_pe_out, const Tag& out_tag, const std::optional<Array>& scale,
                       const std::string& rope_dtype, std::uintptr_t stream) {
  const Format parsed = parse_format(format);
  const TensorView cache_view = to_view(kv_cache);
  const TensorView slot_view = to_view(slots);
  const TensorView kv_c_view = to_view(kv_c_out, out_tag);
  const TensorView k_pe_view = to_view(k_pe_out, out_tag);
  const std::optional<TensorView> scale_view = optional_view(scale);
  const GatherOptions options = gather_options(scale_view, rope_dtype);
  nb::gil_scoped_release release;
  gather_records(parsed, cache_view, slot_view, kv_c_view, k_pe_view, options, to_stream(stream));
}

void py_gather_records_paged(const std::string& format, const Array& kv_cache, const Array& block_table,
                             const Array& seq_lens, const Array& cu_seq_lens, const OutArray& kv_c_out,
                             const OutArray& k_pe_out, const Tag& out_tag, const std::optional<Array>& scale,
                             const std::string& rope_dtype, std::uintptr_t stream) {
  const Format parsed = parse_format(format);
  const TensorView cache_view = to_view(kv_cache);
  const TensorView table_view = to_view(block_table);
  const TensorView lens_view = to_view(seq_lens);
  const TensorView cu_view = to_view(cu_seq_lens);
  const TensorView kv_c_view = to_view(kv_c_out, out_tag);
  const TensorView k_pe_view = to_view(k_pe_out, out_tag);
  const std::optional<TensorView> scale_view = optional_view(scale);
  const GatherOptions options = gather_options(scale_view, rope_dtype);
  nb::gil_scoped_release release;
  gather_records_paged(parsed, cache_view, table_view, lens_view, cu_view, kv_c_view, k_pe_view, options,
                       to_stream(stream));
}

nb::list py_formats() {
  nb::list out;
  for (const FormatInfo& info : formats()) {
    nb::list fields;
    for (const FieldInfo& f : info.fields) {
      nb::dict field;
      field["name"] = std::string(f.name);
      field["offset"] = f.offset;
      field["bytes"] = f.bytes;
      field["contents"] = std::string(f.contents);
      fields.append(field);
    }
    nb::dict entry;
    entry["id"] = std::string(info.id);
    entry["record_bytes"] = info.record_bytes;
    entry["cache_alignment"] = info.cache_alignment;
    entry["layout"] = std::string(info.layout);
    entry["source"] = std::string(info.source);
    entry["fields"] = fields;
    out.append(entry);
  }
  return out;
}

nb::list py_capabilities() {
  nb::list out;
  for (const Capability& c : capabilities()) {
    nb::dict entry;
    entry["format"] = std::string(format_info(c.format).id);
    entry["backend"] = std::string(backend_name(c.backend));
    entry["arch"] = std::string(c.arch);
    entry["writer"] = c.writer;
    entry["reader"] = c.reader;
    out.append(entry);
  }
  return out;
}

}  // namespace
}  // namespace mlakv::python

NB_MODULE(_mlakv, m) {
  using namespace mlakv::python;
  register_error_translator();
  m.attr("__version__") = mlakv::kVersion;
  m.def("concat_and_cache_mla", &py_concat_and_cache_mla, "kv_c"_a, "kv_c_tag"_a.none(), "k_pe"_a, "k_pe_tag"_a.none(),
        "kv_cache"_a, "slot_mapping"_a, "kv_cache_dtype"_a, "scale"_a.none(), "stream"_a);
  m.def("concat_and_cache_nvfp4_mla_fp8_rope", &py_concat_and_cache_nvfp4_mla_fp8_rope, "kv_c"_a, "kv_c_tag"_a.none(),
        "k_pe"_a, "k_pe_tag"_a.none(), "kv_cache"_a, "slot_mapping"_a, "scale"_a.none(), "per_token_scale"_a,
        "stream"_a);
  m.def("gather_records", &py_gather_records, "format"_a, "kv_cache"_a, "slots"_a, "kv_c_out"_a, "k_pe_out"_a,
        "out_tag"_a.none(), "scale"_a.none(), "rope_dtype"_a, "stream"_a);
  m.def("gather_records_paged", &py_gather_records_paged, "format"_a, "kv_cache"_a, "block_table"_a, "seq_lens"_a,
        "cu_seq_lens"_a, "kv_c_out"_a, "k_pe_out"_a, "out_tag"_a.none(), "scale"_a.none(), "rope_dtype"_a, "stream"_a);
  m.def("formats", &py_formats);
  m.def("capabilities", &py_capabilities);
}
