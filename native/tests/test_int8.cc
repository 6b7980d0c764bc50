// The int8 ops (25-32) through the C API: results against integer loops written here, at every ISA
// level this machine runs (DS_FORCE_ISA), and malformed quantized files refused at load with
// DS_ERR_FORMAT naming the node and the attribute or input.
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "harness.h"
#include "op_runner.h"

using opt::Dims;
using opt::Result;

namespace {

void expect(const Result& r, ds_status status, const std::string& needle, int line) {
  if (r.status != status || r.error.find(needle) == std::string::npos)
    harness::record_failure(__FILE__, line, std::string("got ") + ds_status_name(r.status) + " '" + r.error +
                                                "', expected " + ds_status_name(status) + " with '" + needle + "'");
}
#define EXPECT_REFUSED(result, status, needle) expect(result, status, needle, __LINE__)

dsw::Attr attr_float(const std::string& k, float v) {
  dsw::Attr a;
  a.key = k;
  a.type = 2;
  a.f = v;
  return a;
}

struct QConv {
  int64_t n = 1, c = 3, h = 6, w = 6, o = 4, kh = 3, kw = 3, stride = 1, pad = 1, group = 1, dil = 1;
  // Asymmetric windows: bottom and right pads and the column stride, when not -1 (else pad, stride).
  int64_t pad_bottom = -1, pad_right = -1, stride_w = -1;
  float in_scale = 0.05f, out_scale = 0.1f;
  int32_t x_zp = 120, y_zp = 7, act_min = 0, act_max = 255;
  std::vector<int8_t> weight;
  std::vector<int32_t> bias, mult, shift;
  int64_t pb() const { return pad_bottom < 0 ? pad : pad_bottom; }
  int64_t pr() const { return pad_right < 0 ? pad : pad_right; }
  int64_t sw() const { return stride_w < 0 ? stride : stride_w; }
  int64_t oh() const { return (h + pad + pb() - dil * (kh - 1) - 1) / stride + 1; }
  int64_t ow() const { return (w + pad + pr() - dil * (kw - 1) - 1) / sw() + 1; }
};

QConv random_conv(tiny::Rng& rng, QConv q) {
  const int64_t k = q.c / q.group * q.kh * q.kw;
  q.weight.resize(size_t(q.o * k));
  for (auto& v : q.weight) v = int8_t(int(rng.uniform(0, 255)) - 127);
  for (int64_t i = 0; i < q.o; ++i) {
    q.bias.push_back(int32_t(rng.uniform(-5000, 5000)));
    q.mult.push_back(int32_t((1u << 30) + uint32_t(rng.uniform(0, 1 << 30))));
    q.shift.push_back(int32_t(rng.uniform(6, 12)));
  }
  return q;
}

// x f32 -> quantize -> qconv2d -> dequantize -> y
dsw::File conv_file(const QConv& q, std::vector<dsw::Attr> extra = {}, dsw::Tensor* weight_override = nullptr) {
  dsw::File f;
  const uint32_t x = f.add_value("x", {q.n, q.c, q.h, q.w});
  f.inputs = {x};
  const uint32_t qx = f.add_activation("qx", {q.n, q.c, q.h, q.w}, 3);
  f.add_node(25, "quant", {x}, qx, {attr_float("scale", q.in_scale), dsw::attr_int("zero_point", q.x_zp)});
  const int64_t cg = q.c / q.group;
  const uint32_t w = f.add_typed_constant(weight_override ? *weight_override
                                                  : dsw::typed_tensor("w", 2, {uint64_t(q.o), uint64_t(cg), uint64_t(q.kh), uint64_t(q.kw)}, q.weight));
  const uint32_t b = f.add_typed_constant(dsw::typed_tensor("b", 4, {uint64_t(q.o)}, q.bias));
  const uint32_t m = f.add_typed_constant(dsw::typed_tensor("m", 4, {uint64_t(q.o)}, q.mult));
  const uint32_t s = f.add_typed_constant(dsw::typed_tensor("s", 4, {uint64_t(q.o)}, q.shift));
  const uint32_t c = f.add_activation("c", {q.n, q.o, q.oh(), q.ow()}, 3);
  std::vector<dsw::Attr> attrs = {dsw::attr_ints("strides", {q.stride, q.sw()}),
                                  dsw::attr_ints("pads", {q.pad, q.pad, q.pb(), q.pr()}),
                                  dsw::attr_ints("dilations", {q.dil, q.dil}),
                                  dsw::attr_int("group", q.group), dsw::attr_int("x_zero_point", q.x_zp),
                                  dsw::attr_int("y_zero_point", q.y_zp), dsw::attr_int("act_min", q.act_min),
                                  dsw::attr_int("act_max", q.act_max)};
  for (auto& a : extra) {
    bool replaced = false;
    for (auto& b2 : attrs)
      if (b2.key == a.key) b2 = a, replaced = true;
    if (!replaced) attrs.push_back(a);
  }
  f.add_node(27, "conv", {qx, w, b, m, s}, c, attrs);
  const uint32_t y = f.add_value("y", {q.n, q.o, q.oh(), q.ow()});
  f.add_node(26, "dequant", {c}, y, {attr_float("scale", q.out_scale), dsw::attr_int("zero_point", q.y_zp)});
  f.outputs = {y};
  return f;
}

// quantize with the docs/format.md formula.
std::vector<int64_t> quantized_input(const QConv& q, const std::vector<float>& x) {
  std::vector<int64_t> xq(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = std::nearbyint(x[i] / q.in_scale) + float(q.x_zp);
    xq[i] = int64_t(std::min(255.0f, std::max(0.0f, v)));
  }
  return xq;
}

// The docs/format.md formulas with plain integer loops: the conv's u8 outputs.
std::vector<int64_t> expected_conv_u8(const QConv& q, const std::vector<float>& x) {
  const std::vector<int64_t> xq = quantized_input(q, x);
  const int64_t cg = q.c / q.group, og = q.o / q.group;
  std::vector<int64_t> y;
  for (int64_t b = 0; b < q.n; ++b)
    for (int64_t o = 0; o < q.o; ++o)
      for (int64_t oy = 0; oy < q.oh(); ++oy)
        for (int64_t ox = 0; ox < q.ow(); ++ox) {
          int64_t acc = q.bias[size_t(o)];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < q.kh; ++ky)
              for (int64_t kx = 0; kx < q.kw; ++kx) {
                const int64_t iy = oy * q.stride - q.pad + ky * q.dil, ix = ox * q.sw() - q.pad + kx * q.dil;
                const int64_t c = (o / og) * cg + ci;
                const int64_t v = (iy < 0 || iy >= q.h || ix < 0 || ix >= q.w) ? q.x_zp
                                                                              : xq[size_t(((b * q.c + c) * q.h + iy) * q.w + ix)];
                acc += (v - q.x_zp) * q.weight[size_t(((o * cg + ci) * q.kh + ky) * q.kw + kx)];
              }
          const int n = 31 + q.shift[size_t(o)];
          const int64_t r = (acc * q.mult[size_t(o)] + (int64_t(1) << (n - 1))) >> n;
          y.push_back(std::min<int64_t>(q.act_max, std::max<int64_t>(q.act_min, q.y_zp + r)));
        }
  return y;
}

std::vector<float> expected_conv(const QConv& q, const std::vector<float>& x) {
  std::vector<float> y;
  for (int64_t u : expected_conv_u8(q, x)) y.push_back((float(u) - float(q.y_zp)) * q.out_scale);
  return y;
}

