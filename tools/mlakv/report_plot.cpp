// SPDX-License-Identifier: Apache-2.0
#include "report_plot.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "mlakv/error.h"
#include "mlakv/formats.h"
#include "svg_plot.h"

namespace mlakv::tool {
namespace {

[[noreturn]] void fail(const std::string& flag, const std::string& path, const std::string& why) {
  throw Error(ErrorCode::kValue, flag + ": " + path + ": " + why);
}

// All of `text` into `path` (created or truncated), or an error naming --plot
// with the system's reason; a file left partly written is removed.
void write_whole_file(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("--plot", path, std::string("cannot be written: ") + std::strerror(errno));
  std::size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(path.c_str());
    fail("--plot", path, std::string("writing failed: ") + std::strerror(error));
  }
}

}  // namespace

void check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) fail(flag, path, "no directory " + dir.string());
  const bool existed = fs::exists(target, ec);
  if (existed && !fs::is_regular_file(target, ec)) fail(flag, path, "exists and is not a regular file");
  // Opened for writing as the run will open it (a name too long, a read-only
  // file system or a permission shows now, not after the run), without
  // truncating it; a file created here is removed again.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) fail(flag, path, std::string("cannot be written: ") + std::strerror(errno));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
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
  write_whole_file(path, render_svg(fmt::format("{}: KV bytes per token vs sparse-attention error", budget.model.name),
                                    points, 100.0 * limit));
}

}  // namespace mlakv::tool
