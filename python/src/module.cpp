// SPDX-License-Identifier: Apache-2.0
// mlakv._mlakv: the nanobind module. Its op functions (op_functions.cpp, one
// per entry of python/ops/op_table.h) take unconstrained DLPack arrays and let
// mlakv's own validation reject bad input with its messages; the Python
// package (python/mlakv) wraps them with the public signatures. Here: the
// vocabulary's constants and the registry's queries.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "mlakv/mlakv.h"
#include "op_functions.h"
#include "views.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mlakv::python {
namespace {

// Bytes of one page of block_size tokens of `format`, padding included (mlakv::page_bytes).
std::int64_t py_page_bytes(const std::string& format, std::int64_t block_size) {
  return page_bytes(format_info(parse_format(format)), block_size);
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
      field["region"] = f.region == kDataRegion ? "data" : "scale";
      field["element"] = std::string(f.element);
      field["group"] = f.group;
      fields.append(field);
    }
    nb::dict entry;
    entry["id"] = std::string(info.id);
    entry["record_bytes"] = info.record_bytes;
    entry["cache_alignment"] = info.cache_alignment;
    entry["layout"] = std::string(info.layout);
    entry["source"] = std::string(info.source);
    entry["fields"] = fields;
    nb::dict geometry;
    geometry["nope_dims"] = info.geometry.nope_dims;
    geometry["rope_dims"] = info.geometry.rope_dims;
    geometry["v_includes_rope"] = info.geometry.v_includes_rope;
    entry["geometry"] = geometry;
    nb::dict page;
    page["kind"] = info.page.kind == PageKind::kTokenMajor ? "token_major" : "block_planar";
    page["data_row_bytes"] = info.page.data_row_bytes;
    page["scale_row_bytes"] = info.page.scale_row_bytes;
    page["page_multiple"] = info.page.page_multiple;
    entry["page"] = page;
    nb::dict policy;
    policy["needs_k_scale"] = info.policy.needs_k_scale;
    const DType stored = info.policy.input_dtype;
    policy["input_dtype"] = stored == DType::kOther ? nb::object(nb::none())
                                                    : nb::object(nb::str(stored == DType::kBFloat16 ? "bf16" : "fp16"));
    entry["policy"] = policy;
    nb::list names;
    for (const EngineName& n : info.engine_names) {
      nb::dict name;
      name["kv_cache_dtype"] = std::string(n.kv_cache_dtype);
      name["engine"] = std::string(n.engine);
      name["fp8_rope"] = n.fp8_rope;
      name["per_token_scale"] = n.per_token_scale;
      names.append(name);
    }
    entry["engine_names"] = names;
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
    entry["decode"] = c.decode;
    out.append(entry);
  }
  return out;
}

// The format id an engine's cache holds (mlakv::resolve_format); input_dtype "bf16", "fp16" or None.
std::string py_resolve_format(const std::string& kv_cache_dtype, int record_bytes, bool fp8_rope, bool per_token_scale,
                              const std::optional<std::string>& input_dtype) {
  DType dtype = DType::kOther;
  if (input_dtype) {
    if (*input_dtype != "bf16" && *input_dtype != "fp16") {
      throw Error(ErrorCode::kValue, "mlakv::resolve_format(" + kv_cache_dtype +
                                         "): input_dtype: must be bf16, fp16 or None, got '" + *input_dtype + "'");
    }
    dtype = *input_dtype == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  }
  return std::string(format_info(resolve_format(kv_cache_dtype, record_bytes, fp8_rope, per_token_scale, dtype)).id);
}

}  // namespace
}  // namespace mlakv::python

NB_MODULE(_mlakv, m) {
  using namespace mlakv::python;
  register_error_translator();
  m.attr("__version__") = mlakv::kVersion;
  // The vocabulary's dimensions (mlakv/vocabulary.h), so that Python never restates them.
  m.attr("LATENT_DIM") = mlakv::kLatentDim;
  m.attr("ROPE_DIM") = mlakv::kRopeDim;
  m.attr("QUERY_DIM") = mlakv::kQueryDim;
  m.attr("VALUE_DIM") = mlakv::kValueDim;
  m.def("page_bytes", &py_page_bytes, "format"_a, "block_size"_a);
  m.def("formats", &py_formats);
  m.def("resolve_format", &py_resolve_format, "kv_cache_dtype"_a, "record_bytes"_a, "fp8_rope"_a, "per_token_scale"_a,
        "input_dtype"_a.none());
  m.def("capabilities", &py_capabilities);
  register_op_functions(m);
  register_engine_seam(m);
}
