// SPDX-License-Identifier: Apache-2.0
// resolve_format with the caller's Check, so its errors name the calling
// function and the caller's argument that carries the record width.
#pragma once

#include <cstdint>
#include <string_view>

#include "api/check.h"
#include "mlakv/formats.h"

namespace mlakv::api {

/// mlakv::resolve_format's rules. `width_arg` names the argument the record
/// width came from ("record_bytes", "kv_cache"). When the name and switches
/// leave one format, it is returned whatever the width: the caller's
/// validation reports a wrong width in its own words.
Format resolve_format(const Check& check, std::string_view width_arg, std::string_view kv_cache_dtype,
                      std::int64_t record_bytes, bool fp8_rope, bool per_token_scale, DType input_dtype);

}  // namespace mlakv::api
