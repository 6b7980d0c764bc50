// The prepared conv2d and dense paths (packed-weight GEMM, strided 1x1 gather, im2col blocks from
// column phases, pixels-as-rows GEMM from a padded plane, depthwise 3x3) through the C API at every ISA level this machine runs (DS_FORCE_ISA) and 1, 2
// and 3 threads, against plain double loops: pointwise, strided, padded, dilated, grouped, depthwise, tile edges around
// mr/nr, K past the GEMM's kc, more columns than one im2col block. Results must not depend on the
// thread count (bitwise), and a weight that is not a constant falls back to the reference kernel.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/dispatch.h"
#include "core/model.h"
#include "core/session.h"
#include "harness.h"
#include "kernel_tolerances.h"
#include "op_runner.h"

using opt::Dims;

namespace {

const char* const kIsas[] = {"scalar", "avx2", "avx512"};

struct Run {
  ds_status status = DS_OK;
  std::string error;
  std::vector<float> y;
  std::string kernel;  // the conv node's (node 0)
};

Run run_with(const dsw::File& f, const std::vector<std::vector<float>>& xs, const std::vector<Dims>& shapes,
             const char* isa, int threads) {
  Run r;
  setenv("DS_FORCE_ISA", isa, 1);
  const dsw::Bytes bytes = dsw::serialize(f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  ds_session_options o = DS_SESSION_OPTIONS_INIT;
  o.threads = threads;
  r.status = ds_model_load_memory(bytes.data(), bytes.size(), &m);
  if (r.status == DS_OK) r.status = ds_session_create(m, &o, &s);
  const char* kernel = nullptr;
  const char* choices = nullptr;
  if (r.status == DS_OK && ds_session_node_kernel(s, 0, &kernel, &choices) == DS_OK && kernel) r.kernel = kernel;
  for (size_t i = 0; r.status == DS_OK && i < xs.size(); ++i)
    r.status = ds_session_set_input(s, i, xs[i].data(), shapes[i].data(), shapes[i].size());
  if (r.status == DS_OK) r.status = ds_session_run(s);
  size_t rank = 0;
  const int64_t* dims = nullptr;
  if (r.status == DS_OK) r.status = ds_session_output_shape(s, 0, &rank, &dims);
  if (r.status == DS_OK) {
    r.y.resize(opt::count(Dims(dims, dims + rank)));
    r.status = ds_session_get_output(s, 0, r.y.data(), r.y.size());
  }
  if (r.status != DS_OK) r.error = ds_last_error();
  ds_session_free(s);
  ds_model_free(m);
  unsetenv("DS_FORCE_ISA");
  return r;
}

// act_alpha, act_beta used with each activation code.
double act_alpha(int act) { return act == 3 ? 0.1 : act == 5 ? 0.2 : 0.0; }
double act_beta(int act) { return act == 2 ? 6.0 : act == 5 ? 0.5 : 0.0; }
std::vector<dsw::Attr> act_attrs(int act) {
  return {dsw::attr_int("activation", act), opt::attr_float("act_alpha", float(act_alpha(act))),
          opt::attr_float("act_beta", float(act_beta(act)))};
}

bool isa_missing(const Run& r) {
  return r.status == DS_ERR_INVALID_ARG && r.error.find("DS_FORCE_ISA") != std::string::npos;
}

struct Conv {
  int64_t n, c, h, w, o, kh, kw, sh, sw, dh, dw, group;
  int64_t pads[4];
  bool bias;
  int act;
};

int64_t out_size(int64_t in, int64_t pb, int64_t pe, int64_t k, int64_t s, int64_t d) {
  return (in + pb + pe - d * (k - 1) - 1) / s + 1;
}

// Reference value and the magnitude it is built from (sum |x*w| + |bias|), per output element.
void conv_reference(const Conv& p, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, std::vector<double>* y, std::vector<double>* mag) {
  const int64_t oh = out_size(p.h, p.pads[0], p.pads[2], p.kh, p.sh, p.dh);
  const int64_t ow = out_size(p.w, p.pads[1], p.pads[3], p.kw, p.sw, p.dw);
  const int64_t cg = p.c / p.group, og = p.o / p.group;
  y->assign(size_t(p.n * p.o * oh * ow), 0.0);
  mag->assign(y->size(), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t oc = 0; oc < p.o; ++oc)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = p.bias ? b[size_t(oc)] : 0.0, m = std::fabs(acc);
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t iy = oy * p.sh - p.pads[0] + ky * p.dh, ix = ox * p.sw - p.pads[1] + kx * p.dw;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                const double v = double(x[size_t(((n * p.c + (oc / og) * cg + ic) * p.h + iy) * p.w + ix)]) *
                                 w[size_t(((oc * cg + ic) * p.kh + ky) * p.kw + kx)];
                acc += v;
                m += std::fabs(v);
              }
          const size_t i = size_t(((n * p.o + oc) * oh + oy) * ow + ox);
          (*y)[i] = opt::activate(p.act, acc, double(float(act_alpha(p.act))), act_beta(p.act));
          (*mag)[i] = m;
        }
}

bool close(float got, double want, double mag, double tolerance = tol::kGemm) {
  return std::fabs(double(got) - want) <= tolerance * mag + 4 * 1.2e-7 * std::fabs(want) + 1e-30;
}

dsw::File conv_file(const Conv& p, const std::vector<float>& w, const std::vector<float>& b, bool weight_input) {
  const std::vector<uint64_t> wd = {uint64_t(p.o), uint64_t(p.c / p.group), uint64_t(p.kh), uint64_t(p.kw)};
  std::vector<dsw::Attr> attrs = {dsw::attr_ints("strides", {p.sh, p.sw}),
                                  dsw::attr_ints("pads", {p.pads[0], p.pads[1], p.pads[2], p.pads[3]}),
                                  dsw::attr_ints("dilations", {p.dh, p.dw}), dsw::attr_int("group", p.group)};
  for (const dsw::Attr& a : act_attrs(p.act)) attrs.push_back(a);
  std::vector<dsw::Tensor> consts;
  std::vector<Dims> inputs = {{-1, p.c, p.h, p.w}};
  if (weight_input) inputs.push_back(Dims(wd.begin(), wd.end()));
  else consts.push_back(dsw::dense_tensor("w", wd, w));
  if (p.bias) consts.push_back(dsw::dense_tensor("b", {uint64_t(p.o)}, b));
  return opt::one_node(1, inputs, std::move(consts), attrs);
}

