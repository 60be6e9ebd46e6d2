// SPDX-License-Identifier: Apache-2.0
// Which format `mlakv report` recommends, and why.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "format_row.h"

namespace mlakv::tool {

/// The format with the most tokens among those within the attention-error
/// limit whose decoded values are all finite; none (rows.size()) without the
/// sparse-attention check (`attention_na` not empty). `reason` says why, or why none.
std::size_t recommend(const std::vector<FormatRow>& rows, double limit, const std::string& attention_na,
                      std::string& reason);

/// --max-attention-error: "2%" (a percentage, as the table prints errors) or a
/// fraction in [0, 1] ("0.02"); throws mlakv::Error naming the flag otherwise.
double parse_error_limit(const std::string& text);

}  // namespace mlakv::tool
