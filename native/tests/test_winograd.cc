// Winograd F(4x4, 3x3) and F(2x2, 3x3) tile transforms: the scalar transforms against a direct 3x3
// correlation of one window, then every ISA level's transforms against the scalar ones on random counts,
// strides, clipped patches, residuals and every activation code; writes outside the patch (or past
// `count` lanes) must not happen.
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "harness.h"
#include "kernel_tolerances.h"
#include "tiny_net.h"

namespace {

constexpr float kGuard = -7.0f;

void fill(std::vector<float>& v, tiny::Rng& rng) {
  for (float& x : v) x = rng.uniform(-1, 1);
}

float act_alpha(int act) { return act == 2 ? -0.5f : act == 5 ? 0.2f : 0.1f; }

// The scalar transforms of tile size m (4 or 2).
const ds::WinogradKernels& scalar_kernels(int m) {
  return m == 2 ? ds::ds_f32_winograd23_kernels__scalar : ds::ds_f32_winograd43_kernels__scalar;
}

void check_level(ds::Isa isa, int tile) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const ds::KernelTable& table = ds::kernels_for(isa);
  const ds::WinogradKernels& k = tile == 2 ? *table.winograd23 : *table.winograd43;
  const ds::WinogradKernels& ref = scalar_kernels(tile);
  CHECK(k.tile == tile && ref.tile == tile);
  const int64_t m_ = tile, win = k.window(), pos = k.positions();
  const std::string level = std::string(ds::isa_name(isa)) + " F(" + std::to_string(tile) + ",3)";
  tiny::Rng rng(31);
  int cases = 0;
  for (int64_t count = 1; count <= k.lanes; ++count)
    for (int rep = 0; rep < 8; ++rep) {
      // Input: m + 2 rows of a plane wider than the lanes need, a v stride past the lanes.
      const int64_t x_stride = m_ * k.lanes + 2 + rng.below(9), v_stride = k.lanes + rng.below(5);
      std::vector<float> x(size_t(win * x_stride + m_ * k.lanes + 8)), want(size_t(pos * v_stride), kGuard),
          got(want.size(), kGuard);
      fill(x, rng);
      // Past the count tiles' windows (m * count + 2 floats of each row) floats may be read, not used.
      for (int64_t i = 0; i < win; ++i)
        for (int64_t j = m_ * count + 2; j < x_stride; ++j) x[size_t(i * x_stride + j)] = NAN;
      for (int64_t t = 0; t < count; ++t) ref.input(x.data() + m_ * t, x_stride, 1, want.data() + t, v_stride);
      k.input(x.data(), x_stride, count, got.data(), v_stride);
      // F(2x2, 3x3): the same additions in the same order at every level, so equal bit for bit.
      const bool exact = tile == 2;
      int bad = 0;
      for (size_t i = 0; i < want.size(); ++i)  // |x| <= 1: transformed values are below 100
        bad += exact ? !(got[i] == want[i]) : !(std::fabs(double(got[i]) - want[i]) <= 100 * tol::kDwconv);
      CHECK_MSG(bad == 0, level + " input count=" + std::to_string(count) + ": " + std::to_string(bad) + " off");

      // Output: a clipped patch, with or without a residual, some activation.
      const int64_t m_stride = k.lanes + rng.below(5), y_stride = m_ * k.lanes + rng.below(7);
      std::vector<float> m(size_t(pos * m_stride + k.lanes)), res(size_t(m_ * y_stride));
      fill(m, rng);
      for (int64_t xi = 0; xi < pos; ++xi)  // lanes past count are read but not used
        for (int64_t t = count; t < m_stride; ++t) m[size_t(xi * m_stride + t)] = NAN;
      fill(res, rng);
      ds::WinogradOutput o;
      o.bias = rng.uniform(-1, 1);
      o.residual = rng.below(2) ? res.data() : nullptr;
      o.residual_stride = y_stride;
      o.act = int32_t((count + rep) % 8);  // every code at every count parity
      o.alpha = act_alpha(o.act), o.beta = 0.5f;
      o.rows = 1 + rng.below(uint32_t(m_));
      o.cols = 1 + rng.below(uint32_t(m_ * count));
      for (int64_t r = 0; r < m_; ++r)  // nor residual columns past the patch
        for (int64_t q = o.cols; q < y_stride; ++q) res[size_t(r * y_stride + q)] = NAN;
      std::vector<float> ywant(size_t(m_ * y_stride), kGuard), ygot(ywant.size(), kGuard);
      for (int64_t t = 0; t < count; ++t) {
        ds::WinogradOutput ot = o;
        ot.cols = std::min<int64_t>(m_, o.cols - m_ * t);
        if (ot.cols <= 0) break;
        if (o.residual) ot.residual = res.data() + m_ * t;
        ref.output(m.data() + t, m_stride, 1, ot, ywant.data() + m_ * t, y_stride);
      }
      k.output(m.data(), m_stride, count, o, ygot.data(), y_stride);
      bad = 0;
      const bool exact_out = exact && o.act != 5 && o.act != 6;  // 5 and 6 fuse multiply-adds
      for (size_t i = 0; i < ywant.size(); ++i)  // |m| <= 1: sums of at most 36 * 64 |m|, plus 2
        bad += exact_out ? !(ygot[i] == ywant[i])
                         : !(std::fabs(double(ygot[i]) - ywant[i]) <=
                             2400 * tol::kDwconv + tol::kActivationUlps * FLT_EPSILON * std::fabs(ywant[i]));
      CHECK_MSG(bad == 0, level + " output count=" + std::to_string(count) + " rows=" + std::to_string(o.rows) +
                              " cols=" + std::to_string(o.cols) + " act=" + std::to_string(o.act) + ": " +
                              std::to_string(bad) + " off");
      ++cases;
    }
  CHECK(cases >= 8);
}

}  // namespace

