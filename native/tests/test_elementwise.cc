// Elementwise ops against plain loops: the activation op and the fused epilogue for every code,
// batchnorm at several ranks, add/sub/mul/div with numpy broadcasting (incl. [1], rank
// differences, rank 8, constants as inputs), and their shape errors.
#include <cmath>
#include <limits>

#include "harness.h"
#include "op_runner.h"

using opt::Dims;

namespace {

struct Act {
  int kind;
  float alpha, beta;
};
const Act kActs[] = {{0, 0, 0},    {1, 0, 0},    {2, 0, 6},         {2, -0.5f, 0.25f}, {3, 0.1f, 0},
                     {4, 0, 0},    {5, 0.2f, 0.5f}, {5, 1.f / 6, 0.5f}, {6, 0, 0},         {7, 0, 0}};

std::vector<dsw::Attr> epilogue(const Act& a) {
  return {dsw::attr_int("activation", a.kind), opt::attr_float("act_alpha", a.alpha),
          opt::attr_float("act_beta", a.beta)};
}

// numpy broadcasting reference, in double.
std::vector<double> broadcast_ref(const std::vector<float>& a, const Dims& as, const std::vector<float>& b,
                                  const Dims& bs, const Dims& out, int op) {
  std::vector<double> y(opt::count(out));
  const Dims sa = opt::strides(as), sb = opt::strides(bs);
  for (size_t e = 0; e < y.size(); ++e) {
    const Dims idx = opt::unravel(e, out);
    size_t ia = 0, ib = 0;
    for (size_t k = 0; k < as.size(); ++k) {
      const int64_t i = idx[out.size() - as.size() + k];
      ia += size_t((as[k] == 1 ? 0 : i) * sa[k]);
    }
    for (size_t k = 0; k < bs.size(); ++k) {
      const int64_t i = idx[out.size() - bs.size() + k];
      ib += size_t((bs[k] == 1 ? 0 : i) * sb[k]);
    }
    const double u = a[ia], v = b[ib];
    y[e] = op == 10 ? u + v : op == 11 ? u - v : op == 12 ? u * v : u / v;
  }
  return y;
}

}  // namespace

TEST(activation_op_every_code) {
  tiny::Rng rng(1);
  std::vector<float> x = opt::random_vec(rng, 2 * 3 * 7, -8, 8);
  x[0] = 90.0f, x[1] = -90.0f, x[2] = 0.0f, x[3] = -3.0f, x[4] = 3.0f;  // saturation and kinks
  for (const Act& a : kActs) {
    const opt::Result r = opt::run(opt::one_node(9, {{-1, 3, 7}}, {},
                                            {dsw::attr_int("kind", a.kind), opt::attr_float("alpha", a.alpha),
                                             opt::attr_float("beta", a.beta)}),
                              x, {2, 3, 7});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK((r.shape == Dims{2, 3, 7}));
    for (size_t i = 0; i < x.size(); ++i) {
      CHECK_MSG(std::isfinite(r.y[i]), "kind " + std::to_string(a.kind));
      CHECK_NEAR(r.y[i], opt::activate(a.kind, x[i], a.alpha, a.beta), opt::kTol);
    }
  }
}

TEST(fused_epilogue_on_dense_and_conv2d) {
  tiny::Rng rng(2);
  const std::vector<float> x = opt::random_vec(rng, 2 * 3 * 5 * 5, -2, 2);
  const std::vector<float> w = opt::random_vec(rng, 4 * 3 * 3 * 3), b = opt::random_vec(rng, 4);
  const std::vector<float> wd = opt::random_vec(rng, 6 * 5), bd = opt::random_vec(rng, 6);
  for (const Act& a : kActs) {
    // conv2d 3x3, pad 1: compare against tiny::conv without activation, then the function.
    const opt::Result r = opt::run(opt::one_node(1, {{-1, 3, 5, 5}},
                                            {dsw::dense_tensor("w", {4, 3, 3, 3}, w), dsw::dense_tensor("b", {4}, b)},
                                            [&] {
                                              auto at = epilogue(a);
                                              at.push_back(dsw::attr_ints("pads", {1, 1, 1, 1}));
                                              return at;
                                            }()),
                              x, {2, 3, 5, 5});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    int64_t oh, ow;
    const tiny::Conv p{4, 3, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, false};
    const std::vector<float> lin = tiny::conv(x, 2, 3, 5, 5, w, b, p, &oh, &ow);
    REQUIRE(r.y.size() == lin.size());
    for (size_t i = 0; i < lin.size(); ++i) CHECK_NEAR(r.y[i], opt::activate(a.kind, lin[i], a.alpha, a.beta), opt::kTol);

    // dense over the last axis of a rank-4 input (2, 3, 5, 5) -> (2, 3, 5, 6).
    const opt::Result d = opt::run(opt::one_node(2, {{-1, 3, 5, 5}},
                                            {dsw::dense_tensor("w", {6, 5}, wd), dsw::dense_tensor("b", {6}, bd)},
                                            epilogue(a)),
                              x, {2, 3, 5, 5});
    REQUIRE_MSG(d.status == DS_OK, d.error);
    CHECK((d.shape == Dims{2, 3, 5, 6}));
    for (size_t row = 0; row < 30; ++row)
      for (size_t j = 0; j < 6; ++j) {
        double acc = bd[j];
        for (size_t k = 0; k < 5; ++k) acc += double(x[row * 5 + k]) * wd[j * 5 + k];
        CHECK_NEAR(d.y[row * 6 + j], opt::activate(a.kind, acc, a.alpha, a.beta), opt::kTol);
      }
  }
}

