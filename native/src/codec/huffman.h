// Canonical Huffman decoding (docs/format.md, "huffman").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds {

constexpr unsigned kMaxCodeLength = 16;

// A canonical code in the count/first-code form: count[len] codes of each length, symbols sorted
// by (length, value). Decoding walks the lengths one bit at a time.
struct HuffmanCode {
  uint32_t count[kMaxCodeLength + 1] = {};
  std::vector<uint32_t> symbols;
};

// Builds the code from per-symbol lengths (0 = absent). Throws DS_ERR_FORMAT for a length over 16
// or an over-subscribed code (Kraft sum > 1). Incomplete codes are allowed (e.g. one symbol of
// length 1); their unused bit patterns are rejected while decoding.
HuffmanCode huffman_build(const uint8_t* lengths, size_t n);

// Decodes a whole huffman stream: u32 n, u8 lengths[n], then the code bits for `count` symbols of an
// alphabet of 2^bits. Throws DS_ERR_FORMAT for a bad table, a pattern that is no code, a code that
// runs past the end, or whole unused bytes after the last code.
void huffman_decode(const uint8_t* data, size_t size, unsigned bits, uint64_t count, uint32_t* out);

}  // namespace ds
