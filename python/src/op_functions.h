// SPDX-License-Identifier: Apache-2.0
// The op table's functions in the module (op_functions.cpp).
#pragma once

#include <nanobind/nanobind.h>

namespace mlakv::python {

/// Adds mlakv._mlakv.<op> and mlakv._mlakv.raw.<op> for every op of the table, and _mlakv.op_table().
void register_op_functions(nanobind::module_& m);

}  // namespace mlakv::python