// Every ISA level and thread count against the double reference; bitwise equal across threads.
// With `kernel`, the conv must run that kernel.
void check_conv(const Conv& p, tiny::Rng& rng, const std::string& what, double tolerance = tol::kGemm,
                const std::string& kernel = "") {
  const std::vector<float> x = opt::random_vec(rng, size_t(p.n * p.c * p.h * p.w));
  const std::vector<float> w = opt::random_vec(rng, size_t(p.o * (p.c / p.group) * p.kh * p.kw));
  const std::vector<float> b = opt::random_vec(rng, size_t(p.o));
  std::vector<double> want, mag;
  conv_reference(p, x, w, b, &want, &mag);
  const dsw::File f = conv_file(p, w, b, false);
  for (const char* isa : kIsas) {
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      const Run r = run_with(f, {x}, {{p.n, p.c, p.h, p.w}}, isa, threads);
      if (isa_missing(r)) break;
      REQUIRE_MSG(r.status == DS_OK, what + " " + isa + ": " + r.error);
      REQUIRE_MSG(r.y.size() == want.size(), what);
      CHECK_MSG(kernel.empty() || r.kernel == kernel || r.kernel == "depthwise3x3",  // 1 -> 1 channel: depthwise
                what + " " + isa + " ran '" + r.kernel + "', not " + kernel);
      size_t bad = 0;
      double worst = 0;  // largest error over the magnitude, reported on failure
      for (size_t i = 0; i < want.size(); ++i) {
        bad += !close(r.y[i], want[i], mag[i], tolerance);
        worst = std::max(worst, std::fabs(double(r.y[i]) - want[i]) / (mag[i] + 1e-30));
      }
      CHECK_MSG(bad == 0, what + " " + isa + " threads " + std::to_string(threads) + ": " + std::to_string(bad) +
                              " of " + std::to_string(want.size()) + " outside the tolerance (worst " +
                              std::to_string(worst) + " of the magnitude)");
      if (threads == 1) first = r.y;
      else CHECK_MSG(r.y == first, what + " " + isa + ": threads " + std::to_string(threads) + " differ from 1");
    }
  }
}

}  // namespace