// One tile, one channel: A^T [(G g G^T) .* (B^T d B)] A is the m x m correlation of d with g.
void check_correlation(int tile) {
  tiny::Rng rng(5);
  const ds::WinogradKernels& ref = scalar_kernels(tile);
  const int win = ref.window(), pos = ref.positions();
  for (int rep = 0; rep < 20; ++rep) {
    const size_t npos = size_t(pos);
    std::vector<float> d(size_t(win * win + 16)), g(9), u(npos), v(npos), y(size_t(tile * tile), kGuard);
    fill(d, rng);
    fill(g, rng);
    ref.filter(g.data(), u.data(), 1);
    ref.input(d.data(), win, 1, v.data(), 1);
    std::vector<float> m(npos + 1);
    for (int xi = 0; xi < pos; ++xi) m[size_t(xi)] = u[size_t(xi)] * v[size_t(xi)];
    ds::WinogradOutput o;
    o.bias = 0.25f;
    o.rows = o.cols = tile;
    ref.output(m.data(), 1, 1, o, y.data(), tile);
    int bad = 0;
    for (int r = 0; r < tile; ++r)
      for (int c = 0; c < tile; ++c) {
        double want = 0.25;
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) want += double(d[size_t((r + ky) * win + c + kx)]) * g[size_t(ky * 3 + kx)];
        bad += !(std::fabs(y[size_t(r * tile + c)] - want) <= tol::kWinograd * 10);
      }
    CHECK_MSG(bad == 0, "F(" + std::to_string(tile) + ",3) rep " + std::to_string(rep) + ": " + std::to_string(bad) +
                            " of " + std::to_string(tile * tile) + " off");
  }
}

TEST(winograd_transforms_compute_a_3x3_correlation) { check_correlation(4); }
TEST(winograd23_transforms_compute_a_3x3_correlation) { check_correlation(2); }
TEST(winograd_avx2_matches_scalar) { check_level(ds::Isa::kAvx2, 4); }
TEST(winograd_avx512_matches_scalar) { check_level(ds::Isa::kAvx512, 4); }
TEST(winograd23_avx2_matches_scalar) { check_level(ds::Isa::kAvx2, 2); }
TEST(winograd23_avx512_matches_scalar) { check_level(ds::Isa::kAvx512, 2); }
