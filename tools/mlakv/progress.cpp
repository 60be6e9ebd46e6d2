// SPDX-License-Identifier: Apache-2.0
#include "progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

namespace mlakv::tool {

void Progress::step(std::string_view what) {
  ++done_;
  if (quiet_ || std::chrono::steady_clock::now() - start_ < std::chrono::seconds(1)) return;
  // A terminal gets one line rewritten in place; a log gets one line per step.
  static const bool tty = isatty(fileno(stderr)) != 0;
  fmt::print(stderr, "{}mlakv: [{}/{}] {}{}", tty ? "\r\033[K" : "", done_, steps_, what, tty ? "" : "\n");
  std::fflush(stderr);
  printed_ = true;
}

void Progress::finish() {
  if (!printed_) return;
  static const bool tty = isatty(fileno(stderr)) != 0;
  if (tty) fmt::print(stderr, "\r\033[K");
  printed_ = false;
}

}  // namespace mlakv::tool
