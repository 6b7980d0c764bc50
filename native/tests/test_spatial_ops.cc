// Spatial ops: conv_transpose2d against a direct scatter loop, resize against hand-derived
// source indices and coordinates for every mode, lrn, global pools, maxpool dilations, pooling
// split over threads.
#include <algorithm>
#include <cmath>

#include "harness.h"
#include "op_runner.h"

using opt::Dims;
using opt::Result;

namespace {

struct ConvT {
  int64_t c, o, kh, kw, group, sh, sw, dh, dw, oph, opw;
  int64_t pads[4];
  bool bias;
  int act;
};

// Scatter every input pixel times the kernel into the full output, crop the pads, add the bias.
std::vector<double> conv_transpose_scatter(const std::vector<float>& x, int64_t n, int64_t h, int64_t w,
                                           const std::vector<float>& wt, const std::vector<float>& bias,
                                           const ConvT& p, int64_t* oh, int64_t* ow) {
  const int64_t fh = (h - 1) * p.sh + p.dh * (p.kh - 1) + 1 + p.oph;
  const int64_t fw = (w - 1) * p.sw + p.dw * (p.kw - 1) + 1 + p.opw;
  const int64_t cg = p.c / p.group, og = p.o / p.group;
  std::vector<double> full(size_t(n * p.o * fh * fw), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ic = 0; ic < p.c; ++ic)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < w; ++ix)
          for (int64_t ocl = 0; ocl < og; ++ocl)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t oc = (ic / cg) * og + ocl;
                const int64_t fy = iy * p.sh + ky * p.dh, fx = ix * p.sw + kx * p.dw;
                full[size_t(((b * p.o + oc) * fh + fy) * fw + fx)] +=
                    double(x[size_t(((b * p.c + ic) * h + iy) * w + ix)]) *
                    wt[size_t(((ic * og + ocl) * p.kh + ky) * p.kw + kx)];
              }
  *oh = fh - p.pads[0] - p.pads[2];
  *ow = fw - p.pads[1] - p.pads[3];
  std::vector<double> y(size_t(n * p.o * *oh * *ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < p.o; ++oc)
      for (int64_t oy = 0; oy < *oh; ++oy)
        for (int64_t ox = 0; ox < *ow; ++ox) {
          double v = full[size_t(((b * p.o + oc) * fh + oy + p.pads[0]) * fw + ox + p.pads[1])];
          if (p.bias) v += bias[size_t(oc)];
          y[size_t(((b * p.o + oc) * *oh + oy) * *ow + ox)] = opt::activate(p.act, v, 0, 6);
        }
  return y;
}

}  // namespace

