// SPDX-License-Identifier: Apache-2.0
// `mlakv report --json`: the table's numbers as one JSON object.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "format_row.h"
#include "model_options.h"
#include "report_inputs.h"
#include "report_options.h"

namespace mlakv::tool {

/// The same rows, recommendation and reason as print_table; the attention
/// fields null when there is no sparse-attention check (`attention_na`).
void print_json(const ModelBudget& budget, const Inputs& in, Device device, const ReportOptions& o,
                const std::vector<FormatRow>& rows, std::size_t best, const std::string& reason,
                const std::string& attention_na);

}  // namespace mlakv::tool
