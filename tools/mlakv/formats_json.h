// SPDX-License-Identifier: Apache-2.0
// `mlakv formats --json`: the registry as JSON, the same objects mlakv.formats() gives in Python.
#pragma once

#include <string>

namespace mlakv::tool {

/// A JSON array of every format: id, record_bytes, cache_alignment, layout,
/// source, fields, geometry, page, policy and engine_names, keyed as in Python.
std::string formats_json();

}  // namespace mlakv::tool
