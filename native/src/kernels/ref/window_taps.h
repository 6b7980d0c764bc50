// The taps of one output's window that fall inside the input, for the direct reference kernels.
#pragma once

#include <cstdint>

namespace ds {

// Calls tap(ky, kx, iy * p.w + ix) for each tap of the (strided, dilated, padded) window of output
// (oy, ox) that lies inside the h x w input; taps in the padding are skipped. P: Conv2dParams or
// Pool2dParams (anything with the window fields).
template <typename P, typename Tap>
inline void for_each_tap_in_input(const P& p, int64_t oy, int64_t ox, Tap&& tap) {
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
    if (iy < 0 || iy >= p.h) continue;
    for (int64_t kx = 0; kx < p.kw; ++kx) {
      const int64_t ix = ox * p.stride_w - p.pad_left + kx * p.dil_w;
      if (ix < 0 || ix >= p.w) continue;
      tap(ky, kx, iy * p.w + ix);
    }
  }
}

}  // namespace ds
