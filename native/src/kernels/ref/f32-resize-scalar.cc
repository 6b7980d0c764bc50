// ONNX Resize (opset 13+) of the last two axes of NCHW with given output sizes. Coordinates are
// computed in double as `x * in / out` forms, so exact halves and integers stay exact.
#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace ds {
namespace {

// The input coordinate of output index x (coordinate_transformation_mode).
double source_coordinate(int64_t x, int64_t in, int64_t out, int32_t coord) {
  const double xd = double(x), ind = double(in), outd = double(out);
  switch (coord) {
    case kCoordPytorchHalfPixel:
      return out > 1 ? (xd + 0.5) * ind / outd - 0.5 : 0.0;
    case kCoordAlignCorners:
      return out > 1 ? xd * (ind - 1.0) / (outd - 1.0) : 0.0;
    case kCoordAsymmetric:
      return xd * ind / outd;
    default:  // kCoordHalfPixel
      return (xd + 0.5) * ind / outd - 0.5;
  }
}

int64_t nearest_index(int64_t x, int64_t in, int64_t out, int32_t coord, int32_t mode) {
  const double c = source_coordinate(x, in, out, coord);
  const double f = std::floor(c);
  double r;
  switch (mode) {
    case kNearestRoundPreferCeil: r = c - f == 0.5 ? f + 1.0 : std::round(c); break;
    case kNearestFloor: r = f; break;
    case kNearestCeil: r = std::ceil(c); break;
    default: r = c - f == 0.5 ? f : std::round(c); break;  // kNearestRoundPreferFloor
  }
  return int64_t(std::min(std::max(r, 0.0), double(in - 1)));
}

// Linear interpolation taps: the coordinate clamped to [0, in-1] (as onnxruntime), its floor, the
// next index (clamped) and the weight of that next index.
void linear_taps(int64_t x, int64_t in, int64_t out, int32_t coord, int64_t* lo, int64_t* hi, float* frac) {
  const double c = std::min(std::max(source_coordinate(x, in, out, coord), 0.0), double(in - 1));
  *lo = int64_t(std::floor(c));
  *hi = std::min<int64_t>(*lo + 1, in - 1);
  *frac = float(c - double(*lo));
}

}  // namespace

void ds_f32_resize_nearest__scalar(const ResizeParams& p, const float* x, float* y) {
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int64_t iy = nearest_index(oy, p.h, p.oh, p.coord, p.nearest);
      for (int64_t ox = 0; ox < p.ow; ++ox)
        yp[oy * p.ow + ox] = xp[iy * p.w + nearest_index(ox, p.w, p.ow, p.coord, p.nearest)];
    }
  }
}

void ds_f32_resize_linear__scalar(const ResizeParams& p, const float* x, float* y) {
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    const float* xp = x + plane * p.h * p.w;
    float* yp = y + plane * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      int64_t y0, y1;
      float fy;
      linear_taps(oy, p.h, p.oh, p.coord, &y0, &y1, &fy);
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        int64_t x0, x1;
        float fx;
        linear_taps(ox, p.w, p.ow, p.coord, &x0, &x1, &fx);
        const float top = xp[y0 * p.w + x0] * (1.0f - fx) + xp[y0 * p.w + x1] * fx;
        const float bottom = xp[y1 * p.w + x0] * (1.0f - fx) + xp[y1 * p.w + x1] * fx;
        yp[oy * p.ow + ox] = top * (1.0f - fy) + bottom * fy;
      }
    }
  }
}

}  // namespace ds
