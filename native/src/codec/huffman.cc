#include "codec/huffman.h"

#include "codec/bit_reader.h"
#include "common/error.h"

namespace ds {

HuffmanCode huffman_build(const uint8_t* lengths, size_t n) {
  HuffmanCode code;
  for (size_t s = 0; s < n; ++s) {
    if (lengths[s] > kMaxCodeLength)
      fail(DS_ERR_FORMAT, "huffman code length of symbol ", s, " is ", unsigned(lengths[s]),
           ", over the limit of 16");
    code.count[lengths[s]]++;
  }
  code.count[0] = 0;
  // Kraft check: after processing length L, `left` is the number of unused codes of length L.
  int64_t left = 1;
  for (unsigned len = 1; len <= kMaxCodeLength; ++len) {
    left = left * 2 - code.count[len];
    if (left < 0) fail(DS_ERR_FORMAT, "huffman code lengths are over-subscribed (Kraft sum > 1)");
  }
  // Symbols sorted by (length, value): a counting sort over the lengths.
  uint32_t offset[kMaxCodeLength + 2] = {};
  for (unsigned len = 1; len <= kMaxCodeLength; ++len) offset[len + 1] = offset[len] + code.count[len];
  code.symbols.resize(offset[kMaxCodeLength + 1]);
  for (size_t s = 0; s < n; ++s)
    if (lengths[s] != 0) code.symbols[offset[lengths[s]]++] = uint32_t(s);
  return code;
}

namespace {

// Decodes one symbol. Canonical codes of one length are consecutive numbers starting at `first`;
// `index` is where that length's symbols start in code.symbols.
bool decode_symbol(const HuffmanCode& code, BitReader& reader, uint32_t* symbol, uint64_t i) {
  uint32_t value = 0, first = 0, index = 0;
  for (unsigned len = 1; len <= kMaxCodeLength; ++len) {
    uint32_t bit;
    if (!reader.read_bit(&bit))
      fail(DS_ERR_FORMAT, "huffman symbol ", i, " runs past the end of the stream");
    value |= bit;
    const uint32_t n = code.count[len];
    if (value - first < n) {
      *symbol = code.symbols[index + (value - first)];
      return true;
    }
    index += n;
    first = (first + n) << 1;
    value <<= 1;
  }
  return false;
}

}  // namespace

void huffman_decode(const uint8_t* data, size_t size, unsigned bits, uint64_t count, uint32_t* out) {
  if (bits < 1 || bits > 16) fail(DS_ERR_FORMAT, "huffman symbol width ", bits, " is outside 1..16");
  if (size < 4) fail(DS_ERR_FORMAT, "huffman stream of ", size, " bytes is too short for its table size");
  const uint32_t n = uint32_t(data[0]) | uint32_t(data[1]) << 8 | uint32_t(data[2]) << 16 |
                     uint32_t(data[3]) << 24;
  if (n > (1u << bits))
    fail(DS_ERR_FORMAT, "huffman table has ", n, " code lengths, more than the 2^", bits, " symbols");
  if (uint64_t(n) > size - 4)
    fail(DS_ERR_FORMAT, "huffman table of ", n, " code lengths runs past the end of the stream (",
         size, " bytes)");
  const HuffmanCode code = huffman_build(data + 4, n);
  if (count > 0 && code.symbols.empty()) fail(DS_ERR_FORMAT, "huffman table has no symbols");

  BitReader reader(data + 4 + n, size - 4 - n);
  for (uint64_t i = 0; i < count; ++i) {
    if (!decode_symbol(code, reader, &out[i], i))
      fail(DS_ERR_FORMAT, "huffman symbol ", i, " at bit ", reader.position(), " is no code");
  }
  const uint64_t used_bytes = (reader.position() + 7) / 8;
  const uint64_t total_bytes = reader.size_bits() / 8;
  if (used_bytes != total_bytes)
    fail(DS_ERR_FORMAT, "huffman stream has ", total_bytes - used_bytes,
         " unused bytes after its last code");
}

}  // namespace ds