TEST(conv2d_paths_match_reference_at_every_level) {
  setenv("DS_CONV_WINOGRAD", "0", 1);  // the GEMM paths; Winograd has its own test
  tiny::Rng rng(7);
  //            n  c   h   w   o  kh kw sh sw dh dw  g  pads           bias  act
  const Conv cases[] = {
      {1, 16, 9, 11, 24, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},     // pointwise: GEMM on the plane
      {2, 5, 13, 7, 13, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, 0},    // pointwise, batch 2, m = mr + 1
      {1, 8, 10, 10, 12, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, true, 0},    // 1x1 stride 2: gather + GEMM
      {2, 7, 13, 11, 29, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, false, 1},   // 1x1 s2, odd sizes, batch 2
      {1, 9, 17, 23, 14, 1, 1, 3, 2, 1, 1, 1, {0, 0, 0, 0}, true, 6},    // 1x1, strides 3 and 2
      {1, 6, 9, 14, 8, 1, 1, 1, 3, 1, 1, 2, {0, 0, 0, 0}, true, 2},      // 1x1, strides 1 and 3, 2 groups
      {1, 5, 11, 10, 7, 1, 1, 2, 2, 1, 1, 1, {1, 0, 0, 1}, true, 0},     // 1x1 s2 padded: im2col
      {1, 3, 17, 19, 25, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 2},    // 3x3 pad 1, clip
      {1, 6, 15, 16, 11, 3, 3, 2, 2, 1, 1, 1, {1, 1, 0, 0}, true, 3},    // stride 2, asymmetric pads
      {1, 3, 23, 21, 16, 7, 7, 2, 2, 1, 1, 1, {3, 3, 3, 3}, true, 1},    // a stem: 7x7 s2 p3
      {1, 4, 14, 12, 5, 5, 3, 1, 2, 2, 1, 1, {2, 0, 1, 3}, false, 6},    // dilation, mixed strides
      {1, 8, 9, 9, 6, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, true, 5},       // groups
      {1, 300, 4, 5, 7, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 0},     // K = 2700, past kc; n = 20
      {1, 64, 6, 6, 130, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},    // m > n: rows split across threads
      {1, 2, 70, 66, 4, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, false, 0},    // 4620 columns: several blocks
      {2, 9, 5, 4, 40, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 3},      // pixels as rows, batch 2
      {1, 8, 4, 4, 40, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, true, 1},      // pixels as rows, 2 groups
      {1, 24, 7, 7, 70, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 6},     // pointwise, pixels as rows
      {1, 16, 8, 7, 64, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},     // pixels, windows inside the input
      {1, 10, 9, 8, 50, 3, 2, 2, 1, 2, 1, 1, {0, 0, 2, 1}, false, 0},    // pixels, pads at the end only
      {2, 12, 11, 13, 60, 3, 3, 2, 3, 1, 2, 3, {1, 2, 0, 1}, true, 3},   // pixels, strides, dilation, groups
      {1, 10, 12, 13, 10, 3, 3, 1, 1, 1, 1, 10, {1, 1, 1, 1}, true, 6},  // depthwise s1
      {2, 7, 17, 18, 7, 3, 3, 2, 2, 1, 1, 7, {1, 1, 1, 1}, true, 2},     // depthwise s2, batch 2
      {1, 6, 11, 9, 6, 3, 3, 2, 2, 1, 1, 6, {0, 0, 0, 0}, false, 4},     // depthwise s2 unpadded, sigmoid
      {1, 4, 8, 8, 8, 3, 3, 1, 1, 1, 1, 4, {1, 1, 1, 1}, true, 7},       // channel multiplier 2: GEMM
      {1, 5, 9, 9, 5, 3, 3, 1, 1, 2, 2, 5, {2, 2, 2, 2}, true, 0},       // dilated depthwise: reference
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},       // 1x1x1
      {1, 3, 40, 38, 20, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, true, 1},     // stem-like s2: implicit, row phases
      {1, 5, 37, 45, 13, 5, 3, 3, 2, 2, 1, 1, {2, 1, 0, 2}, false, 2},   // implicit, strides 3/2, dilation 2
      {1, 8, 20, 24, 12, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, true, 3},    // implicit, 2 groups
      // Large enough for the pool (small jobs run inline): im2col blocks, pointwise, pixels as
      // rows with a parallel im2col, depthwise planes.
      {1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},
      {1, 128, 30, 30, 128, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},
      {1, 64, 14, 14, 300, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},   // pointwise, 7 panels: rows split too
      {1, 3, 96, 96, 32, 3, 3, 2, 2, 1, 1, 1, {0, 0, 1, 1}, true, 6},     // implicit s2, split across threads
      {1, 64, 13, 13, 96, 1, 1, 1, 1, 1, 1, 2, {0, 0, 0, 0}, false, 6},  // pointwise, 2 groups, partial panel
      {1, 128, 33, 33, 256, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, true, 0},  // 1x1 s2, parallel gather
      {1, 200, 12, 12, 160, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 2},
      {1, 32, 60, 60, 32, 3, 3, 1, 1, 1, 1, 32, {1, 1, 1, 1}, true, 6},
      {1, 32, 121, 120, 32, 3, 3, 2, 2, 1, 1, 32, {1, 1, 1, 1}, false, 0},
      // Batches of at least as many images as threads: whole images per thread (uneven at 3).
      {4, 6, 15, 16, 11, 3, 3, 2, 2, 1, 1, 1, {1, 1, 0, 0}, true, 3},    // im2col
      {5, 9, 5, 4, 40, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},      // pixels as rows
      {4, 7, 13, 11, 29, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, false, 1},   // 1x1 s2
      {5, 16, 12, 13, 40, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 2},   // pointwise
      {3, 16, 41, 41, 48, 6, 6, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},   // FaceNet conv2, batch 3
      // Implicit im2col (stride 1, k >= 3m; AVX-512, AVX2): pads, dilation, groups, sigmoid and tanh
      // (the scalar pass), m = mr + 1 with columns split across threads.
      {1, 3, 17, 19, 5, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 2},
      {1, 4, 14, 16, 5, 3, 3, 1, 1, 2, 2, 1, {2, 2, 2, 2}, true, 4},
      {1, 8, 20, 22, 6, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, true, 7},
      {1, 16, 41, 41, 13, 6, 6, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, 1},
      {1, 1, 88, 88, 16, 7, 7, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},    // FaceNet conv1
      // Stride 1 without padding: the input read in place (dilation, 2 groups of 5, odd m).
      {1, 6, 23, 21, 10, 3, 3, 1, 1, 2, 1, 2, {0, 0, 0, 0}, true, 1},
      {2, 5, 18, 17, 7, 2, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, 0},
      // Rows of 8, 12, 14 outputs, wrapped (gemm_rows_wraps) instead of pixels as rows.
      {1, 48, 12, 12, 96, 5, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},  // FaceNet conv3, in place
      {2, 10, 14, 14, 24, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, true, 3},  // 14 wide, 2 groups, padded
      {1, 7, 16, 27, 9, 5, 4, 1, 2, 1, 1, 1, {0, 0, 0, 0}, false, 0},   // 12 wide, column stride 2
  };
  int i = 0;
  for (const Conv& p : cases) check_conv(p, rng, "case " + std::to_string(i++));
  // Every case again with pixels as rows forced on, then off (DS_CONV_PIXELS), so that each GEMM
  // path sees every shape: strides, dilations, pads, groups, batch 2.
  for (const char* pixels : {"1", "0"}) {
    setenv("DS_CONV_PIXELS", pixels, 1);
    i = 0;
    for (const Conv& p : cases) check_conv(p, rng, std::string("pixels=") + pixels + " case " + std::to_string(i++));
  }
  unsetenv("DS_CONV_PIXELS");
  // And with the implicit im2col off (DS_CONV_ROWS=0): its layers on the packed im2col.
  setenv("DS_CONV_ROWS", "0", 1);
  i = 0;
  for (const Conv& p : cases) check_conv(p, rng, "rows=0 case " + std::to_string(i++));
  unsetenv("DS_CONV_ROWS");
  for (int r = 0; r < 25; ++r) {  // random shapes
    Conv p;
    p.group = rng.below(4) == 0 ? 1 + rng.below(3) : 1;
    p.c = p.group * (1 + rng.below(12));
    p.o = p.group * (1 + rng.below(30));
    p.n = 1 + rng.below(2);
    p.kh = 1 + rng.below(5), p.kw = 1 + rng.below(5);
    p.sh = 1 + rng.below(3), p.sw = 1 + rng.below(3);
    p.dh = 1 + rng.below(2), p.dw = 1 + rng.below(2);
    for (int k = 0; k < 4; ++k) p.pads[k] = rng.below(3);
    p.h = p.dh * (p.kh - 1) + 1 + rng.below(30);
    p.w = p.dw * (p.kw - 1) + 1 + rng.below(30);
    p.bias = rng.below(2) == 0;
    p.act = int(rng.below(8));
    check_conv(p, rng, "random " + std::to_string(r));
  }
  unsetenv("DS_CONV_WINOGRAD");
}

