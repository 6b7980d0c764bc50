// int16 activations (docs/format.md, "int16 activations") through the C API: qconv2d and qdense
// with x and y each u8 or i16, requantize, quantize/dequantize to and from i16 and the i16
// movement ops, against integer loops written here (requantization with exact 128-bit products,
// not the runtime's 15-bit shortcut), at every ISA level this machine runs and 1-3 threads; and
// the load-time checks, each refused with DS_ERR_FORMAT naming the node and the field.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "harness.h"
#include "op_runner.h"

using opt::Dims;
using opt::Result;

namespace {

constexpr uint8_t kF32 = 1, kU8 = 3, kI16 = 5;

void expect(const Result& r, ds_status status, const std::string& needle, int line) {
  if (r.status != status || r.error.find(needle) == std::string::npos)
    harness::record_failure(__FILE__, line, std::string("got ") + ds_status_name(r.status) + " '" + r.error +
                                                "', expected " + ds_status_name(status) + " with '" + needle + "'");
}
#define EXPECT_REFUSED(result, status, needle) expect(result, status, needle, __LINE__)

// A quantized activation: dtype, scale, zero point (0 for i16).
struct Act {
  uint8_t dtype = kI16;
  float scale = 1.0f;
  int32_t zp = 0;
  int64_t lo() const { return dtype == kU8 ? 0 : -32768; }
  int64_t hi() const { return dtype == kU8 ? 255 : 32767; }
};

int64_t quantize(float x, const Act& a) {
  const float q = std::nearbyint(x / a.scale) + float(a.zp);
  if (q != q) return a.zp;
  return q <= float(a.lo()) ? a.lo() : q >= float(a.hi()) ? a.hi() : int64_t(q);
}

float dequantize(int64_t q, const Act& a) { return (float(q) - float(a.zp)) * a.scale; }

// round_shift(acc * multiplier, 31 + shift) with the exact product.
int64_t requant_exact(int64_t acc, int64_t multiplier, int shift) {
  const __int128 v = __int128(acc) * multiplier + (__int128(1) << (30 + shift));
  return int64_t(v >> (31 + shift));
}

int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return std::min(hi, std::max(lo, v)); }

uint32_t add_quantize(dsw::File& f, uint32_t x, const Act& a, const std::string& name, const Dims& dims) {
  const uint32_t q = f.add_activation(name, dims, a.dtype);
  f.add_node(25, name + "_quant", {x}, q, {opt::attr_float("scale", a.scale), dsw::attr_int("zero_point", a.zp)});
  return q;
}

uint32_t add_dequantize(dsw::File& f, uint32_t q, const Act& a, const Dims& dims) {
  const uint32_t y = f.add_value("y", dims);
  f.add_node(26, "dequant", {q}, y, {opt::attr_float("scale", a.scale), dsw::attr_int("zero_point", a.zp)});
  f.outputs = {y};
  return y;
}

