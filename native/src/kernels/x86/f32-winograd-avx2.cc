// F(4x4, 3x3) transforms at the avx2 level: 8 tiles per call, one per vector lane.
#include "kernels/ref/f32-winograd-impl.h"

namespace ds {
namespace {
void input__avx2(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  winograd::input<8>(x, x_stride, count, v, v_stride);
}
void output__avx2(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                  int64_t y_stride) {
  winograd::output<8>(m, m_stride, count, o, y, y_stride);
}
}  // namespace

const WinogradKernels ds_f32_winograd43_kernels__avx2 = {"ds_f32_winograd43__avx2", 8, input__avx2, output__avx2};

}  // namespace ds
