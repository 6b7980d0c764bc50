// The SIMD max pooling kernels against the scalar reference, bit for bit (max is exact), at every
// level this machine runs: the 2x2 s2 / 3x3 s2 / 3x3 s3 path (every width 1..110, so strips below,
// at and above one vector and the column one past a full strip; heights through the bands of 4
// and 2 output rows and their remainders; every pad, asymmetric pads, ceil mode), the general path
// (strides 1 and 2 with dilation or other windows, strides 3-5, long rows), widths around the
// vector (7, 8, 9, 15, 16, 17, 33).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "harness.h"
#include "kernels/kernels.h"
#include "tiny_net.h"

namespace {

int64_t out_size(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d, bool ceil) {
  const int64_t span = in + pb + pe - d * (k - 1) - 1;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pb) --out;
  return out;
}

void check(const ds::Pool2dParams& p, tiny::Rng& rng, const std::string& what, int* ran) {
  std::vector<float> x(size_t(p.n * p.c * p.h * p.w));
  for (float& v : x) v = rng.uniform(-1, 1) - (rng.below(8) == 0 ? 100.0f : 0.0f);  // all negative in places
  std::vector<float> want(size_t(p.n * p.c * p.oh * p.ow)), got(want.size() + 1, 7.0f);
  ds::ds_f32_maxpool2d__scalar(p, x.data(), want.data());
  // Through the dispatch tables, so this builds on every architecture (levels it lacks are skipped).
  for (ds::Isa isa : {ds::Isa::kAvx2, ds::Isa::kAvx512}) {
    if (!ds::isa_available(isa)) continue;
    ++*ran;
    got.assign(want.size() + 1, 7.0f);
    ds::kernels_for(isa).maxpool2d(p, x.data(), got.data());
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
    CHECK_MSG(bad == 0, what + " " + ds::isa_name(isa) + ": " + std::to_string(bad) + " differ");
    CHECK_MSG(got.back() == 7.0f, what + " " + ds::isa_name(isa) + ": wrote past the output");
  }
}

ds::Pool2dParams make(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, int64_t pad, int64_t dil,
                      bool ceil) {
  ds::Pool2dParams p{};
  p.n = n, p.c = c, p.h = h, p.w = w;
  p.kh = p.kw = k;
  p.stride_h = p.stride_w = s;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  p.dil_h = p.dil_w = dil;
  p.oh = out_size(h, pad, pad, k, s, dil, ceil);
  p.ow = out_size(w, pad, pad, k, s, dil, ceil);
  p.count_include_pad = false;
  return p;
}

}  // namespace

TEST(maxpool2d_simd_matches_reference) {
  tiny::Rng rng(5);
  int ran = 0;
  for (int64_t w : {1, 2, 7, 8, 9, 15, 16, 17, 33, 56, 112})
    for (int64_t s : {1, 2, 3})
      for (int64_t k : {2, 3})
        for (int64_t pad : {0, 1}) {
          if (pad >= k || w + 2 * pad < k) continue;
          for (bool ceil : {false, true}) {
            const ds::Pool2dParams p = make(1, 2, 5 + w % 4, w, k, s, pad, 1, ceil);
            if (p.oh < 1 || p.ow < 1) continue;
            check(p, rng, "w" + std::to_string(w) + " s" + std::to_string(s) + " k" + std::to_string(k) + " pad" +
                              std::to_string(pad) + (ceil ? " ceil" : ""), &ran);
          }
        }
  check(make(2, 3, 11, 13, 3, 2, 1, 2, false), rng, "dilation 2", &ran);
  check(make(1, 1, 9, 40, 5, 1, 2, 1, false), rng, "5x5 s1", &ran);
  for (int r = 0; r < 40; ++r) {
    const int64_t k = 1 + rng.below(4), s = 1 + rng.below(2), pad = rng.below(unsigned(k));
    const int64_t h = k + rng.below(20), w = k + rng.below(70);
    const ds::Pool2dParams p = make(1 + rng.below(2), 1 + rng.below(3), h, w, k, s, pad, 1, rng.below(2) == 1);
    if (p.oh < 1 || p.ow < 1) continue;
    check(p, rng, "random " + std::to_string(r), &ran);
  }
  // Strides 3-5 with pads, and rows longer than the kernels' row buffer (2048 floats): the output
  // columns go in several chunks; a window wider than half the buffer takes the scalar path.
  for (int64_t s : {3, 4, 5}) check(make(1, 2, 12, 37, 3, s, 1, 1, true), rng, "s" + std::to_string(s), &ran);
  check(make(1, 1, 3, 4500, 3, 1, 1, 1, false), rng, "long row s1", &ran);
  check(make(1, 1, 3, 4500, 2, 2, 0, 1, true), rng, "long row s2", &ran);
  check(make(1, 1, 4, 7000, 3, 3, 1, 2, false), rng, "long row s3 dilation 2", &ran);
  ds::Pool2dParams wide = make(1, 1, 2, 2600, 1, 7, 0, 1, false);
  wide.kw = 1100;
  wide.ow = out_size(wide.w, 0, 0, wide.kw, 7, 1, false);
  check(wide, rng, "window wider than the buffer", &ran);
  if (ran == 0) SKIP("no SIMD level on this machine");
}