// opt::run with a thread count.
Result run_threads(const dsw::File& f, const std::vector<float>& x, const Dims& xs, int threads) {
  Result r;
  const dsw::Bytes bytes = dsw::serialize(f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  ds_session_options o = DS_SESSION_OPTIONS_INIT;
  o.threads = threads;
  r.status = ds_model_load_memory(bytes.data(), bytes.size(), &m);
  if (r.status == DS_OK) r.status = ds_session_create(m, &o, &s);
  if (r.status == DS_OK) r.status = ds_session_set_input(s, 0, x.data(), xs.data(), xs.size());
  if (r.status == DS_OK) r.status = ds_session_run(s);
  if (r.status == DS_OK) {
    size_t rank = 0;
    const int64_t* dims = nullptr;
    r.status = ds_session_output_shape(s, 0, &rank, &dims);
    if (r.status == DS_OK) {
      r.shape.assign(dims, dims + rank);
      size_t n = 1;
      for (int64_t d : r.shape) n *= size_t(d);
      r.y.resize(n);
      r.status = ds_session_get_output(s, 0, r.y.data(), r.y.size());
    }
  }
  if (r.status != DS_OK) r.error = ds_last_error();
  ds_session_free(s);
  ds_model_free(m);
  return r;
}

const char* const kIsas[] = {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni"};

// Runs f at every available level and checks the output against `want` exactly.
void expect_all_isas(const dsw::File& f, const std::vector<float>& x, const Dims& xs, const std::vector<float>& want,
                     int line) {
  int ran = 0;
  for (const char* isa : kIsas) {
    setenv("DS_FORCE_ISA", isa, 1);
    const Result r = opt::run(f, x, xs);
    if (r.status == DS_ERR_INVALID_ARG && r.error.find("DS_FORCE_ISA") != std::string::npos) continue;
    ++ran;
    bool same = r.status == DS_OK && r.y.size() == want.size();
    for (size_t i = 0; same && i < want.size(); ++i) same = r.y[i] == want[i];
    if (!same) harness::record_failure(__FILE__, line, std::string("int8 output differs at ") + isa + ": " + r.error);
  }
  unsetenv("DS_FORCE_ISA");
  if (ran == 0) harness::record_failure(__FILE__, line, "no ISA level ran");
}

}  // namespace

TEST(qconv2d_matches_integer_loops_at_every_isa) {
  tiny::Rng rng(3);
  const QConv shapes[] = {
      [] { QConv q; return q; }(),
      [] { QConv q; q.c = 8; q.o = 17; q.kh = q.kw = 1; q.pad = 0; q.h = 5; q.w = 7; return q; }(),
      [] { QConv q; q.c = 6; q.o = 6; q.group = 6; q.h = 9; q.w = 11; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 6; q.o = 9; q.group = 3; q.act_min = 7; q.act_max = 200; return q; }(),
      [] { QConv q; q.c = 16; q.o = 40; q.h = 12; q.w = 13; q.n = 2; return q; }(),
      // im2col edges: stride 2 with padding, wide windows, 1x1 stride 2, rows longer than a block
      [] { QConv q; q.c = 5; q.o = 9; q.h = 11; q.w = 37; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 3; q.o = 10; q.h = 17; q.w = 19; q.kh = q.kw = 7; q.pad = 3; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 4; q.o = 6; q.h = 6; q.w = 5; q.kh = q.kw = 5; q.pad = 2; return q; }(),
      [] { QConv q; q.c = 12; q.o = 8; q.h = 9; q.w = 9; q.kh = q.kw = 1; q.pad = 0; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 7; q.o = 33; q.h = 9; q.w = 70; return q; }(),
      [] { QConv q; q.c = 2; q.o = 3; q.h = 4; q.w = 3; q.kh = q.kw = 3; q.pad = 2; q.stride = 3; return q; }(),
      // stride 1 on the padded grid: dilation, several pixel blocks (k = 2304), no padding
      [] { QConv q; q.c = 5; q.o = 7; q.h = 12; q.w = 15; q.dil = 2; q.pad = 2; return q; }(),
      [] { QConv q; q.c = 3; q.o = 5; q.h = 13; q.w = 14; q.dil = 2; q.pad = 2; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 2; q.o = 4; q.h = 10; q.w = 11; q.kh = 2; q.kw = 3; q.pad = 1; q.stride = 3; return q; }(),
      [] { QConv q; q.c = 256; q.o = 10; q.h = 20; q.w = 20; return q; }(),
      [] { QConv q; q.c = 4; q.o = 10; q.h = 7; q.w = 9; q.pad = 0; q.group = 2; return q; }(),
      // channel quads read in place (C/group a multiple of 4): dilation, stride 2, groups, 1x3
      [] { QConv q; q.c = 8; q.o = 9; q.h = 13; q.w = 11; q.dil = 2; q.pad = 2; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 12; q.o = 35; q.h = 15; q.w = 17; q.stride = 2; q.n = 2; return q; }(),
      [] { QConv q; q.c = 16; q.o = 10; q.h = 9; q.w = 8; q.group = 2; q.kh = 1; q.kw = 3; return q; }(),
      // few pixels, K >= 512: output channels in the lanes (a partial panel of 32), stride 2
      [] { QConv q; q.c = 64; q.o = 40; q.h = 9; q.w = 11; return q; }(),
      [] { QConv q; q.c = 128; q.o = 33; q.h = 13; q.w = 14; q.stride = 2; q.n = 2; return q; }(),
      // 196 and 49 output pixels: tiles of 7 pixels
      [] { QConv q; q.c = 64; q.o = 36; q.h = 14; q.w = 14; return q; }(),
      [] { QConv q; q.c = 128; q.o = 70; q.h = 7; q.w = 7; return q; }(),
      // column stride 1 with both side pads: rows of W + max(pad_left, pad_right) (a row's right
      // pad is the next row's left pad); unequal pads, row stride 2, 1x1 with pads, dilation, the
      // taps packed (C not a multiple of 4) and the transposed GEMM
      [] { QConv q; q.c = 8; q.o = 9; q.h = 9; q.w = 10; q.pad_right = 2; q.pad_bottom = 0; return q; }(),
      [] { QConv q; q.c = 8; q.o = 11; q.h = 11; q.w = 13; q.pad = 2; q.pad_right = 1; q.stride = 2; q.stride_w = 1; return q; }(),
      [] { QConv q; q.c = 3; q.o = 7; q.h = 7; q.w = 12; q.pad_right = 3; q.n = 2; return q; }(),
      [] { QConv q; q.c = 12; q.o = 5; q.h = 5; q.w = 6; q.kh = q.kw = 1; return q; }(),
      [] { QConv q; q.c = 8; q.o = 6; q.h = 10; q.w = 17; q.dil = 2; q.pad = 2; q.pad_right = 1; return q; }(),
      [] { QConv q; q.c = 64; q.o = 36; q.h = 9; q.w = 8; q.pad_right = 2; return q; }(),
      // rows of 16 or more output pixels: the GEMM's columns are the pixels (row ends inside and
      // at the edges of vectors), stride 2, dilation
      [] { QConv q; q.c = 8; q.o = 10; q.h = 7; q.w = 16; return q; }(),
      [] { QConv q; q.c = 4; q.o = 9; q.h = 9; q.w = 24; q.pad_right = 0; q.n = 2; return q; }(),
      [] { QConv q; q.c = 12; q.o = 17; q.h = 11; q.w = 41; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 8; q.o = 8; q.h = 12; q.w = 35; q.dil = 2; q.pad = 2; return q; }(),
  };
  for (const QConv& shape : shapes) {
    const QConv q = random_conv(rng, shape);
    const std::vector<float> x = opt::random_vec(rng, size_t(q.n * q.c * q.h * q.w), -7, 7);
    expect_all_isas(conv_file(q), x, {q.n, q.c, q.h, q.w}, expected_conv(q, x), __LINE__);
  }
}

TEST(qconv2d_threads_split_the_same_way_bit_for_bit) {
  // Several pixel blocks (k = 9 * 96), depthwise, 1x1 and a stride-2 im2col layer, at 2 and 3
  // threads against the integer loops.
  tiny::Rng rng(15);
  const QConv shapes[] = {
      [] { QConv q; q.c = 96; q.o = 20; q.h = 30; q.w = 31; return q; }(),
      [] { QConv q; q.c = 20; q.o = 20; q.group = 20; q.h = 17; q.w = 40; return q; }(),
      [] { QConv q; q.c = 24; q.o = 37; q.kh = q.kw = 1; q.pad = 0; q.h = 21; q.w = 23; return q; }(),
      [] { QConv q; q.c = 40; q.o = 11; q.h = 33; q.w = 29; q.stride = 2; return q; }(),
      // few pixels, many channels: the output channels split between threads
      [] { QConv q; q.c = 8; q.o = 45; q.h = 5; q.w = 5; return q; }(),
      [] { QConv q; q.c = 8; q.o = 45; q.h = 9; q.w = 9; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 64; q.o = 70; q.h = 12; q.w = 13; return q; }(),
      [] { QConv q; q.c = 96; q.o = 20; q.h = 30; q.w = 31; q.pad_right = 2; q.stride_w = 1; q.stride = 2; return q; }(),
      [] { QConv q; q.c = 64; q.o = 24; q.h = 33; q.w = 56; return q; }(),
  };
  for (const QConv& shape : shapes) {
    const QConv q = random_conv(rng, shape);
    const std::vector<float> x = opt::random_vec(rng, size_t(q.n * q.c * q.h * q.w), -7, 7);
    const std::vector<float> want = expected_conv(q, x);
    for (int threads : {2, 3}) {
      const Result r = run_threads(conv_file(q), x, {q.n, q.c, q.h, q.w}, threads);
      CHECK_MSG(r.status == DS_OK && r.y == want, "qconv2d differs at " + std::to_string(threads) + " threads " + r.error);
    }
  }
}

// A qadd after a qconv2d, the session's fused pair. The add's other operand is the quantized input
// (the conv keeps the shape: stride 1, "same" padding).
struct QAddAttrs {
  int32_t a_zp = 0, b_zp = 0, y_zp = 90, act_min = 3, act_max = 250, shift = 1;
  int64_t a_mult = 0, b_mult = 0;
  float out_scale = 0.08f;
};

// x -> quantize -> qconv2d -> qadd(conv, qx) (conv_is_a) or qadd(qx, conv) -> dequantize. With
// export_conv the conv's output is a second graph output, so the session cannot fuse the add
// (the unfused graph).
dsw::File residual_file(const QConv& q, const QAddAttrs& a, bool conv_is_a, bool export_conv) {
  dsw::File f = conv_file(q);
  const uint32_t qx = f.nodes[0].outputs[0], c = f.nodes[1].outputs[0], conv_y = f.outputs[0];
  const uint32_t sum = f.add_activation("sum", {q.n, q.o, q.oh(), q.ow()}, 3);
  f.add_node(29, "add", conv_is_a ? std::vector<uint32_t>{c, qx} : std::vector<uint32_t>{qx, c}, sum,
             {dsw::attr_int("a_zero_point", a.a_zp), dsw::attr_int("b_zero_point", a.b_zp),
              dsw::attr_int("y_zero_point", a.y_zp), dsw::attr_int("a_multiplier", a.a_mult),
              dsw::attr_int("b_multiplier", a.b_mult), dsw::attr_int("shift", a.shift),
              dsw::attr_int("act_min", a.act_min), dsw::attr_int("act_max", a.act_max)});
  const uint32_t y = f.add_value("out", {q.n, q.o, q.oh(), q.ow()});
  f.add_node(26, "dequant_sum", {sum}, y, {attr_float("scale", a.out_scale), dsw::attr_int("zero_point", a.y_zp)});
  f.outputs = {y};
  if (export_conv) f.outputs.push_back(conv_y);
  else f.nodes.erase(f.nodes.begin() + 2);  // the conv's dequantize: the add is its only reader
  return f;
}

TEST(qconv2d_fused_qadd_is_bit_identical_to_the_two_nodes) {
  // Every qconv2d path (1x1 direct, channel quads in place, taps packed, transposed few-pixel,
  // depthwise, grouped), both operand orders, at every level and 1-3 threads: the fused graph
  // against the unfused one and both against the integer loops.
  tiny::Rng rng(21);
  const QConv shapes[] = {
      [] { QConv q; q.c = 16; q.o = 16; q.kh = q.kw = 1; q.pad = 0; q.h = 9; q.w = 11; q.n = 2; return q; }(),
      [] { QConv q; q.c = 40; q.o = 40; q.kh = q.kw = 1; q.pad = 0; q.h = 30; q.w = 29; return q; }(),
      [] { QConv q; q.c = 8; q.o = 8; q.h = 10; q.w = 10; q.act_min = 20; q.act_max = 230; return q; }(),
      [] { QConv q; q.c = 6; q.o = 6; q.h = 7; q.w = 9; return q; }(),
      [] { QConv q; q.c = 64; q.o = 64; q.h = 9; q.w = 9; return q; }(),
      [] { QConv q; q.c = 24; q.o = 24; q.group = 24; q.h = 12; q.w = 13; return q; }(),
      [] { QConv q; q.c = 12; q.o = 12; q.group = 3; q.h = 8; q.w = 8; q.n = 2; return q; }(),
      [] { QConv q; q.c = 5; q.o = 5; q.kh = q.kw = 5; q.pad = 2; q.h = 7; q.w = 6; return q; }(),
      // channel quads in place with tiles across grid rows, and 12 rows (a partial row tile)
      [] { QConv q; q.c = 16; q.o = 16; q.h = 20; q.w = 23; q.act_min = 9; return q; }(),
      [] { QConv q; q.c = 12; q.o = 12; q.h = 5; q.w = 37; q.n = 2; return q; }(),
      [] { QConv q; q.c = 8; q.o = 8; q.h = 9; q.w = 56; return q; }(),
  };
  int shape_index = 0;
  for (const QConv& shape : shapes) {
    ++shape_index;
    const QConv q = random_conv(rng, shape);
    const std::vector<float> x = opt::random_vec(rng, size_t(q.n * q.c * q.h * q.w), -7, 7);
    const std::vector<int64_t> xq = quantized_input(q, x), conv = expected_conv_u8(q, x);
    for (bool conv_is_a : {true, false}) {
      QAddAttrs a;
      a.a_zp = conv_is_a ? q.y_zp : q.x_zp, a.b_zp = conv_is_a ? q.x_zp : q.y_zp;
      a.a_mult = int64_t((1u << 30) + uint32_t(rng.uniform(0, 1 << 30)));
      a.b_mult = int64_t((1u << 29) + uint32_t(rng.uniform(0, 1 << 30)));
      // shift 14: n = 45, the 16-bit split's edge; 20 (n = 51): the 64-bit formula
      a.shift = shape_index % 5 == 0 ? 14 : shape_index % 5 == 1 ? 20 : int32_t(rng.uniform(0, 3));
      if (a.shift > 2) a.a_mult >>= a.shift - 3, a.b_mult >>= a.shift - 5;
      std::vector<float> want;
      for (size_t i = 0; i < conv.size(); ++i) {
        const int64_t va = conv_is_a ? conv[i] : xq[i], vb = conv_is_a ? xq[i] : conv[i];
        const int64_t v = (va - a.a_zp) * a.a_mult + (vb - a.b_zp) * a.b_mult;
        const int n = 31 + a.shift;
        const int64_t u = std::min<int64_t>(a.act_max, std::max<int64_t>(a.act_min, a.y_zp + ((v + (int64_t(1) << (n - 1))) >> n)));
        want.push_back((float(u) - float(a.y_zp)) * a.out_scale);
      }
      const dsw::File fused = residual_file(q, a, conv_is_a, false), unfused = residual_file(q, a, conv_is_a, true);
      int ran = 0;
      for (const char* isa : kIsas) {
        setenv("DS_FORCE_ISA", isa, 1);
        for (int threads : {1, 2, 3}) {
          const Result rf = run_threads(fused, x, {q.n, q.c, q.h, q.w}, threads);
          if (rf.status == DS_ERR_INVALID_ARG && rf.error.find("DS_FORCE_ISA") != std::string::npos) break;
          ++ran;
          const Result ru = run_threads(unfused, x, {q.n, q.c, q.h, q.w}, threads);
          const std::string where = std::string(isa) + ", " + std::to_string(threads) + " threads, conv as " +
                                    (conv_is_a ? "a" : "b") + ", C " + std::to_string(q.c) + " group " +
                                    std::to_string(q.group) + " " + std::to_string(q.kh) + "x" + std::to_string(q.kw);
          CHECK_MSG(rf.status == DS_OK && rf.y == want, "fused qconv2d + qadd differs at " + where + " " + rf.error);
          CHECK_MSG(ru.status == DS_OK && ru.y == want, "unfused qconv2d + qadd differs at " + where + " " + ru.error);
        }
      }
      unsetenv("DS_FORCE_ISA");
      CHECK(ran > 0);
    }
  }
}

TEST(qdense_matches_integer_loops_at_every_isa_and_thread_count) {
  // Large enough (M * K >= 65536) for the packed weights to be split between threads; batch 3,
  // a partial last panel, K not a multiple of 4.
  tiny::Rng rng(23);
  for (const auto& [n, k, m] : {std::array<int64_t, 3>{3, 1283, 101}, std::array<int64_t, 3>{1, 640, 130},
                                std::array<int64_t, 3>{2, 37, 9}}) {
    const float in_scale = 0.05f, out_scale = 0.2f;
    const int32_t x_zp = 117, y_zp = 9, act_min = 4, act_max = 251;
    std::vector<int8_t> w(size_t(m * k));
    for (auto& v : w) v = int8_t(int(rng.uniform(0, 255)) - 127);
    std::vector<int32_t> bias, mult, shift;
    for (int64_t j = 0; j < m; ++j) {
      bias.push_back(int32_t(rng.uniform(-5000, 5000)));
      mult.push_back(int32_t((1u << 30) + uint32_t(rng.uniform(0, 1 << 30))));
      shift.push_back(int32_t(rng.uniform(8, 14)));
    }
    dsw::File f;
    const uint32_t x = f.add_value("x", {n, k});
    f.inputs = {x};
    const uint32_t qx = f.add_activation("qx", {n, k}, 3);
    f.add_node(25, "quant", {x}, qx, {attr_float("scale", in_scale), dsw::attr_int("zero_point", x_zp)});
    const uint32_t wi = f.add_typed_constant(dsw::typed_tensor("w", 2, {uint64_t(m), uint64_t(k)}, w));
    const uint32_t bi = f.add_typed_constant(dsw::typed_tensor("b", 4, {uint64_t(m)}, bias));
    const uint32_t mi = f.add_typed_constant(dsw::typed_tensor("m", 4, {uint64_t(m)}, mult));
    const uint32_t si = f.add_typed_constant(dsw::typed_tensor("s", 4, {uint64_t(m)}, shift));
    const uint32_t c = f.add_activation("c", {n, m}, 3);
    f.add_node(28, "fc", {qx, wi, bi, mi, si}, c,
               {dsw::attr_int("x_zero_point", x_zp), dsw::attr_int("y_zero_point", y_zp),
                dsw::attr_int("act_min", act_min), dsw::attr_int("act_max", act_max)});
    const uint32_t y = f.add_value("y", {n, m});
    f.add_node(26, "dequant", {c}, y, {attr_float("scale", out_scale), dsw::attr_int("zero_point", y_zp)});
    f.outputs = {y};
    const std::vector<float> xv = opt::random_vec(rng, size_t(n * k), -6, 6);
    std::vector<float> want;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t j = 0; j < m; ++j) {
        int64_t acc = bias[size_t(j)];
        for (int64_t t = 0; t < k; ++t) {
          const float v = std::nearbyint(xv[size_t(b * k + t)] / in_scale) + float(x_zp);
          acc += (int64_t(std::min(255.0f, std::max(0.0f, v))) - x_zp) * w[size_t(j * k + t)];
        }
        const int sh = 31 + shift[size_t(j)];
        const int64_t r = (acc * mult[size_t(j)] + (int64_t(1) << (sh - 1))) >> sh;
        const int64_t u = std::min<int64_t>(act_max, std::max<int64_t>(act_min, y_zp + r));
        want.push_back((float(u) - float(y_zp)) * out_scale);
      }
    int ran = 0;
    for (const char* isa : kIsas) {
      setenv("DS_FORCE_ISA", isa, 1);
      for (int threads : {1, 2, 3}) {
        const Result r = run_threads(f, xv, {n, k}, threads);
        if (r.status == DS_ERR_INVALID_ARG && r.error.find("DS_FORCE_ISA") != std::string::npos) break;
        ++ran;
        CHECK_MSG(r.status == DS_OK && r.y == want, std::string("qdense differs at ") + isa + ", " +
                                                        std::to_string(threads) + " threads, k " + std::to_string(k) +
                                                        " " + r.error);
      }
    }
    unsetenv("DS_FORCE_ISA");
    CHECK(ran > 0);
  }
}