const char* const kIsas[] = {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni"};

// Runs f at every available level and 1-3 threads; the output must equal `want` exactly.
void expect_everywhere(const dsw::File& f, const std::vector<float>& x, const Dims& xs, const std::vector<float>& want,
                       const std::string& what, int line) {
  int ran = 0;
  for (const char* isa : kIsas) {
    setenv("DS_FORCE_ISA", isa, 1);
    for (int threads : {1, 2, 3}) {
      const Result r = opt::run(f, x, xs, threads);
      if (r.status == DS_ERR_INVALID_ARG && r.error.find("DS_FORCE_ISA") != std::string::npos) break;
      ++ran;
      size_t bad = 0;
      bool same = r.status == DS_OK && r.y.size() == want.size();
      for (size_t i = 0; same && i < want.size(); ++i)
        if (r.y[i] != want[i]) same = false, bad = i;
      if (!same)
        harness::record_failure(__FILE__, line,
                                what + " differs at " + isa + ", " + std::to_string(threads) + " threads, element " +
                                    std::to_string(bad) + ": " + r.error +
                                    (r.y.size() == want.size() && r.status == DS_OK
                                         ? " got " + std::to_string(r.y[bad]) + " want " + std::to_string(want[bad])
                                         : std::string()));
    }
  }
  unsetenv("DS_FORCE_ISA");
  if (ran == 0) harness::record_failure(__FILE__, line, "no ISA level ran");
}

// Per output channel: bias, multiplier, shift. With i16 input the multiplier is a 15-bit number
// times 2^16 (as the writer rounds it); the shift brings a typical accumulator (acc_scale) to
// about `target`, give or take a factor 2, so that some outputs saturate and most do not.
struct Requant {
  std::vector<int32_t> bias, mult, shift;
};
Requant random_requant(tiny::Rng& rng, int64_t rows, uint8_t x_dtype, double acc_scale, double target) {
  Requant r;
  const int base = int(std::lround(std::log2(acc_scale / target)));
  const int lo_shift = x_dtype == kI16 ? -14 : -30;
  for (int64_t i = 0; i < rows; ++i) {
    r.bias.push_back(int32_t(rng.uniform(-1, 1) * std::min(2.0e9, acc_scale)));
    if (x_dtype == kI16) r.mult.push_back(int32_t((16384 + int32_t(rng.below(16384))) << 16));
    else r.mult.push_back(int32_t((1u << 30) + rng.below(1u << 30)));
    r.shift.push_back(int32_t(std::max(lo_shift, std::min(30, base + int(rng.below(3)) - 1))));
  }
  return r;
}

std::vector<int8_t> random_weights(tiny::Rng& rng, size_t n) {
  std::vector<int8_t> w(n);
  for (auto& v : w) v = int8_t(int(rng.below(256)) - 128);
  return w;
}

// The output clamp of a case: absent (the dtype's range), or given.
struct Clamp {
  bool given = false;
  int32_t lo = 0, hi = 0;
};

std::vector<dsw::Attr> output_attrs(const Act& y, const Clamp& c) {
  std::vector<dsw::Attr> a = {dsw::attr_int("y_zero_point", y.zp)};
  if (c.given) a.push_back(dsw::attr_int("act_min", c.lo)), a.push_back(dsw::attr_int("act_max", c.hi));
  return a;
}

int64_t clamp_out(int64_t v, const Act& y, const Clamp& c) {
  return c.given ? clamp(v, c.lo, c.hi) : clamp(v, y.lo(), y.hi());
}

// x f32 -> quantize (xa) -> qconv2d -> dequantize (ya).
struct ConvCase {
  int64_t n = 1, c = 3, h = 6, w = 6, o = 4, kh = 3, kw = 3, stride = 1, pad = 1, group = 1, dil = 1;
  Act xa, ya;
  Clamp clamp;
  int64_t oh() const { return (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - dil * (kw - 1) - 1) / stride + 1; }
};

void check_conv(tiny::Rng& rng, const ConvCase& q, int line) {
  const int64_t cg = q.c / q.group, og = q.o / q.group, k = cg * q.kh * q.kw;
  const std::vector<int8_t> weight = random_weights(rng, size_t(q.o * k));
  // x spans 1.2 x the quantized range: about a sixth of it saturates at the ends.
  const float span = 1.2f * q.xa.scale * float(q.xa.dtype == kI16 ? 32768 : 128);
  const float center = q.xa.dtype == kI16 ? 0.0f : (128.0f - float(q.xa.zp)) * q.xa.scale;
  const std::vector<float> x = opt::random_vec(rng, size_t(q.n * q.c * q.h * q.w), center - span, center + span);
  const double x_mag = q.xa.dtype == kI16 ? 20000 : 80;
  const Requant r = random_requant(rng, q.o, q.xa.dtype, std::sqrt(double(k)) * x_mag * 74,
                                   q.ya.dtype == kI16 ? 8000 : 60);

  dsw::File f;
  const Dims xs = {q.n, q.c, q.h, q.w}, ys = {q.n, q.o, q.oh(), q.ow()};
  const uint32_t xv = f.add_value("x", xs);
  f.inputs = {xv};
  const uint32_t qx = add_quantize(f, xv, q.xa, "qx", xs);
  const uint32_t wv = f.add_typed_constant(
      dsw::typed_tensor("w", 2, {uint64_t(q.o), uint64_t(cg), uint64_t(q.kh), uint64_t(q.kw)}, weight));
  const uint32_t bv = f.add_typed_constant(dsw::typed_tensor("b", 4, {uint64_t(q.o)}, r.bias));
  const uint32_t mv = f.add_typed_constant(dsw::typed_tensor("m", 4, {uint64_t(q.o)}, r.mult));
  const uint32_t sv = f.add_typed_constant(dsw::typed_tensor("s", 4, {uint64_t(q.o)}, r.shift));
  const uint32_t cv = f.add_activation("c", ys, q.ya.dtype);
  std::vector<dsw::Attr> attrs = {dsw::attr_ints("strides", {q.stride, q.stride}),
                                  dsw::attr_ints("pads", {q.pad, q.pad, q.pad, q.pad}),
                                  dsw::attr_ints("dilations", {q.dil, q.dil}), dsw::attr_int("group", q.group),
                                  dsw::attr_int("x_zero_point", q.xa.zp)};
  for (const dsw::Attr& a : output_attrs(q.ya, q.clamp)) attrs.push_back(a);
  f.add_node(27, "conv", {qx, wv, bv, mv, sv}, cv, attrs);
  add_dequantize(f, cv, q.ya, ys);

  std::vector<int64_t> xq;
  for (float v : x) xq.push_back(quantize(v, q.xa));
  std::vector<float> want;
  for (int64_t b = 0; b < q.n; ++b)
    for (int64_t o = 0; o < q.o; ++o)
      for (int64_t oy = 0; oy < q.oh(); ++oy)
        for (int64_t ox = 0; ox < q.ow(); ++ox) {
          int64_t acc = r.bias[size_t(o)];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < q.kh; ++ky)
              for (int64_t kx = 0; kx < q.kw; ++kx) {
                const int64_t iy = oy * q.stride - q.pad + ky * q.dil, ix = ox * q.stride - q.pad + kx * q.dil;
                if (iy < 0 || iy >= q.h || ix < 0 || ix >= q.w) continue;  // adds (zp - zp) * w
                const int64_t c = (o / og) * cg + ci;
                acc += (xq[size_t(((b * q.c + c) * q.h + iy) * q.w + ix)] - q.xa.zp) *
                       weight[size_t(((o * cg + ci) * q.kh + ky) * q.kw + kx)];
              }
          const int64_t v = q.ya.zp + requant_exact(acc, r.mult[size_t(o)], r.shift[size_t(o)]);
          want.push_back(dequantize(clamp_out(v, q.ya, q.clamp), q.ya));
        }
  expect_everywhere(f, x, xs, want,
                    std::string("qconv2d ") + (q.xa.dtype == kI16 ? "i16" : "u8") + "->" +
                        (q.ya.dtype == kI16 ? "i16" : "u8") + " c" + std::to_string(q.c) + " o" + std::to_string(q.o) +
                        " k" + std::to_string(q.kh) + "x" + std::to_string(q.kw) + " g" + std::to_string(q.group),
                    line);
}

