// SPDX-License-Identifier: Apache-2.0
// Reads fuzzer bytes as a sequence of small values; past the end it yields zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mlakv::fuzz {

class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  template <class T>
  T take() {
    T value{};
    const std::size_t n = pos_ + sizeof(T) <= size_ ? sizeof(T) : size_ - pos_;
    if (n > 0) std::memcpy(&value, data_ + pos_, n);
    pos_ += n;
    return value;
  }

  /// A value in [0, n).
  unsigned pick(unsigned n) { return n == 0 ? 0 : take<std::uint8_t>() % n; }

  const std::uint8_t* rest() const { return data_ + pos_; }
  std::size_t remaining() const { return size_ - pos_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace mlakv::fuzz