TEST(conv_transpose2d_matches_scatter_loop) {
  tiny::Rng rng(31);
  struct Case { int64_t n, h, w; ConvT p; };
  const Case cases[] = {
      {1, 3, 3, {2, 3, 3, 3, 1, 2, 2, 1, 1, 1, 1, {1, 1, 1, 1}, true, 0}},   // PyTorch upsampling x2
      {2, 4, 5, {4, 6, 2, 2, 2, 2, 2, 1, 1, 0, 0, {0, 0, 0, 0}, true, 1}},   // groups, relu
      {1, 5, 4, {3, 2, 3, 2, 1, 1, 3, 2, 1, 1, 2, {2, 0, 1, 3}, false, 2}},  // dilation, asym pads, clip
      {1, 1, 1, {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, {0, 0, 0, 0}, false, 0}},  // 1x1 everything
      {1, 7, 3, {6, 3, 3, 5, 3, 3, 2, 2, 1, 2, 1, {1, 2, 0, 1}, true, 0}},   // depthwise-ish, odd sizes
      {2, 2, 2, {2, 4, 4, 4, 2, 1, 1, 1, 1, 0, 0, {2, 2, 2, 2}, true, 0}},   // pads crop to a 1x1 output
  };
  for (const Case& k : cases) {
    const ConvT& p = k.p;
    const std::vector<float> x = opt::random_vec(rng, size_t(k.n * p.c * k.h * k.w));
    const std::vector<float> w = opt::random_vec(rng, size_t(p.c * (p.o / p.group) * p.kh * p.kw));
    const std::vector<float> b = opt::random_vec(rng, size_t(p.o));
    std::vector<dsw::Tensor> consts = {dsw::dense_tensor(
        "w", {uint64_t(p.c), uint64_t(p.o / p.group), uint64_t(p.kh), uint64_t(p.kw)}, w)};
    if (p.bias) consts.push_back(dsw::dense_tensor("b", {uint64_t(p.o)}, b));
    const std::vector<dsw::Attr> attrs = {
        dsw::attr_ints("strides", {p.sh, p.sw}), dsw::attr_ints("pads", {p.pads[0], p.pads[1], p.pads[2], p.pads[3]}),
        dsw::attr_ints("dilations", {p.dh, p.dw}), dsw::attr_int("group", p.group),
        dsw::attr_ints("output_padding", {p.oph, p.opw}), dsw::attr_int("activation", p.act),
        opt::attr_float("act_alpha", 0), opt::attr_float("act_beta", 6)};
    const Result r = opt::run(opt::one_node(15, {{-1, p.c, k.h, k.w}}, consts, attrs), x, {k.n, p.c, k.h, k.w});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    int64_t oh, ow;
    const std::vector<double> want = conv_transpose_scatter(x, k.n, k.h, k.w, w, b, p, &oh, &ow);
    CHECK((r.shape == Dims{k.n, p.o, oh, ow}));
    REQUIRE(r.y.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(r.y[i], want[i], opt::kTolAccum);
  }
}

TEST(conv_transpose2d_shape_rules) {
  const std::vector<float> w(2 * 3 * 3 * 3, 0.1f);
  // Output padding must stay below max(stride, dilation), as in PyTorch.
  const Result op = opt::load(opt::one_node(15, {{1, 2, 4, 4}}, {dsw::dense_tensor("w", {2, 3, 3, 3}, w)},
                                            {dsw::attr_ints("output_padding", {1, 0})}));
  CHECK(op.status == DS_ERR_FORMAT);
  CHECK(op.error.find("output_padding 1") != std::string::npos);
  // Channels must match the weight's first axis.
  const Result ch = opt::load(opt::one_node(15, {{1, 3, 4, 4}}, {dsw::dense_tensor("w", {2, 3, 3, 3}, w)}, {}));
  CHECK(ch.status == DS_ERR_SHAPE);
  CHECK(ch.error.find("node 'op' (conv_transpose2d): weight [2, 3, 3, 3] does not fit input [1, 3, 4, 4]") !=
        std::string::npos);
  // Pads that crop everything away.
  const Result pd = opt::load(opt::one_node(15, {{1, 2, 1, 1}}, {dsw::dense_tensor("w", {2, 3, 3, 3}, w)},
                                            {dsw::attr_ints("pads", {2, 0, 1, 0})}));
  CHECK(pd.status == DS_ERR_SHAPE);
  CHECK(pd.error.find("is empty") != std::string::npos);
}

// Input x[h][w] = 10*h + w: nearest gives 10*row[oy] + col[ox] for source indices row, col; linear
// interpolation of this linear function gives 10*ry + cx for the clamped source coordinates.
TEST(resize_nearest_every_mode_hand_values) {
  struct Case { const char* coord; const char* nearest; std::vector<int> rows, cols; };
  // (1,1,3,4) -> sizes (5, 3); e.g. half_pixel rows: (oy + 0.5) * 3/5 - 0.5 = -0.2, 0.4, 1.0, 1.6, 2.2.
  const Case a[] = {
      {"half_pixel", "round_prefer_floor", {0, 0, 1, 2, 2}, {0, 1, 3}},
      {"half_pixel", "round_prefer_ceil", {0, 0, 1, 2, 2}, {0, 2, 3}},
      {"half_pixel", "floor", {0, 0, 1, 1, 2}, {0, 1, 2}},
      {"half_pixel", "ceil", {0, 1, 1, 2, 2}, {1, 2, 3}},
      {"pytorch_half_pixel", "round_prefer_floor", {0, 0, 1, 2, 2}, {0, 1, 3}},
      {"pytorch_half_pixel", "round_prefer_ceil", {0, 0, 1, 2, 2}, {0, 2, 3}},
      {"pytorch_half_pixel", "floor", {0, 0, 1, 1, 2}, {0, 1, 2}},
      {"pytorch_half_pixel", "ceil", {0, 1, 1, 2, 2}, {1, 2, 3}},
      {"align_corners", "round_prefer_floor", {0, 0, 1, 1, 2}, {0, 1, 3}},
      {"align_corners", "round_prefer_ceil", {0, 1, 1, 2, 2}, {0, 2, 3}},
      {"align_corners", "floor", {0, 0, 1, 1, 2}, {0, 1, 3}},
      {"align_corners", "ceil", {0, 1, 1, 2, 2}, {0, 2, 3}},
      {"asymmetric", "round_prefer_floor", {0, 1, 1, 2, 2}, {0, 1, 3}},
      {"asymmetric", "round_prefer_ceil", {0, 1, 1, 2, 2}, {0, 1, 3}},
      {"asymmetric", "floor", {0, 0, 1, 1, 2}, {0, 1, 2}},
      {"asymmetric", "ceil", {0, 1, 2, 2, 2}, {0, 2, 3}},
  };
  // (1,1,2,5) -> sizes (1, 8): one output row (pytorch_half_pixel and align_corners take 0).
  const Case b[] = {
      {"half_pixel", "round_prefer_floor", {0}, {0, 0, 1, 2, 2, 3, 4, 4}},
      {"half_pixel", "round_prefer_ceil", {1}, {0, 0, 1, 2, 2, 3, 4, 4}},
      {"half_pixel", "floor", {0}, {0, 0, 1, 1, 2, 2, 3, 4}},
      {"half_pixel", "ceil", {1}, {0, 1, 2, 2, 3, 3, 4, 4}},
      {"pytorch_half_pixel", "round_prefer_ceil", {0}, {0, 0, 1, 2, 2, 3, 4, 4}},
      {"align_corners", "round_prefer_floor", {0}, {0, 1, 1, 2, 2, 3, 3, 4}},
      {"align_corners", "ceil", {0}, {0, 1, 2, 2, 3, 3, 4, 4}},
      {"asymmetric", "round_prefer_ceil", {0}, {0, 1, 1, 2, 3, 3, 4, 4}},
      {"asymmetric", "ceil", {0}, {0, 1, 2, 2, 3, 4, 4, 4}},
  };
  for (int which = 0; which < 2; ++which) {
    const int64_t h = which ? 2 : 3, w = which ? 5 : 4, oh = which ? 1 : 5, ow = which ? 8 : 3;
    std::vector<float> x;
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) x.push_back(float(10 * i + j));
    for (const Case& c : which ? std::vector<Case>(std::begin(b), std::end(b)) : std::vector<Case>(std::begin(a), std::end(a))) {
      const Result r = opt::run(opt::one_node(21, {{1, 1, h, w}}, {},
                                              {dsw::attr_ints("sizes", {oh, ow}), opt::attr_str("mode", "nearest"),
                                               opt::attr_str("coordinate_transformation_mode", c.coord),
                                               opt::attr_str("nearest_mode", c.nearest)}),
                                x, {1, 1, h, w});
      REQUIRE_MSG(r.status == DS_OK, r.error);
      CHECK((r.shape == Dims{1, 1, oh, ow}));
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          CHECK_MSG(r.y[size_t(i * ow + j)] == float(10 * c.rows[size_t(i)] + c.cols[size_t(j)]),
                    std::string(c.coord) + " " + c.nearest);
    }
  }
}

