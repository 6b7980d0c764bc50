// u8 data movement: the f32 kernels' semantics (src/kernels/ref/f32-pool2d, x32-copy, f32-pad,
// f32-resize) on bytes, for the ops that take u8 activations unchanged.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/qu8.h"

namespace ds {

namespace {

// The maximum over the taps of output column ox that fall in the buffered input columns.
inline uint8_t tap_max(const Pool2dParams& p, const uint8_t* col_max, int64_t ix0, int64_t ix1, int64_t ox) {
  const int64_t first = ox * p.stride_w - p.pad_left;  // input column of tap kx = 0
  uint8_t m = 0;
  for (int64_t kx = 0; kx < p.kw; ++kx) {
    const int64_t ix = first + kx * p.dil_w;
    if (ix >= ix0 && ix < ix1) m = std::max(m, col_max[ix - ix0]);
  }
  return m;
}

// dst[i] = max(dst[i], src[i]) in blocks of a fixed 16 bytes, which compilers turn into vector
// code at -O2 when the pointers cannot alias.
inline void max_into(uint8_t* __restrict dst, const uint8_t* __restrict src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) dst[i + j] = std::max(dst[i + j], src[i + j]);
  for (; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
}

// y[j] = max(c[2j], c[2j + 1], c[2j + 2]) for j < 16: a 3-wide window at stride 2.
inline void max3_stride2_16(uint8_t* __restrict y, const uint8_t* __restrict c) {
  for (int j = 0; j < 16; ++j) y[j] = std::max(std::max(c[2 * j], c[2 * j + 1]), c[2 * j + 2]);
}

}  // namespace

void ds_u8_maxpool2d__scalar(const Pool2dParams& p, const uint8_t* x, uint8_t* y) {
  // Per output row: the maximum down the window's rows first (one pass over contiguous bytes),
  // then across the window's columns of that row. Rows wider than the buffer go in pieces of
  // output columns.
  constexpr int64_t kRow = 4096;
  uint8_t col_max[kRow];
  const int64_t s = p.stride_w, span = (p.kw - 1) * p.dil_w + 1;
  if (span > kRow) {  // a window wider than the buffer: one output at a time
    for (int64_t plane = 0; plane < p.n * p.c; ++plane)
      for (int64_t oy = 0; oy < p.oh; ++oy)
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          uint8_t m = 0;
          for (int64_t ky = 0; ky < p.kh; ++ky) {
            const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
            if (iy < 0 || iy >= p.h) continue;
            for (int64_t kx = 0; kx < p.kw; ++kx) {
              const int64_t ix = ox * s - p.pad_left + kx * p.dil_w;
              if (ix >= 0 && ix < p.w) m = std::max(m, x[(plane * p.h + iy) * p.w + ix]);
            }
          }
          y[(plane * p.oh + oy) * p.ow + ox] = m;
        }
    return;
  }
  const int64_t piece = (kRow - span) / s + 1;  // output columns per piece
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    const uint8_t* xp = x + plane * p.h * p.w;
    uint8_t* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += piece) {
        const int64_t ox1 = std::min(p.ow, ox0 + piece);
        // Input columns [ix0, ix1) that this piece reads, clipped to the row.
        const int64_t ix0 = std::max<int64_t>(0, ox0 * s - p.pad_left);
        const int64_t ix1 = std::min(p.w, (ox1 - 1) * s - p.pad_left + span);
        const int64_t n = ix1 - ix0;
        std::memset(col_max, 0, size_t(std::max<int64_t>(0, n)));  // every window holds an input element
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
          if (iy < 0 || iy >= p.h) continue;
          max_into(col_max, xp + iy * p.w + ix0, n);
        }
        uint8_t* yr = yp + oy * p.ow;
        // 3 wide, stride 2 (the ResNet stem): the columns whose taps all fall inside [ix0, ix1) in
        // blocks of 16, without bounds checks; the rest tap by tap.
        int64_t ox = ox0;
        if (p.kw == 3 && p.dil_w == 1 && s == 2) {
          while (ox < ox1 && ox * s - p.pad_left < ix0) yr[ox] = tap_max(p, col_max, ix0, ix1, ox), ++ox;
          for (; ox + 16 <= ox1 && (ox + 15) * 2 - p.pad_left + 2 < ix1; ox += 16)
            max3_stride2_16(yr + ox, col_max + (ox * 2 - p.pad_left - ix0));
        }
        for (; ox < ox1; ++ox) yr[ox] = tap_max(p, col_max, ix0, ix1, ox);
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

void ds_x8_copy_nd__scalar(const CopyNdParams& params, const uint8_t* x, uint8_t* y) {
  const CopyNdParams p = merge_copy_dims(params);  // whole planes per memcpy where they are contiguous
  const int last = p.rank - 1;
  const int64_t n = p.dims[last], s = p.strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.dims[k];
  if (n == 0) return;
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