// The three combinations with an i16 side, u8 activations with their zero points.
std::vector<std::pair<Act, Act>> int16_combinations() {
  const Act i16x{kI16, 0.001f, 0}, u8x{kU8, 0.05f, 117}, i16y{kI16, 0.002f, 0}, u8y{kU8, 0.1f, 9};
  return {{i16x, i16y}, {i16x, u8y}, {u8x, i16y}};
}

}  // namespace

TEST(qconv2d_int16_matches_integer_loops) {
  tiny::Rng rng(16);
  const ConvCase shapes[] = {
      [] { ConvCase q; return q; }(),
      [] { ConvCase q; q.c = 8; q.o = 17; q.kh = q.kw = 1; q.pad = 0; q.h = 5; q.w = 7; return q; }(),
      [] { ConvCase q; q.c = 6; q.o = 6; q.group = 6; q.h = 9; q.w = 11; q.stride = 2; return q; }(),  // depthwise
      [] { ConvCase q; q.c = 6; q.o = 9; q.group = 3; q.h = 7; q.w = 5; return q; }(),
      [] { ConvCase q; q.c = 5; q.o = 9; q.h = 11; q.w = 13; q.stride = 2; q.n = 2; return q; }(),
      [] { ConvCase q; q.c = 3; q.o = 10; q.h = 17; q.w = 19; q.kh = q.kw = 7; q.pad = 3; q.stride = 2; return q; }(),
      [] { ConvCase q; q.c = 5; q.o = 7; q.h = 12; q.w = 15; q.dil = 2; q.pad = 2; return q; }(),
      [] { ConvCase q; q.c = 2; q.o = 3; q.h = 4; q.w = 3; q.kh = 2; q.kw = 3; q.pad = 2; q.stride = 3; return q; }(),
      [] { ConvCase q; q.c = 67; q.o = 33; q.h = 9; q.w = 7; return q; }(),
      // Stride 1 over the padded grid: rows crossing 32-column panels, partial last panels, the
      // input read in place (no padding), 1x1 with padding, K past 2 * kQ16Flush pairs.
      [] { ConvCase q; q.c = 9; q.o = 19; q.h = 13; q.w = 37; q.kh = q.kw = 1; q.pad = 0; return q; }(),
      [] { ConvCase q; q.c = 7; q.o = 21; q.h = 11; q.w = 35; q.n = 2; return q; }(),
      [] { ConvCase q; q.c = 4; q.o = 9; q.h = 6; q.w = 9; q.kh = q.kw = 1; q.pad = 1; return q; }(),
      [] { ConvCase q; q.c = 5; q.o = 11; q.h = 14; q.w = 40; q.kh = q.kw = 5; q.pad = 0; return q; }(),
      [] { ConvCase q; q.c = 120; q.o = 9; q.h = 5; q.w = 6; return q; }(),
      [] { ConvCase q; q.c = 8; q.o = 12; q.group = 4; q.h = 10; q.w = 33; return q; }(),
      // Strides over phase planes: 1x1 stride 2 (one phase, not in place), 3x3 stride 2 whose
      // output rows cross panels, stride 2 with dilation 3.
      [] { ConvCase q; q.c = 6; q.o = 10; q.h = 15; q.w = 41; q.kh = q.kw = 1; q.pad = 0; q.stride = 2; return q; }(),
      [] { ConvCase q; q.c = 5; q.o = 9; q.h = 13; q.w = 70; q.stride = 2; return q; }(),
      [] { ConvCase q; q.c = 4; q.o = 7; q.h = 16; q.w = 19; q.stride = 2; q.dil = 3; q.pad = 2; return q; }(),
  };
  int variant = 0;
  for (const ConvCase& shape : shapes)
    for (const auto& [xa, ya] : int16_combinations()) {
      ConvCase q = shape;
      q.xa = xa, q.ya = ya;
      // Every third case clamps: a fused ReLU (act_min at the zero point) or a narrower window.
      if (variant % 3 == 1) q.clamp = {true, ya.zp, int32_t(ya.hi())};
      if (variant % 3 == 2) q.clamp = ya.dtype == kI16 ? Clamp{true, -1000, 20000} : Clamp{true, 4, 251};
      ++variant;
      check_conv(rng, q, __LINE__);
    }
}