TEST(resize_linear_every_mode_hand_values) {
  struct Case { const char* coord; int64_t h, w, oh, ow; std::vector<double> rows, cols; };
  const Case cases[] = {
      // (3,4) -> (5,3); half_pixel rows -0.2 (clamped to 0), 0.4, 1.0, 1.6, 2.2 (clamped to 2);
      // cols (j + 0.5) * 4/3 - 0.5 = 1/6, 3/2, 17/6.
      {"half_pixel", 3, 4, 5, 3, {0, 0.4, 1, 1.6, 2}, {1.0 / 6, 1.5, 17.0 / 6}},
      {"pytorch_half_pixel", 3, 4, 5, 3, {0, 0.4, 1, 1.6, 2}, {1.0 / 6, 1.5, 17.0 / 6}},
      {"align_corners", 3, 4, 5, 3, {0, 0.5, 1, 1.5, 2}, {0, 1.5, 3}},
      {"asymmetric", 3, 4, 5, 3, {0, 0.6, 1.2, 1.8, 2}, {0, 4.0 / 3, 8.0 / 3}},
      // (2,5) -> (1,8): one output row: half_pixel samples between the rows, the others row 0.
      {"half_pixel", 2, 5, 1, 8, {0.5}, {0, 0.4375, 1.0625, 1.6875, 2.3125, 2.9375, 3.5625, 4}},
      {"pytorch_half_pixel", 2, 5, 1, 8, {0}, {0, 0.4375, 1.0625, 1.6875, 2.3125, 2.9375, 3.5625, 4}},
      {"align_corners", 2, 5, 1, 8, {0}, {0, 4.0 / 7, 8.0 / 7, 12.0 / 7, 16.0 / 7, 20.0 / 7, 24.0 / 7, 4}},
      {"asymmetric", 2, 5, 1, 8, {0}, {0, 0.625, 1.25, 1.875, 2.5, 3.125, 3.75, 4}},
  };
  for (const Case& c : cases) {
    std::vector<float> x;
    for (int64_t i = 0; i < c.h; ++i)
      for (int64_t j = 0; j < c.w; ++j) x.push_back(float(10 * i + j));
    const Result r = opt::run(opt::one_node(21, {{-1, 1, c.h, c.w}}, {},
                                            {dsw::attr_ints("sizes", {c.oh, c.ow}), opt::attr_str("mode", "linear"),
                                             opt::attr_str("coordinate_transformation_mode", c.coord)}),
                              x, {1, 1, c.h, c.w});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK((r.shape == Dims{1, 1, c.oh, c.ow}));
    for (int64_t i = 0; i < c.oh; ++i)
      for (int64_t j = 0; j < c.ow; ++j)
        CHECK_NEAR(r.y[size_t(i * c.ow + j)], 10 * c.rows[size_t(i)] + c.cols[size_t(j)], 1e-5);
  }
}

