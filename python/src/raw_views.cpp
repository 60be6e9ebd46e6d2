// SPDX-License-Identifier: Apache-2.0
// mlakv._mlakv.raw: the entry points of mlakv.torch's ops. A tensor travels as
// the tuple (data_ptr, dtype, shape, strides, device_index) that the op reads
// off the torch tensor (dtype: mlakv::DType's value; device_index -1 = CPU),
// not as a DLPack capsule: exporting one per tensor per call costs more than
// the call, and Dynamo cannot trace it. `run` false runs only the call's
// checks (mlakv/checks.h): the fake implementations' validation, on views of
// fake tensors whose data pointers are made up.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string_view.h>

#include <optional>
#include <string>
#include <string_view>

#include "mlakv/mlakv.h"
#include "sparse_decode_extra.h"
#include "views.h"

namespace mlakv::python {
namespace {

std::int64_t int_item(PyObject* o) {
  const long long value = PyLong_AsLongLong(o);
  if (value == -1 && PyErr_Occurred()) throw nb::python_error();
  return value;
}

// The tuple's dims, at most kMaxDims of them.
int dims(PyObject* seq, std::int64_t* out) {
  if (!PyTuple_Check(seq)) throw nb::type_error("mlakv.raw: a view's shape and strides must be tuples");
  const Py_ssize_t n = PyTuple_GET_SIZE(seq);
  if (n > kMaxDims) {
    throw Error(ErrorCode::kShape, "mlakv: arrays of more than " + std::to_string(kMaxDims) +
                                       " dims are not accepted, got " + std::to_string(n));
  }
  for (Py_ssize_t d = 0; d < n; ++d) out[d] = int_item(PyTuple_GET_ITEM(seq, d));
  return static_cast<int>(n);
}

}  // namespace

TensorView raw_view(nb::handle handle) {
  PyObject* t = handle.ptr();
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) {
    throw nb::type_error("mlakv.raw: a view is (data_ptr, dtype, shape, strides, device_index)");
  }
  TensorView view;
  const unsigned long long pointer = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 0));
  if (pointer == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw nb::python_error();
  view.data = reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer));
  const std::int64_t dtype = int_item(PyTuple_GET_ITEM(t, 1));
  view.dtype =
      dtype >= 0 && dtype <= static_cast<std::int64_t>(DType::kOther) ? static_cast<DType>(dtype) : DType::kOther;
  view.ndim = dims(PyTuple_GET_ITEM(t, 2), view.shape);
  if (dims(PyTuple_GET_ITEM(t, 3), view.strides) != view.ndim) {
    throw nb::value_error("mlakv.raw: a view's shape and strides differ in length");
  }
  const std::int64_t device = int_item(PyTuple_GET_ITEM(t, 4));
  view.device = device < 0 ? Device{DeviceType::kCpu, 0} : Device{DeviceType::kCuda, static_cast<int>(device)};
  return view;
}

std::optional<TensorView> optional_raw_view(nb::handle handle) {
  if (handle.is_none()) return std::nullopt;
  return raw_view(handle);
}

