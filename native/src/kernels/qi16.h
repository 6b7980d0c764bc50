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

// ---- the i16-input GEMM of qconv2d/qdense (kernels/x86/q16-gemm-*.cc) ----
// The depth K is taken in pairs; A row r holds pair kk at a[r][2kk], a[r][2kk + 1] (i8 weights
// widened to int16, or i16 activations; any alignment); B is a
// panel of kQ16Nr columns packed [k2][kQ16Nr][2] int16 (zero past K and past the last column).
// gemm: acc[r * kQ16Nr + j] = sum over pairs kk < k2 of A row r . B column j, exactly in int64, for rows
// r < rows <= kQ16Mr. vpmaddwd gives each int32 lane one pair sum |x * w + x' * w'| <= 2 * 32768 * 128
// = 2^23 per step; the lanes are added into int64 every kQ16Flush steps, the most that cannot
// wrap: 255 * 2^23 = 2^31 - 2^23 (256 would reach 2^31 with every x -32768 and every w -128).
constexpr int kQ16Nr = 32, kQ16Mr = 8, kQ16Flush = 255;
struct Q16Kernels {
  const char* isa;
  void (*gemm)(int64_t k2, int rows, const int16_t* const* a, const int16_t* b, int64_t* acc);
  // A B panel from k rows read in place: depth t is the row at x + offsets[t], columns [0, n)
  // (n <= kQ16Nr, nothing read past n; zero past n and past k).
  void (*pack_rows)(int64_t k, const int16_t* x, const int64_t* offsets, int64_t n, int16_t* dst);
  // The epilogue of a conv tile (channel params per row): for r < rows, j < n, y[r * y_stride + j] =
  // clamp(out.y_zp + round_shift(v * (M >> ms), 31 - ms + ch.shift[r])), v = ch.bias[r] + acc[r *
  // kQ16Nr + j], M = ch.multiplier[r], ms = multiplier_shift: 16 for i16 x (q16_requant), 0 for
  // u8 x (qu8_requant), the product's low 64 bits as the reference computes it.
  void (*store_u8)(const int64_t* acc, int rows, int64_t n, const QChannelParams& ch, int multiplier_shift,
                   const QuantOut& out, uint8_t* y, int64_t y_stride);
  void (*store_i16)(const int64_t* acc, int rows, int64_t n, const QChannelParams& ch, int multiplier_shift,
                    const QuantOut& out, int16_t* y, int64_t y_stride);
};
extern const Q16Kernels ds_q16_kernels__avx2, ds_q16_kernels__avx512, ds_q16_kernels__avx512vnni;

// The epilogue of an i16-input accumulator (bias included) for output channel o.
template <typename Y>
inline Y q16_output(int64_t acc, const QChannelParams& ch, int64_t o, const QuantOut& q) {
  return q_clamp<Y>(q.y_zp + q16_requant(acc, ch.multiplier[o], ch.shift[o]), q.act_min, q.act_max);
}

// i16 data movement (the f32 kernels' semantics on int16).
void ds_i16_maxpool2d__scalar(const Pool2dParams& p, const int16_t* x, int16_t* y);
void ds_i16_global_maxpool__scalar(int64_t planes, int64_t size, const int16_t* x, int16_t* y);

}  // namespace ds
