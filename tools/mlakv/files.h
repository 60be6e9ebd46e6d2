// SPDX-License-Identifier: Apache-2.0
// Bounded reads of user-named files: only regular files (a directory, FIFO,
// device or socket is refused before it is read, so /dev/zero cannot be read
// until memory runs out and a FIFO cannot block), and never more bytes than
// the file holds.
#pragma once

#include <cstdint>
#include <string>

namespace mlakv::tool {

/// The size in bytes of `path`, which must be a regular file; throws mlakv::Error naming `flag` and the path.
std::uint64_t regular_file_size(const std::string& flag, const std::string& path);

/// `bytes` bytes at `offset` of the regular file `path` (the range must lie inside the file).
std::string read_file_range(const std::string& flag, const std::string& path, std::uint64_t offset,
                            std::uint64_t bytes);

}  // namespace mlakv::tool