TEST(dense_rank1_and_rank3) {
  tiny::Rng rng(3);
  const std::vector<float> w = opt::random_vec(rng, 3 * 4);
  const std::vector<float> x = opt::random_vec(rng, 4);
  const opt::Result r = opt::run(opt::one_node(2, {{4}}, {dsw::dense_tensor("w", {3, 4}, w)}, {}), x, {4});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  CHECK((r.shape == Dims{3}));
  for (size_t j = 0; j < 3; ++j) {
    double acc = 0;
    for (size_t k = 0; k < 4; ++k) acc += double(x[k]) * w[j * 4 + k];
    CHECK_NEAR(r.y[j], acc, opt::kTol);
  }
  const opt::Result e = opt::run(opt::one_node(2, {{-1, 2, 5}}, {dsw::dense_tensor("w", {3, 4}, w)}, {}),
                            std::vector<float>(10), {1, 2, 5});
  CHECK(e.status == DS_ERR_SHAPE);
  CHECK(e.error.find("node 'op' (dense): weight [3, 4] is not [M, 5]") != std::string::npos);
}

TEST(batchnorm_any_rank) {
  tiny::Rng rng(4);
  const Dims shapes[] = {{3, 5}, {2, 5, 7}, {2, 5, 3, 4}, {1, 5, 2, 3, 2}};
  const std::vector<float> scale = opt::random_vec(rng, 5), bias = opt::random_vec(rng, 5),
                           mean = opt::random_vec(rng, 5), var = opt::random_vec(rng, 5, 0.1f, 2.0f);
  for (const Dims& s : shapes) {
    const std::vector<float> x = opt::random_vec(rng, opt::count(s), -3, 3);
    Dims decl = s;
    decl[0] = -1;
    const opt::Result r = opt::run(opt::one_node(8, {decl},
                                            {dsw::dense_tensor("scale", {5}, scale), dsw::dense_tensor("bias", {5}, bias),
                                             dsw::dense_tensor("mean", {5}, mean), dsw::dense_tensor("var", {5}, var)},
                                            {opt::attr_float("epsilon", 1e-3f)}),
                              x, s);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK(r.shape == s);
    const size_t inner = opt::count(s) / size_t(s[0] * 5);
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = (i / inner) % 5;
      const double want = (double(x[i]) - mean[c]) / std::sqrt(double(var[c]) + 1e-3) * scale[c] + bias[c];
      CHECK_NEAR(r.y[i], want, opt::kTol);
    }
  }
  // A parameter that does not match the channels.
  const opt::Result e = opt::run(opt::one_node(8, {{-1, 4, 2}},
                                          {dsw::dense_tensor("scale", {5}, scale), dsw::dense_tensor("bias", {5}, bias),
                                           dsw::dense_tensor("mean", {5}, mean), dsw::dense_tensor("var", {5}, var)},
                                          {}),
                            std::vector<float>(8), {1, 4, 2});
  CHECK(e.status == DS_ERR_SHAPE);
  CHECK(e.error.find("node 'op' (batchnorm): scale [5] is not [4]") != std::string::npos);
}

TEST(binary_ops_broadcast_like_numpy) {
  tiny::Rng rng(5);
  struct Case { Dims a, b, out; };
  const Case cases[] = {
      {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}},    // same shape
      {{2, 3, 4, 5}, {1}, {2, 3, 4, 5}},             // scalar-like
      {{1}, {3, 7}, {3, 7}},                         // scalar-like on the left
      {{2, 3, 4, 5}, {5}, {2, 3, 4, 5}},             // rank difference
      {{2, 3, 1, 5}, {3, 4, 1}, {2, 3, 4, 5}},       // both broadcast
      {{1, 3, 1, 1}, {2, 3, 5, 7}, {2, 3, 5, 7}},    // per-channel (SE block)
      {{7}, {3, 1}, {3, 7}},
      {{1, 5}, {4, 1}, {4, 5}},
      {{3, 1, 1}, {1, 1, 1, 11}, {1, 3, 1, 11}},     // odd sizes, output rank from b
      {{2, 1, 3, 1, 2, 1, 2, 3}, {1, 2, 1, 3, 1, 2, 1, 1}, {2, 2, 3, 3, 2, 2, 2, 3}},  // rank 8
      {{1}, {1}, {1}},
  };
  for (const Case& c : cases) {
    const std::vector<float> a = opt::random_vec(rng, opt::count(c.a), -2, 2);
    std::vector<float> b = opt::random_vec(rng, opt::count(c.b), 0.5f, 2);  // away from 0 for div
    for (size_t i = 0; i < b.size(); i += 2) b[i] = -b[i];
    for (uint16_t op = 10; op <= 13; ++op) {
      const opt::Result r = opt::run(opt::one_node(op, {c.a, c.b}, {}, {}), {a, b}, {c.a, c.b});
      REQUIRE_MSG(r.status == DS_OK, r.error);
      CHECK_MSG(r.shape == c.out, "op " + std::to_string(op));
      const std::vector<double> want = broadcast_ref(a, c.a, b, c.b, c.out, op);
      REQUIRE(r.y.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(r.y[i], want[i], opt::kTol * (1 + std::fabs(want[i])));
    }
  }
}