// Layers either side of the AVX2 GEMM's gemm_rows bounds (GemmKernels, f32-gemm-6x16-avx2.cc; the
// AVX-512 level has none): the direct 1x1 reads the plane in place only while its weight (per
// group) is at most rows_a_floats = 64K floats, else it packs the plane (direct_1x1); the implicit
// im2col runs only while O/g x the distinct B rows of a panel is at most rows_reuse_limit = 16K,
// else the packed im2col (implicit_rows), and rows of 8, 12, 14 outputs go to pixels as rows past
// it (pixels_pay); an input of at most 16K floats per group is under it whatever O/g. Pixels as
// rows is off (DS_CONV_PIXELS=0) except in the last three, so that each layer takes the path its
// bound picks; every level runs them, against the same reference.
TEST(conv2d_gemm_rows_bounds_match_reference_at_every_level) {
  setenv("DS_CONV_WINOGRAD", "0", 1);
  setenv("DS_CONV_PIXELS", "0", 1);
  tiny::Rng rng(11);
  //            n  c   h   w   o  kh kw sh sw dh dw  g  pads           bias  act
  const Conv cases[] = {
      // Weight m x k against rows_a_floats (65536): the direct 1x1 at or under it, packed above.
      {1, 256, 9, 10, 256, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},    // 256 x 256 = 64K: direct
      {1, 256, 9, 10, 257, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},    // 257 x 256: packed
      {1, 255, 7, 9, 257, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, 6},    // 257 x 255 = 64K - 1: direct
      {1, 256, 8, 8, 512, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 2},     // 512 x 256 = 128K: packed
      {1, 256, 13, 13, 256, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, true, 1},   // 1x1 s2, 64K: direct
      {1, 256, 13, 13, 512, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, true, 0},   // 1x1 s2, 128K (ResNet-18): packed
      {1, 512, 6, 7, 512, 1, 1, 1, 1, 1, 1, 2, {0, 0, 0, 0}, true, 3},     // 2 groups of 256 x 256: direct
      {1, 512, 6, 7, 514, 1, 1, 1, 1, 1, 1, 2, {0, 0, 0, 0}, true, 1},     // 2 groups of 257 x 256: packed
      // O/g x distinct B rows against rows_reuse_limit (16384): implicit at or under it, packed above.
      {1, 64, 20, 21, 128, 2, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},   // 128 x 64*2 = 16K: in place
      {1, 64, 20, 21, 129, 2, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},   // 129 x 128: packed
      {1, 64, 19, 20, 128, 2, 2, 1, 1, 1, 1, 1, {1, 1, 0, 0}, false, 6},  // 16K, padded: implicit
      {1, 64, 19, 20, 129, 2, 2, 1, 1, 1, 1, 1, {1, 1, 0, 0}, false, 6},  // packed
      {1, 32, 40, 40, 85, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, true, 2},    // s2: 85 x 32*3*2 = 16320: implicit
      {1, 32, 40, 40, 86, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, true, 2},    // 86 x 192 = 16512: packed
      {1, 64, 13, 13, 85, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},    // 11 wide, compacted: 16320
      {1, 64, 13, 13, 86, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},    // 16512, input 10.8K floats: implicit
      {1, 64, 21, 13, 86, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},    // 16512, input 17.5K: packed
      {1, 128, 17, 18, 256, 2, 2, 1, 1, 1, 1, 2, {0, 0, 0, 0}, true, 3},  // 2 groups of 128 x 128: implicit
      {1, 128, 17, 18, 258, 2, 2, 1, 1, 1, 1, 2, {0, 0, 0, 0}, true, 3},  // 2 groups of 129 x 128: packed
  };
  int i = 0;
  for (const Conv& p : cases) check_conv(p, rng, "bounds case " + std::to_string(i++));
  unsetenv("DS_CONV_PIXELS");
  // Rows of 12 outputs: wrapped at 16K, pixels as rows past it (the rule's own choice), unless the
  // input is at most 16K floats (then wrapped past it too).
  const Conv rows12[] = {
      {1, 64, 21, 13, 128, 2, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},  // 16K: wrapped
      {1, 64, 21, 13, 129, 2, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},  // 16512, input 17.5K: pixels
      {1, 64, 13, 13, 129, 2, 2, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},  // input 10.8K: wrapped
  };
  for (const Conv& p : rows12) check_conv(p, rng, "bounds case " + std::to_string(i++));
  unsetenv("DS_CONV_WINOGRAD");
}

// Winograd F(4x4, 3x3) (DS_CONV_WINOGRAD=1) and F(2x2, 3x3) (=2) on every eligible shape: tile
// edges (H, W not multiples of the tile, smaller than it), odd C and O, pads 0-2, every
// activation, tile blocks or each block's steps split across threads, batch 2; kernels of 3x3
// pieces up to 9x9.
static void check_winograd(const char* mode) {
  setenv("DS_CONV_WINOGRAD", mode, 1);
  const bool f23 = std::string(mode) == "2";
  const std::string f = f23 ? "F(2,3) " : "F(4,3) ", kernel = f23 ? "winograd23" : "winograd";
  tiny::Rng rng(13);
  //            n  c   h   w   o  kh kw sh sw dh dw  g  pads           bias  act
  const Conv cases[] = {
      {1, 3, 17, 19, 25, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 2},
      {1, 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},       // one pixel
      {1, 2, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false, 0},      // one output pixel, no pads
      {2, 5, 9, 6, 7, 3, 3, 1, 1, 1, 1, 1, {2, 0, 1, 2}, true, 3},       // asymmetric pads, batch 2
      {1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},   // several blocks
      {1, 64, 6, 6, 130, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 4},    // one panel: split by tile position
      {1, 33, 57, 56, 17, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, false, 6},  // many tile rows, odd C and O
      {1, 300, 8, 9, 13, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 7},    // K past kc
      {1, 16, 30, 70, 24, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 5},   // tile rows longer than the lanes
      // Fewer panels than threads: the steps split by channels, tile positions and output
      // channels (SqueezeNet 1.1's 13x13 shape; 27x27 at 3 threads, C = 120 cuts its 2 panels
      // into 2 blocks).
      {1, 48, 13, 13, 192, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},
      {1, 32, 27, 27, 128, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},
      {2, 120, 27, 27, 40, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 2},
      // Enough panels: blocks cut down to single panels (7 at 55x55).
      {1, 16, 55, 55, 64, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},
      // Larger kernels as 3x3 pieces: exact (6x6, FaceNet-1M's conv2; 9x9; 3x6), with taps past
      // the kernel (4x4, 5x5, 7x7, 8x5), pads, one output pixel, few panels (split by tile
      // position), batch 2.
      {1, 16, 41, 41, 48, 6, 6, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},
      {2, 5, 23, 19, 9, 9, 9, 1, 1, 1, 1, 1, {1, 2, 0, 3}, true, 3},
      {1, 7, 14, 15, 11, 3, 6, 1, 1, 1, 1, 1, {1, 0, 2, 1}, false, 0},
      {1, 6, 12, 11, 5, 4, 4, 1, 1, 1, 1, 1, {2, 2, 2, 2}, true, 5},
      {1, 48, 12, 12, 96, 5, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},
      {1, 1, 30, 29, 16, 7, 7, 1, 1, 1, 1, 1, {3, 3, 3, 3}, true, 6},
      {1, 3, 8, 5, 130, 8, 5, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 7},
      {1, 2, 6, 6, 3, 6, 6, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},
      {1, 32, 18, 18, 64, 6, 6, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},
  };
  int i = 0;
  for (const Conv& p : cases) check_conv(p, rng, f + "winograd case " + std::to_string(i++), tol::kWinograd, kernel);
  // Random shapes: 3x3 (the first 20), then kernels up to 9x9 as pieces.
  for (int r = 0; r < 36; ++r) {
    Conv p = {1, 1, 1, 1, 1, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0};
    p.n = 1 + rng.below(2);
    p.c = 1 + rng.below(40), p.o = 1 + rng.below(40);
    if (r >= 20) p.kh = 3 + rng.below(7), p.kw = 3 + rng.below(7);
    for (int k = 0; k < 4; ++k) p.pads[k] = rng.below(3);
    p.h = p.kh + rng.below(30), p.w = p.kw + rng.below(30);
    p.bias = rng.below(2) == 0;
    p.act = int(rng.below(8));
    check_conv(p, rng,
               f + "winograd random " + std::to_string(r) + " (" + std::to_string(p.kh) + "x" + std::to_string(p.kw) +
                   ")",
               tol::kWinograd, kernel);
  }
  unsetenv("DS_CONV_WINOGRAD");
}

