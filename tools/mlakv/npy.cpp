// SPDX-License-Identifier: Apache-2.0
#include "npy.h"

#include <cuda_fp16.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "files.h"
#include "mlakv/error.h"

namespace mlakv::tool {
namespace {

// The value of key `key` in the header dict, e.g. 'descr': '<f4' -> "'<f4'".
std::string header_value(const std::string& header, const std::string& key) {
  const std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  std::size_t v = header.find(':', k);
  if (v == std::string::npos) return "";
  ++v;
  while (v < header.size() && header[v] == ' ') ++v;
  const char open = header[v];
  const char close = open == '(' ? ')' : open == '\'' ? '\'' : ',';
  const std::size_t end = header.find(close, v + 1);
  if (end == std::string::npos) return "";
  return header.substr(v, end - v + 1);
}

}  // namespace

NpyHeader read_npy_header(const std::string& flag, const std::string& path) {
  const auto fail = [&](const std::string& why) { throw Error(ErrorCode::kValue, flag + ": " + path + ": " + why); };
  // Every read is bounded by the file's size: the header first, then exactly the data its shape declares.
  const std::uint64_t file_size = regular_file_size(flag, path);
  if (file_size < 10) fail("not a .npy file");
  const std::string lead = read_file_range(flag, path, 0, std::min<std::uint64_t>(file_size, 12));
  if (lead.compare(0, 6, "\x93NUMPY") != 0) fail("not a .npy file");
  const int major = static_cast<unsigned char>(lead[6]);
  std::uint64_t header_len = 0;
  std::uint64_t offset = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(lead[8]) | (static_cast<std::uint64_t>(static_cast<unsigned char>(lead[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (lead.size() < 12) fail("truncated header");
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<std::uint64_t>(static_cast<unsigned char>(lead[8 + i])) << (8 * i);
    offset = 12;
  } else {
    fail("unsupported .npy version " + std::to_string(major));
  }
  if (header_len > file_size - offset) fail("truncated header");
  const std::string header = read_file_range(flag, path, offset, header_len);
  const std::string descr = header_value(header, "descr");
  const std::string fortran = header_value(header, "fortran_order");
  const std::string shape_text = header_value(header, "shape");
  int element = 0;
  if (descr == "'<f4'") element = 4;
  if (descr == "'<f2'") element = 2;
  if (descr == "'<V2'") {
    fail(
        "dtype must be little-endian float32 or float16, got '<V2' (16-bit values numpy does not know: bfloat16, "
        "as ml_dtypes saves it); save them as float32, e.g. np.save(path, x.astype(np.float32)) or, from torch, "
        "x.float().numpy()");
  }
  if (element == 0) fail("dtype must be little-endian float32 or float16, got " + descr);
  if (fortran.rfind("True", 0) == 0) fail("must be C-ordered (fortran_order is True)");
  NpyHeader result;
  std::size_t pos = 1;
  while (pos < shape_text.size()) {
    while (pos < shape_text.size() && (shape_text[pos] == ' ' || shape_text[pos] == ',')) ++pos;
    if (pos >= shape_text.size() || shape_text[pos] == ')') break;
    std::int64_t dim = 0;
    bool any = false;
    while (pos < shape_text.size() && shape_text[pos] >= '0' && shape_text[pos] <= '9') {
      if (__builtin_mul_overflow(dim, 10, &dim) || __builtin_add_overflow(dim, shape_text[pos++] - '0', &dim)) {
        fail("shape " + shape_text + " does not fit int64");
      }
      any = true;
    }
    if (!any) fail("cannot read the shape " + shape_text);
    result.shape.push_back(dim);
  }
  // The declared data must fit in the file: checked in 64 bits before anything is allocated.
  const std::uint64_t data = offset + header_len;
  std::int64_t count = 1;
  std::int64_t bytes = 0;
  bool fits = true;
  for (const std::int64_t d : result.shape) fits = fits && !__builtin_mul_overflow(count, d, &count);
  fits = fits && !__builtin_mul_overflow(count, std::int64_t{element}, &bytes);
  if (!fits || static_cast<std::uint64_t>(bytes) > file_size - data) {
    fail(fmt::format("shape {} of {}-byte values needs {} bytes of data, the file holds {}", shape_text, element,
                     fits ? std::to_string(bytes) : std::string("more than 2^63"), file_size - data));
  }
  result.element_bytes = element;
  result.data_offset = data;
  result.count = count;
  return result;
}

NpyArray read_npy(const std::string& flag, const std::string& path) {
  const NpyHeader header = read_npy_header(flag, path);
  const std::int64_t count = header.count;
  const int element = header.element_bytes;
  const std::uint64_t bytes = static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(element);
  NpyArray array{header.shape, {}};
  const std::string values = read_file_range(flag, path, header.data_offset, bytes);
  array.values.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    if (element == 4) {
      std::memcpy(&array.values[i], values.data() + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, values.data() + 2 * i, 2);
      array.values[i] = __half2float(__ushort_as_half(h));
    }
  }
  return array;
}

}  // namespace mlakv::tool
