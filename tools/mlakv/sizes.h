// SPDX-License-Identifier: Apache-2.0
// Byte sizes as people write them: 80GiB, 96GB, 1.5TiB, 512MiB, 1000000.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlakv::tool {

/// Parses a size with an optional unit (B, KB/MB/GB/TB powers of 1000,
/// KiB/MiB/GiB/TiB powers of 1024; case-insensitive); throws mlakv::Error
/// naming `flag` when the text is not a positive size.
std::uint64_t parse_size(std::string_view flag, std::string_view text);

/// "80.0 GiB": a size for people.
std::string format_size(double bytes);

}  // namespace mlakv::tool
