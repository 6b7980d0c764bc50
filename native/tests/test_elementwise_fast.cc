// The SIMD elementwise kernels (add/sub/mul/div with broadcasting, relu, the activation op)
// against the scalar ones, bit for bit, at every level this machine runs: random shapes of rank
// 1-5 with random broadcast axes, lengths around the vector widths (tails), every activation
// code, and special values (NaN, +-0, +-inf). Global average pooling within one ulp; softmax
// against double-precision sums.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "harness.h"
#include "kernels/kernels.h"
#include "tiny_net.h"

namespace {

const ds::Isa kLevels[] = {ds::Isa::kAvx2, ds::Isa::kAvx512};

const ds::Activation kActs[] = {{0, 0, 0},       {1, 0, 0},       {2, 0, 6},      {2, -0.5f, 0.25f}, {3, 0.1f, 0},
                                {4, 0, 0},       {5, 0.2f, 0.5f}, {6, 0, 0},      {7, 0, 0}};

// Bitwise equality, with any NaN equal to any NaN.
bool same(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

float value(tiny::Rng& rng) {
  switch (rng.below(40)) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return 0.0f;
    case 2: return -0.0f;
    case 3: return std::numeric_limits<float>::infinity();
    case 4: return -std::numeric_limits<float>::infinity();
    default: return rng.uniform(-8, 8);
  }
}

// Strides of a [dims] tensor in the output index space, 0 along `broadcast` axes.
void strides(const ds::BinaryParams& p, const bool* broadcast, int64_t* s, int64_t* size) {
  int64_t step = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    s[k] = broadcast[k] ? 0 : step;
    step *= broadcast[k] ? 1 : p.dims[k];
  }
  *size = step;
}

}  // namespace

TEST(binary_kernels_match_scalar) {
  tiny::Rng rng(7);
  using Fn = ds::BinaryKernel;
  int ran = 0;
  for (int trial = 0; trial < 600; ++trial) {
    ds::BinaryParams p{};
    p.rank = 1 + int32_t(rng.below(5));
    const int64_t sizes[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 49, 64, 100};
    for (int k = 0; k < p.rank; ++k) p.dims[k] = sizes[rng.below(trial < 300 ? 14 : 6)];
    bool ba[ds::kMaxRank], bb[ds::kMaxRank];
    for (int k = 0; k < p.rank; ++k) {
      const uint32_t r = rng.below(4);  // mostly full; sometimes one side broadcasts
      ba[k] = r == 1;
      bb[k] = r == 2;
    }
    int64_t na, nb, ny = 1;
    strides(p, ba, p.a_strides, &na);
    strides(p, bb, p.b_strides, &nb);
    for (int k = 0; k < p.rank; ++k) ny *= p.dims[k];
    p.act = kActs[rng.below(sizeof kActs / sizeof kActs[0])];
    std::vector<float> a(static_cast<size_t>(na)), b(static_cast<size_t>(nb));
    for (float& v : a) v = value(rng);
    for (float& v : b) v = value(rng);
    const int op = int(rng.below(4));
    const Fn scalar[] = {ds::ds_f32_vadd__scalar, ds::ds_f32_vsub__scalar, ds::ds_f32_vmul__scalar, ds::ds_f32_vdiv__scalar};
    std::vector<float> want(static_cast<size_t>(ny));
    scalar[op](p, a.data(), b.data(), want.data());
    for (ds::Isa isa : kLevels) {
      if (!ds::isa_available(isa)) continue;
      ++ran;
      std::vector<float> got(size_t(ny) + 1, 7.0f);
      const ds::KernelTable& t = ds::kernels_for(isa);  // the tables: this builds on every architecture
      const Fn level[] = {t.add, t.sub, t.mul, t.div};
      level[op](p, a.data(), b.data(), got.data());
      size_t bad = 0;
      for (size_t i = 0; i < want.size(); ++i) bad += !same(got[i], want[i]);
      std::string shape;
      for (int k = 0; k < p.rank; ++k)
        shape += std::to_string(p.dims[k]) + (ba[k] ? "a" : "") + (bb[k] ? "b" : "") + " ";
      CHECK_MSG(bad == 0, std::string(ds::isa_name(isa)) + " op " + std::to_string(op) + " act " +
                              std::to_string(p.act.kind) + " dims " + shape + ": " + std::to_string(bad) + " differ");
      CHECK_MSG(got.back() == 7.0f, std::string(ds::isa_name(isa)) + ": wrote past the output");
    }
  }
  if (ran == 0) SKIP("no SIMD level on this machine");
}