TEST(resize_is_per_plane_and_default_nearest) {
  // Two batches, three channels: each plane resized on its own; defaults are nearest/half_pixel/
  // round_prefer_floor, and x2 upsampling repeats every pixel.
  tiny::Rng rng(32);
  const std::vector<float> x = opt::random_vec(rng, 2 * 3 * 2 * 3);
  const Result r = opt::run(opt::one_node(21, {{-1, 3, 2, 3}}, {}, {dsw::attr_ints("sizes", {4, 6})}), x, {2, 3, 2, 3});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  for (size_t p = 0; p < 6; ++p)
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 6; ++j) CHECK(r.y[p * 24 + i * 6 + j] == x[p * 6 + (i / 2) * 3 + j / 2]);
}

TEST(lrn_matches_loops) {
  tiny::Rng rng(33);
  const Dims dims = {2, 7, 3, 4};
  const std::vector<float> x = opt::random_vec(rng, opt::count(dims), -3, 3);
  for (int64_t size : {1, 2, 3, 5, 10}) {
    const float alpha = 1e-2f, beta = 0.75f, bias = 2.0f;
    const Result r = opt::run(opt::one_node(16, {{-1, 7, 3, 4}}, {},
                                            {dsw::attr_int("size", size), opt::attr_float("alpha", alpha),
                                             opt::attr_float("beta", beta), opt::attr_float("bias", bias)}),
                              x, dims);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK(r.shape == dims);
    const int64_t before = (size - 1) / 2, after = size - 1 - before;  // floor and ceil of (size-1)/2
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 7; ++c)
        for (int64_t p = 0; p < 12; ++p) {
          double sum = 0;
          for (int64_t j = std::max<int64_t>(0, c - before); j <= std::min<int64_t>(6, c + after); ++j) {
            const double v = x[size_t((n * 7 + j) * 12 + p)];
            sum += v * v;
          }
          const size_t i = size_t((n * 7 + c) * 12 + p);
          CHECK_NEAR(r.y[i], x[i] / std::pow(bias + alpha / double(size) * sum, beta), opt::kTolAccum);
        }
  }
}

TEST(global_pools_match_loops) {
  tiny::Rng rng(34);
  for (const Dims& dims : {Dims{2, 3, 5, 7}, Dims{1, 4, 1, 1}, Dims{3, 2, 9}}) {
    const std::vector<float> x = opt::random_vec(rng, opt::count(dims), -5, 5);
    const size_t planes = size_t(dims[0] * dims[1]), size = x.size() / planes;
    for (uint16_t op : {uint16_t(22), uint16_t(23)}) {
      const Result r = opt::run(opt::one_node(op, {dims}, {}, {}), x, dims);
      REQUIRE_MSG(r.status == DS_OK, r.error);
      Dims out(dims.size(), 1);
      out[0] = dims[0], out[1] = dims[1];
      CHECK(r.shape == out);
      for (size_t p = 0; p < planes; ++p) {
        double sum = 0, mx = -1e30;
        for (size_t i = 0; i < size; ++i) sum += x[p * size + i], mx = std::max(mx, double(x[p * size + i]));
        CHECK_NEAR(r.y[p], op == 22 ? sum / double(size) : mx, opt::kTol);
      }
    }
  }
  const Result e = opt::load(opt::one_node(22, {{2, 3}}, {}, {}));
  CHECK(e.status == DS_ERR_SHAPE);
  CHECK(e.error.find("node 'op' (global_avgpool)") != std::string::npos);
}