TEST(conv2d_winograd_matches_reference_at_every_level) { check_winograd("1"); }
TEST(conv2d_winograd23_matches_reference_at_every_level) { check_winograd("2"); }

// conv2d (no activation) -> add(conv, skip) with the add's activation, which the session runs as
// one conv2d with `skip` as the residual of its epilogue: every conv path, both operand orders,
// and graphs where the add must stay (the conv output is a graph output too; the conv has its own
// activation; the skip is computed after the conv).
enum class Fuse { kPlain, kSwapped, kConvIsOutput, kConvHasAct, kSkipAfter };

dsw::File residual_file(const Conv& p, const std::vector<float>& w, const std::vector<float>& b, int add_act,
                        Fuse how, bool weight_input) {
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, p.c, p.h, p.w});
  const uint32_t skip_in = f.add_value("skip_in", {-1, p.o, out_size(p.h, p.pads[0], p.pads[2], p.kh, p.sh, p.dh),
                                                    out_size(p.w, p.pads[1], p.pads[3], p.kw, p.sw, p.dw)});
  f.inputs = {x, skip_in};
  std::vector<uint32_t> conv_in = {x};
  const std::vector<uint64_t> wd = {uint64_t(p.o), uint64_t(p.c / p.group), uint64_t(p.kh), uint64_t(p.kw)};
  if (weight_input) {
    conv_in.push_back(f.add_value("w", Dims(wd.begin(), wd.end())));
    f.inputs.push_back(conv_in.back());
  } else {
    conv_in.push_back(f.add_constant(dsw::dense_tensor("w", wd, w)));
  }
  if (p.bias) conv_in.push_back(f.add_constant(dsw::dense_tensor("b", {uint64_t(p.o)}, b)));
  std::vector<dsw::Attr> attrs = {dsw::attr_ints("strides", {p.sh, p.sw}),
                                  dsw::attr_ints("pads", {p.pads[0], p.pads[1], p.pads[2], p.pads[3]}),
                                  dsw::attr_ints("dilations", {p.dh, p.dw}), dsw::attr_int("group", p.group)};
  if (how == Fuse::kConvHasAct) attrs.push_back(dsw::attr_int("activation", 1));
  const uint32_t y = f.add_value("y", {1}), skip = f.add_value("skip", {1}), z = f.add_value("z", {1});
  // The skip is the graph's second input (shape N, O, OH, OW) through a relu, before or after the conv.
  if (how != Fuse::kSkipAfter) f.add_node(5, "skip", {skip_in}, skip);
  f.add_node(1, "conv", conv_in, y, attrs);
  if (how == Fuse::kSkipAfter) f.add_node(5, "skip", {skip_in}, skip);
  f.add_node(10, "add", how == Fuse::kSwapped ? std::vector<uint32_t>{skip, y} : std::vector<uint32_t>{y, skip}, z,
             act_attrs(add_act));
  f.outputs = {z};
  if (how == Fuse::kConvIsOutput) f.outputs.push_back(y);
  return f;
}

TEST(conv2d_add_fusion_matches_reference) {
  tiny::Rng rng(17);
  //            n  c   h   w   o  kh kw sh sw dh dw  g  pads           bias  act (of the add)
  const Conv cases[] = {
      {1, 16, 9, 11, 24, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 1},     // pointwise
      {2, 12, 15, 13, 20, 1, 1, 2, 2, 1, 1, 1, {0, 0, 0, 0}, true, 0},    // pointwise strided, batch 2
      {2, 6, 15, 16, 11, 3, 3, 2, 2, 1, 1, 1, {1, 1, 0, 0}, true, 2},     // im2col blocks, batch 2
      {5, 6, 15, 16, 11, 3, 3, 2, 2, 1, 1, 1, {1, 1, 0, 0}, true, 1},     // whole images per thread
      {4, 9, 5, 4, 40, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 2},      // pixels, images per thread
      {1, 64, 6, 6, 130, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 3},    // rows split across threads
      {1, 8, 20, 22, 10, 5, 5, 1, 1, 1, 1, 1, {2, 2, 2, 2}, true, 1},    // implicit im2col
      {3, 8, 20, 22, 10, 5, 5, 1, 1, 1, 1, 1, {2, 2, 2, 2}, true, 2},    // implicit, images per thread
      {2, 9, 5, 4, 40, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, false, 1},     // pixels as rows
      {1, 8, 4, 4, 40, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, true, 6},      // pixels as rows, groups
      {1, 64, 20, 20, 64, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},   // Winograd (forced below)
      {1, 10, 12, 13, 10, 3, 3, 1, 1, 1, 1, 10, {1, 1, 1, 1}, true, 7},  // depthwise
      {1, 5, 9, 9, 5, 3, 3, 1, 1, 2, 2, 5, {2, 2, 2, 2}, true, 4},       // dilated depthwise: reference
  };
  setenv("DS_CONV_WINOGRAD", "1", 1);
  int index = 0;
  for (const Conv& p0 : cases) {
    for (Fuse how : {Fuse::kPlain, Fuse::kSwapped, Fuse::kConvIsOutput, Fuse::kConvHasAct, Fuse::kSkipAfter}) {
      Conv p = p0;
      const int add_act = p.act;
      p.act = how == Fuse::kConvHasAct ? 1 : 0;
      const int64_t oh = out_size(p.h, p.pads[0], p.pads[2], p.kh, p.sh, p.dh);
      const int64_t ow = out_size(p.w, p.pads[1], p.pads[3], p.kw, p.sw, p.dw);
      const std::vector<float> x = opt::random_vec(rng, size_t(p.n * p.c * p.h * p.w));
      const std::vector<float> w = opt::random_vec(rng, size_t(p.o * (p.c / p.group) * p.kh * p.kw));
      const std::vector<float> b = opt::random_vec(rng, size_t(p.o));
      const std::vector<float> skip = opt::random_vec(rng, size_t(p.n * p.o * oh * ow));
      std::vector<double> conv, mag;
      conv_reference(p, x, w, b, &conv, &mag);
      const bool weight_input = index % 3 == 2;  // some through the reference kernel
      const dsw::File f = residual_file(p, w, b, add_act, how, weight_input);
      std::vector<std::vector<float>> xs = {x, skip};
      std::vector<Dims> shapes = {{p.n, p.c, p.h, p.w}, {p.n, p.o, oh, ow}};
      if (weight_input) {
        xs.push_back(w);
        shapes.push_back({p.o, p.c / p.group, p.kh, p.kw});
      }
      const std::string what = "fusion case " + std::to_string(index) + " variant " + std::to_string(int(how));
      {  // fused: the plan has buffers for the skip and the add's output only
        const dsw::Bytes bytes = dsw::serialize(f);
        std::unique_ptr<ds::Model> model = ds::load_model(bytes.data(), bytes.size());
        ds::Session session(*model, 1);
        for (size_t k = 0; k < xs.size(); ++k) session.set_input(k, xs[k].data(), shapes[k]);
        const bool fused = how == Fuse::kPlain || how == Fuse::kSwapped;
        CHECK_MSG(session.buffer_plan().size() == (fused ? 2u : 3u), what + ": plan of " +
                                                                     std::to_string(session.buffer_plan().size()));
      }
      for (const char* isa : kIsas) {
        for (int threads : {1, 2}) {
          const Run r = run_with(f, xs, shapes, isa, threads);
          if (isa_missing(r)) break;
          REQUIRE_MSG(r.status == DS_OK, what + " " + isa + ": " + r.error);
          REQUIRE_MSG(r.y.size() == conv.size(), what);
          size_t bad = 0;
          for (size_t i = 0; i < conv.size(); ++i) {
            const double want = opt::activate(add_act, conv[i] + std::max(0.0f, skip[i]),
                                              double(float(act_alpha(add_act))), act_beta(add_act));
            bad += !close(r.y[i], want, mag[i] + std::fabs(skip[i]), tol::kWinograd);
          }
          CHECK_MSG(bad == 0, what + " " + isa + " threads " + std::to_string(threads) + ": " + std::to_string(bad) +
                                  " of " + std::to_string(conv.size()) + " outside the tolerance");
        }
      }
    }
    ++index;
  }
  unsetenv("DS_CONV_WINOGRAD");
}

