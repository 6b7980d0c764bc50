// Reference quantize, dequantize, qadd, requantization tables, lookup and qglobal_avgpool
// (docs/format.md, "Quantized inference (int8)").
#include <cmath>

#include "kernels/qu8.h"

namespace ds {

// q = clamp(rint(x / scale) + zp, 0, 255) in float32, round half to even; NaN gives zp.
void ds_qu8_quantize__scalar(int64_t n, float scale, int32_t zp, const float* x, uint8_t* y) {
  const float z = float(zp);
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(x[i] / scale) + z;
    y[i] = q != q ? uint8_t(zp) : q <= 0.0f ? uint8_t(0) : q >= 255.0f ? uint8_t(255) : uint8_t(q);
  }
}

void ds_qu8_dequantize__scalar(int64_t n, float scale, int32_t zp, const uint8_t* x, float* y) {
  const float z = float(zp);
  for (int64_t i = 0; i < n; ++i) y[i] = (float(x[i]) - z) * scale;
}

void ds_qu8_vadd__scalar(const BinaryParams& p, const QAddParams& q, const uint8_t* a, const uint8_t* b, uint8_t* y) {
  const int last = p.rank - 1;
  const int64_t n = p.dims[last], sa = p.a_strides[last], sb = p.b_strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.dims[k];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t ia = 0, ib = 0;
    for (int k = 0; k < last; ++k) ia += index[k] * p.a_strides[k], ib += index[k] * p.b_strides[k];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = (int64_t(a[ia + i * sa]) - q.a_zp) * q.a_mult + (int64_t(b[ib + i * sb]) - q.b_zp) * q.b_mult;
      y[i] = qu8_clamp(q.out.y_zp + qu8_round_shift(v, 31 + q.shift), q.out.act_min, q.out.act_max);
    }
    y += n;
    for (int k = last - 1; k >= 0; --k) {
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

void ds_qu8_requant_table__scalar(int32_t zp, int32_t mult, int32_t shift, int32_t y_zp, uint8_t* table) {
  for (int v = 0; v < 256; ++v) table[v] = qu8_clamp(y_zp + qu8_requant(v - zp, mult, shift), 0, 255);
}

void ds_u8_lut__scalar(int64_t n, const uint8_t* x, const uint8_t* table, uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = table[x[i]];
}

void ds_qu8_global_avgpool__scalar(int64_t planes, int64_t size, int32_t x_zp, int32_t y_zp, int32_t mult,
                                   int32_t shift, const uint8_t* x, uint8_t* y) {
  for (int64_t p = 0; p < planes; ++p) {
    int64_t sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += x[p * size + i];
    sum -= int64_t(x_zp) * size;
    y[p] = qu8_clamp(y_zp + qu8_requant(sum, mult, shift), 0, 255);
  }
}

}  // namespace ds
