// F(4x4, 3x3) transforms at the avx512 level: 16 tiles per call, one per vector lane.
#include "kernels/ref/f32-winograd-impl.h"

namespace ds {
namespace {
void input__avx512(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  winograd::input<16>(x, x_stride, count, v, v_stride);
}
void output__avx512(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                    int64_t y_stride) {
  winograd::output<16>(m, m_stride, count, o, y, y_stride);
}
}  // namespace

const WinogradKernels ds_f32_winograd43_kernels__avx512 = {"ds_f32_winograd43__avx512", 16, input__avx512, output__avx512};

}  // namespace ds
