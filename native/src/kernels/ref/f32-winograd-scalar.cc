// Scalar Winograd transforms (the oracle of the SIMD levels) and the filter transforms.
#include "kernels/ref/f32-winograd-impl.h"

namespace ds {
namespace {

// U = G g G^T of one 3x3 filter g, G being W x 3, into u[(a * W + b) * u_stride], in double.
template <int W>
void filter_transform(const double (&G)[W][3], const float* g, float* u, int64_t u_stride) {
  double gg[W][3];  // G g
  for (int a = 0; a < W; ++a)
    for (int j = 0; j < 3; ++j) gg[a][j] = G[a][0] * g[j] + G[a][1] * g[3 + j] + G[a][2] * g[6 + j];
  for (int a = 0; a < W; ++a)
    for (int b = 0; b < W; ++b)
      u[(a * W + b) * u_stride] = float(gg[a][0] * G[b][0] + gg[a][1] * G[b][1] + gg[a][2] * G[b][2]);
}

}  // namespace

void ds_f32_winograd43_filter(const float* g, float* u, int64_t u_stride) {
  static const double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                 {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                 {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  filter_transform<6>(G, g, u, u_stride);
}

void ds_f32_winograd23_filter(const float* g, float* u, int64_t u_stride) {
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  filter_transform<4>(G, g, u, u_stride);
}

namespace {
template <class F>
void input__scalar(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  winograd::input<F, 1>(x, x_stride, count, v, v_stride);
}
template <class F>
void output__scalar(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                    int64_t y_stride) {
  winograd::output<F, 1>(m, m_stride, count, o, y, y_stride);
}
}  // namespace

const WinogradKernels ds_f32_winograd43_kernels__scalar = {"ds_f32_winograd43__scalar",
                                                           4,
                                                           1,
                                                           input__scalar<winograd::F43>,
                                                           output__scalar<winograd::F43>,
                                                           ds_f32_winograd43_filter};
const WinogradKernels ds_f32_winograd23_kernels__scalar = {"ds_f32_winograd23__scalar",
                                                           2,
                                                           1,
                                                           input__scalar<winograd::F23>,
                                                           output__scalar<winograd::F23>,
                                                           ds_f32_winograd23_filter};

}  // namespace ds
