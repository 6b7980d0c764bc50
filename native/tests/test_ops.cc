// Op tests through the C API on one-node graphs: conv2d and pooling at edges against plain loops,
// pooling against values from PyTorch, softmax, flatten, relu, attribute and shape errors.
#include <cmath>
#include <string>

#include "deepslim/deepslim.h"
#include "dsm_writer.h"
#include "harness.h"
#include "tiny_net.h"

namespace {

constexpr double kTol = 1e-5;  // float32 accumulation against a double reference

struct Result {
  ds_status status = DS_OK;
  std::string error;
  std::vector<int64_t> shape;
  std::vector<float> y;
};

// Runs the file's single output for input x of shape xs.
Result run_file(const dsw::File& f, const std::vector<float>& x, const std::vector<int64_t>& xs) {
  Result r;
  const dsw::Bytes bytes = dsw::serialize(f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  ds_session_options o = DS_SESSION_OPTIONS_INIT;
  r.status = ds_model_load_memory(bytes.data(), bytes.size(), &m);
  if (r.status == DS_OK) r.status = ds_session_create(m, &o, &s);
  if (r.status == DS_OK) r.status = ds_session_set_input(s, 0, x.data(), xs.data(), xs.size());
  if (r.status == DS_OK) r.status = ds_session_run(s);
  size_t rank = 0;
  const int64_t* dims = nullptr;
  if (r.status == DS_OK) r.status = ds_session_output_shape(s, 0, &rank, &dims);
  if (r.status == DS_OK) {
    r.shape.assign(dims, dims + rank);
    size_t n = 1;
    for (int64_t d : r.shape) n *= size_t(d);
    r.y.resize(n);
    r.status = ds_session_get_output(s, 0, r.y.data(), n);
  }
  if (r.status != DS_OK) r.error = ds_last_error();
  ds_session_free(s);
  ds_model_free(m);
  return r;
}

// x -> op -> y, with optional constant inputs after x.
dsw::File one_node(uint16_t op, const std::vector<int64_t>& xs, std::vector<dsw::Tensor> consts,
                   std::vector<dsw::Attr> attrs, bool absent_bias = false) {
  dsw::File f;
  const uint32_t x = f.add_value("x", xs);
  f.inputs = {x};
  std::vector<uint32_t> in = {x};
  for (dsw::Tensor& t : consts) in.push_back(f.add_constant(std::move(t)));
  if (absent_bias) in.push_back(0xFFFFFFFFu);
  const uint32_t y = f.add_value("y", {1});
  f.outputs = {y};
  f.add_node(op, "op", in, y, std::move(attrs));
  return f;
}

std::vector<float> random_vec(tiny::Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1, 1);
  return v;
}

}  // namespace

