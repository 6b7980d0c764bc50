// Depthwise 3x3 of every ISA level that has its own kernel against the scalar reference: planes
// from 1x1 up, widths around the 16-lane vector (15, 16, 17, 33) and past a stride-2 strip of 128
// outputs (261), stride 1 and 2, pads 0 and 1, every activation code, 1-3 planes per call with and
// without bias; then small planes (the AVX-512 flat path: up to 8 vectors of output) with every
// padding 0..2 on each side; then every narrow shape (widths 1..20 and a few more, heights 1..9 and
// 14-17, each side's padding 0 or 1). Every call of every level, the scalar reference's too, runs
// twice: with the input, weights, bias and output each ending right before an inaccessible page,
// then each starting right after one, so that a read or write just outside an operand faults.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "guarded_floats.h"
#include "harness.h"
#include "kernel_tolerances.h"
#include "tiny_net.h"

namespace {

// `fn` on copies of the operands placed against a guard page on `side`; the output, whose
// elements start at -7.
std::vector<float> run_guarded(ds::DwConv3x3Fn fn, const ds::DwConv3x3Params& p, int64_t planes,
                               const std::vector<float>& x, const std::vector<float>& wt,
                               const std::vector<float>* bias, guarded::Guard side, const std::string& what) {
  guarded::set_case(what + (side == guarded::Guard::kAfter ? ", guard pages after" : ", guard pages before"));
  const guarded::Floats gx(x, side), gw(wt, side), gb(bias ? *bias : std::vector<float>(), side);
  guarded::Floats gy(std::vector<float>(size_t(p.oh * p.ow * planes), -7.0f), side);
  fn(p, planes, gx.data(), gw.data(), bias ? gb.data() : nullptr, gy.data());
  return gy.vector();
}

// Calls of `fn` on `planes` random planes against the reference, with each operand against a
// guard page after its end, then before its start (an access outside them faults); false when an
// output is off.
bool matches(ds::DwConv3x3Fn fn, const ds::DwConv3x3Params& p, int64_t planes, bool with_bias, tiny::Rng& rng,
             const std::string& what) {
  const size_t in = size_t(p.h * p.w);
  std::vector<float> x(in * planes), wt(9 * planes), bias(planes);
  for (float& v : x) v = rng.uniform(-1, 1);
  for (float& v : wt) v = rng.uniform(-1, 1);
  for (float& v : bias) v = rng.uniform(-1, 1);
  const std::vector<float>* b = with_bias ? &bias : nullptr;
  const std::vector<float> want = run_guarded(ds::ds_f32_dwconv3x3__scalar, p, planes, x, wt, b, guarded::Guard::kAfter,
                                                  "scalar reference for " + what);
  if (run_guarded(ds::ds_f32_dwconv3x3__scalar, p, planes, x, wt, b, guarded::Guard::kBefore,
                  "scalar reference for " + what) != want)
    return false;
  for (guarded::Guard side : {guarded::Guard::kAfter, guarded::Guard::kBefore}) {
    const std::vector<float> got = run_guarded(fn, p, planes, x, wt, b, side, what);
    for (size_t i = 0; i < want.size(); ++i) {
      // |x|, |w| <= 1: the sum's magnitude is at most 9 + |bias|.
      const double allowed = tol::kDwconv * 10 + tol::kActivationUlps * FLT_EPSILON * std::fabs(want[i]);
      if (!(std::fabs(double(got[i]) - want[i]) <= allowed)) return false;
    }
  }
  return true;
}

void random_act(ds::DwConv3x3Params& p, tiny::Rng& rng) {
  p.act = int32_t(rng.below(8));
  p.alpha = p.act == 2 ? -0.5f : p.act == 5 ? 0.2f : 0.1f;
  p.beta = 0.5f;
}

std::string describe(ds::Isa isa, const ds::DwConv3x3Params& p, int64_t planes) {
  return std::string(ds::isa_name(isa)) + " h=" + std::to_string(p.h) + " w=" + std::to_string(p.w) +
         " oh=" + std::to_string(p.oh) + " ow=" + std::to_string(p.ow) + " stride=" + std::to_string(p.stride) +
         " pad=" + std::to_string(p.pad_top) + "," + std::to_string(p.pad_left) + " act=" + std::to_string(p.act) +
         " planes=" + std::to_string(planes);
}

void check_level(ds::Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const ds::DwConv3x3Fn fn = ds::kernels_for(isa).dwconv3x3;
  tiny::Rng rng(21);
  const int64_t sizes[] = {1, 2, 3, 5, 7, 15, 16, 17, 31, 33, 40, 67, 261};
  int cases = 0;
  for (int64_t h : sizes)
    for (int64_t w : sizes)
      for (int64_t stride = 1; stride <= 2; ++stride)
        for (int64_t pad = 0; pad <= 1; ++pad) {
          ds::DwConv3x3Params p;
          p.h = h, p.w = w, p.stride = stride, p.pad_top = pad, p.pad_left = pad;
          p.oh = (h + 2 * pad - 3) / stride + 1;
          p.ow = (w + 2 * pad - 3) / stride + 1;
          if (h + 2 * pad < 3 || w + 2 * pad < 3) continue;
          random_act(p, rng);
          const int64_t planes = 1 + int64_t(rng.below(3));
          const std::string what = describe(isa, p, planes);
          CHECK_MSG(matches(fn, p, planes, rng.below(4) != 0, rng, what), what);
          ++cases;
        }
  CHECK(cases > 300);
  // Small planes (the flat stride-1 path) and every padding 0..2 on each side, stride 1 and 2.
  const int64_t small[] = {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 14, 16};
  for (int64_t h : small)
    for (int64_t w : small)
      for (int64_t stride = 1; stride <= 2; ++stride)
        for (int64_t pt = 0; pt <= 2; ++pt)
          for (int64_t pb = 0; pb <= 2; ++pb) {
            const int64_t pl = int64_t(rng.below(3)), pr = int64_t(rng.below(3));
            if (h + pt + pb < 3 || w + pl + pr < 3) continue;
            ds::DwConv3x3Params p;
            p.h = h, p.w = w, p.stride = stride, p.pad_top = pt, p.pad_left = pl;
            p.oh = (h + pt + pb - 3) / stride + 1;
            p.ow = (w + pl + pr - 3) / stride + 1;
            random_act(p, rng);
            const int64_t planes = 1 + int64_t(rng.below(4));
            const std::string what = describe(isa, p, planes);
          CHECK_MSG(matches(fn, p, planes, rng.below(4) != 0, rng, what), what);
          }
}

// Every narrow shape around the 8-lane blocks of the AVX2 kernel (left and right edge blocks, the
// last block moved left to end at the row's end, rows narrower than 8, 16-column blocks with an
// edge block after them): widths 1..20 and a few past 16-column blocks, heights 1..9, 14, 16 and 17
// (the AVX2 padded-scratch planes go up to 16), padding 0 or 1 on each side independently, stride 1
// and 2, every activation code.
void check_edges(ds::Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const ds::DwConv3x3Fn fn = ds::kernels_for(isa).dwconv3x3;
  tiny::Rng rng(77);
  std::vector<int64_t> widths;
  for (int64_t w = 1; w <= 20; ++w) widths.push_back(w);
  for (int64_t w : {23, 24, 25, 26, 31, 33, 34, 35, 40, 47, 57}) widths.push_back(w);
  int cases = 0;
  for (int64_t h : {1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 16, 17})
    for (int64_t w : widths)
      for (int64_t stride = 1; stride <= 2; ++stride)
        for (int pads = 0; pads < 16; ++pads) {
          const int64_t pt = pads & 1, pb = (pads >> 1) & 1, pl = (pads >> 2) & 1, pr = (pads >> 3) & 1;
          if (h + pt + pb < 3 || w + pl + pr < 3) continue;
          ds::DwConv3x3Params p;
          p.h = h, p.w = w, p.stride = stride, p.pad_top = pt, p.pad_left = pl;
          p.oh = (h + pt + pb - 3) / stride + 1;
          p.ow = (w + pl + pr - 3) / stride + 1;
          p.act = int32_t(cases % 8);
          p.alpha = p.act == 2 ? -0.5f : p.act == 5 ? 0.2f : 0.1f;
          p.beta = 0.5f;
          const int64_t planes = 1 + cases % 2;
          const std::string what = describe(isa, p, planes);
          CHECK_MSG(matches(fn, p, planes, cases % 3 != 0, rng, what), what);
          ++cases;
        }
  CHECK(cases > 3000);
}

}  // namespace

