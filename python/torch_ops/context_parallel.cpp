// SPDX-License-Identifier: Apache-2.0
// torch.ops.mlakv's context-parallel steps in C++: dcp_local_slots (new
// local slots) and merge_attention_states_stacked (the N-way merge, new out
// and lse).
#include "mlakv/context_parallel.h"

#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "views.h"

namespace mlakv::torch_ops {
namespace {

at::Tensor dcp_local_slots_op(const at::Tensor& indices, const at::Tensor& req_id, const at::Tensor& block_table,
                              std::int64_t world_size, std::int64_t rank, std::int64_t block_size,
                              std::int64_t interleave) {
  return translated([&] {
    at::Tensor local = at::empty(indices.sizes(), at::TensorOptions().dtype(at::kInt).device(indices.device()));
    const ContextParallelLayout layout{world_size, rank, interleave, block_size};
    dcp_local_slots(view(indices), view(req_id), view(block_table), view(local), layout, stream(indices));
    return local;
  });
}

std::tuple<at::Tensor, at::Tensor> merge_attention_states_stacked_op(const at::Tensor& outs, const at::Tensor& lses) {
  return translated([&] {
    // outs.shape[1:] and outs.shape[1:3], as mlakv.torch's fake gives them (outs with too
    // few dims is the library's to refuse).
    const std::vector<std::int64_t> sizes = outs.sizes().vec();
    const auto dims = [&](std::size_t first, std::size_t end) {
      end = std::min(end, sizes.size());
      first = std::min(first, end);
      return std::vector<std::int64_t>(sizes.begin() + first, sizes.begin() + end);
    };
    at::Tensor out =
        at::empty(dims(1, sizes.size()), at::TensorOptions().dtype(outs.scalar_type()).device(outs.device()));
    at::Tensor lse = at::empty(dims(1, 3), at::TensorOptions().dtype(at::kFloat).device(outs.device()));
    merge_attention_states(view(outs), view(lses), view(out), view(lse), stream(outs));
    return std::make_tuple(out, lse);
  });
}

}  // namespace
}  // namespace mlakv::torch_ops

TORCH_LIBRARY_FRAGMENT(mlakv, m) {
  m.def(
      "dcp_local_slots(Tensor indices, Tensor req_id, Tensor block_table, *, int world_size, int rank, "
      "int block_size, int interleave=1) -> Tensor");
  m.def("merge_attention_states_stacked(Tensor outs, Tensor lses) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(mlakv, CPU, m) {
  m.impl("dcp_local_slots", &mlakv::torch_ops::dcp_local_slots_op);
  m.impl("merge_attention_states_stacked", &mlakv::torch_ops::merge_attention_states_stacked_op);
}

TORCH_LIBRARY_IMPL(mlakv, CUDA, m) {
  m.impl("dcp_local_slots", &mlakv::torch_ops::dcp_local_slots_op);
  m.impl("merge_attention_states_stacked", &mlakv::torch_ops::merge_attention_states_stacked_op);
}
