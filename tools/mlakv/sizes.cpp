// SPDX-License-Identifier: Apache-2.0
#include "sizes.h"

#include <fmt/core.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

#include "mlakv/error.h"

namespace mlakv::tool {
namespace {

struct Unit {
  std::string_view name;
  double bytes;
};

constexpr double kKiB = 1024.0;
constexpr std::array<Unit, 10> kUnits = {{{"", 1.0},
                                          {"b", 1.0},
                                          {"kb", 1e3},
                                          {"mb", 1e6},
                                          {"gb", 1e9},
                                          {"tb", 1e12},
                                          {"kib", kKiB},
                                          {"mib", kKiB* kKiB},
                                          {"gib", kKiB* kKiB* kKiB},
                                          {"tib", kKiB* kKiB* kKiB* kKiB}}};

}  // namespace

std::uint64_t parse_size(std::string_view flag, std::string_view text) {
  const auto fail = [&] {
    throw Error(ErrorCode::kValue, std::string(flag) + ": cannot parse '" + std::string(text) +
                                       "' as a size (e.g. 80GiB, 96GB, 1.5TiB, 1000000)");
  };
  double number = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || !std::isfinite(number)) fail();
  if (number <= 0.0) {
    throw Error(ErrorCode::kValue, std::string(flag) + ": must be > 0, got '" + std::string(text) + "'");
  }
  std::string unit;
  for (const char* c = end; c != text.data() + text.size(); ++c) {
    if (*c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  }
  double scale = 0.0;
  for (const Unit& u : kUnits) {
    if (u.name == unit) scale = u.bytes;
  }
  if (scale == 0.0) fail();
  const double bytes = number * scale;
  if (bytes < 1.0) {
    throw Error(ErrorCode::kValue, std::string(flag) + ": must be at least 1 byte, got '" + std::string(text) + "'");
  }
  if (bytes > 1.8e19) {
    throw Error(ErrorCode::kValue, std::string(flag) + ": must be below 16 EiB, got '" + std::string(text) + "'");
  }
  return static_cast<std::uint64_t>(bytes);
}

std::string format_size(double bytes) {
  constexpr std::array<std::string_view, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t i = 0;
  while (bytes >= 1024.0 && i + 1 < kNames.size()) {
    bytes /= 1024.0;
    ++i;
  }
  return fmt::format("{:.1f} {}", bytes, kNames[i]);
}

}  // namespace mlakv::tool