TEST(dwconv3x3_reference_on_known_values) {
  // 3x3 input 1..9, all-ones weights, pad 1, stride 2: outputs at (0,0), (0,2), (2,0), (2,2) sum the
  // 2x2 corner blocks: 1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9; bias 1; relu.
  const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const float w[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  ds::DwConv3x3Params p;
  p.h = p.w = 3, p.oh = p.ow = 2, p.stride = 2, p.pad_top = p.pad_left = 1, p.act = 1;
  float y[4];
  const float one = 1.0f;
  ds::ds_f32_dwconv3x3__scalar(p, 1, x, w, &one, y);
  CHECK_NEAR(y[0], 13, 0);
  CHECK_NEAR(y[1], 17, 0);
  CHECK_NEAR(y[2], 25, 0);
  CHECK_NEAR(y[3], 29, 0);
}

// Bands of output rows (ds::dwconv3x3_rows) into an output with a wider plane stride, as conv2d's
// fused depthwise -> 1x1 runs them: bit for bit the whole-plane call of the same level.
void check_bands(ds::Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const ds::DwConv3x3Fn fn = ds::kernels_for(isa).dwconv3x3;
  tiny::Rng rng(5);
  const int64_t sizes[] = {1, 2, 3, 7, 9, 14, 16, 17, 31, 56, 57, 112};
  int cases = 0;
  for (int64_t h : sizes)
    for (int64_t w : sizes)
      for (int64_t stride = 1; stride <= 2; ++stride)
        for (int64_t pad = 0; pad <= 1; ++pad) {
          if (h + 2 * pad < 3 || w + 2 * pad < 3) continue;
          ds::DwConv3x3Params p;
          p.h = h, p.w = w, p.stride = stride, p.pad_top = pad, p.pad_left = pad;
          p.oh = (h + 2 * pad - 3) / stride + 1;
          p.ow = (w + 2 * pad - 3) / stride + 1;
          random_act(p, rng);
          const int64_t planes = 1 + int64_t(rng.below(3)), rows = 1 + int64_t(rng.below(10));
          const int64_t in = h * w, out = p.oh * p.ow, band = rows * p.ow + int64_t(rng.below(20));
          std::vector<float> x(size_t(in * planes)), wt(size_t(9 * planes)), bias(static_cast<size_t>(planes));
          for (float& v : x) v = rng.uniform(-1, 1);
          for (float& v : wt) v = rng.uniform(-1, 1);
          for (float& v : bias) v = rng.uniform(-1, 1);
          std::vector<float> want(size_t(out * planes)), got(size_t(band * planes), -7.0f);
          fn(p, planes, x.data(), wt.data(), bias.data(), want.data());
          bool same = true;
          for (int64_t r0 = 0; r0 < p.oh; r0 += rows) {
            const int64_t r1 = std::min(p.oh, r0 + rows);
            int64_t xo = 0, yo = 0;
            ds::DwConv3x3Params q = ds::dwconv3x3_rows(p, r0, r1, &xo, &yo);
            q.y_plane = band;
            std::fill(got.begin(), got.end(), -7.0f);
            fn(q, planes, x.data() + xo, wt.data(), bias.data(), got.data());
            for (int64_t c = 0; c < planes; ++c)
              for (int64_t i = 0; i < (r1 - r0) * p.ow; ++i)
                same = same && got[size_t(c * band + i)] == want[size_t(c * out + yo + i)];
            for (int64_t c = 0; c < planes; ++c)  // nothing written past the band's rows
              for (int64_t i = (r1 - r0) * p.ow; i < band; ++i) same = same && got[size_t(c * band + i)] == -7.0f;
          }
          CHECK_MSG(same, describe(isa, p, planes) + " rows=" + std::to_string(rows));
          ++cases;
        }
  CHECK(cases > 300);
}

TEST(dwconv3x3_scalar_bands_match_whole_planes) { check_bands(ds::Isa::kScalar); }
TEST(dwconv3x3_avx2_bands_match_whole_planes) { check_bands(ds::Isa::kAvx2); }
TEST(dwconv3x3_avx512_bands_match_whole_planes) { check_bands(ds::Isa::kAvx512); }

TEST(dwconv3x3_avx2_matches_reference) { check_level(ds::Isa::kAvx2); }
TEST(dwconv3x3_avx512_matches_reference) { check_level(ds::Isa::kAvx512); }
TEST(dwconv3x3_avx2_edges_match_reference) { check_edges(ds::Isa::kAvx2); }
TEST(dwconv3x3_avx512_edges_match_reference) { check_edges(ds::Isa::kAvx512); }