TEST(qdense_int16_matches_integer_loops) {
  tiny::Rng rng(17);
  int variant = 0;
  for (const auto& [n, k, m] : {std::array<int64_t, 3>{3, 1283, 101}, std::array<int64_t, 3>{1, 640, 130},
                                std::array<int64_t, 3>{2, 37, 9}, std::array<int64_t, 3>{11, 300, 45},
                                std::array<int64_t, 3>{1, 1, 1}})
    for (const auto& [xa, ya] : int16_combinations()) {
      const Clamp clamp = variant++ % 2 ? Clamp{true, ya.zp, int32_t(ya.hi())} : Clamp{};
      const std::vector<int8_t> w = random_weights(rng, size_t(m * k));
      const float span = 1.2f * xa.scale * float(xa.dtype == kI16 ? 32768 : 128);
      const float center = xa.dtype == kI16 ? 0.0f : (128.0f - float(xa.zp)) * xa.scale;
      const std::vector<float> x = opt::random_vec(rng, size_t(n * k), center - span, center + span);
      const Requant r = random_requant(rng, m, xa.dtype, std::sqrt(double(k)) * (xa.dtype == kI16 ? 20000 : 80) * 74,
                                       ya.dtype == kI16 ? 8000 : 60);
      dsw::File f;
      const uint32_t xv = f.add_value("x", {n, k});
      f.inputs = {xv};
      const uint32_t qx = add_quantize(f, xv, xa, "qx", {n, k});
      const uint32_t wi = f.add_typed_constant(dsw::typed_tensor("w", 2, {uint64_t(m), uint64_t(k)}, w));
      const uint32_t bi = f.add_typed_constant(dsw::typed_tensor("b", 4, {uint64_t(m)}, r.bias));
      const uint32_t mi = f.add_typed_constant(dsw::typed_tensor("m", 4, {uint64_t(m)}, r.mult));
      const uint32_t si = f.add_typed_constant(dsw::typed_tensor("s", 4, {uint64_t(m)}, r.shift));
      const uint32_t c = f.add_activation("c", {n, m}, ya.dtype);
      std::vector<dsw::Attr> attrs = {dsw::attr_int("x_zero_point", xa.zp)};
      for (const dsw::Attr& a : output_attrs(ya, clamp)) attrs.push_back(a);
      f.add_node(28, "fc", {qx, wi, bi, mi, si}, c, attrs);
      add_dequantize(f, c, ya, {n, m});
      std::vector<float> want;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t j = 0; j < m; ++j) {
          int64_t acc = r.bias[size_t(j)];
          for (int64_t t = 0; t < k; ++t) acc += (quantize(x[size_t(b * k + t)], xa) - xa.zp) * w[size_t(j * k + t)];
          const int64_t v = ya.zp + requant_exact(acc, r.mult[size_t(j)], r.shift[size_t(j)]);
          want.push_back(dequantize(clamp_out(v, ya, clamp), ya));
        }
      expect_everywhere(f, x, {n, k}, want, "qdense k" + std::to_string(k), __LINE__);
    }
}

