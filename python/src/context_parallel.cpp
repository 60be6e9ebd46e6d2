// SPDX-License-Identifier: Apache-2.0
// Bindings of the context-parallel steps (mlakv/context_parallel.h); the
// Python package's mlakv.context_parallel wraps them.
#include "context_parallel.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "mlakv/context_parallel.h"
#include "views.h"

namespace mlakv::python {
namespace {

using namespace nb::literals;
using Array = nb::ndarray<nb::ro>;
using OutArray = nb::ndarray<>;
using Tag = std::optional<std::string>;

StreamHandle to_stream(std::uintptr_t stream) { return reinterpret_cast<StreamHandle>(stream); }

void py_dcp_local_slots(const Array& indices, const Array& req_id, const Array& block_table,
                        const OutArray& local_slots, std::int64_t world_size, std::int64_t rank,
                        std::int64_t interleave, std::int64_t block_size, std::uintptr_t stream) {
  const TensorView i = to_view(indices);
  const TensorView r = to_view(req_id);
  const TensorView t = to_view(block_table);
  const TensorView o = to_view(local_slots);
  const ContextParallelLayout layout{world_size, rank, interleave, block_size};
  nb::gil_scoped_release release;
  dcp_local_slots(i, r, t, o, layout, to_stream(stream));
}

void py_merge_attention_states_stacked(const Array& outs, const Tag& outs_tag, const Array& lses, const OutArray& out,
                                       const Tag& out_tag, const OutArray& lse, std::uintptr_t stream) {
  const TensorView a = to_view(outs, outs_tag);
  const TensorView la = to_view(lses);
  const TensorView o = to_view(out, out_tag);
  const TensorView l = to_view(lse);
  nb::gil_scoped_release release;
  merge_attention_states(a, la, o, l, to_stream(stream));
}

}  // namespace

void bind_context_parallel(nb::module_& m) {
  m.def("dcp_local_slots", &py_dcp_local_slots, "indices"_a, "req_id"_a, "block_table"_a, "local_slots"_a,
        "world_size"_a, "rank"_a, "interleave"_a, "block_size"_a, "stream"_a);
  m.def("merge_attention_states_stacked", &py_merge_attention_states_stacked, "outs"_a, "outs_tag"_a.none(), "lses"_a,
        "out"_a, "out_tag"_a.none(), "lse"_a, "stream"_a);
}

}  // namespace mlakv::python
