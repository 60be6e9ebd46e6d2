// SPDX-License-Identifier: Apache-2.0
#include "report_plot.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "svg_plot.h"

namespace mlakv::tool {

void check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw Error(ErrorCode::kValue, flag + ": " + path + ": no directory " + dir.string());
  if (fs::exists(target, ec) && !fs::is_regular_file(target, ec)) {
    throw Error(ErrorCode::kValue, flag + ": " + path + ": exists and is not a regular file");
  }
  if (::access(fs::exists(target, ec) ? path.c_str() : dir.c_str(), W_OK) != 0) {
    throw Error(ErrorCode::kValue, flag + ": " + path + ": not writable");
  }
}

void write_plot(const std::string& path, const ModelBudget& budget, const std::vector<FormatRow>& rows,
                std::size_t best, double limit) {
  std::vector<PlotPoint> points;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (nonfinite(rows[i]) > 0) continue;  // no error number places it
    points.push_back({std::string(format_info(rows[i].capacity.format).id),
                      static_cast<double>(rows[i].capacity.bytes_per_token), rows[i].accuracy.attention->rel_rms,
                      i == best});
  }
  std::ofstream file(path);
  if (!file) throw Error(ErrorCode::kValue, "--plot: cannot write " + path);
  file << render_svg(fmt::format("{}: KV bytes per token vs sparse-attention error", budget.model.name), points,
                     100.0 * limit);
  if (!file) throw Error(ErrorCode::kValue, "--plot: writing " + path + " failed");
}

}  // namespace mlakv::tool
