// The test network: conv(codebook+huffman, relu) -> maxpool -> grouped dilated conv (sparse_rel)
// -> avgpool(ceil_mode) -> relu -> flatten -> dense(sparse_rel+codebook+huffman) -> softmax,
// written with dsw, and a plain-loop forward pass to check the runtime against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dsm_writer.h"

namespace tiny {

// Deterministic pseudo-random numbers (a 64-bit LCG), so failures reproduce.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 6364136223846793005ull + 1442695040888963407ull) {}
  uint32_t next() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() % 1000000) / 1e6f; }
  uint32_t below(uint32_t n) { return next() % n; }
};

struct Conv {
  int64_t o, c, kh, kw, group, sh, sw, dh, dw;
  int64_t pads[4];
  bool relu;
};

// out[b][oc][oy][ox] = bias + sum over the group's channels and taps of x * w, zero outside.
inline std::vector<float> conv(const std::vector<float>& x, int64_t n, int64_t c, int64_t h, int64_t w,
                               const std::vector<float>& wt, const std::vector<float>& bias, const Conv& p,
                               int64_t* oh_out, int64_t* ow_out) {
  const int64_t oh = (h + p.pads[0] + p.pads[2] - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  const int64_t ow = (w + p.pads[1] + p.pads[3] - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  const int64_t cg = c / p.group, og = p.o / p.group;
  std::vector<float> out(size_t(n * p.o * oh * ow));
  auto at = [&](int64_t b, int64_t ch, int64_t y, int64_t xx) -> float {
    if (y < 0 || y >= h || xx < 0 || xx >= w) return 0.0f;
    return x[size_t(((b * c + ch) * h + y) * w + xx)];
  };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < p.o; ++oc)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = bias.empty() ? 0.0 : bias[size_t(oc)];
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx)
                acc += double(at(b, (oc / og) * cg + ic, oy * p.sh - p.pads[0] + ky * p.dh,
                                 ox * p.sw - p.pads[1] + kx * p.dw)) *
                       wt[size_t(((oc * cg + ic) * p.kh + ky) * p.kw + kx)];
          if (p.relu) acc = std::max(acc, 0.0);
          out[size_t(((b * p.o + oc) * oh + oy) * ow + ox)] = float(acc);
        }
  *oh_out = oh;
  *ow_out = ow;
  return out;
}

// PyTorch pooling: output size with ceil_mode (last window must start inside input or left pad),
// windows clipped to the input; average divisor per count_include_pad.
inline int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, bool ceil_mode) {
  const int64_t num = in + pb + pe - k;
  int64_t out = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pb) --out;
  return out;
}

inline std::vector<float> pool(const std::vector<float>& x, int64_t planes, int64_t h, int64_t w, int64_t k,
                               int64_t s, const int64_t pads[4], bool ceil_mode, bool is_max,
                               bool count_include_pad, int64_t* oh_out, int64_t* ow_out) {
  const int64_t oh = pool_out(h, k, s, pads[0], pads[2], ceil_mode);
  const int64_t ow = pool_out(w, k, s, pads[1], pads[3], ceil_mode);
  std::vector<float> out(size_t(planes * oh * ow));
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t ys = oy * s - pads[0], xs = ox * s - pads[1];
        const int64_t ye = std::min(ys + k, h + pads[2]), xe = std::min(xs + k, w + pads[3]);
        double best = -INFINITY, sum = 0;
        int64_t real = 0;
        for (int64_t y = std::max<int64_t>(ys, 0); y < std::min(ye, h); ++y)
          for (int64_t xx = std::max<int64_t>(xs, 0); xx < std::min(xe, w); ++xx) {
            const double v = x[size_t((pl * h + y) * w + xx)];
            best = std::max(best, v);
            sum += v;
            ++real;
          }
        const double div = count_include_pad ? double((ye - ys) * (xe - xs)) : double(real);
        out[size_t((pl * oh + oy) * ow + ox)] = float(is_max ? best : sum / div);
      }
  *oh_out = oh;
  *ow_out = ow;
  return out;
}

struct Net {
  dsw::File file;
  std::vector<float> w1, b1, w2, w3, b3;
  Conv c1{4, 1, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true};
  Conv c2{4, 4, 3, 3, 2, 1, 1, 2, 2, {2, 2, 2, 2}, false};
  int64_t ap_pads[4] = {1, 1, 1, 1};
  int64_t mp_pads[4] = {0, 0, 0, 0};
};

