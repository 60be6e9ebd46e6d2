// SPDX-License-Identifier: Apache-2.0
// The validated description of one sparse prefill: a prefill's rows are decode
// rows (the same pointers, strides, lengths, scale and sink), so it is the
// decode's description, with no workspace and no extra cache.
#pragma once

#include "params/attention_params.h"

namespace mlakv::params {

using SparsePrefillParams = SparseDecodeParams;

}  // namespace mlakv::params
