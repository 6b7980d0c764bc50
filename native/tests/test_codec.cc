// Codec unit tests: CRC-32, bitpack, canonical Huffman (valid and rejected codes), sparse_rel,
// codebook lookup.
#include <cstring>
#include <string>

#include "codec/bitpack.h"
#include "codec/crc32.h"
#include "codec/huffman.h"
#include "codec/sparse.h"
#include "common/error.h"
#include "dsm_writer.h"
#include "harness.h"
#include "tiny_net.h"

namespace {

// Runs fn and returns the ds::Error message it throws ("" when it does not throw).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const ds::Error& e) {
    return e.message().empty() ? "(empty message)" : e.message();
  }
  return "";
}

}  // namespace

TEST(crc32_matches_zlib) {
  const char* s = "123456789";
  CHECK(ds::crc32(reinterpret_cast<const uint8_t*>(s), 9) == 0xCBF43926u);  // the standard check value
  CHECK(ds::crc32(nullptr, 0) == 0u);
  const uint8_t* b = reinterpret_cast<const uint8_t*>(s);
  CHECK(ds::crc32(b + 4, 5, ds::crc32(b, 4)) == 0xCBF43926u);
}

TEST(bitpack_round_trip_every_width) {
  tiny::Rng rng(7);
  for (unsigned bits = 1; bits <= 16; ++bits) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(1000)}) {
      std::vector<uint32_t> sym;
      for (size_t i = 0; i < count; ++i) sym.push_back(rng.next() & ((1u << bits) - 1));
      if (count) sym[0] = (1u << bits) - 1;  // the largest value
      const dsw::Bytes packed = dsw::bitpack_encode(sym, bits);
      CHECK(packed.size() == (count * bits + 7) / 8);
      std::vector<uint32_t> out(count, 0xDEADu);
      ds::bitpack_decode(packed.data(), packed.size(), bits, count, out.data());
      CHECK_MSG(out == sym, "bits " + std::to_string(bits) + " count " + std::to_string(count));
    }
  }
}

TEST(bitpack_is_msb_first) {
  const uint8_t data[] = {0xB4};  // 1011 0100
  uint32_t out[4];
  ds::bitpack_decode(data, 1, 2, 4, out);
  CHECK(out[0] == 2 && out[1] == 3 && out[2] == 1 && out[3] == 0);
}

TEST(bitpack_rejects_wrong_length) {
  const uint8_t data[3] = {0, 0, 0};
  CHECK(!error_of([&] { uint32_t o[4]; ds::bitpack_decode(data, 3, 4, 4, o); }).empty());  // needs 2
  CHECK(!error_of([&] { uint32_t o[4]; ds::bitpack_decode(data, 1, 4, 4, o); }).empty());
  CHECK(!error_of([&] { uint32_t o[1]; ds::bitpack_decode(data, 3, 17, 1, o); }).empty());
}

// A hand-built canonical code: lengths A=2 B=1 C=3 D=3 give B=0, A=10, C=110, D=111.
TEST(huffman_decodes_hand_built_code) {
  dsw::Buf s;
  s.u32(4);
  for (uint8_t l : {2, 1, 3, 3}) s.u8(l);
  // symbols B A C D A B -> 0 10 110 111 10 0 = 0101 1011 1100 (12 bits) -> 0x5B 0xC0
  s.u8(0x5B);
  s.u8(0xC0);
  uint32_t out[6];
  ds::huffman_decode(s.b.data(), s.b.size(), 2, 6, out);
  const uint32_t want[6] = {1, 0, 2, 3, 0, 1};
  CHECK(std::memcmp(out, want, sizeof(want)) == 0);
}

TEST(huffman_one_symbol_code) {
  const std::vector<uint32_t> sym(11, 5);
  const dsw::Bytes s = dsw::huffman_encode(sym, 3);
  CHECK(s.size() == 4 + 8 + 2);  // 11 one-bit codes "0"
  std::vector<uint32_t> out(11);
  ds::huffman_decode(s.data(), s.size(), 3, 11, out.data());
  CHECK(out == sym);
  // The unused pattern "1" is no code.
  dsw::Bytes bad = s;
  bad[12] = 0x80;
  CHECK(!error_of([&] { ds::huffman_decode(bad.data(), bad.size(), 3, 11, out.data()); }).empty());
}

TEST(huffman_sixteen_bit_lengths) {
  // Lengths 1, 2, ..., 15, 16, 16 over 17 symbols: a complete code with two 16-bit codes.
  std::vector<uint8_t> lengths;
  for (uint8_t l = 1; l <= 16; ++l) lengths.push_back(l);
  lengths.push_back(16);
  const std::vector<uint32_t> sym = {16, 15, 0, 16, 7, 1, 15};
  const dsw::Bytes s = dsw::huffman_encode(sym, lengths);
  std::vector<uint32_t> out(sym.size());
  ds::huffman_decode(s.data(), s.size(), 5, sym.size(), out.data());
  CHECK(out == sym);
}

