// SPDX-License-Identifier: Apache-2.0
// `mlakv report --plot`: an SVG of each format's bytes per token against its sparse-attention error.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "format_row.h"
#include "model_options.h"

namespace mlakv::tool {

/// The plot's file must be writable before the run starts, not found
/// unwritable after it: throws mlakv::Error naming `flag` ("" `path`: no plot).
void check_writable(const std::string& flag, const std::string& path);

/// Writes the plot of the rows with a sparse-attention error (every row's
/// values finite) to `path`; `limit` is drawn as the threshold. Throws
/// mlakv::Error naming --plot, leaving no partly written file, when it cannot.
void write_plot(const std::string& path, const ModelBudget& budget, const std::vector<FormatRow>& rows,
                std::size_t best, double limit);

}  // namespace mlakv::tool