TEST(maxpool2d_strided_matches_reference) {
  tiny::Rng rng(11);
  int ran = 0;
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {3, 3}})
    for (int64_t w = 1; w <= 110; ++w)
      for (int64_t pad = 0; pad < k; ++pad)
        for (bool ceil : {false, true}) {
          if (w + 2 * pad < k) continue;
          const int64_t h = k + rng.below(unsigned(7 * s));  // 1 .. 8 output rows: bands of 4, 2, 1
          const ds::Pool2dParams p = make(1, 1 + rng.below(3), h, w, k, s, pad, 1, ceil);
          if (p.oh < 1 || p.ow < 1) continue;
          check(p, rng, "s" + std::to_string(s) + " k" + std::to_string(k) + " w" + std::to_string(w) + " h" +
                            std::to_string(h) + " pad" + std::to_string(pad) + (ceil ? " ceil" : ""), &ran);
        }
  // Asymmetric pads (as an ONNX model may give them): top/left and bottom/right differ.
  for (int r = 0; r < 90; ++r) {
    const int64_t k = 2 + rng.below(2), s = k == 3 ? 2 + rng.below(2) : 2;
    const int64_t w = k + rng.below(100), h = k + rng.below(20);
    ds::Pool2dParams p = make(1, 1 + rng.below(2), h, w, k, s, 0, 1, false);
    p.pad_top = rng.below(unsigned(k)), p.pad_left = rng.below(unsigned(k));
    p.pad_bottom = rng.below(unsigned(k)), p.pad_right = rng.below(unsigned(k));
    p.oh = out_size(h, p.pad_top, p.pad_bottom, k, s, 1, rng.below(2) == 1);
    p.ow = out_size(w, p.pad_left, p.pad_right, k, s, 1, rng.below(2) == 1);
    if (p.oh < 1 || p.ow < 1) continue;
    check(p, rng, "asymmetric pads " + std::to_string(r), &ran);
  }
  check(make(1, 3, 112, 112, 3, 2, 1, 1, false), rng, "resnet18 stem", &ran);
  check(make(1, 3, 36, 36, 3, 3, 0, 1, false), rng, "facenet1m pool2", &ran);
  // 1500 and 1000 output columns: the strided path at AVX-512 (up to 128 strips), the general one
  // at AVX2.
  check(make(1, 1, 7, 3001, 3, 2, 1, 1, true), rng, "long row 3x3 s2", &ran);
  check(make(1, 1, 7, 3001, 3, 3, 0, 1, true), rng, "long row 3x3 s3", &ran);
  check(make(1, 3, 111, 111, 3, 2, 0, 1, true), rng, "squeezenet pool1", &ran);
  if (ran == 0) SKIP("no SIMD level on this machine");
}
