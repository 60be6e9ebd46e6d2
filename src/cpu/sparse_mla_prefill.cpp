// SPDX-License-Identifier: Apache-2.0
// The CPU sparse prefill: a prefill row is a decode row, so the decode's
// float32 reference (src/cpu/attention.cpp) computes every row; sharing it
// keeps one definition of the math that both CUDA kernels are tested against.
#include "cpu/cpu_backend.h"

namespace mlakv::cpu {

void sparse_mla_prefill(const params::SparsePrefillParams& params) { sparse_mla_decode(params); }

}  // namespace mlakv::cpu
