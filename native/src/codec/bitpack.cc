#include "codec/bitpack.h"

#include "codec/bit_reader.h"
#include "common/error.h"

namespace ds {

void bitpack_decode(const uint8_t* data, size_t size, unsigned bits, uint64_t count, uint32_t* out) {
  if (bits < 1 || bits > 16) fail(DS_ERR_FORMAT, "bitpack width ", bits, " is outside 1..16");
  // count is bounded by the caller (<= 2^31), so count * bits cannot overflow.
  const uint64_t need = (count * bits + 7) / 8;
  if (need != size)
    fail(DS_ERR_FORMAT, "bitpack stream of ", count, " symbols x ", bits, " bits needs ", need,
         " bytes, but its length is ", size);
  BitReader reader(data, size);
  for (uint64_t i = 0; i < count; ++i) reader.read(bits, &out[i]);  // length checked above
}

}  // namespace ds