TEST(maxpool_dilations_match_pytorch) {
  // x = arange(36).view(1,1,6,6) with odd columns negated;
  // F.max_pool2d(x, 2, stride=2, padding=1, dilation=2, ceil_mode=True) and
  // F.max_pool2d(x, 3, stride=2, padding=1, dilation=2).
  std::vector<float> x(36);
  for (int i = 0; i < 36; ++i) x[size_t(i)] = float(i % 2 ? -i : i);
  const Result a = opt::run(opt::one_node(3, {{1, 1, 6, 6}}, {},
                                          {dsw::attr_ints("kernel", {2, 2}), dsw::attr_ints("strides", {2, 2}),
                                           dsw::attr_ints("pads", {1, 1, 1, 1}), dsw::attr_ints("dilations", {2, 2}),
                                           dsw::attr_int("ceil_mode", 1)}),
                            x, {1, 1, 6, 6});
  REQUIRE_MSG(a.status == DS_OK, a.error);
  CHECK((a.shape == Dims{1, 1, 4, 4}));
  CHECK((a.y == std::vector<float>{-7, -7, -9, -11, -7, -7, -9, -11, -19, -19, -21, -23, -31, -31, -33, -35}));
  const Result b = opt::run(opt::one_node(3, {{1, 1, 6, 6}}, {},
                                          {dsw::attr_ints("kernel", {3, 3}), dsw::attr_ints("strides", {2, 2}),
                                           dsw::attr_ints("pads", {1, 1, 1, 1}), dsw::attr_ints("dilations", {2, 2})}),
                            x, {1, 1, 6, 6});
  REQUIRE_MSG(b.status == DS_OK, b.error);
  CHECK((b.shape == Dims{1, 1, 2, 2}));
  CHECK((b.y == std::vector<float>{-7, -7, -7, -7}));
  // avgpool2d has no dilations.
  const Result c = opt::load(opt::one_node(4, {{1, 1, 6, 6}}, {},
                                           {dsw::attr_ints("kernel", {2, 2}), dsw::attr_ints("dilations", {2, 2})}));
  CHECK(c.status == DS_ERR_UNSUPPORTED_OP);
  CHECK(c.error.find("unknown attribute 'dilations'") != std::string::npos);
}

TEST(pools_split_over_threads_equal_one_thread) {
  // Planes are split over the threads from about 32K input elements: 2 x 37 planes of 27x29
  // (58K) split, 1 x 3 planes do not; windows with padding and a ceil-mode edge. The result
  // equals the single-threaded one exactly (each output is computed the same way).
  uint32_t seed = 7;
  for (const Dims& xs : {Dims{2, 37, 27, 29}, Dims{1, 3, 27, 29}}) {
    std::vector<float> x(opt::count(xs));
    for (float& v : x) v = float(int((seed = seed * 1664525u + 1013904223u) >> 20) % 2001 - 1000) / 128.0f;
    for (const uint16_t op : {uint16_t(3), uint16_t(4)}) {
      const dsw::File f = opt::one_node(op, {xs}, {},
                                        {dsw::attr_ints("kernel", {3, 3}), dsw::attr_ints("strides", {2, 2}),
                                         dsw::attr_ints("pads", {1, 0, 1, 0}), dsw::attr_int("ceil_mode", 1)});
      const Result one = opt::run(f, x, xs, 1);
      REQUIRE_MSG(one.status == DS_OK, one.error);
      CHECK((one.shape == Dims{xs[0], xs[1], 14, 14}));
      for (const int threads : {2, 3}) {
        const Result many = opt::run(f, x, xs, threads);
        REQUIRE_MSG(many.status == DS_OK, many.error);
        CHECK(many.y == one.y);
      }
    }
  }
}
