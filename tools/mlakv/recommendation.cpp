// SPDX-License-Identifier: Apache-2.0
#include "recommendation.h"

#include <fmt/core.h>

#include <charconv>
#include <cmath>
#include <system_error>

#include "mlakv/error.h"

namespace mlakv::tool {

std::size_t recommend(const std::vector<FormatRow>& rows, double limit, const std::string& attention_na,
                      std::string& reason) {
  if (!attention_na.empty()) {
    reason =
        "the formats are ranked by their sparse-attention error, which is not measured for them (no decode "
        "reads them); compare their latent and RoPE errors";
    return rows.size();
  }
  std::size_t best = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const FormatRow& r = rows[i];
    if (nonfinite(r) > 0) continue;        // overflows (or non-finite inputs): no error number describes it
    if (r.capacity.tokens == 0) continue;  // holds nothing in this budget
    if (!(r.accuracy.attention->rel_rms <= limit)) continue;
    if (best == rows.size() || r.capacity.tokens > rows[best].capacity.tokens ||
        (r.capacity.tokens == rows[best].capacity.tokens &&
         r.accuracy.attention->rel_rms < rows[best].accuracy.attention->rel_rms)) {
      best = i;
    }
  }
  if (best == rows.size()) {
    // A budget that holds no token in any format is refused before the run (budget_capacities).
    bool all_nonfinite = true;
    for (const FormatRow& r : rows) all_nonfinite = all_nonfinite && nonfinite(r) > 0;
    reason = all_nonfinite ? "every format decodes some values as NaN or infinity (non-finite inputs, or values "
                             "beyond a format's range); no error threshold can rank them"
                           : fmt::format("no format is within --max-attention-error {:g}%", 100.0 * limit);
    return best;
  }
  const FormatRow& r = rows[best];
  reason = fmt::format(
      "the most tokens ({:.2f}x bf16) among formats whose sparse-attention error is within {:g}% "
      "(it measured {:.3f}%)",
      r.capacity.tokens_vs_bf16, 100.0 * limit, 100.0 * r.accuracy.attention->rel_rms);
  return best;
}

double parse_error_limit(const std::string& text) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string number = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0.0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  const bool parsed = ec == std::errc() && end == number.data() + number.size() && std::isfinite(value);
  const double limit = percent ? value / 100.0 : value;
  if (!parsed || !(limit >= 0.0 && limit <= 1.0)) {
    throw Error(ErrorCode::kValue, fmt::format("--max-attention-error: must be a percentage in [0%, 100%] (2%) or a "
                                               "fraction in [0, 1] (0.02), got '{}'",
                                               text));
  }
  return limit;
}

}  // namespace mlakv::tool