TEST(conv2d_matches_loops_at_edges) {
  tiny::Rng rng(11);
  struct Case { int64_t n, c, h, w; tiny::Conv p; bool bias; };
  const Case cases[] = {
      {1, 1, 5, 5, {1, 1, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false}, false},   // 1x1
      {2, 3, 7, 6, {5, 3, 3, 3, 1, 2, 2, 1, 1, {1, 1, 1, 1}, true}, true},     // stride 2, odd sizes
      {1, 4, 6, 6, {4, 1, 3, 3, 4, 1, 1, 1, 1, {1, 1, 1, 1}, false}, true},    // depthwise
      {1, 4, 9, 8, {6, 2, 3, 2, 2, 1, 2, 2, 3, {2, 0, 1, 3}, true}, true},     // groups, dilation, asym pads
      {3, 2, 4, 4, {3, 2, 4, 4, 1, 1, 1, 1, 1, {0, 0, 0, 0}, false}, false},   // kernel = input
      {1, 3, 11, 13, {2, 3, 5, 3, 1, 3, 2, 1, 1, {2, 1, 0, 2}, true}, true},   // prime sizes and strides
  };
  for (const Case& k : cases) {
    const tiny::Conv& p = k.p;
    const std::vector<float> x = random_vec(rng, size_t(k.n * k.c * k.h * k.w));
    const std::vector<float> w = random_vec(rng, size_t(p.o * p.c * p.kh * p.kw));
    const std::vector<float> b = k.bias ? random_vec(rng, size_t(p.o)) : std::vector<float>();
    std::vector<dsw::Tensor> consts = {dsw::dense_tensor("w", {uint64_t(p.o), uint64_t(p.c), uint64_t(p.kh), uint64_t(p.kw)}, w)};
    if (k.bias) consts.push_back(dsw::dense_tensor("b", {uint64_t(p.o)}, b));
    const dsw::File f = one_node(1, {-1, k.c, k.h, k.w}, consts,
                                 {dsw::attr_ints("strides", {p.sh, p.sw}), dsw::attr_ints("pads", {p.pads[0], p.pads[1], p.pads[2], p.pads[3]}),
                                  dsw::attr_ints("dilations", {p.dh, p.dw}), dsw::attr_int("group", p.group),
                                  dsw::attr_int("activation", p.relu ? 1 : 0)});
    const Result r = run_file(f, x, {k.n, k.c, k.h, k.w});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    int64_t oh, ow;
    const std::vector<float> want = tiny::conv(x, k.n, k.c, k.h, k.w, w, b, p, &oh, &ow);
    CHECK((r.shape == std::vector<int64_t>{k.n, p.o, oh, ow}));
    REQUIRE(r.y.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(r.y[i], want[i], kTol);
  }
}

TEST(conv2d_absent_bias_and_shape_errors) {
  tiny::Rng rng(2);
  const std::vector<float> w = random_vec(rng, 2 * 3 * 3 * 3);
  const std::vector<float> x = random_vec(rng, 3 * 5 * 5);
  dsw::File f = one_node(1, {-1, 3, 5, 5}, {dsw::dense_tensor("w", {2, 3, 3, 3}, w)}, {}, true);
  const Result r = run_file(f, x, {1, 3, 5, 5});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  CHECK((r.shape == std::vector<int64_t>{1, 2, 3, 3}));
  // Channels that do not match the weight: refused at load, naming the node.
  dsw::File g = one_node(1, {-1, 4, 5, 5}, {dsw::dense_tensor("w", {2, 3, 3, 3}, w)}, {});
  const Result e = run_file(g, x, {1, 4, 5, 5});
  CHECK(e.status == DS_ERR_SHAPE);
  CHECK(e.error.find("node 'op'") != std::string::npos);
  // Kernel larger than the input.
  dsw::File k = one_node(1, {-1, 3, 2, 2}, {dsw::dense_tensor("w", {2, 3, 3, 3}, w)}, {});
  CHECK(run_file(k, x, {1, 3, 2, 2}).status == DS_ERR_SHAPE);
}

TEST(pooling_matches_pytorch_values) {
  std::vector<float> x16(16), x25(25);
  for (int i = 0; i < 16; ++i) x16[size_t(i)] = float(i);
  for (int i = 0; i < 25; ++i) x25[size_t(i)] = float(i);
  using dsw::attr_int;
  using dsw::attr_ints;
  // F.avg_pool2d(arange(16).view(1,1,4,4), 3, 2, 1, ceil_mode=True, count_include_pad=True / False)
  const std::vector<float> incl = {1.1111111f, 2.6666667f, 1.6666666f, 5.6666665f, 10.0f, 5.5f, 4.1666665f, 7.0f, 3.75f};
  const std::vector<float> excl = {2.5f, 4.0f, 5.0f, 8.5f, 10.0f, 11.0f, 12.5f, 14.0f, 15.0f};
  for (int cip = 0; cip <= 1; ++cip) {
    const Result r = run_file(one_node(4, {-1, 1, 4, 4}, {}, {attr_ints("kernel", {3, 3}), attr_ints("strides", {2, 2}),
                                                             attr_ints("pads", {1, 1, 1, 1}), attr_int("ceil_mode", 1),
                                                             attr_int("count_include_pad", cip)}),
                              x16, {1, 1, 4, 4});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    const std::vector<float>& want = cip ? incl : excl;
    REQUIRE(r.y.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(r.y[i], want[i], 1e-5);
  }
  // F.max_pool2d(arange(25).view(1,1,5,5), 2, 2, 0, ceil_mode=True); strides default to the kernel.
  const std::vector<float> mx = {6, 8, 9, 16, 18, 19, 21, 23, 24};
  const Result m = run_file(one_node(3, {-1, 1, 5, 5}, {}, {attr_ints("kernel", {2, 2}), attr_int("ceil_mode", 1)}), x25,
                            {1, 1, 5, 5});
  REQUIRE_MSG(m.status == DS_OK, m.error);
  CHECK(m.y == mx);
  // F.avg_pool2d(arange(25).view(1,1,5,5), 2, 2, 0, ceil_mode=True, count_include_pad=True)
  const std::vector<float> av = {3.0f, 5.0f, 6.5f, 13.0f, 15.0f, 16.5f, 20.5f, 22.5f, 24.0f};
  const Result a = run_file(one_node(4, {-1, 1, 5, 5}, {}, {attr_ints("kernel", {2, 2}), attr_int("ceil_mode", 1),
                                                           attr_int("count_include_pad", 1)}),
                            x25, {1, 1, 5, 5});
  REQUIRE_MSG(a.status == DS_OK, a.error);
  for (size_t i = 0; i < av.size(); ++i) CHECK_NEAR(a.y[i], av[i], 1e-6);
}

TEST(pooling_matches_loops) {
  tiny::Rng rng(5);
  struct Case { int64_t h, w, k, s; int64_t pads[4]; bool ceil, cip; };
  const Case cases[] = {{7, 7, 3, 2, {1, 1, 1, 1}, true, false}, {6, 9, 2, 3, {0, 1, 1, 0}, true, true},
                        {5, 5, 5, 1, {0, 0, 0, 0}, false, false}, {8, 3, 3, 1, {2, 0, 2, 1}, false, true}};
  for (const Case& k : cases) {
    const std::vector<float> x = random_vec(rng, size_t(2 * 3 * k.h * k.w));
    for (uint16_t op : {uint16_t(3), uint16_t(4)}) {
      std::vector<dsw::Attr> attrs = {dsw::attr_ints("kernel", {k.k, k.k}), dsw::attr_ints("strides", {k.s, k.s}),
                                      dsw::attr_ints("pads", {k.pads[0], k.pads[1], k.pads[2], k.pads[3]}),
                                      dsw::attr_int("ceil_mode", k.ceil)};
      if (op == 4) attrs.push_back(dsw::attr_int("count_include_pad", k.cip));
      const Result r = run_file(one_node(op, {-1, 3, k.h, k.w}, {}, attrs), x, {2, 3, k.h, k.w});
      REQUIRE_MSG(r.status == DS_OK, r.error);
      int64_t oh, ow;
      const std::vector<float> want = tiny::pool(x, 6, k.h, k.w, k.k, k.s, k.pads, k.ceil, op == 3, k.cip, &oh, &ow);
      CHECK((r.shape == std::vector<int64_t>{2, 3, oh, ow}));
      REQUIRE(r.y.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(r.y[i], want[i], kTol);
    }
  }
}

TEST(pool_pad_not_below_kernel_is_rejected) {
  const Result r = run_file(one_node(3, {-1, 1, 4, 4}, {}, {dsw::attr_ints("kernel", {2, 2}), dsw::attr_ints("pads", {2, 0, 0, 0})}),
                            std::vector<float>(16), {1, 1, 4, 4});
  CHECK(r.status == DS_ERR_FORMAT);
  CHECK(r.error.find("pad") != std::string::npos);
}

TEST(softmax_axis_and_stability) {
  // (2, 3, 2) along axis 1, with huge values that overflow exp() without the max shift.
  const std::vector<float> x = {1000, 1, 1001, 2, 1002, 3, -5, 0, -5, 0, -5, 0};
  const Result r = run_file(one_node(7, {-1, 3, 2}, {}, {dsw::attr_int("axis", 1)}), x, {2, 3, 2});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 2; ++i) {
      double m = -INFINITY, sum = 0;
      for (int64_t a = 0; a < 3; ++a) m = std::max(m, double(x[size_t(b * 6 + a * 2 + i)]));
      for (int64_t a = 0; a < 3; ++a) sum += std::exp(double(x[size_t(b * 6 + a * 2 + i)]) - m);
      for (int64_t a = 0; a < 3; ++a) {
        const size_t j = size_t(b * 6 + a * 2 + i);
        CHECK_NEAR(r.y[j], std::exp(double(x[j]) - m) / sum, 1e-6);
      }
    }
  CHECK(run_file(one_node(7, {-1, 3, 2}, {}, {dsw::attr_int("axis", 3)}), x, {2, 3, 2}).status == DS_ERR_SHAPE);
}

TEST(flatten_and_relu) {
  std::vector<float> x(2 * 3 * 4 * 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3.0f;
  const Result f = run_file(one_node(6, {-1, 3, 4, 5}, {}, {dsw::attr_int("axis", 2)}), x, {2, 3, 4, 5});
  REQUIRE_MSG(f.status == DS_OK, f.error);
  CHECK((f.shape == std::vector<int64_t>{2, 3, 20}));
  CHECK(f.y == x);
  const Result r = run_file(one_node(5, {-1, 3, 4, 5}, {}, {}), x, {2, 3, 4, 5});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  for (size_t i = 0; i < x.size(); ++i) CHECK(r.y[i] == std::max(x[i], 0.0f));
}

TEST(dense_matches_loops) {
  tiny::Rng rng(9);
  const std::vector<float> x = random_vec(rng, 3 * 17), w = random_vec(rng, 5 * 17), b = random_vec(rng, 5);
  for (int act = 0; act <= 1; ++act) {
    const Result r = run_file(one_node(2, {-1, 17}, {dsw::dense_tensor("w", {5, 17}, w), dsw::dense_tensor("b", {5}, b)},
                                       {dsw::attr_int("activation", act)}),
                              x, {3, 17});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK((r.shape == std::vector<int64_t>{3, 5}));
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 5; ++j) {
        double acc = b[size_t(j)];
        for (int i = 0; i < 17; ++i) acc += double(x[size_t(n * 17 + i)]) * w[size_t(j * 17 + i)];
        if (act) acc = std::max(acc, 0.0);
        CHECK_NEAR(r.y[size_t(n * 5 + j)], acc, kTol);
      }
  }
}

TEST(attribute_errors_name_the_key) {
  const std::vector<float> x(16);
  const Result u = run_file(one_node(5, {-1, 16}, {}, {dsw::attr_int("alpha", 1)}), x, {1, 16});
  CHECK(u.status == DS_ERR_UNSUPPORTED_OP);
  CHECK(u.error.find("'alpha'") != std::string::npos && u.error.find("node 'op'") != std::string::npos);
  const Result t = run_file(one_node(6, {-1, 16}, {}, {dsw::attr_ints("axis", {1})}), x, {1, 16});
  CHECK(t.status == DS_ERR_FORMAT);
  CHECK(t.error.find("'axis'") != std::string::npos);
  const Result a = run_file(one_node(2, {-1, 4}, {dsw::dense_tensor("w", {2, 4}, std::vector<float>(8))},
                                     {dsw::attr_int("activation", 8)}),
                            x, {4, 4});
  CHECK(a.status == DS_ERR_FORMAT);
  const Result k = run_file(one_node(3, {-1, 1, 4, 4}, {}, {}), x, {1, 1, 4, 4});  // kernel missing
  CHECK(k.status == DS_ERR_FORMAT);
  CHECK(k.error.find("'kernel'") != std::string::npos);
}
