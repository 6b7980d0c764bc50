// Reference qconv2d / qdense (docs/format.md), x and y each u8 or i16: int64 sums of (x - x_zp) * w
// in the order of the formula, padded taps skipped (they add (x_zp - x_zp) * w = 0), then the
// fixed-point epilogue.
#include <algorithm>
#include <cstring>

#include "kernels/qi16.h"
#include "kernels/ref/window_taps.h"

namespace ds {

template <typename X, typename Y>
void ds_q16_conv2d__scalar(const QConv2dParams& q, const X* x, const int8_t* w, const QChannelParams& ch, Y* y,
                           int64_t plane0, int64_t plane1) {
  const Conv2dParams& p = q.conv;
  const int64_t cg = p.c / p.group, og = p.o / p.group;
  for (int64_t plane = plane0; plane < plane1; ++plane) {
    const int64_t b = plane / p.o, o = plane % p.o;
    const int64_t g = o / og;
    const int8_t* wo = w + o * cg * p.kh * p.kw;
    Y* yo = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int64_t acc = ch.bias[o];
        for (int64_t c = 0; c < cg; ++c) {
          const X* xc = x + ((b * p.c) + g * cg + c) * p.h * p.w;
          for_each_tap_in_input(p, oy, ox, [&](int64_t ky, int64_t kx, int64_t i) {
            acc += (int64_t(xc[i]) - q.x_zp) * wo[(c * p.kh + ky) * p.kw + kx];
          });
        }
        yo[oy * p.ow + ox] = q_clamp<Y>(q.out.y_zp + q_requant_acc<X>(acc, ch.multiplier[o], ch.shift[o]),
                                        q.out.act_min, q.out.act_max);
      }
    }
  }
}

template <typename X, typename Y>
void ds_q16_dense__scalar(int64_t n, int64_t k, int64_t m, int32_t x_zp, const QuantOut& q, const X* x,
                          const int8_t* w, const QChannelParams& ch, Y* y, int64_t m0, int64_t m1) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = m0; j < m1; ++j) {
      int64_t acc = ch.bias[j];
      for (int64_t t = 0; t < k; ++t) acc += (int64_t(x[i * k + t]) - x_zp) * w[j * k + t];
      y[i * m + j] = q_clamp<Y>(q.y_zp + q_requant_acc<X>(acc, ch.multiplier[j], ch.shift[j]), q.act_min, q.act_max);
    }
  }
}

#define DS_Q16_LINEAR(X, Y)                                                                                        \
  template void ds_q16_conv2d__scalar<X, Y>(const QConv2dParams&, const X*, const int8_t*, const QChannelParams&, \
                                            Y*, int64_t, int64_t);                                                 \
  template void ds_q16_dense__scalar<X, Y>(int64_t, int64_t, int64_t, int32_t, const QuantOut&, const X*,          \
                                           const int8_t*, const QChannelParams&, Y*, int64_t, int64_t);
DS_Q16_LINEAR(uint8_t, uint8_t)
DS_Q16_LINEAR(uint8_t, int16_t)
DS_Q16_LINEAR(int16_t, uint8_t)
DS_Q16_LINEAR(int16_t, int16_t)
#undef DS_Q16_LINEAR

void ds_qu8_conv2d__scalar(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                           uint8_t* y) {
  ds_q16_conv2d__scalar(q, x, w, ch, y, 0, q.conv.n * q.conv.o);
}

void ds_qu8_dense__scalar(int64_t n, int64_t k, int64_t m, int32_t x_zp, const QuantOut& q, const uint8_t* x,
                          const int8_t* w, const QChannelParams& ch, uint8_t* y) {
  ds_q16_dense__scalar(n, k, m, x_zp, q, x, w, ch, y, 0, m);
}

void ds_u8_im2col__scalar(const Conv2dParams& p, int64_t channels, int32_t x_zp, const uint8_t* x, int64_t p0,
                          int64_t p1, uint8_t* dst) {
  const int64_t cols = p1 - p0;
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* xc = x + c * p.h * p.w;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        uint8_t* row = dst + ((c * p.kh + ky) * p.kw + kx) * cols;
        // One output row segment at a time: the taps inside the input are a strided run.
        for (int64_t j = 0; j < cols;) {
          const int64_t oy = (p0 + j) / p.ow, ox0 = (p0 + j) % p.ow;
          const int64_t len = std::min(cols - j, p.ow - ox0);
          const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
          uint8_t* out = row + j;
          if (iy < 0 || iy >= p.h) {
            std::memset(out, x_zp, size_t(len));
          } else {
            const uint8_t* xr = xc + iy * p.w;
            const int64_t s = p.stride_w, base = kx * p.dil_w - p.pad_left;  // ix = ox * s + base
            // Taps t in [t0, t1) fall inside the row; the rest are padding.
            const int64_t ox_lo = base >= 0 ? 0 : (-base + s - 1) / s;
            const int64_t ox_hi = p.w - base <= 0 ? 0 : (p.w - base + s - 1) / s;
            const int64_t t0 = std::min(len, std::max<int64_t>(0, ox_lo - ox0));
            const int64_t t1 = std::max(t0, std::min(len, ox_hi - ox0));
            if (t0 > 0) std::memset(out, x_zp, size_t(t0));
            if (t1 < len) std::memset(out + t1, x_zp, size_t(len - t1));
            const uint8_t* src = xr + (ox0 + t0) * s + base;
            if (s == 1) {
              std::memcpy(out + t0, src, size_t(t1 - t0));
            } else {
              for (int64_t t = 0; t < t1 - t0; ++t) out[t0 + t] = src[t * s];
            }
          }
          j += len;
        }
      }
    }
  }
}

// The generic depthwise kernels copy one channel at a time into a u8 plane padded with x_zp on
// every side (rows of ds_qu8_dw_padded_width bytes), then run without bounds checks; plus an int32
// row. The 3x3 ones take ds_qu8_dw3x3_layout.
int64_t ds_qu8_dwconv_workspace(const Conv2dParams& p) {
  const int64_t hp = (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dil_h + 1;
  const int64_t wp = ds_qu8_dw_padded_width(p);
  const int64_t generic = hp * wp + 64 + 4 * (p.ow + 64);
  if (p.kh != 3 || p.kw != 3) return generic;
  const QDw3x3Layout l = ds_qu8_dw3x3_layout(p);
  return std::max({generic, l.group * l.channel_bytes, ds_qu8_dw3x3_cl_layout(p).bytes, ds_qu8_dw3x3_rows_layout(p).bytes});
}

extern const QKernels ds_qkernels__scalar = {"scalar", nullptr, nullptr, nullptr};

}  // namespace ds
