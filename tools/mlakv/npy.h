// SPDX-License-Identifier: Apache-2.0
// Reads numpy .npy files (format versions 1-3): little-endian float32 or
// float16, C order. The format is a magic string, a header dict and raw data,
// so it is parsed here rather than pulled in as a dependency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlakv::tool {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // float16 files are widened exactly
};

/// What a .npy header declares, checked against the file's size.
struct NpyHeader {
  std::vector<std::int64_t> shape;
  int element_bytes = 0;          // 4 (float32) or 2 (float16)
  std::uint64_t data_offset = 0;  // where the values start
  std::int64_t count = 0;         // values the shape declares
};

/// The header alone (the data is not read): for sizing a run before reading.
/// Throws mlakv::Error naming `flag` and the file on anything it cannot read.
NpyHeader read_npy_header(const std::string& flag, const std::string& path);

/// Throws mlakv::Error naming `flag` and the file on anything it cannot read.
NpyArray read_npy(const std::string& flag, const std::string& path);

}  // namespace mlakv::tool