TEST(activation_and_relu_kernels_match_scalar) {
  tiny::Rng rng(11);
  int ran = 0;
  for (int64_t n : {1, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 100, 1000, 1031}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = value(rng);
    for (const ds::Activation& act : kActs) {
      std::vector<float> want(static_cast<size_t>(n));
      ds::ds_f32_activation__scalar(n, act, x.data(), want.data());
      std::vector<float> want_relu(static_cast<size_t>(n));
      ds::ds_f32_relu__scalar(n, x.data(), want_relu.data());
      for (ds::Isa isa : kLevels) {
        if (!ds::isa_available(isa)) continue;
        ++ran;
        const ds::KernelTable& t = ds::kernels_for(isa);
        std::vector<float> got(size_t(n) + 1, 7.0f);
        t.activation(n, act, x.data(), got.data());
        size_t bad = 0;
        for (size_t i = 0; i < want.size(); ++i) bad += !same(got[i], want[i]);
        CHECK_MSG(bad == 0, std::string(ds::isa_name(isa)) + " act " + std::to_string(act.kind) + " n " +
                                std::to_string(n) + ": " + std::to_string(bad) + " differ");
        CHECK(got.back() == 7.0f);
        got.assign(size_t(n) + 1, 7.0f);
        t.relu(n, x.data(), got.data());
        bad = 0;
        for (size_t i = 0; i < want.size(); ++i) bad += !same(got[i], want_relu[i]);
        CHECK_MSG(bad == 0, std::string(ds::isa_name(isa)) + " relu n " + std::to_string(n));
        CHECK(got.back() == 7.0f);
      }
    }
  }
  // In place (y == x), as the session may run it.
  for (ds::Isa isa : kLevels) {
    if (!ds::isa_available(isa)) continue;
    std::vector<float> x = {-1, 2, -3, 4, -5, 6, -7, 8, -9, 10, -11, 12, -13, 14, -15, 16, -17, 18};
    ds::kernels_for(isa).relu(int64_t(x.size()), x.data(), x.data());
    for (size_t i = 0; i < x.size(); ++i) CHECK(x[i] == (i % 2 ? float(i + 1) : 0.0f));
  }
  if (ran == 0) SKIP("no SIMD level on this machine");
}

TEST(tables_use_the_simd_kernels) {
#if !defined(__x86_64__) && !defined(_M_X64)
  SKIP("the x86 kernels exist on x86-64 builds only");
#else
  if (ds::isa_available(ds::Isa::kAvx2)) CHECK(ds::kernels_for(ds::Isa::kAvx2).add == ds::ds_f32_vadd__avx2);
  if (ds::isa_available(ds::Isa::kAvx512)) CHECK(ds::kernels_for(ds::Isa::kAvx512).relu == ds::ds_f32_relu__avx512);
  CHECK(ds::kernels_for(ds::Isa::kScalar).add == ds::ds_f32_vadd__scalar);
#endif
}

TEST(global_avgpool_kernels_match_scalar) {
  tiny::Rng rng(13);
  int ran = 0;
  for (int64_t size : {1, 3, 7, 8, 9, 15, 16, 17, 31, 49, 64, 169, 1000, 100003}) {
    const int64_t planes = size > 1000 ? 2 : 5;
    std::vector<float> x(static_cast<size_t>(planes * size));
    for (float& v : x) v = rng.uniform(-4, 4) + (rng.below(2) ? 100.0f : 0.0f);  // some planes far from 0
    std::vector<float> want(static_cast<size_t>(planes));
    ds::ds_f32_global_avgpool__scalar(planes, size, x.data(), want.data());
    for (ds::Isa isa : kLevels) {
      if (!ds::isa_available(isa)) continue;
      ++ran;
      std::vector<float> got(static_cast<size_t>(planes) + 1, 7.0f);
      ds::kernels_for(isa).global_avgpool(planes, size, x.data(), got.data());
      for (int64_t p = 0; p < planes; ++p) {
        // Both sum in double, in different orders: the float results agree to the last bit but for
        // a rounding tie, so allow one ulp.
        const float w = want[size_t(p)], g = got[size_t(p)];
        CHECK_MSG(std::fabs(g - w) <= std::fabs(w) * 1.2e-7f + 1e-30f,
                  std::string(ds::isa_name(isa)) + " size " + std::to_string(size) + ": " + std::to_string(g) +
                      " vs " + std::to_string(w));
      }
      CHECK(got.back() == 7.0f);
    }
  }
  if (ran == 0) SKIP("no SIMD level on this machine");
}