TEST(int4_weights_bitpacked_are_sign_extended) {
  tiny::Rng rng(4);
  QConv q = random_conv(rng, QConv());
  for (auto& v : q.weight) v = int8_t(int(rng.uniform(0, 15)) - 7);
  dsw::Tensor w;
  w.name = "w";
  w.dtype = 2;
  w.dims = {uint64_t(q.o), uint64_t(q.c), 3, 3};
  w.entry_count = q.weight.size();
  dsw::Stream s;
  s.codec = 1;
  s.bits = 4;
  s.count = q.weight.size();
  std::vector<uint32_t> sym;
  for (int8_t v : q.weight) sym.push_back(uint32_t(uint8_t(v)) & 15u);
  s.bytes = dsw::bitpack_encode(sym, 4);
  w.streams.push_back(s);
  const std::vector<float> x = opt::random_vec(rng, size_t(q.c * q.h * q.w), -5, 5);
  expect_all_isas(conv_file(q, {}, &w), x, {1, q.c, q.h, q.w}, expected_conv(q, x), __LINE__);
}

TEST(quantize_dequantize_round_half_even_and_saturate) {
  dsw::File f;
  const uint32_t x = f.add_value("x", {1, 8});
  f.inputs = {x};
  const uint32_t q = f.add_activation("q", {1, 8}, 3);
  f.add_node(25, "quant", {x}, q, {attr_float("scale", 0.5f), dsw::attr_int("zero_point", 10)});
  const uint32_t y = f.add_value("y", {1, 8});
  f.add_node(26, "dequant", {q}, y, {attr_float("scale", 0.5f), dsw::attr_int("zero_point", 10)});
  f.outputs = {y};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // 0.25 / 0.5 = 0.5 -> 0; 0.75 -> 1.5 -> 2; -5.25 -> -10.5 -> -10 -> 0; 1e9 -> 255
  const Result r = opt::run(f, {0.25f, 0.75f, -5.25f, 1e9f, -inf, inf, nan, -6.0f}, {1, 8});
  CHECK(r.status == DS_OK);
  const std::vector<float> want = {0.0f, 1.0f, -5.0f, 122.5f, -5.0f, 122.5f, 0.0f, -5.0f};
  CHECK(r.y == want);
}

TEST(malformed_quantization_parameters_are_refused) {
  tiny::Rng rng(5);
  const QConv q = random_conv(rng, QConv());
  EXPECT_REFUSED(opt::load(conv_file(q, {dsw::attr_int("x_zero_point", 256)})), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): attribute 'x_zero_point' is 256, outside 0..255");
  EXPECT_REFUSED(opt::load(conv_file(q, {dsw::attr_int("y_zero_point", -1)})), DS_ERR_FORMAT,
                 "attribute 'y_zero_point' is -1");
  EXPECT_REFUSED(opt::load(conv_file(q, {dsw::attr_int("act_min", 9), dsw::attr_int("act_max", 8)})), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): act_min 9 is greater than act_max 8");
  EXPECT_REFUSED(opt::load(conv_file(q, {dsw::attr_int("act_max", 256)})), DS_ERR_FORMAT, "attribute 'act_max' is 256");
  QConv bad = q;
  bad.mult[1] = -1;
  EXPECT_REFUSED(opt::load(conv_file(bad)), DS_ERR_FORMAT, "node 'conv' (qconv2d): multiplier[1] is -1");
  bad = q;
  bad.shift[2] = 31;
  EXPECT_REFUSED(opt::load(conv_file(bad)), DS_ERR_FORMAT, "node 'conv' (qconv2d): shift[2] is 31, outside -30..30");
  bad = q;
  bad.shift[0] = -31;
  EXPECT_REFUSED(opt::load(conv_file(bad)), DS_ERR_FORMAT, "shift[0] is -31");
  for (float s : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    bad = q;
    bad.in_scale = s;
    EXPECT_REFUSED(opt::load(conv_file(bad)), DS_ERR_FORMAT, "node 'quant' (quantize): attribute 'scale' is ");
    bad = q;
    bad.out_scale = s;
    EXPECT_REFUSED(opt::load(conv_file(bad)), DS_ERR_FORMAT, "node 'dequant' (dequantize): attribute 'scale' is ");
  }
  // Constants of the wrong dtype or shape.
  dsw::Tensor wf = dsw::typed_tensor("w", 1, {4, 3, 3, 3}, std::vector<float>(108, 0.0f));
  EXPECT_REFUSED(opt::load(conv_file(q, {}, &wf)), DS_ERR_FORMAT, "node 'conv' (qconv2d): input 1 (weight) is f32, must be i8");
  dsw::File f = conv_file(q);
  f.tensors[1] = dsw::typed_tensor("b", 4, {3}, std::vector<int32_t>(3, 0));
  f.values[3].dims = {3};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'conv' (qconv2d): bias has shape [3], must be [4]");
  f = conv_file(q);
  f.tensors[2] = dsw::typed_tensor("m", 1, {4}, std::vector<float>(4, 1.0f));
  f.values[4].dtype = 1;
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "input 3 (multiplier) is f32, must be i32");
  // A value whose declared dtype disagrees with its tensor record.
  f = conv_file(q);
  f.values[2].dtype = 3;
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "u8 differs from tensor 'w' (i8)");
  // The declared output dtype of a node must be what its op gives.
  f = conv_file(q);
  f.values[1].dtype = 1;
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'quant' (quantize): output is declared f32; the op gives u8 or i16");
}

TEST(accumulation_depth_beyond_int32_is_refused) {
  QConv q;
  q.c = 65794;  // K * 255 * 128 >= 2^31
  q.h = q.w = 1;
  q.kh = q.kw = 1;
  q.pad = 0;
  q.o = 1;
  q.weight.assign(size_t(q.c), 1);
  q.bias = {0};
  q.mult = {1 << 30};
  q.shift = {0};
  EXPECT_REFUSED(opt::load(conv_file(q)), DS_ERR_FORMAT, "sums 65794 products per output, more than 65793");
  q.c = 65793;
  q.weight.assign(size_t(q.c), 1);
  CHECK(opt::load(conv_file(q)).status == DS_OK);
}

