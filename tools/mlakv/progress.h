// SPDX-License-Identifier: Apache-2.0
// A progress line on stderr for work that takes more than a second.
#pragma once

#include <chrono>
#include <string_view>

namespace mlakv::tool {

class Progress {
 public:
  Progress(bool quiet, int steps);
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Announces the next step; nothing is printed until a second has passed.
  void step(std::string_view what);
  /// Ends the line, if one was printed.
  void finish();

 private:
  bool quiet_;
  bool tty_;  // a terminal gets one line rewritten in place; a log gets a line per step
  int steps_;
  int done_ = 0;
  bool printed_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace mlakv::tool
