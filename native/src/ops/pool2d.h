// Shared parsing and shape rules of maxpool2d and avgpool2d.
#pragma once

#include <algorithm>

#include "ops/op.h"
#include "ops/parallel.h"

namespace ds {

OpParams pool2d_parse(const std::vector<Attr>& attrs, const std::string& node, const char* op,
                      bool is_avg);
Shape pool2d_infer_shape(const OpParams& p, const Shape& x, const std::string& node, const char* op);
Pool2dParams pool2d_kernel_params(const OpParams& p, const Shape& x, const Shape& out);

// Runs kernel(params, x, y) on the N*C planes of x split over the session's threads (planes are
// independent); T is the element type (float, uint8_t).
template <typename T, typename Kernel>
void pool2d_run_planes(ThreadPool* pool, const Pool2dParams& q, const T* x, T* y, Kernel kernel) {
  const int64_t in_plane = q.h * q.w, out_plane = q.oh * q.ow;
  // Below about 32K input elements the hand-off costs more than the second thread saves.
  const int64_t min_planes = 32768 / std::max<int64_t>(1, in_plane) + 1;
  parallel_range(pool, q.n * q.c, min_planes, 1, [&](int64_t b, int64_t e) {
    Pool2dParams part = q;
    part.n = 1;
    part.c = e - b;
    kernel(part, x + b * in_plane, y + b * out_plane);
  });
}

}  // namespace ds
