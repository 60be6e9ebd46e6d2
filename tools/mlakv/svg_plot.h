// SPDX-License-Identifier: Apache-2.0
// The report's picture: bytes per token against attention error, one mark per format.
#pragma once

#include <string>
#include <vector>

namespace mlakv::tool {

struct PlotPoint {
  std::string label;
  double bytes_per_token;  // x
  double error;            // y: relative RMS error of the attention output
  bool recommended;
};

/// A standalone SVG document: axes with ticks, one <circle class="mark"> per point.
std::string render_svg(const std::string& title, const std::vector<PlotPoint>& points);

}  // namespace mlakv::tool