TEST(dtypes_an_op_does_not_take_are_refused) {
  // relu (f32 only) on u8
  dsw::File f;
  const uint32_t x = f.add_value("x", {1, 4});
  f.inputs = {x};
  const uint32_t q = f.add_activation("q", {1, 4}, 3);
  f.add_node(25, "quant", {x}, q, {attr_float("scale", 1.0f), dsw::attr_int("zero_point", 0)});
  const uint32_t r = f.add_activation("r", {1, 4}, 3);
  f.add_node(5, "relu", {q}, r);
  const uint32_t y = f.add_value("y", {1, 4});
  f.add_node(26, "dequant", {r}, y, {attr_float("scale", 1.0f), dsw::attr_int("zero_point", 0)});
  f.outputs = {y};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'relu' (relu): input 0 ('q') is u8; the op takes f32");
  // pad of u8 with a value that is no zero point; resize linear of u8
  f.nodes[1] = {20, "pad", {q}, {r}, {dsw::attr_ints("pads", {0, 0, 0, 0}), attr_float("value", 0.5f)}};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'pad' (pad): attribute 'value' is 0.5");
  // a u8 graph input or output
  dsw::File g = f;
  g.nodes[1] = {20, "pad", {q}, {r}, {dsw::attr_ints("pads", {0, 0, 0, 0}), attr_float("value", 3.0f)}};
  CHECK(opt::load(g).status == DS_OK);
  g.outputs = {r};
  EXPECT_REFUSED(opt::load(g), DS_ERR_FORMAT, "output 'r' is u8; this runtime returns f32 graph outputs");
  g = f;
  g.values[x].dtype = 3;
  g.nodes.erase(g.nodes.begin());
  g.nodes.erase(g.nodes.begin());
  g.nodes[0].inputs = {x};
  EXPECT_REFUSED(opt::load(g), DS_ERR_FORMAT, "input 'x' is u8; this runtime takes f32 graph inputs");
  // qlut with a table that is not 256 u8
  dsw::File h = f;
  const uint32_t t = h.add_typed_constant(dsw::typed_tensor("table", 3, {255}, std::vector<uint8_t>(255, 1)));
  h.nodes[1] = {31, "lut", {q, t}, {r}, {}};
  EXPECT_REFUSED(opt::load(h), DS_ERR_FORMAT, "node 'lut' (qlut): table has shape [255], must be [256]");
  h.tensors[0] = dsw::typed_tensor("table", 2, {256}, std::vector<int8_t>(256, 1));
  h.values[t].dims = {256};
  h.values[t].dtype = 2;
  EXPECT_REFUSED(opt::load(h), DS_ERR_FORMAT, "input 1 (table) is i8, must be u8");
  // unknown dtype id
  h = f;
  h.values[q].dtype = 9;
  EXPECT_REFUSED(opt::load(h), DS_ERR_FORMAT, "9 is not 1 (f32), 2 (i8), 3 (u8), 4 (i32) or 5 (i16)");
  // an i32 activation
  h = f;
  h.values[q].dtype = 4;
  EXPECT_REFUSED(opt::load(h), DS_ERR_FORMAT, "i32 is not an activation dtype (f32, u8 or i16)");
}

TEST(qadd_qconcat_qlut_qglobal_avgpool_and_u8_movement) {
  // x (1,2,2,2) -> quantize (scale 1, zp 0) -> [qlut (255 - v), qadd(q, lut), maxpool 2, qconcat
  // with the pooled, global pools] checked through one path each.
  const std::vector<float> xv = {0, 10, 20, 30, 40, 50, 60, 250};
  auto base = [](dsw::File& f, uint32_t& q) {
    const uint32_t x = f.add_value("x", {1, 2, 2, 2});
    f.inputs = {x};
    q = f.add_activation("q", {1, 2, 2, 2}, 3);
    f.add_node(25, "quant", {x}, q, {attr_float("scale", 1.0f), dsw::attr_int("zero_point", 0)});
  };
  auto finish = [](dsw::File& f, uint32_t v, std::vector<int64_t> dims) {
    const uint32_t y = f.add_value("y", std::move(dims));
    f.add_node(26, "dequant", {v}, y, {attr_float("scale", 1.0f), dsw::attr_int("zero_point", 0)});
    f.outputs = {y};
  };
  {  // qlut then qadd: y = round_shift(q * 2^30 + (255 - q) * 2^30, 31) = round(255 / 2) = 128
    dsw::File f;
    uint32_t q;
    base(f, q);
    std::vector<uint8_t> table(256);
    for (int i = 0; i < 256; ++i) table[size_t(i)] = uint8_t(255 - i);
    const uint32_t t = f.add_typed_constant(dsw::typed_tensor("table", 3, {256}, table));
    const uint32_t l = f.add_activation("l", {1, 2, 2, 2}, 3);
    f.add_node(31, "lut", {q, t}, l);
    const uint32_t a = f.add_activation("a", {1, 2, 2, 2}, 3);
    f.add_node(29, "add", {q, l}, a,
               {dsw::attr_int("a_zero_point", 0), dsw::attr_int("b_zero_point", 0), dsw::attr_int("y_zero_point", 0),
                dsw::attr_int("a_multiplier", 1 << 30), dsw::attr_int("b_multiplier", 1 << 30),
                dsw::attr_int("shift", 0)});
    finish(f, a, {1, 2, 2, 2});
    const Result r = opt::run(f, xv, {1, 2, 2, 2});
    CHECK(r.status == DS_OK && r.y == std::vector<float>(8, 128.0f));
  }
  {  // maxpool 2x2 on u8, then qconcat along channels with the input's global maxpool and a
     // rescale by 1/2 (multiplier 2^30, shift 0) with y_zp 1: [30, 250] and [(v+1)/2 rounded]
    dsw::File f;
    uint32_t q;
    base(f, q);
    const uint32_t m = f.add_activation("m", {1, 2, 1, 1}, 3);
    f.add_node(3, "pool", {q}, m, {dsw::attr_ints("kernel", {2, 2})});
    const uint32_t g = f.add_activation("g", {1, 2, 1, 1}, 3);
    f.add_node(23, "gmax", {q}, g);
    const uint32_t c = f.add_activation("c", {1, 4, 1, 1}, 3);
    f.add_node(30, "cat", {m, g}, c,
               {dsw::attr_int("axis", 1), dsw::attr_ints("zero_points", {0, 0}),
                dsw::attr_ints("multipliers", {1 << 30, 1 << 30}), dsw::attr_ints("shifts", {0, 0}),
                dsw::attr_int("y_zero_point", 1)});
    const uint32_t a = f.add_activation("avg", {1, 4, 1, 1}, 3);
    // qglobal_avgpool over one element, multiplier 2^31-1 shift 0 ~ identity: round(v * (1 - 2^-31))
    f.add_node(32, "gavg", {c}, a,
               {dsw::attr_int("x_zero_point", 1), dsw::attr_int("y_zero_point", 0),
                dsw::attr_int("multiplier", (int64_t(1) << 31) - 1), dsw::attr_int("shift", 0)});
    finish(f, a, {1, 4, 1, 1});
    const Result r = opt::run(f, xv, {1, 2, 2, 2});
    // maxes 30 and 250 -> 1 + round(15) = 16, 1 + 125 = 126; minus x_zp 1 -> 15, 125 (twice)
    CHECK(r.status == DS_OK && (r.y == std::vector<float>{15, 125, 15, 125}));
  }
}

// ---- the SIMD kernels against the scalar formula at tile edges, bit for bit ----

#include "core/cpu_features.h"
#include "kernels/qu8.h"

namespace {

struct Level {
  const char* name;
  const ds::QKernels* k;
};

std::vector<Level> simd_levels() {
  std::vector<Level> v;
#if defined(__x86_64__)
  const ds::CpuFeatures& f = ds::cpu_features();
  if (f.avx2 && f.fma) v.push_back({"avx2", &ds::ds_qkernels__avx2});
  if (f.avx2 && f.fma && f.avxvnni) v.push_back({"avxvnni", &ds::ds_qkernels__avxvnni});
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni) v.push_back({"avx512vnni", &ds::ds_qkernels__avx512vnni});
#endif
  return v;
}

int32_t rand_shift(tiny::Rng& rng) {
  static const int32_t shifts[] = {-3, -1, 0, 1, 5, 12, 30};
  return shifts[int(rng.uniform(0, 6.999f))];
}

// A random qdense problem: u8 input, i8 weights (m x k), its zero point, bias, the bias with the
// zero point's weight sums folded in (what the SIMD kernels take), multipliers and shifts.
struct DenseCase {
  std::vector<uint8_t> x;
  std::vector<int8_t> w;
  int32_t x_zp;
  std::vector<int32_t> bias, folded, mult, shift;
};

DenseCase random_dense(tiny::Rng& rng, int64_t m, int64_t k) {
  DenseCase d;
  d.x.resize(static_cast<size_t>(k));
  d.w.resize(size_t(m * k));
  for (auto& v : d.x) v = uint8_t(rng.uniform(0, 255));
  for (auto& v : d.w) v = int8_t(int(rng.uniform(0, 255)) - 128);
  d.x_zp = int32_t(rng.uniform(0, 255));
  for (int64_t j = 0; j < m; ++j) {
    d.bias.push_back(int32_t(rng.uniform(-20000, 20000)));
    int64_t sum = 0;
    for (int64_t t = 0; t < k; ++t) sum += d.w[size_t(j * k + t)];
    d.folded.push_back(int32_t(d.bias.back() - d.x_zp * sum));
    d.mult.push_back(int32_t(rng.uniform(0, 2147483520.0f)));
    d.shift.push_back(rand_shift(rng));
  }
  return d;
}

// Shifts 2..21 only (31 + shift in 33..52), where the kernels may requantize from the products'
// high halves: a whole block of channels takes that path only when all of its shifts are here.
int32_t rand_high_shift(tiny::Rng& rng) {
  static const int32_t shifts[] = {2, 3, 7, 12, 21};
  return shifts[int(rng.uniform(0, 4.999f))];
}

}  // namespace

