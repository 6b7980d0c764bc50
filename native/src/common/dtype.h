// Element types of values and tensors (docs/format.md, "dtypes").
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds {

enum Dtype : uint8_t { kDtypeF32 = 1, kDtypeI8 = 2, kDtypeU8 = 3, kDtypeI32 = 4, kDtypeI16 = 5 };

inline bool dtype_known(uint8_t d) { return d >= kDtypeF32 && d <= kDtypeI16; }

inline size_t dtype_size(uint8_t d) { return d == kDtypeI8 || d == kDtypeU8 ? 1 : d == kDtypeI16 ? 2 : 4; }

// The dtypes of quantized activations: u8 (asymmetric) and i16 (symmetric, zero point 0).
inline bool dtype_quantized_activation(uint8_t d) { return d == kDtypeU8 || d == kDtypeI16; }

inline const char* dtype_name(uint8_t d) {
  switch (d) {
    case kDtypeF32: return "f32";
    case kDtypeI8: return "i8";
    case kDtypeU8: return "u8";
    case kDtypeI32: return "i32";
    case kDtypeI16: return "i16";
    default: return "unknown dtype";
  }
}

}  // namespace ds
