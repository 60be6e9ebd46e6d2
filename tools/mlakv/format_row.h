// SPDX-License-Identifier: Apache-2.0
// One format's row of `mlakv report`: its capacity, accuracy and speed.
#pragma once

#include <cstdint>
#include <limits>

#include "capacity.h"
#include "measure.h"

namespace mlakv::tool {

struct FormatRow {
  Capacity capacity;
  FormatAccuracy accuracy;
  FormatSpeed speed;
};

/// Decoded or reference values that are NaN or infinite, over every check of the row.
inline std::int64_t nonfinite(const FormatRow& r) {
  return r.accuracy.latent.nonfinite + r.accuracy.rope.nonfinite +
         (r.accuracy.attention ? r.accuracy.attention->nonfinite : 0);
}

/// GB/s of `bytes` moved in `us` microseconds (0 when nothing was timed).
inline double gbps(double bytes, double us) { return us > 0.0 ? bytes / us / 1e3 : 0.0; }

/// A kernel's time as a fraction of a copy of the same bytes (NaN without a copy timing: the CPU).
inline double fraction(double copy, double us) {
  return copy > 0.0 && us > 0.0 ? copy / us : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace mlakv::tool