TEST(qs8_gemm_matches_the_formula_at_tile_edges) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(9);
  for (const Level& lv : levels) {
    const ds::QGemmKernels& g = *lv.k->gemm;
    // m = 41 with k = 8001: more rows than one block of weights kept in cache.
    const int64_t ms[] = {1, g.mr - 1, g.mr, g.mr + 1, 2 * g.mr + 3, 41};
    const int64_t ns[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 130};
    const int64_t ks[] = {1, 2, 3, 4, 5, 8, 17, 64, 255, 8001};
    for (int64_t m : ms)
      for (int64_t n : ns)
        for (int64_t k : ks) {
          if ((m == 41) != (k == 8001) || (k == 8001 && n > 33)) continue;
          std::vector<int8_t> w(size_t(m * k));
          std::vector<uint8_t> x(size_t(k * (n + 3)));  // row stride n + 3
          const bool extreme = rng.uniform(0, 1) < 0.5f;
          for (auto& v : w) v = extreme ? (rng.uniform(0, 1) < 0.5f ? -128 : 127) : int8_t(int(rng.uniform(0, 255)) - 128);
          for (auto& v : x) v = extreme ? (rng.uniform(0, 1) < 0.5f ? 0 : 255) : uint8_t(rng.uniform(0, 255));
          std::vector<int32_t> bias(static_cast<size_t>(m)), mult(static_cast<size_t>(m)), shift(static_cast<size_t>(m));
          const int64_t limit = ((int64_t(1) << 31) - 1) - k * 255 * 128;
          for (int64_t i = 0; i < m; ++i) {
            bias[size_t(i)] = int32_t(rng.uniform(0, 1) < 0.2f ? (i % 2 ? limit : -limit) : int64_t(rng.uniform(-1e6f, 1e6f)));
            mult[size_t(i)] = rng.uniform(0, 1) < 0.1f ? int32_t((int64_t(1) << 31) - 1) : int32_t(rng.uniform(0, 2147483520.0f));
            shift[size_t(i)] = rand_shift(rng);
          }
          ds::QuantOut q{int32_t(rng.uniform(0, 255)), 0, 255};
          if (rng.uniform(0, 1) < 0.5f) q.act_min = q.y_zp, q.act_max = int32_t(rng.uniform(float(q.y_zp), 255));
          std::vector<uint8_t> pw(size_t(g.packed_w_bytes(m, k))), px(size_t(g.packed_x_bytes(k, n)));
          g.pack_w(m, k, w.data(), pw.data());
          g.pack_x(k, n, x.data(), n + 3, px.data());
          std::vector<uint8_t> y(size_t(m * (n + 1)), 0xAB), want = y;
          ds::QGemmParams p;
          p.m = m, p.n = n, p.k = k, p.w = pw.data(), p.x = px.data(), p.y = y.data(), p.y_row_stride = n + 1;
          p.ch = {bias.data(), mult.data(), shift.data()};
          p.out = q;
          g.gemm(p);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              int64_t acc = bias[size_t(i)];
              for (int64_t t = 0; t < k; ++t) acc += int64_t(w[size_t(i * k + t)]) * x[size_t(t * (n + 3) + j)];
              want[size_t(i * (n + 1) + j)] =
                  ds::qu8_clamp(q.y_zp + ds::qu8_requant(acc, mult[size_t(i)], shift[size_t(i)]), q.act_min, q.act_max);
            }
          if (y != want) {
            harness::record_failure(__FILE__, __LINE__, std::string(lv.name) + " gemm differs at m=" + std::to_string(m) +
                                                            " n=" + std::to_string(n) + " k=" + std::to_string(k));
            return;
          }
          if (!g.grid_out) continue;
          // The same columns as positions of a grid (QGemmParams::grid_w): the output columns land
          // packed, out_w to a grid row, and nothing else is written.
          const int64_t grid_w = 1 + int64_t(rng.uniform(0, 40)), out_w = 1 + int64_t(rng.uniform(0, float(grid_w)));
          const int64_t grid0 = int64_t(rng.uniform(0, float(2 * grid_w)));
          auto out_col = [&](int64_t grid) { return grid - grid / grid_w * (grid_w - out_w); };
          const int64_t stride = out_col(grid0 + n) + 1;
          std::vector<uint8_t> yg(size_t(m * stride), 0xAB), want_g = yg;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              if ((grid0 + j) % grid_w < out_w)
                want_g[size_t(i * stride + out_col(grid0 + j))] = want[size_t(i * (n + 1) + j)];
          p.y = yg.data(), p.y_row_stride = stride;
          p.grid_w = grid_w, p.out_w = out_w, p.grid0 = grid0;
          g.gemm(p);
          if (yg != want_g) {
            harness::record_failure(__FILE__, __LINE__, std::string(lv.name) + " grid gemm differs at m=" + std::to_string(m) +
                                                            " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                                            " grid_w=" + std::to_string(grid_w) + " out_w=" +
                                                            std::to_string(out_w) + " grid0=" + std::to_string(grid0));
            return;
          }
          if (!g.fused_add) continue;
          // With a qadd in the epilogue (QGemmParams::residual, the residual at y's offsets): the
          // formula on the stored results, nothing else written.
          ds::QAddParams qa{int32_t(rng.uniform(0, 255)), int32_t(rng.uniform(0, 255)), int64_t(rng.uniform(0, 2147483520.0f)),
                            int64_t(rng.uniform(0, 2147483520.0f)), int32_t(rng.uniform(-2, 3)), {int32_t(rng.uniform(0, 255)), 0, 255}};
          if (rng.uniform(0, 1) < 0.5f) qa.out.act_min = qa.out.y_zp, qa.out.act_max = int32_t(rng.uniform(float(qa.out.y_zp), 255));
          CHECK(ds::qu8_qadd_split(qa, p.add));
          std::vector<uint8_t> residual(yg.size());
          for (auto& v : residual) v = uint8_t(rng.uniform(0, 255));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              if ((grid0 + j) % grid_w < out_w) {
                const size_t at = size_t(i * stride + out_col(grid0 + j));
                const int64_t v = (int64_t(want_g[at]) - qa.a_zp) * qa.a_mult + (int64_t(residual[at]) - qa.b_zp) * qa.b_mult;
                want_g[at] = ds::qu8_clamp(qa.out.y_zp + ds::qu8_round_shift(v, 31 + qa.shift), qa.out.act_min, qa.out.act_max);
              }
          std::fill(yg.begin(), yg.end(), 0xAB);
          p.residual = residual.data(), p.add_out = qa.out;
          g.gemm(p);
          p.residual = nullptr;
          if (yg != want_g) {
            harness::record_failure(__FILE__, __LINE__, std::string(lv.name) + " gemm with qadd differs at m=" +
                                                            std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                                                            std::to_string(k) + " grid_w=" + std::to_string(grid_w));
            return;
          }
        }
  }
}

// QGemmParams::pixel_cols: the columns are output pixels t, read in place (x_offsets) at their
// grid position t + (t / out_w) * (grid_w - out_w) and stored at y[i * stride + t]; vectors that
// meet a row's end at every lane, partial last tiles, a qadd in the epilogue.
TEST(qs8_gemm_pixel_columns_match_the_formula) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(31);
  for (const Level& lv : levels) {
    const ds::QGemmKernels& g = *lv.k->gemm;
    if (!g.pixel_cols) continue;
    for (int rep = 0; rep < 60; ++rep) {
      const int64_t m = 1 + int64_t(rng.uniform(0, 19.99f)), groups = 1 + int64_t(rng.uniform(0, 12.99f)), k = 4 * groups;
      const int64_t out_w = 16 + int64_t(rng.uniform(0, 50.99f)), grid_w = out_w + int64_t(rng.uniform(0, 3.99f));
      const int64_t grid0 = int64_t(rng.uniform(0, float(3 * out_w))), n = 1 + int64_t(rng.uniform(0, 140.99f));
      const int64_t end = grid0 + n, positions = end + (end / out_w + 1) * (grid_w - out_w) + 64;
      // Each depth group its own run of [position][4] bytes.
      std::vector<int64_t> xoff;
      for (int64_t q = 0; q < groups; ++q) xoff.push_back(q * positions * 4);
      std::vector<uint8_t> x(size_t(groups * positions * 4 + 64));
      for (auto& v : x) v = uint8_t(rng.uniform(0, 255.99f));
      std::vector<int8_t> w(size_t(m * k));
      for (auto& v : w) v = int8_t(int(rng.uniform(0, 255.99f)) - 128);
      std::vector<int32_t> bias(static_cast<size_t>(m)), mult(static_cast<size_t>(m)), shift(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) {
        bias[size_t(i)] = int32_t(rng.uniform(-1e5f, 1e5f));
        mult[size_t(i)] = int32_t(rng.uniform(0, 2147483520.0f));
        shift[size_t(i)] = rand_shift(rng);
      }
      std::vector<uint8_t> pw(size_t(g.packed_w_bytes(m, k)));
      g.pack_w(m, k, w.data(), pw.data());
      const int64_t stride = end + 3;
      std::vector<uint8_t> y(size_t(m * stride), 0xAB), want = y, residual(y.size());
      for (auto& v : residual) v = uint8_t(rng.uniform(0, 255.99f));
      ds::QGemmParams p;
      p.m = m, p.n = n, p.k = k, p.w = pw.data(), p.x = x.data(), p.x_offsets = xoff.data();
      p.y = y.data(), p.y_row_stride = stride, p.ch = {bias.data(), mult.data(), shift.data()};
      p.out = {int32_t(rng.uniform(0, 255.99f)), 0, 255};
      p.grid_w = grid_w, p.out_w = out_w, p.grid0 = grid0, p.pixel_cols = true;
      const bool with_add = g.fused_add && rep % 2 == 1;
      ds::QAddParams qa{int32_t(rng.uniform(0, 255)), int32_t(rng.uniform(0, 255)), int64_t(rng.uniform(0, 2147483520.0f)),
                        int64_t(rng.uniform(0, 2147483520.0f)), int32_t(rng.uniform(-2, 3)), {int32_t(rng.uniform(0, 255)), 0, 255}};
      if (with_add) {
        CHECK(ds::qu8_qadd_split(qa, p.add));
        p.residual = residual.data(), p.add_out = qa.out;
      }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t t = grid0; t < end; ++t) {
          const int64_t q = t + t / out_w * (grid_w - out_w);
          int64_t acc = bias[size_t(i)];
          for (int64_t kk = 0; kk < k; ++kk)
            acc += int64_t(w[size_t(i * k + kk)]) * x[size_t(xoff[size_t(kk / 4)] + 4 * q + kk % 4)];
          int64_t v = ds::qu8_clamp(p.out.y_zp + ds::qu8_requant(acc, mult[size_t(i)], shift[size_t(i)]), 0, 255);
          if (with_add) {
            const int64_t sum = (v - qa.a_zp) * qa.a_mult + (int64_t(residual[size_t(i * stride + t)]) - qa.b_zp) * qa.b_mult;
            v = ds::qu8_clamp(qa.out.y_zp + ds::qu8_round_shift(sum, 31 + qa.shift), 0, 255);
          }
          want[size_t(i * stride + t)] = uint8_t(v);
        }
      g.gemm(p);
      if (y != want) {
        harness::record_failure(__FILE__, __LINE__, std::string(lv.name) + " pixel-column gemm differs at m=" +
                                                        std::to_string(m) + " n=" + std::to_string(n) + " k=" +
                                                        std::to_string(k) + " out_w=" + std::to_string(out_w) +
                                                        " grid_w=" + std::to_string(grid_w) + " grid0=" +
                                                        std::to_string(grid0));
        return;
      }
    }
  }
}

