// CRC-32 (IEEE 802.3 polynomial, reflected), identical to zlib.crc32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

// Continue a CRC: crc32(b, n2, crc32(a, n1)) == crc32(a || b). Start with crc = 0.
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace ds