// A NaN in the residual of a fused conv + add stays NaN in the output (no activation, or relu's
// 0), whichever thread and whichever vector or scalar step adds it: pixels as rows (the transpose
// adds the residual per part of the GEMM's split) and the direct 1x1, at 1 to 3 threads.
TEST(conv2d_add_fusion_keeps_nan_residuals) {
  tiny::Rng rng(29);
  //            n  c   h   w   o  kh kw sh sw dh dw  g  pads          bias act (of the add)
  const Conv cases[] = {
      {1, 64, 6, 6, 130, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 0},   // pixels as rows, split across threads
      {1, 48, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 0},    // pixels, 49 rows, odd tails
      {1, 32, 20, 21, 64, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, true, 0},  // pointwise
      {1, 64, 6, 6, 130, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1},   // relu: NaN -> 0
  };
  for (const Conv& p : cases) {
    const int64_t oh = out_size(p.h, p.pads[0], p.pads[2], p.kh, p.sh, p.dh);
    const int64_t ow = out_size(p.w, p.pads[1], p.pads[3], p.kw, p.sw, p.dw);
    const std::vector<float> x = opt::random_vec(rng, size_t(p.n * p.c * p.h * p.w));
    const std::vector<float> w = opt::random_vec(rng, size_t(p.o * p.c * p.kh * p.kw));
    const std::vector<float> b = opt::random_vec(rng, size_t(p.o));
    std::vector<float> skip = opt::random_vec(rng, size_t(p.n * p.o * oh * ow));
    for (size_t i = 0; i < skip.size(); i += 1 + rng.below(13)) skip[i] = std::nanf("");
    dsw::File f;
    const uint32_t xv = f.add_value("x", {-1, p.c, p.h, p.w}), sv = f.add_value("skip", {-1, p.o, oh, ow});
    f.inputs = {xv, sv};
    const uint32_t wv = f.add_constant(dsw::dense_tensor("w", {uint64_t(p.o), uint64_t(p.c), uint64_t(p.kh), uint64_t(p.kw)}, w));
    const uint32_t bv = f.add_constant(dsw::dense_tensor("b", {uint64_t(p.o)}, b));
    const uint32_t y = f.add_value("y", {1}), z = f.add_value("z", {1});
    f.add_node(1, "conv", {xv, wv, bv}, y,
               {dsw::attr_ints("strides", {p.sh, p.sw}), dsw::attr_ints("pads", {p.pads[0], p.pads[1], p.pads[2], p.pads[3]}),
                dsw::attr_ints("dilations", {p.dh, p.dw}), dsw::attr_int("group", 1)});
    f.add_node(10, "add", {y, sv}, z, act_attrs(p.act));
    f.outputs = {z};
    const std::string what = "nan residual c=" + std::to_string(p.c) + " o=" + std::to_string(p.o) + " act " + std::to_string(p.act);
    for (const char* isa : kIsas) {
      for (int threads : {1, 2, 3}) {
        const Run r = run_with(f, {x, skip}, {{p.n, p.c, p.h, p.w}, {p.n, p.o, oh, ow}}, isa, threads);
        if (isa_missing(r)) break;
        REQUIRE_MSG(r.status == DS_OK, what + " " + isa + ": " + r.error);
        REQUIRE_MSG(r.y.size() == skip.size(), what);
        size_t bad = 0;
        for (size_t i = 0; i < skip.size(); ++i)
          if (std::isnan(skip[i])) bad += p.act == 0 ? !std::isnan(r.y[i]) : r.y[i] != 0.0f;
          else bad += std::isnan(r.y[i]);
        CHECK_MSG(bad == 0, what + " " + isa + " threads " + std::to_string(threads) + ": " + std::to_string(bad) +
                                " elements with the wrong NaN-ness");
      }
    }
  }
}

