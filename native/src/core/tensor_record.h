// A tensor table record as stored (before decoding), and its decoder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/shape.h"

namespace ds {

enum StreamRole : uint8_t { kRoleValues = 1, kRoleIndices = 2, kRoleCodebook = 3 };
enum StreamCodec : uint8_t { kCodecRaw = 0, kCodecBitpack = 1, kCodecHuffman = 2 };

struct StreamRecord {
  uint8_t role = 0, codec = 0, bits = 0;
  uint64_t count = 0, offset = 0, length = 0;
  uint32_t crc32 = 0;
};

struct TensorRecord {
  std::string name;
  uint8_t dtype = kDtypeF32;
  Shape dims;
  int64_t elements = 0;
  uint8_t layout = 0;  // 0 dense, 1 sparse_rel
  uint8_t values = 0;  // 0 raw, 1 codebook
  uint8_t index_bits = 0, cluster_bits = 0;
  uint64_t entry_count = 0;
  std::vector<StreamRecord> streams;
  const StreamRecord* stream(uint8_t role) const {
    for (const StreamRecord& s : streams)
      if (s.role == role) return &s;
    return nullptr;
  }
};

const char* role_name(uint8_t role);

// Checks each stream's CRC-32 (DS_ERR_CHECKSUM) and decodes the tensor to dense float32
// (DS_ERR_FORMAT for a bad code, cluster index or sparse position). The record has been validated
// against the file size and the stream rules already. For an f32 record only.
std::vector<float> decode_tensor(const TensorRecord& t, const uint8_t* file);

// The same for an i8, u8 or i32 record (dense): the elements' bytes, little-endian, C order. i8
// bit-packed symbols are sign-extended from their width (int4 weights).
std::vector<uint8_t> decode_tensor_bytes(const TensorRecord& t, const uint8_t* file);

}  // namespace ds
