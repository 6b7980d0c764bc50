// u8 data movement: the f32 kernels' semantics (src/kernels/ref/f32-pool2d, x32-copy, f32-pad,
// f32-resize) on bytes, for the ops that take u8 activations unchanged.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/qu8.h"

namespace ds {

void ds_u8_maxpool2d__scalar(const Pool2dParams& p, const uint8_t* x, uint8_t* y) {
  const int64_t s = p.stride_w;
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const uint8_t* xp = x + plane * p.h * p.w;
    uint8_t* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      uint8_t* yr = yp + oy * p.ow;
      std::memset(yr, 0, size_t(p.ow));  // every window holds an input element (the op's checks)
      for (int64_t ky = 0; ky < p.kh; ++ky) {
        const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
        if (iy < 0 || iy >= p.h) continue;
        const uint8_t* xr = xp + iy * p.w;
        for (int64_t kx = 0; kx < p.kw; ++kx) {
          // Output columns [lo, hi) read tap kx inside the row; the others skip it.
          const int64_t base = kx * p.dil_w - p.pad_left;  // ix = ox * s + base
          const int64_t lo = std::min(p.ow, base >= 0 ? 0 : (-base + s - 1) / s);
          const int64_t hi = std::max(lo, std::min(p.ow, p.w - base <= 0 ? 0 : (p.w - base + s - 1) / s));
          for (int64_t ox = lo; ox < hi; ++ox) yr[ox] = std::max(yr[ox], xr[ox * s + base]);
        }
      }
    }
  }
}

void ds_u8_global_maxpool__scalar(int64_t planes, int64_t size, const uint8_t* x, uint8_t* y) {
  for (int64_t p = 0; p < planes; ++p) {
    uint8_t m = 0;
    for (int64_t i = 0; i < size; ++i) m = std::max(m, x[p * size + i]);
    y[p] = m;
  }
}

void ds_x8_copy_nd__scalar(const CopyNdParams& p, const uint8_t* x, uint8_t* y) {
  const int last = p.rank - 1;
  const int64_t n = p.dims[last], s = p.strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.dims[k];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = p.offset;
    for (int k = 0; k < last; ++k) base += index[k] * p.strides[k];
    if (s == 1) std::memcpy(y, x + base, size_t(n));
    else
      for (int64_t i = 0; i < n; ++i) y[i] = x[base + i * s];
    y += n;
    for (int k = last - 1; k >= 0; --k) {
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

void ds_x8_concat__scalar(const ConcatParams& p, const uint8_t* const* xs, const uint8_t* const* tables, uint8_t* y) {
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int32_t i = 0; i < p.count; ++i) {
      const uint8_t* src = xs[i] + o * p.sizes[i];
      if (tables && tables[i]) ds_u8_lut__scalar(p.sizes[i], src, tables[i], y);
      else std::memcpy(y, src, size_t(p.sizes[i]));
      y += p.sizes[i];
    }
  }
}

namespace {

int64_t pad_source(int64_t o, int64_t begin, int64_t size, int32_t mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < size) return i;
  switch (mode) {
    case kPadReflect: return i < 0 ? -i : 2 * (size - 1) - i;
    case kPadEdge: return i < 0 ? 0 : size - 1;
    default: return -1;
  }
}

double resize_coordinate(int64_t x, int64_t in, int64_t out, int32_t coord) {
  const double xd = double(x), ind = double(in), outd = double(out);
  switch (coord) {
    case kCoordPytorchHalfPixel: return out > 1 ? (xd + 0.5) * ind / outd - 0.5 : 0.0;
    case kCoordAlignCorners: return out > 1 ? xd * (ind - 1.0) / (outd - 1.0) : 0.0;
    case kCoordAsymmetric: return xd * ind / outd;
    default: return (xd + 0.5) * ind / outd - 0.5;
  }
}

int64_t resize_nearest_index(int64_t x, int64_t in, int64_t out, int32_t coord, int32_t mode) {
  const double c = resize_coordinate(x, in, out, coord);
  const double f = std::floor(c);
  double r;
  switch (mode) {
    case kNearestRoundPreferCeil: r = c - f == 0.5 ? f + 1.0 : std::round(c); break;
    case kNearestFloor: r = f; break;
    case kNearestCeil: r = std::ceil(c); break;
    default: r = c - f == 0.5 ? f : std::round(c); break;
  }
  return int64_t(std::min(std::max(r, 0.0), double(in - 1)));
}

}  // namespace

void ds_u8_pad__scalar(const PadParams& p, const uint8_t* x, uint8_t* y) {
  int64_t in_strides[kMaxRank];
  int64_t total = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    in_strides[k] = k == p.rank - 1 ? 1 : in_strides[k + 1] * p.in_dims[k + 1];
    total *= p.dims[k];
  }
  const uint8_t value = uint8_t(p.value);
  int64_t index[kMaxRank] = {0};
  for (int64_t e = 0; e < total; ++e) {
    int64_t src = 0;
    bool inside = true;
    for (int k = 0; k < p.rank && inside; ++k) {
      const int64_t i = pad_source(index[k], p.begin[k], p.in_dims[k], p.mode);
      if (i < 0) inside = false;
      else src += i * in_strides[k];
    }
    y[e] = inside ? x[src] : value;
    for (int k = p.rank - 1; k >= 0; --k) {
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

void ds_u8_resize_nearest__scalar(const ResizeParams& p, const uint8_t* x, uint8_t* y) {
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const uint8_t* xp = x + plane * p.h * p.w;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int64_t iy = resize_nearest_index(oy, p.h, p.oh, p.coord, p.nearest);
      for (int64_t ox = 0; ox < p.ow; ++ox)
        *y++ = xp[iy * p.w + resize_nearest_index(ox, p.w, p.ow, p.coord, p.nearest)];
    }
  }
}

}  // namespace ds