// (1x1 ->) depthwise 3x3 -> 1x1 (-> add), which the session runs as one 1x1 node over bands of
// the depthwise output's rows when that output or the depthwise's input (and the expanding 1x1's
// output) is large (at least 256K floats per image) and read by the next node alone: bit for bit the nodes run apart (the same
// graph with the depthwise output also a graph output), at every level and 1-3 threads; odd
// sizes, stride 1 and 2, batch 2, a last band of fewer rows, bias or none, activations on every
// node, a residual.
struct DwPw {
  int64_t n, c, h, w, o, stride, pad;
  bool dw_bias;
  int dw_act, pw_act;
  bool residual;
  int64_t expand_from;  // channels of an expanding conv before the depthwise (0: none)
  bool expand_bias;
  int64_t expand_k = 1, expand_stride = 1, expand_pad = 0;  // that conv's window (a stem: 3, 2, 1)
  int64_t in_h = 0, in_w = 0;  // the graph input's H and W when the expanding conv changes them
};

dsw::File depthwise_1x1_file(const DwPw& p, tiny::Rng& rng, bool dw_is_output, int64_t oh, int64_t ow) {
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, p.expand_from ? p.expand_from : p.c, p.in_h ? p.in_h : p.h, p.in_w ? p.in_w : p.w});
  f.inputs = {x};
  uint32_t dw_x = x;
  if (p.expand_from) {
    const uint64_t k = uint64_t(p.expand_k);
    std::vector<uint32_t> e_in = {x, f.add_constant(dsw::dense_tensor("e_w", {uint64_t(p.c), uint64_t(p.expand_from), k, k},
                                                                      opt::random_vec(rng, size_t(p.c * p.expand_from) * k * k)))};
    if (p.expand_bias) e_in.push_back(f.add_constant(dsw::dense_tensor("e_b", {uint64_t(p.c)}, opt::random_vec(rng, size_t(p.c)))));
    dw_x = f.add_value("e", {1});
    std::vector<dsw::Attr> e_attrs = {dsw::attr_ints("strides", {p.expand_stride, p.expand_stride}),
                                      dsw::attr_ints("pads", {p.expand_pad, p.expand_pad, p.expand_pad, p.expand_pad})};
    for (const dsw::Attr& a : act_attrs(p.dw_act == 2 ? 3 : 2)) e_attrs.push_back(a);
    f.add_node(1, "expand", e_in, dw_x, e_attrs);
  }
  std::vector<uint32_t> dw_in = {dw_x, f.add_constant(dsw::dense_tensor("dw_w", {uint64_t(p.c), 1, 3, 3},
                                                                       opt::random_vec(rng, size_t(p.c * 9))))};
  if (p.dw_bias) dw_in.push_back(f.add_constant(dsw::dense_tensor("dw_b", {uint64_t(p.c)}, opt::random_vec(rng, size_t(p.c)))));
  const uint32_t pw_w = f.add_constant(dsw::dense_tensor("pw_w", {uint64_t(p.o), uint64_t(p.c), 1, 1},
                                                         opt::random_vec(rng, size_t(p.o * p.c))));
  const uint32_t pw_b = f.add_constant(dsw::dense_tensor("pw_b", {uint64_t(p.o)}, opt::random_vec(rng, size_t(p.o))));
  std::vector<dsw::Attr> dw_attrs = {dsw::attr_ints("strides", {p.stride, p.stride}),
                                     dsw::attr_ints("pads", {p.pad, p.pad, p.pad, p.pad}), dsw::attr_int("group", p.c)};
  for (const dsw::Attr& a : act_attrs(p.dw_act)) dw_attrs.push_back(a);
  const uint32_t y = f.add_value("y", {1}), z = f.add_value("z", {1});
  f.add_node(1, "dw", dw_in, y, dw_attrs);
  f.add_node(1, "pw", {y, pw_w, pw_b}, z, p.residual ? std::vector<dsw::Attr>{} : act_attrs(p.pw_act));
  f.outputs = {z};
  if (p.residual) {
    const uint32_t skip_in = f.add_value("skip", {-1, p.o, oh, ow}), sum = f.add_value("sum", {1});
    f.inputs.push_back(skip_in);
    f.add_node(10, "add", {z, skip_in}, sum, act_attrs(p.pw_act));
    f.outputs = {sum};
  }
  if (dw_is_output) f.outputs.push_back(y);
  return f;
}