TEST(qconv2d_int16_extreme_accumulators_are_exact) {
  // Every input at -32768 and every weight at -128: the largest positive accumulator of the shape
  // (K * 2^22), with the largest 15-bit multiplier; and the most negative one (weights 127).
  for (int8_t wv : {int8_t(-128), int8_t(127)}) {
    const int64_t c = 512, k = c * 9;
    const Act xa{kI16, 1.0f, 0}, ya{kI16, 1.0f, 0};
    dsw::File f;
    const Dims xs = {1, c, 3, 3};
    const uint32_t xv = f.add_value("x", xs);
    f.inputs = {xv};
    const uint32_t qx = add_quantize(f, xv, xa, "qx", xs);
    const int32_t mult = 32767 << 16, shift = 12;
    const uint32_t w = f.add_typed_constant(dsw::typed_tensor("w", 2, {2, uint64_t(c), 3, 3}, std::vector<int8_t>(size_t(2 * k), wv)));
    const uint32_t b = f.add_typed_constant(dsw::typed_tensor("b", 4, {2}, std::vector<int32_t>{2147483647, -2147483647 - 1}));
    const uint32_t m = f.add_typed_constant(dsw::typed_tensor("m", 4, {2}, std::vector<int32_t>{mult, mult}));
    const uint32_t s = f.add_typed_constant(dsw::typed_tensor("s", 4, {2}, std::vector<int32_t>{shift, shift + 18}));
    const uint32_t cv = f.add_activation("c", {1, 2, 1, 1}, kI16);
    f.add_node(27, "conv", {qx, w, b, m, s}, cv, {dsw::attr_int("x_zero_point", 0), dsw::attr_int("y_zero_point", 0)});
    add_dequantize(f, cv, ya, {1, 2, 1, 1});
    const std::vector<float> x(size_t(c * 9), -40000.0f);
    const int64_t sum = k * -32768 * int64_t(wv);
    std::vector<float> want;
    for (int o = 0; o < 2; ++o) {
      const int64_t acc = sum + (o == 0 ? 2147483647 : -2147483648LL);
      want.push_back(float(clamp(requant_exact(acc, mult, o == 0 ? shift : shift + 18), -32768, 32767)));
    }
    expect_everywhere(f, x, xs, want, "extreme qconv2d", __LINE__);
  }
}

TEST(requantize_all_four_dtype_combinations) {
  tiny::Rng rng(18);
  const Act u8a{kU8, 0.05f, 131}, i16a{kI16, 0.0004f, 0};
  for (const Act& xa : {u8a, i16a})
    for (const Act& ya : {Act{kU8, 0.07f, 3}, Act{kI16, 0.0003f, 0}}) {
      for (const auto& [mult, shift] : {std::pair<int32_t, int32_t>{int32_t(1) << 30, 0}, {1518500250, -3},
                                        {2147483647, -30}, {1, 30}, {0, 0}, {1234567891, 7}}) {
        // The multiplier and shift in real terms: out_scale = x_scale / y_scale, rescaled by the
        // test ranges; here only the integer formula matters, so any pair does.
        const Dims xs = {2, 3, 5, 7};
        const float span = 1.1f * xa.scale * float(xa.dtype == kI16 ? 32768 : 128);
        const float center = xa.dtype == kI16 ? 0.0f : (128.0f - float(xa.zp)) * xa.scale;
        const std::vector<float> x = opt::random_vec(rng, opt::count(xs), center - span, center + span);
        dsw::File f;
        const uint32_t xv = f.add_value("x", xs);
        f.inputs = {xv};
        const uint32_t qx = add_quantize(f, xv, xa, "qx", xs);
        const uint32_t rq = f.add_activation("r", xs, ya.dtype);
        f.add_node(33, "requant", {qx}, rq,
                   {dsw::attr_int("x_zero_point", xa.zp), dsw::attr_int("y_zero_point", ya.zp),
                    dsw::attr_int("multiplier", mult), dsw::attr_int("shift", shift)});
        add_dequantize(f, rq, ya, xs);
        std::vector<float> want;
        for (float v : x) {
          const int64_t y = ya.zp + requant_exact(quantize(v, xa) - xa.zp, mult, shift);
          want.push_back(dequantize(clamp(y, ya.lo(), ya.hi()), ya));
        }
        expect_everywhere(f, x, xs, want, "requantize mult " + std::to_string(mult) + " shift " + std::to_string(shift),
                          __LINE__);
      }
    }
}

TEST(quantize_dequantize_int16_round_half_even_and_saturate) {
  const Act a{kI16, 0.5f, 0};
  const std::vector<float> x = {1.25f, 1.75f, -1.25f, -1.75f, 0.0f, -0.0f, 16383.25f, 16383.75f, -16384.0f,
                                -16384.25f, -16384.5f, 1e9f, -1e9f, std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  const std::vector<int64_t> q = {2, 4, -2, -4, 0, 0, 32766, 32767, -32768, -32768, -32768, 32767, -32768, 32767, -32768, 0};
  dsw::File f;
  const Dims xs = {int64_t(x.size())};
  const uint32_t xv = f.add_value("x", xs);
  f.inputs = {xv};
  const uint32_t qx = add_quantize(f, xv, a, "qx", xs);
  add_dequantize(f, qx, a, xs);
  std::vector<float> want;
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(quantize(x[i], a) == q[i]);  // the test's own formula agrees with the table
    want.push_back(float(q[i]) * a.scale);
  }
  expect_everywhere(f, x, xs, want, "quantize/dequantize i16", __LINE__);
}