namespace {

void concat_and_cache_mla_raw(nb::handle kv_c, nb::handle k_pe, nb::handle kv_cache, nb::handle slot_mapping,
                              std::string_view kv_cache_dtype, nb::handle scale, std::uintptr_t stream, bool run) {
  const TensorView kv = raw_view(kv_c), pe = raw_view(k_pe), cache = raw_view(kv_cache), slots = raw_view(slot_mapping);
  const std::optional<TensorView> s = optional_raw_view(scale);
  if (!run) return check_concat_and_cache_mla(kv, pe, cache, slots, kv_cache_dtype, pointer(s));
  nb::gil_scoped_release release;
  concat_and_cache_mla(kv, pe, cache, slots, kv_cache_dtype, pointer(s), to_stream(stream));
}

void concat_and_cache_nvfp4_mla_fp8_rope_raw(nb::handle kv_c, nb::handle k_pe, nb::handle kv_cache,
                                             nb::handle slot_mapping, nb::handle scale, bool per_token_scale,
                                             std::uintptr_t stream, bool run) {
  const TensorView kv = raw_view(kv_c), pe = raw_view(k_pe), cache = raw_view(kv_cache), slots = raw_view(slot_mapping);
  const std::optional<TensorView> s = optional_raw_view(scale);
  if (!run) return check_concat_and_cache_nvfp4_mla_fp8_rope(kv, pe, cache, slots, pointer(s), per_token_scale);
  nb::gil_scoped_release release;
  concat_and_cache_nvfp4_mla_fp8_rope(kv, pe, cache, slots, pointer(s), per_token_scale, to_stream(stream));
}

void gather_records_raw(std::string_view format, nb::handle kv_cache, nb::handle slots, nb::handle kv_c_out,
                        nb::handle k_pe_out, nb::handle scale, std::string_view rope_dtype, std::uintptr_t stream,
                        bool run) {
  const Format parsed = parse_format(format);
  const TensorView cache = raw_view(kv_cache), slot_view = raw_view(slots);
  const TensorView kv = raw_view(kv_c_out), pe = raw_view(k_pe_out);
  const std::optional<TensorView> s = optional_raw_view(scale);
  const GatherOptions options = gather_options(pointer(s), rope_dtype);
  if (!run) return check_gather_records(parsed, cache, slot_view, kv, pe, options);
  nb::gil_scoped_release release;
  gather_records(parsed, cache, slot_view, kv, pe, options, to_stream(stream));
}

void gather_records_paged_raw(std::string_view format, nb::handle kv_cache, nb::handle block_table, nb::handle seq_lens,
                              nb::handle cu_seq_lens, nb::handle kv_c_out, nb::handle k_pe_out, nb::handle scale,
                              std::string_view rope_dtype, std::uintptr_t stream, bool run) {
  const Format parsed = parse_format(format);
  const TensorView cache = raw_view(kv_cache), table = raw_view(block_table);
  const TensorView lens = raw_view(seq_lens), cu = raw_view(cu_seq_lens);
  const TensorView kv = raw_view(kv_c_out), pe = raw_view(k_pe_out);
  const std::optional<TensorView> s = optional_raw_view(scale);
  const GatherOptions options = gather_options(pointer(s), rope_dtype);
  if (!run) return check_gather_records_paged(parsed, cache, table, lens, cu, kv, pe, options);
  nb::gil_scoped_release release;
  gather_records_paged(parsed, cache, table, lens, cu, kv, pe, options, to_stream(stream));
}

void sparse_mla_decode_raw(std::string_view format, nb::handle q, nb::handle kv_cache, nb::handle indices,
                           nb::handle out, nb::handle lse, nb::handle topk_len, float sm_scale, nb::handle scale,
                           std::string_view rope_dtype, nb::handle workspace, nb::handle attn_sink,
                           std::optional<std::string_view> extra_format, nb::handle extra_kv_cache,
                           nb::handle extra_indices, nb::handle extra_topk_len, std::uintptr_t stream, bool run) {
  const Format parsed = parse_format(format);
  const TensorView q_view = raw_view(q), cache = raw_view(kv_cache), index_view = raw_view(indices);
  const TensorView out_view = raw_view(out), lse_view = raw_view(lse);
  const std::optional<TensorView> lens = optional_raw_view(topk_len);
  const std::optional<TensorView> s = optional_raw_view(scale);
  const std::optional<TensorView> ws = optional_raw_view(workspace), sink = optional_raw_view(attn_sink);
  const bindings::ExtraCacheArguments extra_arguments{extra_format, optional_raw_view(extra_kv_cache),
                                                      optional_raw_view(extra_indices),
                                                      optional_raw_view(extra_topk_len)};
  const std::optional<SparseDecodeExtraCache> extra = bindings::extra_cache(format, extra_arguments);
  SparseDecodeOptions options;
  options.sm_scale = sm_scale;
  options.topk_len = pointer(lens);
  options.decode = gather_options(pointer(s), rope_dtype);
  options.workspace = pointer(ws);
  options.attn_sink = pointer(sink);
  options.extra = extra ? &*extra : nullptr;
  if (!run) return check_sparse_mla_decode(parsed, q_view, cache, index_view, out_view, lse_view, options);
  nb::gil_scoped_release release;
  sparse_mla_decode(parsed, q_view, cache, index_view, out_view, lse_view, options, to_stream(stream));
}

void merge_attention_states_raw(nb::handle out_a, nb::handle lse_a, nb::handle out_b, nb::handle lse_b, nb::handle out,
                                nb::handle lse, std::uintptr_t stream, bool run) {
  const TensorView a = raw_view(out_a), la = raw_view(lse_a), b = raw_view(out_b), lb = raw_view(lse_b);
  const TensorView o = raw_view(out), l = raw_view(lse);
  if (!run) return check_merge_attention_states(a, la, b, lb, o, l);
  nb::gil_scoped_release release;
  merge_attention_states(a, la, b, lb, o, l, to_stream(stream));
}

void dcp_local_slots_raw(nb::handle indices, nb::handle req_id, nb::handle block_table, nb::handle local_slots,
                         std::int64_t world_size, std::int64_t rank, std::int64_t interleave, std::int64_t block_size,
                         std::uintptr_t stream, bool run) {
  const TensorView idx = raw_view(indices), req = raw_view(req_id), table = raw_view(block_table);
  const TensorView local = raw_view(local_slots);
  const ContextParallelLayout layout{world_size, rank, interleave, block_size};
  if (!run) return check_dcp_local_slots(idx, req, table, local, layout);
  nb::gil_scoped_release release;
  dcp_local_slots(idx, req, table, local, layout, to_stream(stream));
}

void merge_attention_states_stacked_raw(nb::handle outs, nb::handle lses, nb::handle out, nb::handle lse,
                                        std::uintptr_t stream, bool run) {
  const TensorView partials = raw_view(outs), partial_lses = raw_view(lses), o = raw_view(out), l = raw_view(lse);
  if (!run) return check_merge_attention_states(partials, partial_lses, o, l);
  nb::gil_scoped_release release;
  merge_attention_states(partials, partial_lses, o, l, to_stream(stream));
}

}  // namespace

