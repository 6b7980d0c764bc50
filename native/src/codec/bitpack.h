// Fixed-width bit unpacking (docs/format.md, "bitpack").
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// Unpacks `count` symbols of `bits` (1..16) bits each into out[count]. The stream must be exactly
// ceil(count * bits / 8) bytes long. Throws ds::Error(DS_ERR_FORMAT) otherwise.
void bitpack_decode(const uint8_t* data, size_t size, unsigned bits, uint64_t count, uint32_t* out);

}  // namespace ds