TEST(int16_movement_ops_pass_values_unchanged) {
  // quantize i16 -> maxpool2d 3x3 s2 pad 1 -> dequantize; and quantize i16 -> global_maxpool ->
  // flatten -> reshape -> dequantize, against loops over the quantized values.
  tiny::Rng rng(19);
  const Act a{kI16, 0.001f, 0};
  const Dims xs = {2, 3, 7, 9};
  const std::vector<float> x = opt::random_vec(rng, opt::count(xs), -40.0f, 40.0f);
  std::vector<int64_t> q;
  for (float v : x) q.push_back(quantize(v, a));
  {
    const Dims ys = {2, 3, 4, 5};
    dsw::File f;
    const uint32_t xv = f.add_value("x", xs);
    f.inputs = {xv};
    const uint32_t qx = add_quantize(f, xv, a, "qx", xs);
    const uint32_t p = f.add_activation("p", ys, kI16);
    f.add_node(3, "pool", {qx}, p,
               {dsw::attr_ints("kernel", {3, 3}), dsw::attr_ints("strides", {2, 2}), dsw::attr_ints("pads", {1, 1, 1, 1})});
    add_dequantize(f, p, a, ys);
    std::vector<float> want;
    for (int64_t plane = 0; plane < 6; ++plane)
      for (int64_t oy = 0; oy < 4; ++oy)
        for (int64_t ox = 0; ox < 5; ++ox) {
          int64_t m = -32768;
          for (int64_t iy = 2 * oy - 1; iy <= 2 * oy + 1; ++iy)
            for (int64_t ix = 2 * ox - 1; ix <= 2 * ox + 1; ++ix)
              if (iy >= 0 && iy < 7 && ix >= 0 && ix < 9) m = std::max(m, q[size_t((plane * 7 + iy) * 9 + ix)]);
          want.push_back(dequantize(m, a));
        }
    expect_everywhere(f, x, xs, want, "maxpool2d i16", __LINE__);
  }
  {
    dsw::File f;
    const uint32_t xv = f.add_value("x", xs);
    f.inputs = {xv};
    const uint32_t qx = add_quantize(f, xv, a, "qx", xs);
    const uint32_t g = f.add_activation("g", {2, 3, 1, 1}, kI16);
    f.add_node(23, "gmax", {qx}, g);
    const uint32_t fl = f.add_activation("fl", {2, 3}, kI16);
    f.add_node(6, "flat", {g}, fl, {dsw::attr_int("axis", 1)});
    const uint32_t rs = f.add_activation("rs", {3, 2}, kI16);
    f.add_node(18, "reshape", {fl}, rs, {dsw::attr_ints("shape", {3, -1})});
    add_dequantize(f, rs, a, {3, 2});
    std::vector<float> want;
    for (int64_t plane = 0; plane < 6; ++plane) {
      int64_t m = -32768;
      for (int64_t i = 0; i < 63; ++i) m = std::max(m, q[size_t(plane * 63 + i)]);
      want.push_back(dequantize(m, a));
    }
    expect_everywhere(f, x, xs, want, "global_maxpool/flatten/reshape i16", __LINE__);
  }
}

namespace {

// x f32 -> quantize i16 -> qconv2d 1x1 (i16 -> yd) -> dequantize, for the load-time checks.
dsw::File small_conv(uint8_t yd, std::vector<dsw::Attr> attrs, int32_t mult = 1 << 30, int32_t shift = 0,
                     int32_t quant_zp = 0) {
  dsw::File f;
  const uint32_t x = f.add_value("x", {1, 2, 2, 2});
  f.inputs = {x};
  const uint32_t qx = f.add_activation("qx", {1, 2, 2, 2}, kI16);
  f.add_node(25, "quant", {x}, qx, {opt::attr_float("scale", 0.01f), dsw::attr_int("zero_point", quant_zp)});
  const uint32_t w = f.add_typed_constant(dsw::typed_tensor("w", 2, {3, 2, 1, 1}, std::vector<int8_t>(6, 1)));
  const uint32_t b = f.add_typed_constant(dsw::typed_tensor("b", 4, {3}, std::vector<int32_t>(3, 0)));
  const uint32_t m = f.add_typed_constant(dsw::typed_tensor("m", 4, {3}, std::vector<int32_t>(3, mult)));
  const uint32_t s = f.add_typed_constant(dsw::typed_tensor("s", 4, {3}, std::vector<int32_t>(3, shift)));
  const uint32_t c = f.add_activation("c", {1, 3, 2, 2}, yd);
  attrs.push_back(dsw::attr_int("x_zero_point", 0));
  if (std::none_of(attrs.begin(), attrs.end(), [](const dsw::Attr& a) { return a.key == "y_zero_point"; }))
    attrs.push_back(dsw::attr_int("y_zero_point", 0));
  f.add_node(27, "conv", {qx, w, b, m, s}, c, attrs);
  const uint32_t y = f.add_value("y", {1, 3, 2, 2});
  f.add_node(26, "dequant", {c}, y, {opt::attr_float("scale", 0.02f), dsw::attr_int("zero_point", 0)});
  f.outputs = {y};
  return f;
}

}  // namespace

