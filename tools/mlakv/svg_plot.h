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

/// A standalone SVG document: axes with 1-2-5 ticks, one <circle class="mark">
/// per point, its label placed where it overlaps no other label, mark, legend
/// or the frame (with a leader line when moved away from its mark), the
/// threshold as a dashed line (threshold_percent < 0: none), and a legend.
/// Each label carries its box as data-box="x0 y0 x1 y1" (as measured for
/// placement: 7 px per character, 14 px high).
std::string render_svg(const std::string& title, const std::vector<PlotPoint>& points, double threshold_percent);

}  // namespace mlakv::tool
