// SPDX-License-Identifier: Apache-2.0
#include "npy.h"

#include <cuda_fp16.h>

#include <cstring>
#include <fstream>
#include <iterator>

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

NpyArray read_npy(const std::string& flag, const std::string& path) {
  const auto fail = [&](const std::string& why) { throw Error(ErrorCode::kValue, flag + ": " + path + ": " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open the file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) fail("not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0;
  std::size_t offset = 0;
  if (major == 1) {
    header_len =
        static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail("truncated header");
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    fail("unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < offset + header_len) fail("truncated header");
  const std::string header = bytes.substr(offset, header_len);
  const std::string descr = header_value(header, "descr");
  const std::string fortran = header_value(header, "fortran_order");
  const std::string shape_text = header_value(header, "shape");
  int element = 0;
  if (descr == "'<f4'") element = 4;
  if (descr == "'<f2'") element = 2;
  if (element == 0) fail("dtype must be little-endian float32 or float16, got " + descr);
  if (fortran.rfind("True", 0) == 0) fail("must be C-ordered (fortran_order is True)");
  NpyArray array;
  std::size_t pos = 1;
  while (pos < shape_text.size()) {
    while (pos < shape_text.size() && (shape_text[pos] == ' ' || shape_text[pos] == ',')) ++pos;
    if (pos >= shape_text.size() || shape_text[pos] == ')') break;
    std::int64_t dim = 0;
    bool any = false;
    while (pos < shape_text.size() && shape_text[pos] >= '0' && shape_text[pos] <= '9') {
      dim = dim * 10 + (shape_text[pos++] - '0');
      any = true;
    }
    if (!any) fail("cannot read the shape " + shape_text);
    array.shape.push_back(dim);
  }
  std::int64_t count = 1;
  for (const std::int64_t d : array.shape) count *= d;
  const std::size_t data = offset + header_len;
  if (bytes.size() - data < static_cast<std::size_t>(count) * element) fail("holds fewer values than its shape");
  array.values.resize(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    if (element == 4) {
      std::memcpy(&array.values[i], bytes.data() + data + 4 * i, 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, bytes.data() + data + 2 * i, 2);
      array.values[i] = __half2float(__ushort_as_half(h));
    }
  }
  return array;
}

}  // namespace mlakv::tool
