// int16 activations (docs/format.md, "int16 activations"): qconv2d/qdense with x and y each u8 or
// i16, requantize, quantize/dequantize to and from i16, and i16 data movement. An i16 value is
// symmetric (zero point 0). Names: ds_q16_* compute, ds_i16_* move int16 values.
#pragma once

#include <cstdint>

#include "kernels/qu8.h"

namespace ds {

// qconv2d/qdense requantization with i16 input: the multiplier is a multiple of 2^16 (checked at
// load), so requant(acc, M, s) = round_shift(acc * M, 31 + s) = round_shift(acc * (M >> 16), 15 + s),
// exact in int64 for |acc| < 2^47 (M >> 16 < 2^15, 15 + s >= 1).
inline int64_t q16_requant(int64_t acc, int32_t multiplier, int32_t shift) {
  return qu8_round_shift(acc * (multiplier >> 16), 15 + shift);
}

// The requantization of an accumulator over x of type X: the full formula for u8 input
// (|acc| < 2^31), the shortcut above for i16 input.
template <typename X>
inline int64_t q_requant_acc(int64_t acc, int32_t multiplier, int32_t shift) {
  if constexpr (sizeof(X) == 1) return qu8_requant(acc, multiplier, shift);
  else return q16_requant(acc, multiplier, shift);
}

template <typename Y>
inline Y q_clamp(int64_t v, int32_t lo, int32_t hi) {
  return Y(v < lo ? lo : v > hi ? hi : v);
}

// Reference qconv2d for x u8 or i16 (X = uint8_t, int16_t) and y u8 or i16 (Y likewise): int64
// sums of (x - x_zp) * w, padded taps skipped; output planes [plane0, plane1) of the N * O planes
// (plane b * O + o). Instantiated for the four combinations.
template <typename X, typename Y>
void ds_q16_conv2d__scalar(const QConv2dParams& p, const X* x, const int8_t* w, const QChannelParams& ch, Y* y,
                           int64_t plane0, int64_t plane1);
// Reference qdense: y (n, m) from x (n, k) and w (m, k), output columns [m0, m1) of every row.
template <typename X, typename Y>
void ds_q16_dense__scalar(int64_t n, int64_t k, int64_t m, int32_t x_zp, const QuantOut& q, const X* x,
                          const int8_t* w, const QChannelParams& ch, Y* y, int64_t m0, int64_t m1);

// requantize (op 33): y = clamp(y_zp + requant(x - x_zp, multiplier, shift), lo, hi), lo..hi the
// range of Y, in int64 (the full 31-bit multiplier: |x - x_zp| < 2^16).
struct QRequantParams {
  int32_t x_zp = 0, y_zp = 0, multiplier = 0, shift = 0;
};
template <typename X, typename Y>
void ds_q16_requantize__scalar(int64_t n, const QRequantParams& q, const X* x, Y* y);

// quantize to i16: q = clamp(rint(x / scale), -32768, 32767), round half to even; NaN gives 0.
void ds_q16_quantize__scalar(int64_t n, float scale, const float* x, int16_t* y);
// dequantize from i16: y = q * scale.
void ds_q16_dequantize__scalar(int64_t n, float scale, const int16_t* x, float* y);

// i16 data movement (the f32 kernels' semantics on int16).
void ds_i16_maxpool2d__scalar(const Pool2dParams& p, const int16_t* x, int16_t* y);
void ds_i16_global_maxpool__scalar(int64_t planes, int64_t size, const int16_t* x, int16_t* y);

}  // namespace ds
