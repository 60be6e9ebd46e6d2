// SPDX-License-Identifier: Apache-2.0
// The context-parallel bindings, added to the module by module.cpp.
#pragma once

#include <nanobind/nanobind.h>

namespace mlakv::python {

/// Adds dcp_local_slots and merge_attention_states_stacked.
void bind_context_parallel(nanobind::module_& m);

}  // namespace mlakv::python
