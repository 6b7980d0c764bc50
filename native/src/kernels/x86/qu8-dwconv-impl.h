// Depthwise u8 x i8 convolution, shared by the per-ISA files (each includes this after defining
// QU8_DW_NAME, the kernel's name, and a function `requant_row` of its ISA). Each channel is copied
// into a plane padded with x_zp (kernels/qu8.h, ds_qu8_dw_padded_width), so the window loops have
// no bounds checks and the compiler vectorizes them with the file's ISA flags; an output row is
// accumulated in int32 and requantized at once.
#include <algorithm>
#include <cstring>

namespace ds {

void QU8_DW_NAME(const QConv2dParams& q, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                 uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1) {
  const Conv2dParams& p = q.conv;
  const int64_t hp = (p.oh - 1) * p.stride_h + (p.kh - 1) * p.dil_h + 1;
  const int64_t wreq = (p.ow - 1) * p.stride_w + (p.kw - 1) * p.dil_w + 1;
  const int64_t wp = ds_qu8_dw_padded_width(p);
  uint8_t* plane = workspace;
  int32_t* acc = reinterpret_cast<int32_t*>(workspace + (hp * wp + 63) / 64 * 64);
  const int64_t sw = p.stride_w;
  for (int64_t c = c0; c < c1; ++c) {
    const uint8_t* xc = x + c * p.h * p.w;
    for (int64_t py = 0; py < hp; ++py) {
      uint8_t* row = plane + py * wp;
      std::memset(row, q.x_zp, size_t(wp));
      const int64_t iy = py - p.pad_top;
      if (iy < 0 || iy >= p.h) continue;
      const int64_t n = std::min<int64_t>(p.w, wreq - p.pad_left);
      if (n > 0) std::memcpy(row + p.pad_left, xc + iy * p.w, size_t(n));
    }
    const int8_t* wc = w + c * p.kh * p.kw;
    uint8_t* yc = y + c * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox = 0; ox < p.ow; ++ox) acc[ox] = 0;
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        for (int64_t kx = 0; kx < p.kw; ++kx) {
          const int32_t wv = wc[ky * p.kw + kx];
          const uint8_t* r = plane + (oy * p.stride_h + ky * p.dil_h) * wp + kx * p.dil_w;
          if (sw == 1) {
            for (int64_t ox = 0; ox < p.ow; ++ox) acc[ox] += int32_t(r[ox]) * wv;
          } else if (sw == 2) {
            for (int64_t ox = 0; ox < p.ow; ++ox) acc[ox] += int32_t(r[2 * ox]) * wv;
          } else {
            for (int64_t ox = 0; ox < p.ow; ++ox) acc[ox] += int32_t(r[ox * sw]) * wv;
          }
        }
      }
      requant_row(acc, p.ow, ch.bias[c], ch.multiplier[c], ch.shift[c], q.out, yc + oy * p.ow);
    }
  }
}

}  // namespace ds