TEST(binary_ops_with_constants_and_fused_activation) {
  tiny::Rng rng(6);
  const Dims xs = {2, 3, 4, 5};
  const std::vector<float> x = opt::random_vec(rng, opt::count(xs), -4, 4);
  const std::vector<float> k = opt::random_vec(rng, 3, 0.5f, 1.5f);
  // x * constant (3, 1, 1), constant [1] - x, constant / x's shape-mate: an input may be a constant.
  const opt::Result m = opt::run(opt::one_node(12, {{-1, 3, 4, 5}}, {dsw::dense_tensor("k", {3, 1, 1}, k)}, {}), x, xs);
  REQUIRE_MSG(m.status == DS_OK, m.error);
  const std::vector<double> want = broadcast_ref(x, xs, k, {3, 1, 1}, xs, 12);
  for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(m.y[i], want[i], opt::kTol);
  {
    dsw::File f;
    const uint32_t c = f.add_constant(dsw::dense_tensor("c", {1}, {2.5f}));
    const uint32_t in = f.add_value("x", {-1, 3, 4, 5});
    f.inputs = {in};
    const uint32_t y = f.add_value("y", {1, 3, 4, 5});
    f.outputs = {y};
    f.add_node(11, "sub", {c, in}, y);
    const opt::Result s = opt::run(f, x, xs);
    REQUIRE_MSG(s.status == DS_OK, s.error);
    for (size_t i = 0; i < x.size(); ++i) CHECK_NEAR(s.y[i], 2.5 - double(x[i]), opt::kTol);
  }
  // add with a fused clip (ReLU6) and leaky ReLU.
  for (const Act& a : {Act{2, 0, 6}, Act{3, 0.25f, 0}}) {
    const opt::Result r = opt::run(opt::one_node(10, {{-1, 3, 4, 5}}, {dsw::dense_tensor("k", {5}, {5, -5, 1, 0, 3})},
                                            epilogue(a)),
                              x, xs);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    const float kk[5] = {5, -5, 1, 0, 3};
    for (size_t i = 0; i < x.size(); ++i)
      CHECK_NEAR(r.y[i], opt::activate(a.kind, double(x[i]) + kk[i % 5], a.alpha, a.beta), opt::kTol);
  }
  // Same value on both sides.
  {
    dsw::File f;
    const uint32_t in = f.add_value("x", {-1, 3, 4, 5});
    f.inputs = {in};
    const uint32_t y = f.add_value("y", {1, 3, 4, 5});
    f.outputs = {y};
    f.add_node(12, "square", {in, in}, y);
    const opt::Result s = opt::run(f, x, xs);
    REQUIRE_MSG(s.status == DS_OK, s.error);
    for (size_t i = 0; i < x.size(); ++i) CHECK_NEAR(s.y[i], double(x[i]) * x[i], opt::kTol);
  }
}

TEST(div_by_zero_is_ieee_not_a_crash) {
  const opt::Result r = opt::run(opt::one_node(13, {{3}, {3}}, {}, {}), {{1, -1, 0}, {0, 0, 0}}, {{3}, {3}});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  CHECK(std::isinf(r.y[0]) && r.y[0] > 0);
  CHECK(std::isinf(r.y[1]) && r.y[1] < 0);
  CHECK(std::isnan(r.y[2]));
}

TEST(binary_shape_errors_name_both_shapes) {
  const opt::Result r = opt::load(opt::one_node(10, {{1, 64, 56, 56}, {1, 32, 56, 56}}, {}, {}));
  CHECK(r.status == DS_ERR_SHAPE);
  CHECK_MSG(r.error.find("node 'op' (add): shapes [1, 64, 56, 56] and [1, 32, 56, 56] do not broadcast") !=
                std::string::npos,
            r.error);
  const opt::Result m = opt::load(opt::one_node(12, {{-1, 3}}, {dsw::dense_tensor("k", {2}, {1, 2})}, {}));
  CHECK(m.status == DS_ERR_SHAPE);
  CHECK(m.error.find("(mul): shapes [1, 3] and [2]") != std::string::npos);
  // sub/mul/div have no epilogue attributes.
  const opt::Result a = opt::load(opt::one_node(11, {{3}, {3}}, {}, {dsw::attr_int("activation", 1)}));
  CHECK(a.status == DS_ERR_UNSUPPORTED_OP);
  CHECK(a.error.find("unknown attribute 'activation'") != std::string::npos);
}
