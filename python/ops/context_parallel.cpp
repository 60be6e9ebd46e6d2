// SPDX-License-Identifier: Apache-2.0
// The context-parallel run functions: dcp_local_slots and the N-way merge.
#include "mlakv/context_parallel.h"

#include "mlakv/checks.h"
#include "run_functions.h"

namespace mlakv::bindings {

std::int64_t run_dcp_local_slots(const OpCall& c) {
  const TensorView &indices = c.tensor("indices"), &req_id = c.tensor("req_id"), &table = c.tensor("block_table");
  const ContextParallelLayout layout{c.integer("world_size"), c.integer("rank"), c.integer("interleave"),
                                     c.integer("block_size")};
  if (!c.run()) {
    check_dcp_local_slots(indices, req_id, table, c.output(0), layout);
  } else {
    dcp_local_slots(indices, req_id, table, c.output(0), layout, c.stream());
  }
  return 0;
}

std::int64_t run_merge_attention_states_stacked(const OpCall& c) {
  const TensorView &outs = c.tensor("outs"), &lses = c.tensor("lses");
  if (!c.run()) {
    check_merge_attention_states(outs, lses, c.output(0), c.output(1));
  } else {
    merge_attention_states(outs, lses, c.output(0), c.output(1), c.stream());
  }
  return 0;
}

}  // namespace mlakv::bindings