TEST(softmax_kernels_match_double) {
  // Contiguous axes of every length around the vector width (the AVX-512 kernel), and a strided
  // one (inner > 1: the scalar kernel at every level), with values far apart (outputs near 0).
  tiny::Rng rng(17);
  for (int64_t axis : {1, 2, 15, 16, 17, 33, 100, 848, 1000}) {
    for (int64_t inner : {1, 3}) {
      const ds::SoftmaxParams p{3, axis, inner};
      std::vector<float> x(static_cast<size_t>(3 * axis * inner));
      for (float& v : x) v = rng.uniform(-30, 30) + (rng.below(8) == 0 ? 500.0f : 0.0f);
      for (ds::Isa isa : {ds::Isa::kScalar, ds::Isa::kAvx2, ds::Isa::kAvx512}) {
        if (!ds::isa_available(isa)) continue;
        std::vector<float> y(x.size() + 1, 7.0f);
        ds::kernels_for(isa).softmax(p, x.data(), y.data());
        CHECK(y.back() == 7.0f);
        int64_t bad = 0;
        for (int64_t o = 0; o < 3; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            auto at = [&](int64_t a) { return size_t((o * axis + a) * inner + i); };
            double m = -INFINITY, sum = 0;
            for (int64_t a = 0; a < axis; ++a) m = std::max(m, double(x[at(a)]));
            for (int64_t a = 0; a < axis; ++a) sum += std::exp(double(x[at(a)]) - m);
            for (int64_t a = 0; a < axis; ++a) {
              // x - max rounds in float: a relative error of |x - max| ulps in the exponent.
              const double d = double(x[at(a)]) - m, want = std::exp(d) / sum;
              bad += !(std::fabs(y[at(a)] - want) <= (2e-6 + std::fabs(d) * 1.2e-7) * want + 1e-44);
            }
          }
        CHECK_MSG(bad == 0, std::string(ds::isa_name(isa)) + " axis " + std::to_string(axis) + " inner " +
                                std::to_string(inner) + ": " + std::to_string(bad) + " off");
      }
    }
  }
}

TEST(softmax_kernels_give_the_scalar_results_on_nan_and_inf) {
  // A row with a NaN, +inf or only -inf gives what the scalar kernel gives (IEEE: NaNs), at every
  // level; the other rows of the same call stay ordinary.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t axis : {5, 16, 40, 848}) {
    for (int64_t special : {0, 1, 2, 3}) {
      const ds::SoftmaxParams p{2, axis, 1};
      std::vector<float> x(size_t(2 * axis));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3.0f;
      const size_t at = size_t(axis + axis / 2);  // in the second row
      if (special == 0) x[at] = nan;
      if (special == 1) x[at] = inf;
      if (special == 2) std::fill(x.begin() + axis, x.end(), -inf);
      if (special == 3) x[size_t(axis - 1)] = nan;  // the last lane of the first row
      std::vector<float> want(x.size());
      ds::kernels_for(ds::Isa::kScalar).softmax(p, x.data(), want.data());
      for (ds::Isa isa : {ds::Isa::kAvx2, ds::Isa::kAvx512}) {
        if (!ds::isa_available(isa)) continue;
        std::vector<float> y(x.size());
        ds::kernels_for(isa).softmax(p, x.data(), y.data());
        int64_t bad = 0;
        for (size_t i = 0; i < x.size(); ++i)
          bad += std::isnan(want[i]) ? !std::isnan(y[i]) : !(std::fabs(y[i] - want[i]) <= 4e-6f * want[i] + 1e-44f);
        CHECK_MSG(bad == 0, std::string(ds::isa_name(isa)) + " axis " + std::to_string(axis) + " case " +
                                std::to_string(special) + ": " + std::to_string(bad) + " off");
      }
    }
  }
}