TEST(qu8_dwconv_and_dense_kernels_match_the_reference) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(10);
  struct Shape { int64_t c, h, w, k, stride, pad, dil; };
  const Shape shapes[] = {{3, 7, 7, 3, 1, 1, 1}, {5, 8, 9, 3, 2, 1, 1}, {2, 17, 33, 3, 1, 0, 1}, {4, 6, 5, 5, 1, 2, 1},
                          {3, 9, 9, 3, 2, 2, 2}, {2, 3, 3, 3, 3, 1, 1}, {1, 1, 70, 1, 1, 0, 1}};
  for (const Level& lv : levels) {
    for (const Shape& s : shapes) {
      ds::QConv2dParams q;
      ds::Conv2dParams& c = q.conv;
      c.n = 1, c.c = s.c, c.h = s.h, c.w = s.w, c.o = s.c, c.kh = c.kw = s.k;
      c.stride_h = c.stride_w = s.stride, c.pad_top = c.pad_left = s.pad, c.dil_h = c.dil_w = s.dil, c.group = s.c;
      c.oh = (s.h + 2 * s.pad - s.dil * (s.k - 1) - 1) / s.stride + 1;
      c.ow = (s.w + 2 * s.pad - s.dil * (s.k - 1) - 1) / s.stride + 1;
      q.x_zp = int32_t(rng.uniform(0, 255));
      q.out = {int32_t(rng.uniform(0, 255)), 0, 255};
      std::vector<uint8_t> x(size_t(s.c * s.h * s.w));
      std::vector<int8_t> w(size_t(s.c * s.k * s.k));
      for (auto& v : x) v = uint8_t(rng.uniform(0, 255));
      for (auto& v : w) v = int8_t(int(rng.uniform(0, 255)) - 128);
      std::vector<int32_t> bias, folded, mult, shift;
      for (int64_t ch = 0; ch < s.c; ++ch) {
        bias.push_back(int32_t(rng.uniform(-20000, 20000)));
        int64_t sum = 0;
        for (int64_t t = 0; t < s.k * s.k; ++t) sum += w[size_t(ch * s.k * s.k + t)];
        folded.push_back(int32_t(bias.back() - q.x_zp * sum));
        mult.push_back(int32_t(rng.uniform(0, 2147483520.0f)));
        shift.push_back(rand_shift(rng));
      }
      std::vector<uint8_t> want(size_t(s.c * c.oh * c.ow)), got(want.size());
      ds::ds_qu8_conv2d__scalar(q, x.data(), w.data(), {bias.data(), mult.data(), shift.data()}, want.data());
      std::vector<uint8_t> ws(size_t(ds::ds_qu8_dwconv_workspace(c)));
      lv.k->dwconv(q, x.data(), w.data(), {folded.data(), mult.data(), shift.data()}, ws.data(), got.data(), 0, s.c);
      CHECK_MSG(got == want, std::string(lv.name) + " dwconv differs");
    }
    for (int64_t k : {1, 15, 16, 17, 63, 64, 65, 200}) {
      const int64_t m = 11;
      const DenseCase d = random_dense(rng, m, k);
      const auto& [x, w, x_zp, bias, folded, mult, shift] = d;
      const ds::QuantOut q{3, 2, 250};
      std::vector<uint8_t> want(static_cast<size_t>(m)), got(static_cast<size_t>(m));
      ds::ds_qu8_dense__scalar(1, k, m, x_zp, q, x.data(), w.data(), {bias.data(), mult.data(), shift.data()}, want.data());
      lv.k->dense(k, x.data(), w.data(), 0, m, {folded.data(), mult.data(), shift.data()}, q, got.data());
      CHECK_MSG(got == want, std::string(lv.name) + " dense differs");
    }
    // The packed form: partial panels, depth tails, a row range starting past panel 0.
    if (!lv.k->dense_packed) continue;
    for (int64_t k : {1, 3, 4, 7, 8, 64, 65, 130, 1280}) {
      for (int64_t m : {1, 16, 17, 32, 45, 100}) {
        const DenseCase d = random_dense(rng, m, k);
        const auto& [x, w, x_zp, bias, folded, mult, shift] = d;
        const ds::QuantOut q{int32_t(rng.uniform(0, 255)), 2, 250};
        std::vector<uint8_t> want(static_cast<size_t>(m)), got(static_cast<size_t>(m), 0);
        ds::ds_qu8_dense__scalar(1, k, m, x_zp, q, x.data(), w.data(), {bias.data(), mult.data(), shift.data()},
                                 want.data());
        std::vector<uint8_t> packed(size_t(lv.k->dense_packed_bytes(m, k)));
        lv.k->dense_pack(m, k, w.data(), packed.data());
        const int64_t split = std::min(m, lv.k->dense_rows);  // two calls: [0, split) and [split, m)
        const ds::QChannelParams ch{folded.data(), mult.data(), shift.data()};
        lv.k->dense_packed(k, x.data(), reinterpret_cast<const int8_t*>(packed.data()), 0, split, ch, q, got.data());
        if (split < m)
          lv.k->dense_packed(k, x.data(), reinterpret_cast<const int8_t*>(packed.data()), split, m, ch, q, got.data());
        CHECK_MSG(got == want, std::string(lv.name) + " dense_packed differs at k=" + std::to_string(k) +
                                   " m=" + std::to_string(m));
      }
    }
  }
}

namespace {

struct DwCase {
  int64_t c, h, w, k, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right;
};

// One depthwise case at one level against ds_qu8_conv2d__scalar, channels [c0, c1) only; the
// other channels' outputs must stay untouched.
bool dwconv_matches(const Level& lv, const DwCase& s, tiny::Rng& rng, int64_t c0, int64_t c1) {
  ds::QConv2dParams q;
  ds::Conv2dParams& c = q.conv;
  c.n = 1, c.c = s.c, c.h = s.h, c.w = s.w, c.o = s.c, c.kh = c.kw = s.k;
  c.stride_h = s.stride_h, c.stride_w = s.stride_w, c.pad_top = s.pad_top, c.pad_left = s.pad_left;
  c.dil_h = c.dil_w = 1, c.group = s.c;
  c.oh = (s.h + s.pad_top + s.pad_bottom - s.k) / s.stride_h + 1;
  c.ow = (s.w + s.pad_left + s.pad_right - s.k) / s.stride_w + 1;
  if (c.oh < 1 || c.ow < 1) return true;
  const bool extreme = rng.uniform(0, 1) < 0.3f;
  q.x_zp = extreme ? (rng.uniform(0, 1) < 0.5f ? 0 : 255) : int32_t(rng.uniform(0, 255));
  q.out = {int32_t(rng.uniform(0, 255)), 0, 255};
  if (rng.uniform(0, 1) < 0.5f) q.out.act_min = q.out.y_zp, q.out.act_max = int32_t(rng.uniform(float(q.out.y_zp), 255));
  std::vector<uint8_t> x(size_t(s.c * s.h * s.w));
  std::vector<int8_t> w(size_t(s.c * s.k * s.k));
  for (auto& v : x) v = extreme ? (rng.uniform(0, 1) < 0.5f ? 0 : 255) : uint8_t(rng.uniform(0, 255));
  for (auto& v : w) v = extreme ? (rng.uniform(0, 1) < 0.5f ? -128 : 127) : int8_t(int(rng.uniform(0, 255)) - 128);
  std::vector<int32_t> bias, folded, mult, shift;
  const bool high_shifts = rng.uniform(0, 1) < 0.5f;
  for (int64_t ch = 0; ch < s.c; ++ch) {
    bias.push_back(int32_t(rng.uniform(-200000, 200000)));
    int64_t sum = 0;
    for (int64_t t = 0; t < s.k * s.k; ++t) sum += w[size_t(ch * s.k * s.k + t)];
    folded.push_back(int32_t(bias.back() - q.x_zp * sum));
    mult.push_back(rng.uniform(0, 1) < 0.1f ? int32_t((int64_t(1) << 31) - 1) : int32_t(rng.uniform(0, 2147483520.0f)));
    shift.push_back(high_shifts ? rand_high_shift(rng) : rand_shift(rng));
  }
  const size_t plane = size_t(c.oh * c.ow);
  std::vector<uint8_t> want(size_t(s.c) * plane), got(want.size(), 0xCD);
  ds::ds_qu8_conv2d__scalar(q, x.data(), w.data(), {bias.data(), mult.data(), shift.data()}, want.data());
  for (int64_t ch = 0; ch < s.c; ++ch)
    if (ch < c0 || ch >= c1) std::fill(want.begin() + ch * plane, want.begin() + (ch + 1) * plane, 0xCD);
  // 64 canary bytes past the workspace the kernel may use.
  const size_t ws_bytes = size_t(ds::ds_qu8_dwconv_workspace(c));
  std::vector<uint8_t> ws(ws_bytes + 64, 0xEE);
  lv.k->dwconv(q, x.data(), w.data(), {folded.data(), mult.data(), shift.data()}, ws.data(), got.data(), c0, c1);
  for (size_t i = ws_bytes; i < ws.size(); ++i)
    if (ws[i] != 0xEE) return false;
  if (got != want) return false;
  // The same channels through the kernel with per-session constants, where the level has one for
  // the shape (channel ranges on its 16-channel blocks).
  const int64_t packed_bytes = lv.k->dw_packed_bytes ? lv.k->dw_packed_bytes(q) : 0;
  if (packed_bytes > 0 && c0 % 16 == 0 && (c1 % 16 == 0 || c1 == s.c)) {
    std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes)), again(want.size(), 0xCD);
    lv.k->dw_pack(q, w.data(), {folded.data(), mult.data(), shift.data()}, packed.data());
    lv.k->dwconv_packed(q, x.data(), packed.data(), ws.data(), again.data(), c0, c1);
    for (size_t i = ws_bytes; i < ws.size(); ++i)
      if (ws[i] != 0xEE) return false;
    if (again != want) return false;
  }
  return true;
}

}  // namespace

TEST(qu8_dwconv3x3_matches_the_reference_on_random_shapes) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(11);
  // Widths around the 16- and 32-output blocks at both strides, heights down to one row.
  const int64_t widths[] = {1, 2, 3, 4, 7, 14, 15, 16, 17, 31, 32, 33, 34, 35, 47, 63, 64, 65, 66, 67, 112, 113, 130, 250};
  for (const Level& lv : levels) {
    int cases = 0;
    for (int64_t w : widths)
      for (int64_t stride_w = 1; stride_w <= 2; ++stride_w) {
        for (int rep = 0; rep < 3; ++rep) {
          DwCase s;
          s.c = 1 + int64_t(rng.uniform(0, 4.99f));
          s.h = 1 + int64_t(rng.uniform(0, rep == 0 ? 39.99f : 9.99f));
          s.w = w;
          s.k = 3;
          s.stride_h = 1 + int64_t(rng.uniform(0, 1.99f));
          s.stride_w = stride_w;
          s.pad_top = int64_t(rng.uniform(0, 2.99f)), s.pad_bottom = int64_t(rng.uniform(0, 2.99f));
          s.pad_left = int64_t(rng.uniform(0, 2.99f)), s.pad_right = int64_t(rng.uniform(0, 2.99f));
          const int64_t c0 = int64_t(rng.uniform(0, float(s.c) - 0.01f));
          const int64_t c1 = c0 + 1 + int64_t(rng.uniform(0, float(s.c - c0) - 0.01f));
          ++cases;
          if (!dwconv_matches(lv, s, rng, c0, c1)) {
            harness::record_failure(__FILE__, __LINE__,
                                    std::string(lv.name) + " dwconv3x3 differs at c=" + std::to_string(s.c) +
                                        " h=" + std::to_string(s.h) + " w=" + std::to_string(s.w) + " stride=" +
                                        std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) + " pads=" +
                                        std::to_string(s.pad_top) + "," + std::to_string(s.pad_left) + "," +
                                        std::to_string(s.pad_bottom) + "," + std::to_string(s.pad_right));
            return;
          }
        }
      }
    // Other windows and strides go through the same entry point.
    const DwCase others[] = {{2, 9, 20, 5, 1, 1, 2, 2, 2, 2}, {3, 9, 21, 3, 3, 3, 1, 1, 1, 1},
                             {2, 6, 7, 1, 1, 1, 0, 0, 0, 0}, {2, 8, 40, 3, 2, 1, 0, 1, 1, 0}};
    for (const DwCase& s : others) CHECK_MSG(dwconv_matches(lv, s, rng, 0, s.c), std::string(lv.name) + " dwconv differs");
    CHECK(cases > 0);
  }
}