// Input [-1, 1, 8, 8]; outputs [N, 10] probabilities and [N, 10] logits.
inline Net build(uint64_t seed = 1) {
  Net net;
  Rng rng(seed);
  const std::vector<float> cb1 = {-0.5f, -0.125f, 0.25f, 0.75f};
  for (int i = 0; i < 4 * 9; ++i) net.w1.push_back(cb1[rng.below(4)]);
  for (int i = 0; i < 4; ++i) net.b1.push_back(rng.uniform(-0.1f, 0.1f));
  for (int i = 0; i < 4 * 2 * 9; ++i) net.w2.push_back(rng.below(10) < 6 ? 0.0f : rng.uniform(-1, 1));
  const std::vector<float> cb3 = {0.0f, -0.75f, -0.25f, 0.125f, 0.5f, 1.0f};
  for (int i = 0; i < 10 * 36; ++i) net.w3.push_back(rng.below(10) < 7 ? 0.0f : cb3[1 + rng.below(5)]);
  for (int i = 0; i < 10; ++i) net.b3.push_back(rng.uniform(-0.2f, 0.2f));

  dsw::File& f = net.file;
  using dsw::attr_int;
  using dsw::attr_ints;
  const uint32_t x = f.add_value("x", {-1, 1, 8, 8});
  f.inputs = {x};
  const uint32_t w1 = f.add_constant(dsw::codebook_tensor("conv1.weight", {4, 1, 3, 3}, net.w1, cb1, 2, true));
  const uint32_t b1 = f.add_constant(dsw::dense_tensor("conv1.bias", {4}, net.b1));
  const uint32_t w2 = f.add_constant(dsw::sparse_tensor("conv2.weight", {4, 2, 3, 3}, net.w2, 2));
  const uint32_t w3 = f.add_constant(dsw::sparse_tensor("fc.weight", {10, 36}, net.w3, 3, &cb3, 3, true));
  const uint32_t b3 = f.add_constant(dsw::dense_tensor("fc.bias", {10}, net.b3));
  const uint32_t a1 = f.add_value("conv1.out", {1, 4, 8, 8});
  const uint32_t a2 = f.add_value("pool1.out", {1, 4, 4, 4});
  const uint32_t a3 = f.add_value("conv2.out", {1, 4, 4, 4});
  const uint32_t a4 = f.add_value("pool2.out", {1, 4, 3, 3});
  const uint32_t a5 = f.add_value("relu.out", {1, 4, 3, 3});
  const uint32_t a6 = f.add_value("flat.out", {1, 36});
  const uint32_t a7 = f.add_value("fc.out", {1, 10});
  const uint32_t y = f.add_value("probs", {1, 10});
  f.outputs = {y, a7};  // probabilities, and the logits before them
  f.add_node(1, "conv1", {x, w1, b1}, a1, {attr_ints("pads", {1, 1, 1, 1}), attr_int("activation", 1)});
  f.add_node(3, "pool1", {a1}, a2, {attr_ints("kernel", {2, 2})});
  f.add_node(1, "conv2", {a2, w2, 0xFFFFFFFFu}, a3,
             {attr_ints("pads", {2, 2, 2, 2}), attr_ints("dilations", {2, 2}), attr_int("group", 2)});
  f.add_node(4, "pool2", {a3}, a4,
             {attr_ints("kernel", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1}),
              attr_int("ceil_mode", 1)});
  f.add_node(5, "relu", {a4}, a5);
  f.add_node(6, "flat", {a5}, a6, {attr_int("axis", 1)});
  f.add_node(2, "fc", {a6, w3, b3}, a7);
  f.add_node(7, "softmax", {a7}, y, {attr_int("axis", -1)});
  return net;
}

// The plain-loop forward pass of build()'s network.
inline std::vector<float> forward(const Net& net, const std::vector<float>& x, int64_t n,
                                  std::vector<float>* logits = nullptr) {
  int64_t h, w;
  std::vector<float> a = conv(x, n, 1, 8, 8, net.w1, net.b1, net.c1, &h, &w);
  a = pool(a, n * 4, h, w, 2, 2, net.mp_pads, false, true, false, &h, &w);
  a = conv(a, n, 4, h, w, net.w2, {}, net.c2, &h, &w);
  a = pool(a, n * 4, h, w, 3, 2, net.ap_pads, true, false, false, &h, &w);
  for (float& v : a) v = std::max(v, 0.0f);
  const int64_t k = 4 * h * w;
  std::vector<float> out(size_t(n * 10));
  for (int64_t b = 0; b < n; ++b) {
    double m = -INFINITY;
    double z[10];
    for (int j = 0; j < 10; ++j) {
      z[j] = net.b3[size_t(j)];
      for (int64_t i = 0; i < k; ++i) z[j] += double(a[size_t(b * k + i)]) * net.w3[size_t(j * k + i)];
      m = std::max(m, z[j]);
    }
    if (logits)
      for (double v : z) logits->push_back(float(v));
    double sum = 0;
    for (double& v : z) sum += (v = std::exp(v - m));
    for (int j = 0; j < 10; ++j) out[size_t(b * 10 + j)] = float(z[j] / sum);
  }
  return out;
}

}  // namespace tiny
