// SPDX-License-Identifier: Apache-2.0
#include "progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

namespace mlakv::tool {

Progress::Progress(bool quiet, int steps) : quiet_(quiet), tty_(isatty(fileno(stderr)) != 0), steps_(steps) {}

void Progress::step(std::string_view what) {
  ++done_;
  if (quiet_ || std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
  fmt::print(stderr, "{}mlakv: [{}/{}] {}{}", tty_ ? "\r\033[K" : "", done_, steps_, what, tty_ ? "" : "\n");
  std::fflush(stderr);
  printed_ = true;
}

void Progress::finish() {
  if (!printed_) return;
  if (tty_) fmt::print(stderr, "\r\033[K");
  printed_ = false;
}

}  // namespace mlakv::tool
