// SPDX-License-Identifier: Apache-2.0
// `mlakv report`'s table: a header, one row per format, notes and the recommendation.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "format_row.h"
#include "model_options.h"
#include "report_inputs.h"

namespace mlakv::tool {

/// Rows of `rows`, the one at `best` starred (none when best == rows.size());
/// `attention_na`: why there is no sparse-attention check ("" when there is one).
void print_table(const ModelBudget& budget, const Inputs& in, Device device, const std::vector<FormatRow>& rows,
                 std::size_t best, const std::string& reason, const std::string& attention_na);

}  // namespace mlakv::tool
