// SPDX-License-Identifier: Apache-2.0
// mlakv._mlakv: the nanobind module. It takes unconstrained DLPack arrays and
// lets mlakv's own validation reject bad input with its messages; the Python
// package (python/mlakv) wraps these functions with the public signatures.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "context_parallel.h"
#include "mlakv/mlakv.h"
#include "sparse_decode_extra.h"
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
  const GatherOptions options = gather_options(pointer(scale_view), rope_dtype);
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
  const GatherOptions options = gather_options(pointer(scale_view), rope_dtype);
  nb::gil_scoped_release release;
  gather_records_paged(parsed, cache_view, table_view, lens_view, cu_view, kv_c_view, k_pe_view, options,
                       to_stream(stream));
}

void py_sparse_mla_decode(const std::string& format, const Array& q, const Tag& q_tag, const Array& kv_cache,
                          const Array& indices, const OutArray& out, const Tag& out_tag, const OutArray& lse,
                          const std::optional<Array>& topk_len, float sm_scale, const std::optional<Array>& scale,
                          const std::string& rope_dtype, const std::optional<OutArray>& workspace,
                          const std::optional<Array>& attn_sink, const std::optional<std::string>& extra_format,
                          const std::optional<Array>& extra_kv_cache, const std::optional<Array>& extra_indices,
                          const std::optional<Array>& extra_topk_len, std::uintptr_t stream) {
  const Format parsed = parse_format(format);
  const TensorView q_view = to_view(q, q_tag);
  const TensorView cache_view = to_view(kv_cache);
  const TensorView indices_view = to_view(indices);
  const TensorView out_view = to_view(out, out_tag);
  const TensorView lse_view = to_view(lse);
  const std::optional<TensorView> len_view = optional_view(topk_len);
  const std::optional<TensorView> scale_view = optional_view(scale);
  const std::optional<TensorView> workspace_view =
      workspace ? std::optional<TensorView>(to_view(*workspace)) : std::nullopt;
  const std::optional<TensorView> sink_view = optional_view(attn_sink);
  const bindings::ExtraCacheArguments extra_arguments{extra_format, optional_view(extra_kv_cache),
                                                      optional_view(extra_indices), optional_view(extra_topk_len)};
  const std::optional<SparseDecodeExtraCache> extra = bindings::extra_cache(format, extra_arguments);
  SparseDecodeOptions options;
  options.sm_scale = sm_scale;
  options.topk_len = len_view ? &*len_view : nullptr;
  options.decode = gather_options(pointer(scale_view), rope_dtype);
  options.workspace = workspace_view ? &*workspace_view : nullptr;
  options.attn_sink = pointer(sink_view);
  options.extra = extra ? &*extra : nullptr;
  nb::gil_scoped_release release;
  sparse_mla_decode(parsed, q_view, cache_view, indices_view, out_view, lse_view, options, to_stream(stream));
}

void py_merge_attention_states(const Array& out_a, const Tag& a_tag, const Array& lse_a, const Array& out_b,
                               const Tag& b_tag, const Array& lse_b, const OutArray& out, const Tag& out_tag,
                               const OutArray& lse, std::uintptr_t stream) {
  const TensorView a = to_view(out_a, a_tag);
  const TensorView la = to_view(lse_a);
  const TensorView b = to_view(out_b, b_tag);
  const TensorView lb = to_view(lse_b);
  const TensorView o = to_view(out, out_tag);
  const TensorView l = to_view(lse);
  nb::gil_scoped_release release;
  merge_attention_states(a, la, b, lb, o, l, to_stream(stream));
}

std::size_t py_sparse_mla_decode_workspace_size(std::int64_t rows, std::int64_t heads, std::int64_t topk, bool cuda,
                                                int device_index) {
  return sparse_mla_decode_workspace_size(rows, heads, topk,
                                          Device{cuda ? DeviceType::kCuda : DeviceType::kCpu, device_index});
}

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
  m.def("concat_and_cache_mla", &py_concat_and_cache_mla, "kv_c"_a, "kv_c_tag"_a.none(), "k_pe"_a, "k_pe_tag"_a.none(),
        "kv_cache"_a, "slot_mapping"_a, "kv_cache_dtype"_a, "scale"_a.none(), "stream"_a);
  m.def("concat_and_cache_nvfp4_mla_fp8_rope", &py_concat_and_cache_nvfp4_mla_fp8_rope, "kv_c"_a, "kv_c_tag"_a.none(),
        "k_pe"_a, "k_pe_tag"_a.none(), "kv_cache"_a, "slot_mapping"_a, "scale"_a.none(), "per_token_scale"_a,
        "stream"_a);
  m.def("gather_records", &py_gather_records, "format"_a, "kv_cache"_a, "slots"_a, "kv_c_out"_a, "k_pe_out"_a,
        "out_tag"_a.none(), "scale"_a.none(), "rope_dtype"_a, "stream"_a);
  m.def("gather_records_paged", &py_gather_records_paged, "format"_a, "kv_cache"_a, "block_table"_a, "seq_lens"_a,
        "cu_seq_lens"_a, "kv_c_out"_a, "k_pe_out"_a, "out_tag"_a.none(), "scale"_a.none(), "rope_dtype"_a, "stream"_a);
  m.def("sparse_mla_decode", &py_sparse_mla_decode, "format"_a, "q"_a, "q_tag"_a.none(), "kv_cache"_a, "indices"_a,
        "out"_a, "out_tag"_a.none(), "lse"_a, "topk_len"_a.none(), "sm_scale"_a, "scale"_a.none(), "rope_dtype"_a,
        "workspace"_a.none(), "attn_sink"_a.none(), "extra_format"_a.none(), "extra_kv_cache"_a.none(),
        "extra_indices"_a.none(), "extra_topk_len"_a.none(), "stream"_a);
  m.def("merge_attention_states", &py_merge_attention_states, "out_a"_a, "a_tag"_a.none(), "lse_a"_a, "out_b"_a,
        "b_tag"_a.none(), "lse_b"_a, "out"_a, "out_tag"_a.none(), "lse"_a, "stream"_a);
  m.def("sparse_mla_decode_workspace_size", &py_sparse_mla_decode_workspace_size, "rows"_a, "heads"_a, "topk"_a,
        "cuda"_a, "device_index"_a);
  m.def("page_bytes", &py_page_bytes, "format"_a, "block_size"_a);
  m.def("formats", &py_formats);
  m.def("resolve_format", &py_resolve_format, "kv_cache_dtype"_a, "record_bytes"_a, "fp8_rope"_a, "per_token_scale"_a,
        "input_dtype"_a.none());
  m.def("capabilities", &py_capabilities);
  register_raw_entry_points(m);
  register_engine_seam(m);
  bind_context_parallel(m);
}
