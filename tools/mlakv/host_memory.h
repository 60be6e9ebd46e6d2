// SPDX-License-Identifier: Apache-2.0
// The memory guard: a run that would not fit in host memory is refused with
// an estimate before it starts, rather than ending in bad_alloc (or swapping)
// after minutes.
#pragma once

#include <cstdint>

namespace mlakv::tool {

/// Throws mlakv::Error naming --tokens when `tokens` tokens of `mlakv report`
/// need more host memory than is available.
void check_host_memory(std::int64_t tokens);

}  // namespace mlakv::tool
