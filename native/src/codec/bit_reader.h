// MSB-first bit reader: bit k of a stream is bit (7 - k % 8) of byte k / 8 (docs/format.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

class BitReader {
 public:
  BitReader(const uint8_t* data, size_t size) : data_(data), size_bits_(uint64_t(size) * 8) {}

  // Reads one bit into *bit; false (nothing read) at the end of the stream.
  bool read_bit(uint32_t* bit) {
    if (pos_ >= size_bits_) return false;
    *bit = (data_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1u;
    ++pos_;
    return true;
  }

  // Reads `bits` (0..32) bits, most significant first; false (nothing read) if fewer remain.
  bool read(unsigned bits, uint32_t* value) {
    if (bits > 32 || size_bits_ - pos_ < bits) return false;
    uint32_t v = 0;
    for (unsigned i = 0; i < bits; ++i) {
      v = (v << 1) | ((data_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1u);
      ++pos_;
    }
    *value = v;
    return true;
  }

  uint64_t position() const { return pos_; }
  uint64_t size_bits() const { return size_bits_; }

 private:
  const uint8_t* data_;
  uint64_t size_bits_;
  uint64_t pos_ = 0;
};

}  // namespace ds