// The AVX-512 3x3 kernels run channels 16 to a vector (channels in lanes), one padded channel at
// a time in rows of 64 outputs (channel rows), or one int16 plane at a time: channel counts around
// 16, channel ranges starting inside a block, plane widths around the 4- and 8-window steps and
// the 64-output blocks, each kernel apart at every width.
TEST(qu8_dwconv3x3_channel_blocks_match_the_reference) {
  std::vector<Level> levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
#if defined(__x86_64__)
  // Without the packed-constants entry, which picks its kernel by shape.
  static ds::QKernels planes = ds::ds_qkernels__avx512vnni, rows = planes, lanes = planes;
  planes.dwconv = ds::ds_qu8_dwconv3x3_planes__avx512vnni;
  rows.dwconv = ds::ds_qu8_dwconv3x3_rows__avx512vnni;
  lanes.dwconv = ds::ds_qu8_dwconv3x3_cl__avx512vnni;
  planes.dw_packed_bytes = rows.dw_packed_bytes = lanes.dw_packed_bytes = nullptr;
  if (levels.back().k == &ds::ds_qkernels__avx512vnni) {
    levels.push_back({"avx512vnni planes", &planes});
    levels.push_back({"avx512vnni channel rows", &rows});
    levels.push_back({"avx512vnni channels in lanes", &lanes});
  }
#endif
  tiny::Rng rng(13);
  const int64_t channels[] = {15, 16, 17, 31, 33, 47};
  const int64_t widths[] = {1, 5, 7, 8, 9, 14, 16, 17, 28, 30, 56, 63, 64, 65, 66, 97, 112, 129, 130};
  for (const Level& lv : levels) {
    for (int64_t c : channels)
      for (int64_t w : widths)
        for (int64_t stride = 1; stride <= 2; ++stride) {
          DwCase s;
          s.c = c, s.w = w, s.k = 3;
          s.h = 1 + int64_t(rng.uniform(0, 15.99f));
          s.stride_h = 1 + int64_t(rng.uniform(0, 1.99f)), s.stride_w = stride;
          s.pad_top = int64_t(rng.uniform(0, 1.99f)), s.pad_bottom = int64_t(rng.uniform(0, 1.99f));
          s.pad_left = int64_t(rng.uniform(0, 1.99f)), s.pad_right = int64_t(rng.uniform(0, 1.99f));
          const int64_t c0 = rng.uniform(0, 1) < 0.5f ? 0 : int64_t(rng.uniform(0, float(c) - 0.01f));
          const int64_t c1 = rng.uniform(0, 1) < 0.5f ? c : c0 + 1 + int64_t(rng.uniform(0, float(c - c0) - 0.01f));
          CHECK_MSG(dwconv_matches(lv, s, rng, c0, c1),
                    std::string(lv.name) + " dwconv3x3 differs at c=" + std::to_string(c) + " [" + std::to_string(c0) +
                        ", " + std::to_string(c1) + ") h=" + std::to_string(s.h) + " w=" + std::to_string(w) +
                        " stride=" + std::to_string(s.stride_h) + "x" + std::to_string(stride));
        }
  }
}

TEST(u8_maxpool2d_kernels_match_the_scalar_one) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(14);
  for (const Level& lv : levels) {
    if (!lv.k->maxpool2d) continue;
    for (int rep = 0; rep < 200; ++rep) {
      ds::Pool2dParams p{};
      p.n = 1 + int64_t(rng.uniform(0, 1.99f)), p.c = 1 + int64_t(rng.uniform(0, 4.99f));
      p.h = 1 + int64_t(rng.uniform(0, 20.99f)), p.w = 1 + int64_t(rng.uniform(0, rep % 4 == 0 ? 150.99f : 40.99f));
      // Wide and tall: the AVX-512 kernel's row blocks (32 KiB of window rows) come in several.
      if (rep % 10 == 1) p.h = 40 + int64_t(rng.uniform(0, 60.99f)), p.w = 600 + int64_t(rng.uniform(0, 1400.99f));
      p.kh = 1 + int64_t(rng.uniform(0, 3.99f)), p.kw = 1 + int64_t(rng.uniform(0, 3.99f));
      p.stride_h = 1 + int64_t(rng.uniform(0, 2.99f)), p.stride_w = 1 + int64_t(rng.uniform(0, 2.99f));
      p.dil_h = 1 + int64_t(rng.uniform(0, 1.99f)), p.dil_w = 1 + int64_t(rng.uniform(0, 1.99f));
      p.pad_top = int64_t(rng.uniform(0, float(p.kh) - 0.01f)), p.pad_bottom = int64_t(rng.uniform(0, float(p.kh) - 0.01f));
      p.pad_left = int64_t(rng.uniform(0, float(p.kw) - 0.01f)), p.pad_right = int64_t(rng.uniform(0, float(p.kw) - 0.01f));
      p.oh = (p.h + p.pad_top + p.pad_bottom - (p.kh - 1) * p.dil_h - 1) / p.stride_h + 1;
      p.ow = (p.w + p.pad_left + p.pad_right - (p.kw - 1) * p.dil_w - 1) / p.stride_w + 1;
      if (p.oh < 1 || p.ow < 1) continue;
      std::vector<uint8_t> x(size_t(p.n * p.c * p.h * p.w));
      for (auto& v : x) v = uint8_t(rng.uniform(0, 255));
      std::vector<uint8_t> want(size_t(p.n * p.c * p.oh * p.ow)), got(want.size(), 0xCD);
      ds::ds_u8_maxpool2d__scalar(p, x.data(), want.data());
      lv.k->maxpool2d(p, x.data(), got.data());
      CHECK_MSG(got == want, std::string(lv.name) + " u8 maxpool2d differs at h=" + std::to_string(p.h) +
                                 " w=" + std::to_string(p.w) + " k=" + std::to_string(p.kh) + "x" + std::to_string(p.kw) +
                                 " stride=" + std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w));
    }
  }
}

// quantize on random float bit patterns (every exponent, NaN, infinities, subnormals) and near
// the clamp bounds, at scales from subnormal to the largest floats and 0, odd lengths for the tails.
TEST(qu8_quantize_matches_the_reference_on_any_float) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(17);
  const float scales[] = {1e-45f, 1e-39f, 1.2e-38f, 1e-20f, 0.0039215689f, 0.017f, 1.0f / 3.0f, 1.0f, 2.5f, 1e20f,
                          8.5e37f, 3.4e38f, 0.0f};
  uint32_t bits = 12345u;
  for (const Level& lv : levels) {
    if (!lv.k->quantize) continue;
    for (float scale : scales)
      for (int rep = 0; rep < 4; ++rep) {
        const int32_t zp = rep == 0 ? 0 : rep == 1 ? 255 : int32_t(rng.uniform(0, 255));
        std::vector<float> x(size_t(3001 + rep));
        for (size_t i = 0; i < x.size(); ++i) {
          bits = bits * 1664525u + 1013904223u;
          float v;
          if (i % 3 == 0) {
            std::memcpy(&v, &bits, sizeof v);
          } else {  // around the values that quantize to -300..300 and to the clamp bounds
            v = (float(int(bits >> 8) % 601 - 300) + rng.uniform(-1, 1)) * scale;
          }
          x[i] = v;
        }
        std::vector<uint8_t> want(x.size()), got(x.size());
        ds::ds_qu8_quantize__scalar(int64_t(x.size()), scale, zp, x.data(), want.data());
        lv.k->quantize(int64_t(x.size()), scale, zp, x.data(), got.data());
        CHECK_MSG(got == want, std::string(lv.name) + " quantize differs at scale " + std::to_string(scale));
      }
  }
}

// quantize near the rounding ties: x = (k + 1/2) * scale nudged by a few ulps, at many scales.
TEST(qu8_quantize_matches_the_reference_near_ties) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(16);
  for (const Level& lv : levels) {
    if (!lv.k->quantize) continue;
    for (int rep = 0; rep < 50; ++rep) {
      const float scale = rep % 5 == 0 ? 1.0f / float(1 + rep) : rng.uniform(1e-4f, 3.0f);
      const int32_t zp = int32_t(rng.uniform(0, 255));
      std::vector<float> x(4000);
      for (size_t i = 0; i < x.size(); ++i) {
        float v = (std::floor(rng.uniform(-1100, 1100)) + 0.5f) * scale;
        const int nudge = int(rng.uniform(-4, 4.99f));
        for (int t = 0; t < std::abs(nudge); ++t) v = std::nextafter(v, nudge > 0 ? 1e30f : -1e30f);
        x[i] = v;
      }
      std::vector<uint8_t> want(x.size()), got(x.size());
      ds::ds_qu8_quantize__scalar(int64_t(x.size()), scale, zp, x.data(), want.data());
      lv.k->quantize(int64_t(x.size()), scale, zp, x.data(), got.data());
      CHECK_MSG(got == want, std::string(lv.name) + " quantize differs near ties at scale " + std::to_string(scale));
    }
  }
}

TEST(qu8_global_avgpool_kernels_match_the_scalar_one) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(17);
  for (const Level& lv : levels) {
    if (!lv.k->global_avgpool) continue;
    for (int64_t size : {1, 7, 49, 63, 64, 65, 196, 1000, 50176}) {
      const int64_t planes = 1 + int64_t(rng.uniform(0, 20.99f));
      std::vector<uint8_t> x(size_t(planes * size));
      const bool extreme = rng.uniform(0, 1) < 0.3f;
      for (auto& v : x) v = extreme ? 255 : uint8_t(rng.uniform(0, 255));
      const int32_t x_zp = int32_t(rng.uniform(0, 255)), y_zp = int32_t(rng.uniform(0, 255));
      const int32_t mult = int32_t(rng.uniform(0, 2147483520.0f)), shift = rand_shift(rng);
      std::vector<uint8_t> want(static_cast<size_t>(planes)), got(static_cast<size_t>(planes));
      ds::ds_qu8_global_avgpool__scalar(planes, size, x_zp, y_zp, mult, shift, x.data(), want.data());
      lv.k->global_avgpool(planes, size, x_zp, y_zp, mult, shift, x.data(), got.data());
      CHECK_MSG(got == want, std::string(lv.name) + " global_avgpool differs at size " + std::to_string(size));
    }
  }
}

TEST(qu8_elementwise_kernels_match_the_reference) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(12);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const Level& lv : levels) {
    for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 1000}) {
      // quantize: ties, saturation, NaN and infinities among random values
      if (lv.k->quantize) {
        const float scale = rng.uniform(0, 1) < 0.3f ? 0.5f : rng.uniform(0.001f, 2.0f);
        const int32_t zp = int32_t(rng.uniform(0, 255));
        std::vector<float> x(static_cast<size_t>(n));
        const float specials[] = {0.25f, 0.75f, -0.25f, 1.25f, 127.5f, -127.5f, 1e9f, -1e9f, nan, inf, -inf, -0.0f};
        for (auto& v : x) v = rng.uniform(0, 1) < 0.2f ? specials[int(rng.uniform(0, 11.99f))] : rng.uniform(-300, 300);
        std::vector<uint8_t> want(x.size()), got(x.size());
        ds::ds_qu8_quantize__scalar(n, scale, zp, x.data(), want.data());
        lv.k->quantize(n, scale, zp, x.data(), got.data());
        CHECK_MSG(got == want, std::string(lv.name) + " quantize differs at n=" + std::to_string(n));
      }
      std::vector<uint8_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      const bool extreme = rng.uniform(0, 1) < 0.3f;
      for (auto& v : a) v = extreme ? (rng.uniform(0, 1) < 0.5f ? 0 : 255) : uint8_t(rng.uniform(0, 255));
      for (auto& v : b) v = extreme ? (rng.uniform(0, 1) < 0.5f ? 0 : 255) : uint8_t(rng.uniform(0, 255));
      const float scale = rng.uniform(0.001f, 2.0f);
      const int32_t zp = int32_t(rng.uniform(0, 255));
      if (lv.k->dequantize) {
        std::vector<float> want(a.size()), got(a.size());
        ds::ds_qu8_dequantize__scalar(n, scale, zp, a.data(), want.data());
        lv.k->dequantize(n, scale, zp, a.data(), got.data());
        CHECK_MSG(got == want, std::string(lv.name) + " dequantize differs at n=" + std::to_string(n));
      }
      if (lv.k->vadd) {
        for (int rep = 0; rep < 8; ++rep) {
          ds::QAddParams q;
          q.a_zp = int32_t(rng.uniform(0, 255)), q.b_zp = int32_t(rng.uniform(0, 255));
          q.a_mult = rng.uniform(0, 1) < 0.2f ? (int64_t(1) << 31) - 1 : int64_t(rng.uniform(0, 2147483520.0f));
          q.b_mult = rng.uniform(0, 1) < 0.2f ? (int64_t(1) << 31) - 1 : int64_t(rng.uniform(0, 2147483520.0f));
          static const int32_t shifts[] = {-30, -15, -1, 0, 1, 2, 15, 30};  // the split for -15..15
          q.shift = shifts[rep];
          q.out = {int32_t(rng.uniform(0, 255)), 0, 255};
          if (rng.uniform(0, 1) < 0.5f) q.out.act_min = q.out.y_zp, q.out.act_max = int32_t(rng.uniform(float(q.out.y_zp), 255));
          ds::BinaryParams bp{};
          bp.rank = 1, bp.dims[0] = n, bp.a_strides[0] = 1, bp.b_strides[0] = 1;
          std::vector<uint8_t> want(a.size()), got(a.size());
          ds::ds_qu8_vadd__scalar(bp, q, a.data(), b.data(), want.data());
          lv.k->vadd(n, q, a.data(), b.data(), got.data());
          CHECK_MSG(got == want, std::string(lv.name) + " qadd differs at n=" + std::to_string(n) + " shift=" +
                                     std::to_string(q.shift));
        }
      }
    }
  }
}