TEST(int16_load_time_checks_name_node_and_field) {
  CHECK(opt::load(small_conv(kI16, {})).status == DS_OK);
  CHECK(opt::load(small_conv(kU8, {dsw::attr_int("y_zero_point", 5)})).status == DS_OK);
  EXPECT_REFUSED(opt::load(small_conv(kI16, {}, 1 << 30, 0, 3)), DS_ERR_FORMAT,
                 "node 'quant' (quantize): attribute 'zero_point' is 3, must be 0 for an i16 value");
  dsw::File f = small_conv(kI16, {});
  for (dsw::Attr& a : f.nodes[1].attrs)
    if (a.key == "x_zero_point") a.i = 1;
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'conv' (qconv2d): attribute 'x_zero_point' is 1, must be 0 for an i16 value");
  EXPECT_REFUSED(opt::load(small_conv(kI16, {dsw::attr_int("y_zero_point", 2)})), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): attribute 'y_zero_point' is 2, must be 0 for an i16 value");
  EXPECT_REFUSED(opt::load(small_conv(kI16, {}, (1 << 30) + 1)), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): multiplier[0] is 1073741825, not a multiple of 2^16");
  CHECK(opt::load(small_conv(kI16, {}, 1 << 30, -14)).status == DS_OK);
  EXPECT_REFUSED(opt::load(small_conv(kI16, {}, 1 << 30, -15)), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): shift[0] is -15; with i16 input 15 + shift must be >= 1");
  EXPECT_REFUSED(opt::load(small_conv(kU8, {dsw::attr_int("act_min", -1)})), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): attribute 'act_min' is -1, outside 0..255 (output u8)");
  EXPECT_REFUSED(opt::load(small_conv(kU8, {dsw::attr_int("act_max", 256)})), DS_ERR_FORMAT,
                 "attribute 'act_max' is 256, outside 0..255 (output u8)");
  CHECK(opt::load(small_conv(kI16, {dsw::attr_int("act_min", -32768), dsw::attr_int("act_max", 32767)})).status == DS_OK);
  EXPECT_REFUSED(opt::load(small_conv(kI16, {dsw::attr_int("act_max", 32768)})), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): attribute 'act_max' is 32768, outside -32768..32767");
  EXPECT_REFUSED(opt::load(small_conv(kI16, {dsw::attr_int("act_min", 5), dsw::attr_int("act_max", 4)})), DS_ERR_FORMAT,
                 "node 'conv' (qconv2d): act_min 5 is greater than act_max 4");
  // The output declared f32; an f32 input.
  f = small_conv(kI16, {});
  f.values[f.nodes[1].outputs[0]].dtype = kF32;
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'conv' (qconv2d): output is declared f32; the op gives u8 or i16");
  f = small_conv(kI16, {});
  f.nodes[1].inputs[0] = f.inputs[0];
  f.nodes.erase(f.nodes.begin());
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'conv' (qconv2d): input 0 (x) is f32, must be u8 or i16");
  // dequantize of i16 with a zero point.
  f = small_conv(kI16, {});
  f.nodes[2].attrs[1] = dsw::attr_int("zero_point", 4);
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'dequant' (dequantize): attribute 'zero_point' is 4, must be 0 for an i16 value");
  // An i16 graph output; an op that takes no i16 (transpose, qadd).
  f = small_conv(kI16, {});
  f.outputs = {f.nodes[1].outputs[0]};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "output 'c' is i16; this runtime returns f32 graph outputs");
  f = small_conv(kI16, {});
  const uint32_t t = f.add_activation("t", {1, 3, 2, 2}, kI16);
  f.nodes.insert(f.nodes.begin() + 2, {19, "tr", {f.nodes[1].outputs[0]}, {t}, {dsw::attr_ints("perm", {0, 1, 3, 2})}});
  f.nodes[3].inputs = {t};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'tr' (transpose): input 0 is i16; the op takes f32 or u8");
  f.nodes[2] = {29, "add", {f.nodes[1].outputs[0], f.nodes[1].outputs[0]}, {t},
                {dsw::attr_int("a_zero_point", 0), dsw::attr_int("b_zero_point", 0), dsw::attr_int("y_zero_point", 0),
                 dsw::attr_int("a_multiplier", 1 << 30), dsw::attr_int("b_multiplier", 1 << 30), dsw::attr_int("shift", 0)}};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'add' (qadd): input 0 (a) is i16, must be u8");
}

