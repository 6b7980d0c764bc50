#include <cstring>

#include "codec/bitpack.h"
#include "codec/crc32.h"
#include "codec/huffman.h"
#include "codec/sparse.h"
#include "common/error.h"
#include "core/tensor_record.h"

namespace ds {

const char* role_name(uint8_t role) {
  switch (role) {
    case kRoleValues: return "values";
    case kRoleIndices: return "indices";
    case kRoleCodebook: return "codebook";
    default: return "unknown role";
  }
}

namespace {

std::string stream_label(const TensorRecord& t, const StreamRecord& s) {
  const size_t k = size_t(&s - t.streams.data());
  return cat("tensor '", t.name, "': stream ", k, " (", role_name(s.role), ")");
}

std::vector<float> raw_floats(const StreamRecord& s, const uint8_t* file) {
  std::vector<float> out(s.count);
  if (s.count) std::memcpy(out.data(), file + s.offset, s.count * sizeof(float));
  return out;
}

std::vector<uint32_t> symbols(const TensorRecord& t, const StreamRecord& s, const uint8_t* file) {
  // Each symbol takes at least one bit: bounding count by the stream's bits keeps a bad count from
  // allocating more than the file could describe.
  if (s.count > s.length * 8)
    fail(DS_ERR_FORMAT, stream_label(t, s), ": ", s.count, " symbols cannot fit in ", s.length, " bytes");
  std::vector<uint32_t> out(s.count);
  try {
    if (s.codec == kCodecBitpack)
      bitpack_decode(file + s.offset, s.length, s.bits, s.count, out.data());
    else
      huffman_decode(file + s.offset, s.length, s.bits, s.count, out.data());
  } catch (const Error& e) {
    fail(e.status(), stream_label(t, s), ": ", e.message());
  }
  return out;
}

void check_crcs(const TensorRecord& t, const uint8_t* file) {
  for (const StreamRecord& s : t.streams) {
    const uint32_t crc = crc32(file + s.offset, s.length);
    if (crc != s.crc32)
      fail(DS_ERR_CHECKSUM, stream_label(t, s), ": CRC-32 0x", std::hex, crc,
           " does not match the stored 0x", s.crc32);
  }
}

}  // namespace

std::vector<uint8_t> decode_tensor_bytes(const TensorRecord& t, const uint8_t* file) {
  check_crcs(t, file);
  const StreamRecord& vs = *t.stream(kRoleValues);
  const size_t size = dtype_size(t.dtype);
  // The entries' values (entry_count elements, the validated stream count).
  std::vector<uint8_t> values(size_t(vs.count) * size);
  if (vs.codec == kCodecRaw) {
    if (!values.empty()) std::memcpy(values.data(), file + vs.offset, values.size());
  } else {
    // i8/u8 symbols (the loader allows no other dtype here): bits <= 8, one byte each.
    const std::vector<uint32_t> sym = symbols(t, vs, file);
    const unsigned bits = vs.bits;
    for (size_t i = 0; i < sym.size(); ++i) {
      uint32_t v = sym[i];
      if (t.dtype == kDtypeI8 && bits < 8 && (v >> (bits - 1)) & 1u) v |= ~0u << bits;  // sign-extend
      values[i] = uint8_t(v);
    }
  }
  if (t.layout == 0) return values;

  const StreamRecord& is = *t.stream(kRoleIndices);
  const std::vector<uint32_t> rel = symbols(t, is, file);
  std::vector<uint8_t> dense(size_t(t.elements) * size, 0);
  uint64_t next = 0;  // as sparse_rel_expand
  for (uint64_t i = 0; i < t.entry_count; ++i) {
    const uint64_t p = next + rel[i];
    if (p >= uint64_t(t.elements))
      fail(DS_ERR_FORMAT, stream_label(t, is), ": sparse entry ", i, " lands at position ", p,
           ", past the element count ", t.elements);
    std::memcpy(dense.data() + p * size, values.data() + i * size, size);
    next = p + 1;
  }
  return dense;
}

std::vector<float> decode_tensor(const TensorRecord& t, const uint8_t* file) {
  check_crcs(t, file);
  const StreamRecord& vs = *t.stream(kRoleValues);
  std::vector<float> values;
  if (t.values == 0) {
    values = raw_floats(vs, file);
  } else {
    const std::vector<float> codebook = raw_floats(*t.stream(kRoleCodebook), file);
    const std::vector<uint32_t> index = symbols(t, vs, file);
    values.resize(index.size());
    try {
      codebook_lookup(index.data(), index.size(), codebook.data(), codebook.size(), values.data());
    } catch (const Error& e) {
      fail(e.status(), stream_label(t, vs), ": ", e.message());
    }
  }
  if (t.layout == 0) return values;

  const StreamRecord& is = *t.stream(kRoleIndices);
  const std::vector<uint32_t> rel = symbols(t, is, file);
  std::vector<float> dense(size_t(t.elements), 0.0f);
  try {
    sparse_rel_expand(rel.data(), values.data(), t.entry_count, dense.data(), uint64_t(t.elements));
  } catch (const Error& e) {
    fail(e.status(), stream_label(t, is), ": ", e.message());
  }
  return dense;
}

}  // namespace ds