TEST(qadd_split_into_16_bit_products_is_exact_on_every_pair) {
  // qu8_qadd_split_eval against the 64-bit formula on all 65536 (a, b) pairs, at the extreme
  // multipliers and zero points and at both ends of the shifts it takes.
  tiny::Rng rng(31);
  const int64_t mult_max = (int64_t(1) << 31) - 1;
  for (int rep = 0; rep < 40; ++rep) {
    ds::QAddParams q;
    const int64_t mults[] = {0, 1, mult_max, mult_max - 32768, int64_t(1) << 30, 65535, 65536};
    auto mult = [&] { return rng.uniform(0, 1) < 0.4f ? mults[int(rng.uniform(0, 6.99f))] : int64_t(rng.uniform(0, 2147483520.0f)); };
    q.a_mult = mult(), q.b_mult = mult();
    q.a_zp = rep % 3 == 0 ? 255 : int32_t(rng.uniform(0, 255)), q.b_zp = rep % 5 == 0 ? 0 : int32_t(rng.uniform(0, 255));
    q.shift = rep < 4 ? (rep < 2 ? -15 : 15) : int32_t(rng.uniform(-15, 15.99f));
    q.out = {int32_t(rng.uniform(0, 255)), 0, 255};
    ds::QAddSplit s;
    CHECK(ds::qu8_qadd_split(q, s));
    const int n = 31 + q.shift;
    int bad = 0;
    for (int32_t a = 0; a < 256; ++a)
      for (int32_t b = 0; b < 256; ++b) {
        const int64_t v = (int64_t(a) - q.a_zp) * q.a_mult + (int64_t(b) - q.b_zp) * q.b_mult;
        bad += ds::qu8_qadd_split_eval(s, a, b) != q.out.y_zp + ds::qu8_round_shift(v, n);
      }
    CHECK_MSG(bad == 0, std::to_string(bad) + " pairs differ at shift " + std::to_string(q.shift) + " a_mult " +
                            std::to_string(q.a_mult) + " b_mult " + std::to_string(q.b_mult));
  }
  ds::QAddParams q{0, 0, 1, 1, 16, {}};
  ds::QAddSplit s;
  CHECK(!ds::qu8_qadd_split(q, s));  // n = 47
  q.shift = -16;
  CHECK(!ds::qu8_qadd_split(q, s));  // n = 15
}

TEST(u8_maxpool2d_matches_a_plain_loop) {
  tiny::Rng rng(13);
  for (int rep = 0; rep < 310; ++rep) {
    ds::Pool2dParams p{};
    p.n = 1, p.c = 1 + int64_t(rng.uniform(0, 2.99f));
    p.h = 1 + int64_t(rng.uniform(0, 12.99f)), p.w = 1 + int64_t(rng.uniform(0, 40.99f));
    p.kh = 1 + int64_t(rng.uniform(0, 3.99f)), p.kw = 1 + int64_t(rng.uniform(0, 3.99f));
    if (rep >= 300) {  // rows longer than the kernel's row buffer, and a window wider than it
      p.c = 1, p.h = 2, p.w = 9000 + rep;
      if (rep >= 305) p.kw = 4100;
    }
    const bool stem = rep % 3 == 0 && rep < 300;  // 3 wide at stride 2, the kernel's fast case
    p.stride_h = 1 + int64_t(rng.uniform(0, 2.99f)), p.stride_w = 1 + int64_t(rng.uniform(0, 2.99f));
    p.dil_h = 1 + int64_t(rng.uniform(0, 1.99f)), p.dil_w = 1 + int64_t(rng.uniform(0, 1.99f));
    if (stem) p.kw = 3, p.stride_w = 2, p.dil_w = 1, p.w = 20 + int64_t(rng.uniform(0, 80.99f));
    // Padding below the window so that every window holds an input element.
    p.pad_top = int64_t(rng.uniform(0, float(p.kh) - 0.01f)), p.pad_left = int64_t(rng.uniform(0, float(p.kw) - 0.01f));
    p.pad_bottom = p.pad_top, p.pad_right = p.pad_left;
    p.oh = (p.h + 2 * p.pad_top - p.dil_h * (p.kh - 1) - 1) / p.stride_h + 1;
    p.ow = (p.w + 2 * p.pad_left - p.dil_w * (p.kw - 1) - 1) / p.stride_w + 1;
    if (p.oh < 1 || p.ow < 1 || p.pad_top * 1 >= (p.kh - 1) * p.dil_h + 1 || p.pad_left >= (p.kw - 1) * p.dil_w + 1) continue;
    std::vector<uint8_t> x(size_t(p.c * p.h * p.w));
    for (auto& v : x) v = uint8_t(rng.uniform(1, 255));
    std::vector<uint8_t> want(size_t(p.c * p.oh * p.ow)), got(want.size(), 0xCD);
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t oy = 0; oy < p.oh; ++oy)
        for (int64_t ox = 0; ox < p.ow; ++ox) {
          uint8_t m = 0;
          for (int64_t ky = 0; ky < p.kh; ++ky)
            for (int64_t kx = 0; kx < p.kw; ++kx) {
              const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dil_h, ix = ox * p.stride_w - p.pad_left + kx * p.dil_w;
              if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) m = std::max(m, x[size_t((c * p.h + iy) * p.w + ix)]);
            }
          want[size_t((c * p.oh + oy) * p.ow + ox)] = m;
        }
    ds::ds_u8_maxpool2d__scalar(p, x.data(), got.data());
    if (got != want) {
      harness::record_failure(__FILE__, __LINE__, "u8 maxpool differs at h=" + std::to_string(p.h) + " w=" + std::to_string(p.w));
      return;
    }
  }
}

TEST(u8_im2col_kernels_match_the_scalar_one) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(14);
  for (const Level& lv : levels) {
    if (!lv.k->gemm->im2col) continue;
    for (int rep = 0; rep < 400; ++rep) {
      ds::Conv2dParams c{};
      c.n = 1, c.c = 1 + int64_t(rng.uniform(0, 2.99f));
      c.h = 1 + int64_t(rng.uniform(0, 9.99f)), c.w = 1 + int64_t(rng.uniform(0, 150.99f));
      c.kh = 1 + int64_t(rng.uniform(0, 6.99f)), c.kw = 1 + int64_t(rng.uniform(0, 6.99f));
      c.stride_h = 1 + int64_t(rng.uniform(0, 2.99f)), c.stride_w = 1 + int64_t(rng.uniform(0, 2.99f));
      c.dil_h = 1 + int64_t(rng.uniform(0, 1.99f)), c.dil_w = 1 + int64_t(rng.uniform(0, 1.99f));
      c.pad_top = int64_t(rng.uniform(0, 3.99f)), c.pad_left = int64_t(rng.uniform(0, 3.99f));
      c.oh = (c.h + 2 * c.pad_top - c.dil_h * (c.kh - 1) - 1) / c.stride_h + 1;
      c.ow = (c.w + 2 * c.pad_left - c.dil_w * (c.kw - 1) - 1) / c.stride_w + 1;
      if (c.oh < 1 || c.ow < 1) continue;
      c.o = 1, c.group = 1;
      std::vector<uint8_t> x(size_t(c.c * c.h * c.w));
      for (auto& v : x) v = uint8_t(rng.uniform(0, 255));
      const int32_t zp = int32_t(rng.uniform(0, 255));
      const int64_t pixels = c.oh * c.ow;
      const int64_t p0 = int64_t(rng.uniform(0, float(pixels) - 0.01f));
      const int64_t p1 = p0 + 1 + int64_t(rng.uniform(0, float(pixels - p0) - 0.01f));
      const size_t bytes = size_t(c.c * c.kh * c.kw * (p1 - p0));
      std::vector<uint8_t> want(bytes + 64, 0xCD), got(bytes + 64, 0xCD);
      ds::ds_u8_im2col__scalar(c, c.c, zp, x.data(), p0, p1, want.data());
      lv.k->gemm->im2col(c, c.c, zp, x.data(), p0, p1, got.data());
      if (got != want) {
        harness::record_failure(__FILE__, __LINE__, std::string(lv.name) + " im2col differs at w=" + std::to_string(c.w) +
                                                        " k=" + std::to_string(c.kw) + " stride=" + std::to_string(c.stride_w));
        return;
      }
    }
  }
}

TEST(u8_gather_row_and_interleave4_match_a_plain_loop) {
  const auto levels = simd_levels();
  if (levels.empty()) SKIP("no int8 SIMD level on this CPU");
  tiny::Rng rng(16);
  for (const Level& lv : levels) {
    const ds::QGemmKernels& g = *lv.k->gemm;
    for (int64_t stride = 1; stride <= 3; ++stride)
      for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 57, 58, 63, 64, 65, 100, 128, 130}) {
        const std::string where = std::string(lv.name) + " n=" + std::to_string(n) + " stride=" + std::to_string(stride);
        // Each source row ends right after its last read byte.
        std::vector<std::vector<uint8_t>> rows(4, std::vector<uint8_t>(size_t((n - 1) * stride + 1)));
        for (auto& row : rows)
          for (auto& v : row) v = uint8_t(rng.uniform(0, 255));
        const uint8_t* const src[4] = {rows[0].data(), rows[1].data(), rows[2].data(), rows[3].data()};
        if (g.gather_row) {
          std::vector<uint8_t> want(size_t(n) + 8, 0xCD), got(want);
          for (int64_t j = 0; j < n; ++j) want[size_t(j)] = src[0][j * stride];
          g.gather_row(n, src[0], stride, got.data());
          CHECK_MSG(got == want, "gather_row differs at " + where);
        }
        if (g.interleave4) {
          // Columns [lo, hi) from the rows (whole, or with padding columns of x_zp on either side).
          for (int pads = 0; pads < 4; ++pads) {
            const int64_t lo = pads & 1 ? 1 + int64_t(rng.uniform(0, 2.99f)) : 0;
            const int64_t hi = pads & 2 ? std::max(lo, n - 1 - int64_t(rng.uniform(0, 2.99f))) : n;
            const int32_t zp = int32_t(rng.uniform(0, 255.99f));
            std::vector<uint8_t> want(size_t(4 * n) + 8, 0xCD), got(want);
            for (int64_t j = 0; j < n; ++j)
              for (int r = 0; r < 4; ++r)
                want[size_t(4 * j + r)] = j >= lo && j < hi ? src[r][(j - lo) * stride] : uint8_t(zp);
            g.interleave4(n, lo, hi, src, stride, zp, got.data());
            CHECK_MSG(got == want, "interleave4 differs at " + where + " lo=" + std::to_string(lo) + " hi=" +
                                       std::to_string(hi));
          }
        }
      }
  }
}