void register_raw_entry_points(nb::module_& m) {
  using namespace nb::literals;
  nb::module_ raw = m.def_submodule("raw", "mlakv.torch's entry points: views as tuples, run=False only checks");
  raw.def("concat_and_cache_mla", &concat_and_cache_mla_raw, "kv_c"_a, "k_pe"_a, "kv_cache"_a, "slot_mapping"_a,
          "kv_cache_dtype"_a, "scale"_a.none(), "stream"_a, "run"_a);
  raw.def("concat_and_cache_nvfp4_mla_fp8_rope", &concat_and_cache_nvfp4_mla_fp8_rope_raw, "kv_c"_a, "k_pe"_a,
          "kv_cache"_a, "slot_mapping"_a, "scale"_a.none(), "per_token_scale"_a, "stream"_a, "run"_a);
  raw.def("gather_records", &gather_records_raw, "format"_a, "kv_cache"_a, "slots"_a, "kv_c_out"_a, "k_pe_out"_a,
          "scale"_a.none(), "rope_dtype"_a, "stream"_a, "run"_a);
  raw.def("gather_records_paged", &gather_records_paged_raw, "format"_a, "kv_cache"_a, "block_table"_a, "seq_lens"_a,
          "cu_seq_lens"_a, "kv_c_out"_a, "k_pe_out"_a, "scale"_a.none(), "rope_dtype"_a, "stream"_a, "run"_a);
  raw.def("sparse_mla_decode", &sparse_mla_decode_raw, "format"_a, "q"_a, "kv_cache"_a, "indices"_a, "out"_a, "lse"_a,
          "topk_len"_a.none(), "sm_scale"_a, "scale"_a.none(), "rope_dtype"_a, "workspace"_a.none(),
          "attn_sink"_a.none(), "extra_format"_a.none(), "extra_kv_cache"_a.none(), "extra_indices"_a.none(),
          "extra_topk_len"_a.none(), "stream"_a, "run"_a);
  raw.def("merge_attention_states", &merge_attention_states_raw, "out_a"_a, "lse_a"_a, "out_b"_a, "lse_b"_a, "out"_a,
          "lse"_a, "stream"_a, "run"_a);
  raw.def("dcp_local_slots", &dcp_local_slots_raw, "indices"_a, "req_id"_a, "block_table"_a, "local_slots"_a,
          "world_size"_a, "rank"_a, "interleave"_a, "block_size"_a, "stream"_a, "run"_a);
  raw.def("merge_attention_states_stacked", &merge_attention_states_stacked_raw, "outs"_a, "lses"_a, "out"_a, "lse"_a,
          "stream"_a, "run"_a);
}

}  // namespace mlakv::python