TEST(conv2d_depthwise_1x1_fusion_matches_the_two_nodes) {
  tiny::Rng rng(23);
  //          n   c    h    w   o  s  pad  dw_bias dw_act pw_act residual expand_from expand_bias
  const DwPw cases[] = {
      {1, 21, 113, 111, 10, 1, 1, true, 2, 0, false, 0, false},   // odd sizes, last band of 1 row, relu6
      {1, 24, 226, 223, 17, 2, 1, false, 1, 6, false, 0, false},  // stride 2, m = mr + 5, no depthwise bias
      {2, 32, 96, 90, 16, 1, 1, true, 3, 0, true, 0, false},      // batch 2, a residual, leaky relu
      {1, 20, 118, 115, 13, 1, 0, true, 4, 7, false, 0, false},   // unpadded; sigmoid and tanh (scalar passes)
      {1, 21, 229, 230, 24, 2, 0, true, 2, 1, true, 0, false},    // stride 2 unpadded, a residual
      // With an expanding 1x1 first: odd channels, bands of 8 / 4 / 2 rows by the expand's width.
      {1, 21, 113, 111, 10, 1, 1, true, 2, 0, false, 5, true},
      {2, 112, 97, 101, 13, 2, 1, true, 2, 0, true, 16, false},
      {1, 96, 113, 112, 24, 2, 1, true, 2, 0, false, 16, true},   // MobileNet V2's block 2, odd height
      {1, 150, 57, 58, 25, 1, 1, false, 1, 3, true, 3, true},
      {1, 60, 75, 1090, 7, 1, 0, true, 5, 6, false, 7, true},     // wide rows: bands of 2 rows
      // Only the depthwise's input large (MobileNet V2's block 4: 144 x 56 x 56 at stride 2).
      {1, 144, 56, 56, 32, 2, 1, true, 2, 0, false, 24, true},
      {2, 100, 55, 57, 13, 2, 1, false, 2, 1, true, 7, false},
      // A stem conv first (MobileNet V2's 3x3 stride 2 -> depthwise -> 1x1, odd sizes): the
      // bands read its input's row and column phases.
      {1, 32, 112, 112, 16, 1, 1, true, 2, 0, false, 3, true, 3, 2, 1, 224, 224},
      {2, 44, 57, 111, 10, 1, 1, false, 2, 6, true, 3, false, 3, 2, 1, 113, 221},
      {1, 26, 101, 103, 9, 2, 1, true, 1, 0, false, 4, true, 5, 1, 2, 101, 103},
      {1, 40, 110, 60, 8, 1, 1, true, 2, 1, false, 2, true, 3, 2, 0, 221, 121},
  };
  int index = 0;
  for (const DwPw& p : cases) {
    const std::string what = "depthwise 1x1 case " + std::to_string(index++);
    const int64_t oh = (p.h + 2 * p.pad - 3) / p.stride + 1, ow = (p.w + 2 * p.pad - 3) / p.stride + 1;
    REQUIRE_MSG(p.c * std::max(oh * ow, p.h * p.w) >= 256 * 1024, what + ": too small to be fused");
    tiny::Rng weights_a = rng, weights_b = rng;  // the same weights in both graphs
    const dsw::File fused = depthwise_1x1_file(p, weights_a, false, oh, ow);
    const dsw::File apart = depthwise_1x1_file(p, weights_b, true, oh, ow);
    rng = weights_a;
    const int64_t in_c = p.expand_from ? p.expand_from : p.c;
    const int64_t in_h = p.in_h ? p.in_h : p.h, in_w = p.in_w ? p.in_w : p.w;
    std::vector<std::vector<float>> xs = {opt::random_vec(rng, size_t(p.n * in_c * in_h * in_w))};
    std::vector<Dims> shapes = {{p.n, in_c, in_h, in_w}};
    if (p.residual) {
      xs.push_back(opt::random_vec(rng, size_t(p.n * p.o * oh * ow)));
      shapes.push_back({p.n, p.o, oh, ow});
    }
    {  // fused on this machine's best level when it has gemm_rows (AVX-512, AVX2): no buffer for the depthwise output
      const dsw::Bytes bytes = dsw::serialize(fused);
      std::unique_ptr<ds::Model> model = ds::load_model(bytes.data(), bytes.size());
      ds::Session session(*model, 1);
      for (size_t k = 0; k < xs.size(); ++k) session.set_input(k, xs[k].data(), shapes[k]);
      if (ds::kernels_for(ds::active_isa()).gemm->gemm_rows)
        CHECK_MSG(session.buffer_plan().size() == 1u, what + ": plan of " + std::to_string(session.buffer_plan().size()));
    }
    for (const char* isa : kIsas) {
      const Run want = run_with(apart, xs, shapes, isa, 1);
      if (isa_missing(want)) break;
      REQUIRE_MSG(want.status == DS_OK, what + " " + isa + ": " + want.error);
      for (int threads : {1, 2, 3}) {
        const Run r = run_with(fused, xs, shapes, isa, threads);
        REQUIRE_MSG(r.status == DS_OK, what + " " + isa + ": " + r.error);
        CHECK_MSG(r.y == want.y, what + " " + isa + " threads " + std::to_string(threads) + ": differs from the two nodes");
      }
    }
  }
}

TEST(conv2d_weight_from_an_input_runs_the_reference) {
  tiny::Rng rng(9);
  const Conv p = {1, 4, 8, 9, 6, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true, 1};
  const std::vector<float> x = opt::random_vec(rng, size_t(p.c * p.h * p.w));
  const std::vector<float> w = opt::random_vec(rng, size_t(p.o * p.c * 9));
  const std::vector<float> b = opt::random_vec(rng, size_t(p.o));
  std::vector<double> want, mag;
  conv_reference(p, x, w, b, &want, &mag);
  const Run r = run_with(conv_file(p, w, b, true), {x, w}, {{1, p.c, p.h, p.w}, {p.o, p.c, 3, 3}}, "scalar", 2);
  REQUIRE_MSG(r.status == DS_OK, r.error);
  for (size_t i = 0; i < want.size(); ++i) CHECK(close(r.y[i], want[i], mag[i]));
}

TEST(dense_matches_reference_at_every_level) {
  tiny::Rng rng(11);
  struct Case { int64_t batch, k, m; bool bias; int act; };
  const Case cases[] = {{1, 784, 300, true, 1}, {1, 1, 1, false, 0}, {3, 17, 33, true, 2}, {13, 500, 10, true, 4},
                        {1, 6144, 128, true, 1}, {2, 64, 1000, false, 7}, {5, 31, 31, true, 6},
                        {4, 1024, 600, true, 1},   // large enough for the pool
                        {1, 700, 200, true, 1},    // GEMV split: 7 panels (odd) at nr 32
                        {2, 1280, 1000, false, 0}};
  for (const Case& c : cases) {
    const std::vector<float> x = opt::random_vec(rng, size_t(c.batch * c.k));
    const std::vector<float> w = opt::random_vec(rng, size_t(c.m * c.k));
    const std::vector<float> b = opt::random_vec(rng, size_t(c.m));
    std::vector<dsw::Tensor> consts = {dsw::dense_tensor("w", {uint64_t(c.m), uint64_t(c.k)}, w)};
    if (c.bias) consts.push_back(dsw::dense_tensor("b", {uint64_t(c.m)}, b));
    const std::vector<dsw::Attr> attrs = act_attrs(c.act);
    const dsw::File f = opt::one_node(2, {{-1, c.k}}, std::move(consts), attrs);
    const std::string what = std::to_string(c.batch) + "x" + std::to_string(c.k) + "x" + std::to_string(c.m);
    for (const char* isa : kIsas) {
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        const Run r = run_with(f, {x}, {{c.batch, c.k}}, isa, threads);
        if (isa_missing(r)) break;
        REQUIRE_MSG(r.status == DS_OK, what + " " + isa + ": " + r.error);
        size_t bad = 0;
        for (int64_t i = 0; i < c.batch; ++i)
          for (int64_t j = 0; j < c.m; ++j) {
            double acc = c.bias ? b[size_t(j)] : 0.0, mag = std::fabs(acc);
            for (int64_t q = 0; q < c.k; ++q) {
              const double v = double(x[size_t(i * c.k + q)]) * w[size_t(j * c.k + q)];
              acc += v;
              mag += std::fabs(v);
            }
            bad += !close(r.y[size_t(i * c.m + j)], opt::activate(c.act, acc, double(float(act_alpha(c.act))), act_beta(c.act)), mag);
          }
        CHECK_MSG(bad == 0, what + " " + isa + " threads " + std::to_string(threads) + ": " + std::to_string(bad) + " bad");
        if (threads == 1) first = r.y;
        else CHECK_MSG(r.y == first, what + " " + isa + ": threads " + std::to_string(threads) + " differ from 1");
      }
    }
  }
}
