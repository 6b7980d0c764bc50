// Scalar F(4x4, 3x3) transforms (the oracle of the SIMD levels) and the filter transform.
#include "kernels/ref/f32-winograd-impl.h"

namespace ds {

void ds_f32_winograd43_filter(const float* g, float* u, int64_t u_stride) {
  static const double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                 {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                 {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  double gg[6][3];  // G g
  for (int a = 0; a < 6; ++a)
    for (int j = 0; j < 3; ++j) gg[a][j] = G[a][0] * g[j] + G[a][1] * g[3 + j] + G[a][2] * g[6 + j];
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b)
      u[(a * 6 + b) * u_stride] = float(gg[a][0] * G[b][0] + gg[a][1] * G[b][1] + gg[a][2] * G[b][2]);
}

namespace {
void input__scalar(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  winograd::input<1>(x, x_stride, count, v, v_stride);
}
void output__scalar(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                    int64_t y_stride) {
  winograd::output<1>(m, m_stride, count, o, y, y_stride);
}
}  // namespace

const WinogradKernels ds_f32_winograd43_kernels__scalar = {"ds_f32_winograd43__scalar", 1, input__scalar,
                                                           output__scalar};

}  // namespace ds