TEST(huffman_round_trip_random) {
  tiny::Rng rng(3);
  for (unsigned bits : {1u, 2u, 4u, 8u, 12u}) {
    std::vector<uint32_t> sym;
    for (int i = 0; i < 3000; ++i) sym.push_back(rng.below(1u << std::min(bits, 6u)) * (rng.below(4) == 0));
    const dsw::Bytes s = dsw::huffman_encode(sym, bits);
    std::vector<uint32_t> out(sym.size());
    ds::huffman_decode(s.data(), s.size(), bits, sym.size(), out.data());
    CHECK_MSG(out == sym, "bits " + std::to_string(bits));
  }
}

TEST(huffman_empty_stream) {
  const dsw::Bytes s(4, 0);  // n = 0, no bits
  CHECK(error_of([&] { ds::huffman_decode(s.data(), s.size(), 4, 0, nullptr); }).empty());
  uint32_t out[1];
  CHECK(!error_of([&] { ds::huffman_decode(s.data(), s.size(), 4, 1, out); }).empty());  // no symbols
}

TEST(huffman_rejects_bad_codes) {
  uint32_t out[16];
  auto decode = [&](const dsw::Bytes& b, unsigned bits, uint64_t count) {
    return error_of([&] { ds::huffman_decode(b.data(), b.size(), bits, count, out); });
  };
  // Over-subscribed: three codes of length 1.
  dsw::Bytes over = {3, 0, 0, 0, 1, 1, 1, 0x00};
  CHECK(decode(over, 2, 1).find("over-subscribed") != std::string::npos);
  // A length over 16.
  dsw::Bytes too_long = {2, 0, 0, 0, 1, 17, 0x00};
  CHECK(!decode(too_long, 1, 1).empty());
  // More lengths than the alphabet (n > 2^bits).
  dsw::Bytes too_many = {3, 0, 0, 0, 1, 2, 2, 0x00};
  CHECK(!decode(too_many, 1, 1).empty());
  // Table runs past the end.
  dsw::Bytes short_table = {9, 0, 0, 0, 1, 1};
  CHECK(!decode(short_table, 4, 1).empty());
  // Fewer than 4 bytes.
  dsw::Bytes tiny_stream = {1, 0};
  CHECK(!decode(tiny_stream, 1, 1).empty());
  // Codes run past the end: one byte holds 8 one-bit codes; 4 or 8 decode, 9 do not.
  dsw::Bytes run_past = {2, 0, 0, 0, 1, 1, 0x55};
  CHECK(decode(run_past, 1, 4).empty());
  CHECK(decode(run_past, 1, 8).empty());
  uint32_t big[9];
  CHECK(!error_of([&] { ds::huffman_decode(run_past.data(), run_past.size(), 1, 9, big); }).empty());
  // Unused whole bytes after the last code.
  dsw::Bytes trailing = {2, 0, 0, 0, 1, 1, 0x55, 0x00};
  CHECK(!decode(trailing, 1, 4).empty());
}

TEST(codebook_lookup_checks_range) {
  const float cb[3] = {0.5f, -1.0f, 2.0f};
  const uint32_t ok[4] = {2, 0, 1, 2};
  float out[4];
  ds::codebook_lookup(ok, 4, cb, 3, out);
  CHECK(out[0] == 2.0f && out[1] == 0.5f && out[2] == -1.0f && out[3] == 2.0f);
  const uint32_t bad[2] = {1, 3};
  CHECK(error_of([&] { ds::codebook_lookup(bad, 2, cb, 3, out); }).find("cluster index 3") != std::string::npos);
}

TEST(sparse_rel_expands_and_checks_overflow) {
  const uint32_t rel[3] = {1, 0, 3};
  const float val[3] = {1.0f, 2.0f, 3.0f};
  float out[8] = {};
  ds::sparse_rel_expand(rel, val, 3, out, 8);
  const float want[8] = {0, 1, 2, 0, 0, 0, 3, 0};
  CHECK(std::memcmp(out, want, sizeof(want)) == 0);
  float small[6] = {};
  CHECK(error_of([&] { ds::sparse_rel_expand(rel, val, 3, small, 6); }).find("position 6") != std::string::npos);
}

TEST(sparse_writer_fillers_round_trip) {
  // Long zero runs with 1-bit indices need many fillers; decoding must give the data back.
  std::vector<float> data(40, 0.0f);
  data[0] = 1.0f, data[9] = -2.0f, data[39] = 4.0f;
  const dsw::Tensor t = dsw::sparse_tensor("t", {40}, data, 1);
  std::vector<uint32_t> rel(t.entry_count);
  ds::bitpack_decode(t.streams[0].bytes.data(), t.streams[0].bytes.size(), 1, t.entry_count, rel.data());
  std::vector<float> vals(t.entry_count);
  std::memcpy(vals.data(), t.streams[1].bytes.data(), vals.size() * 4);
  std::vector<float> out(40, 0.0f);
  ds::sparse_rel_expand(rel.data(), vals.data(), t.entry_count, out.data(), 40);
  CHECK(out == data);
  CHECK(t.entry_count > 3);
}