TEST(requantize_load_time_checks) {
  auto file = [](uint8_t xd, uint8_t yd, std::vector<dsw::Attr> attrs) {
    dsw::File f;
    const uint32_t x = f.add_value("x", {4});
    f.inputs = {x};
    const uint32_t q = f.add_activation("q", {4}, xd);
    f.add_node(25, "quant", {x}, q, {opt::attr_float("scale", 0.5f), dsw::attr_int("zero_point", 0)});
    const uint32_t r = f.add_activation("r", {4}, yd);
    f.add_node(33, "rq", {q}, r, std::move(attrs));
    const uint32_t y = f.add_value("y", {4});
    f.add_node(26, "dequant", {r}, y, {opt::attr_float("scale", 0.5f), dsw::attr_int("zero_point", 0)});
    f.outputs = {y};
    return f;
  };
  auto attrs = [](int64_t xzp, int64_t yzp, int64_t m, int64_t s) {
    return std::vector<dsw::Attr>{dsw::attr_int("x_zero_point", xzp), dsw::attr_int("y_zero_point", yzp),
                                  dsw::attr_int("multiplier", m), dsw::attr_int("shift", s)};
  };
  CHECK(opt::load(file(kI16, kU8, attrs(0, 0, 1 << 30, 0))).status == DS_OK);
  CHECK(opt::load(file(kU8, kI16, attrs(0, 0, 2147483647, -30))).status == DS_OK);
  EXPECT_REFUSED(opt::load(file(kI16, kU8, attrs(1, 0, 1 << 30, 0))), DS_ERR_FORMAT,
                 "node 'rq' (requantize): attribute 'x_zero_point' is 1, must be 0 for an i16 value");
  EXPECT_REFUSED(opt::load(file(kU8, kI16, attrs(0, 1, 1 << 30, 0))), DS_ERR_FORMAT,
                 "node 'rq' (requantize): attribute 'y_zero_point' is 1, must be 0 for an i16 value");
  EXPECT_REFUSED(opt::load(file(kU8, kU8, attrs(0, 256, 1 << 30, 0))), DS_ERR_FORMAT,
                 "node 'rq' (requantize): attribute 'y_zero_point' is 256, outside 0..255");
  EXPECT_REFUSED(opt::load(file(kU8, kU8, attrs(0, 0, 2147483648LL, 0))), DS_ERR_FORMAT,
                 "node 'rq' (requantize): attribute 'multiplier' is 2147483648, outside 0..2147483647");
  EXPECT_REFUSED(opt::load(file(kU8, kU8, attrs(0, 0, 1 << 30, 31))), DS_ERR_FORMAT,
                 "node 'rq' (requantize): attribute 'shift' is 31, outside -30..30");
  EXPECT_REFUSED(opt::load(file(kU8, kU8, {dsw::attr_int("x_zero_point", 0), dsw::attr_int("y_zero_point", 0)})),
                 DS_ERR_FORMAT, "node 'rq' (requantize): attribute 'multiplier' is missing");
  EXPECT_REFUSED(opt::load(file(kU8, kF32, attrs(0, 0, 1 << 30, 0))), DS_ERR_FORMAT,
                 "node 'rq' (requantize): output is declared f32; the op gives u8 or i16");
}

TEST(int16_accumulation_depth_limit) {
  // K * 32768 * 128 must be < 2^46: K = 2^24 is refused (never in practice; a 16 MB weight).
  const int64_t k = int64_t(1) << 24;
  dsw::File f;
  const uint32_t x = f.add_value("x", {1, k});
  f.inputs = {x};
  const uint32_t qx = f.add_activation("qx", {1, k}, kI16);
  f.add_node(25, "quant", {x}, qx, {opt::attr_float("scale", 0.01f), dsw::attr_int("zero_point", 0)});
  const uint32_t w = f.add_typed_constant(dsw::typed_tensor("w", 2, {1, uint64_t(k)}, std::vector<int8_t>(size_t(k), 1)));
  const uint32_t b = f.add_typed_constant(dsw::typed_tensor("b", 4, {1}, std::vector<int32_t>{0}));
  const uint32_t m = f.add_typed_constant(dsw::typed_tensor("m", 4, {1}, std::vector<int32_t>{1 << 30}));
  const uint32_t s = f.add_typed_constant(dsw::typed_tensor("s", 4, {1}, std::vector<int32_t>{0}));
  const uint32_t c = f.add_activation("c", {1, 1}, kI16);
  f.add_node(28, "fc", {qx, w, b, m, s}, c, {dsw::attr_int("x_zero_point", 0), dsw::attr_int("y_zero_point", 0)});
  const uint32_t y = f.add_value("y", {1, 1});
  f.add_node(26, "dequant", {c}, y, {opt::attr_float("scale", 0.02f), dsw::attr_int("zero_point", 0)});
  f.outputs = {y};
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'fc' (qdense): weight [1, 16777216] sums 16777216 products per output, more than 16777215");
}
