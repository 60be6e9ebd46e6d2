// SPDX-License-Identifier: Apache-2.0
// The CPU reference of the context-parallel steps: local slots and the N-way merge.
#include "params/context_parallel.h"

#include <array>

#include "cpu/cpu_backend.h"
#include "cpu/parallel_for.h"

namespace mlakv::cpu {

void dcp_local_slots(const params::LocalSlotsParams& p) {
  parallel_for(p.rows, [&p](std::int64_t r) {
    const std::int32_t req = p.req_id[r];
    for (std::int64_t k = 0; k < p.topk; ++k) {
      p.local_slots[r * p.local_stride_row_elems + k] =
          params::local_slot(p, req, p.indices[r * p.indices_stride_row_elems + k]);
    }
  });
}

void merge_attention_states(const params::StackedMergeParams& p) {
  parallel_for(
      p.rows * p.heads,
      [&p](std::int64_t i) {
        const std::int64_t r = i / p.heads;
        const std::int64_t h = i % p.heads;
        const float max_lse = params::stacked_max_lse(p, r, h);
        std::array<float, params::kMaxMergeParts> weights{};
        float sum = 0.0f;
        for (std::int64_t n = 0; n < p.parts; ++n) {
          weights[n] = params::stacked_weight(p, n, r, h, max_lse);
          sum += weights[n];
        }
        params::merge_dims(p, r, h, weights.data(), sum, 0, p.width, 1);
        params::lse_at(p.merged, r, h) = params::merged_lse(max_lse, sum);
      },
      64);
}

}  // namespace mlakv::cpu
