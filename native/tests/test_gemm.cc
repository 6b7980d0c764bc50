// f32 GEMM of every ISA level this machine runs against the scalar reference: sizes at and around
// the register tile and cache blocks (1, tile-1, tile, tile+1, primes, > kc/mc/nc), every
// activation code, bias per row/column/none, residual on/off, packed and unpacked operands,
// transposed strides and padded C rows; then thread-count invariance (bitwise). The level under
// test runs each case twice, with A, B (raw or packed), the bias, the residual and C each against
// an inaccessible page after their end, then before their start: an access outside them faults.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "kernels/x86/f32-gemm-driver.h"
#include "guarded_floats.h"
#include "harness.h"
#include "kernel_tolerances.h"
#include "tiny_net.h"

namespace {

using ds::GemmKernels;
using ds::GemmParams;
using ds::Isa;

struct Case {
  int64_t m, n, k;
  int32_t act = 0;
  int32_t bias_kind = 0;
  bool residual = false;
  bool pack_a = false, pack_b = false;
  bool a_trans = false, b_trans = false;  // raw operand stored transposed
  int64_t c_pad = 0;                      // extra floats per C row
};

std::string describe(const Case& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " act=" + std::to_string(c.act) + " bias=" + std::to_string(c.bias_kind) +
         " res=" + std::to_string(c.residual) + " packA=" + std::to_string(c.pack_a) +
         " packB=" + std::to_string(c.pack_b) + " aT=" + std::to_string(c.a_trans) +
         " bT=" + std::to_string(c.b_trans) + " cpad=" + std::to_string(c.c_pad);
}

std::vector<float> random_vec(tiny::Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = rng.uniform(-1, 1);
  return v;
}

// The problem's data, and params for one GemmKernels (packing with its tile).
struct Problem {
  Case cs;
  std::vector<float> a, b, bias, residual, a_packed, b_packed;
  float alpha = 0, beta = 0;

  Problem(const Case& c, tiny::Rng& rng) : cs(c) {
    a = random_vec(rng, size_t(c.m * c.k));
    b = random_vec(rng, size_t(c.k * c.n));
    bias = random_vec(rng, size_t(c.bias_kind == 1 ? c.m : c.n));
    residual = random_vec(rng, size_t(c.m * c.n));
    // Parameters that make each activation do something on values of size ~sqrt(K).
    switch (c.act) {
      case 2: alpha = -0.5f, beta = 0.75f; break;
      case 3: alpha = 0.125f; break;
      case 5: alpha = 0.2f, beta = 0.5f; break;
      default: break;
    }
  }
  int64_t a_rs() const { return cs.a_trans ? 1 : cs.k; }
  int64_t a_cs() const { return cs.a_trans ? cs.m : 1; }
  int64_t b_rs() const { return cs.b_trans ? 1 : cs.n; }
  int64_t b_cs() const { return cs.b_trans ? cs.k : 1; }

  GemmParams params(const GemmKernels& g, float* c_out, bool allow_packing) {
    GemmParams p;
    p.m = cs.m, p.n = cs.n, p.k = cs.k;
    p.a = {a.data(), a_rs(), a_cs(), false};
    p.b = {b.data(), b_rs(), b_cs(), false};
    if (allow_packing && cs.pack_a) {
      a_packed.assign(size_t(ds::gemm_packed_a_size(g, cs.m, cs.k)), NAN);
      ds::gemm_pack_a(g, cs.m, cs.k, a.data(), a_rs(), a_cs(), a_packed.data());
      p.a = {a_packed.data(), 0, 0, true};
    }
    if (allow_packing && cs.pack_b) {
      b_packed.assign(size_t(ds::gemm_packed_b_size(g, cs.k, cs.n)), NAN);
      ds::gemm_pack_b(g, cs.k, cs.n, b.data(), b_rs(), b_cs(), b_packed.data());
      p.b = {b_packed.data(), 0, 0, true};
    }
    p.c = c_out;
    p.c_row_stride = cs.n + cs.c_pad;
    p.bias = cs.bias_kind ? bias.data() : nullptr;
    p.bias_kind = cs.bias_kind;
    p.residual = cs.residual ? residual.data() : nullptr;
    p.residual_row_stride = cs.n;
    p.act = cs.act, p.alpha = alpha, p.beta = beta;
    return p;
  }

  // Per element: sum |a b| + |bias| + |residual|, the scale of the rounding error.
  std::vector<double> magnitude() const {
    std::vector<double> s(size_t(cs.m * cs.n));
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t j = 0; j < cs.n; ++j) {
        double t = 0;
        for (int64_t q = 0; q < cs.k; ++q) t += std::fabs(double(a[i * cs.k + q]) * b[q * cs.n + j]);
        if (cs.bias_kind) t += std::fabs(bias[size_t(cs.bias_kind == 1 ? i : j)]);
        if (cs.residual) t += std::fabs(residual[i * cs.n + j]);
        s[i * cs.n + j] = t;
      }
    return s;
  }
};

std::vector<float> run(const GemmKernels& g, GemmParams p, int64_t rows, int64_t row_stride) {
  std::vector<float> c(size_t(rows * row_stride), -7.0f);  // padding must stay untouched
  std::vector<float> ws(size_t(g.workspace_floats) + 16);
  float* wsa = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t(63));
  p.c = c.data();
  g.gemm(p, wsa);
  return c;
}

// g.gemm on p with copies of its operands (A and B as p passes them: raw or packed, `a_floats` and
// `b_floats` long; the bias, the residual, C) against a guard page on `side`. C starts at -7.
std::vector<float> run_guarded(const GemmKernels& g, const Problem& pr, GemmParams p, size_t a_floats, size_t b_floats,
                               int64_t rows, int64_t row_stride, guarded::Guard side) {
  const guarded::Floats a(std::vector<float>(p.a.data, p.a.data + a_floats), side);
  const guarded::Floats b(std::vector<float>(p.b.data, p.b.data + b_floats), side);
  const guarded::Floats bias(pr.bias, side), residual(pr.residual, side);
  guarded::Floats c(std::vector<float>(size_t(rows * row_stride), -7.0f), side);  // padding must stay untouched
  std::vector<float> ws(size_t(g.workspace_floats) + 16);
  float* wsa = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t(63));
  p.a.data = a.data();
  p.b.data = b.data();
  if (p.bias) p.bias = bias.data();
  if (p.residual) p.residual = residual.data();
  p.c = c.data();
  g.gemm(p, wsa);
  return c.vector();
}

// Runs the case at `isa` and checks it against the reference. Returns false on a mismatch.
bool check_case(Isa isa, const Case& cs, tiny::Rng& rng) {
  // The problem data are generated in the same form whatever isa is: a and b are row-major unless
  // transposed, and the test only rearranges indices for transposed storage.
  Problem pr(cs, rng);
  if (cs.a_trans) {  // store A column-major: element (i, q) at i + q*m
    std::vector<float> t(pr.a.size());
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t q = 0; q < cs.k; ++q) t[size_t(i + q * cs.m)] = pr.a[size_t(i * cs.k + q)];
    std::swap(t, pr.a);
  }
  if (cs.b_trans) {  // B column-major: element (q, j) at q + j*k
    std::vector<float> t(pr.b.size());
    for (int64_t q = 0; q < cs.k; ++q)
      for (int64_t j = 0; j < cs.n; ++j) t[size_t(q + j * cs.k)] = pr.b[size_t(q * cs.n + j)];
    std::swap(t, pr.b);
  }
  const GemmKernels& ref = ds::ds_f32_gemm_kernels__scalar;
  const GemmKernels& g = *ds::kernels_for(isa).gemm;
  const int64_t ldc = cs.n + cs.c_pad;
  const std::vector<float> want = run(ref, pr.params(ref, nullptr, false), cs.m, ldc);
  const GemmParams p = pr.params(g, nullptr, true);
  const size_t a_floats = cs.pack_a ? pr.a_packed.size() : pr.a.size();
  const size_t b_floats = cs.pack_b ? pr.b_packed.size() : pr.b.size();
  const std::string what = std::string(ds::isa_name(isa)) + " " + describe(cs);
  guarded::set_case(what + ", guard pages after");
  const std::vector<float> got_after = run_guarded(g, pr, p, a_floats, b_floats, cs.m, ldc, guarded::Guard::kAfter);
  guarded::set_case(what + ", guard pages before");
  const std::vector<float> got_before = run_guarded(g, pr, p, a_floats, b_floats, cs.m, ldc, guarded::Guard::kBefore);
  // Magnitudes on the untransposed layout.
  Problem plain = pr;
  if (cs.a_trans || cs.b_trans) {
    for (int64_t i = 0; i < cs.m; ++i)
      for (int64_t q = 0; q < cs.k; ++q) plain.a[size_t(i * cs.k + q)] = pr.a[size_t(i * pr.a_rs() + q * pr.a_cs())];
    for (int64_t q = 0; q < cs.k; ++q)
      for (int64_t j = 0; j < cs.n; ++j) plain.b[size_t(q * cs.n + j)] = pr.b[size_t(q * pr.b_rs() + j * pr.b_cs())];
  }
  const std::vector<double> mag = plain.magnitude();
  // Elements off in one result (and the worst error, in units of the tolerance x kGemm).
  auto count_bad = [&](const std::vector<float>& got, double* worst) {
    int64_t bad = 0;
    for (int64_t i = 0; i < cs.m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const float w = want[size_t(i * ldc + j)], v = got[size_t(i * ldc + j)];
        if (j >= cs.n) {
          if (v != -7.0f) ++bad;  // wrote past the row
          continue;
        }
        const double allowed = tol::kGemm * mag[size_t(i * cs.n + j)] +
                               tol::kActivationUlps * FLT_EPSILON * std::fabs(w);
        const double err = std::fabs(double(v) - w) / (allowed + 1e-30) * tol::kGemm;
        if (!(err <= tol::kGemm)) ++bad;
        if (err > *worst || std::isnan(err)) *worst = std::isnan(err) ? INFINITY : err;
      }
    }
    return bad;
  };
  double worst = 0;
  const int64_t bad_after = count_bad(got_after, &worst), bad_before = count_bad(got_before, &worst);
  CHECK_MSG(bad_after + bad_before == 0,
            what + ": " + std::to_string(bad_after) + " and " + std::to_string(bad_before) +
                " elements off (guards after, before), worst error (in units of the tolerance x kGemm) " +
                std::to_string(worst));
  return bad_after + bad_before == 0;
}

std::vector<int64_t> edge_sizes(int64_t tile) {
  return {1, 2, tile - 1, tile, tile + 1, 2 * tile + 3, 13, 97, 211};
}

void edges_at(Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const GemmKernels& g = *ds::kernels_for(isa).gemm;
  tiny::Rng rng(1234 + int(isa));
  const std::vector<int64_t> ms = edge_sizes(g.mr), ns = edge_sizes(g.nr);
  const std::vector<int64_t> ks = {1, 2, 3, 8, 17, 64, 255, 256, 257, 300};
  // Every M x N edge pair once, K, epilogue and operand forms drawn at random.
  int failures = 0;
  for (int64_t m : ms)
    for (int64_t n : ns) {
      Case c{m, n, ks[rng.below(uint32_t(ks.size()))]};
      c.act = int32_t(rng.below(8));
      c.bias_kind = int32_t(rng.below(3));
      c.residual = rng.below(2);
      c.pack_a = rng.below(2);
      c.pack_b = rng.below(2);
      c.a_trans = rng.below(4) == 0;
      c.b_trans = rng.below(4) == 0;
      c.c_pad = rng.below(3) == 0 ? 3 : 0;
      if (!check_case(isa, c, rng) && ++failures > 5) return;
    }
}

void epilogues_at(Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  tiny::Rng rng(99 + int(isa));
  // Every activation x bias kind x residual, with partial tiles in both directions.
  for (int32_t act = 0; act <= 7; ++act)
    for (int32_t bias = 0; bias <= 2; ++bias)
      for (int res = 0; res <= 1; ++res) {
        Case c{23, 45, 29};
        c.act = act, c.bias_kind = bias, c.residual = res;
        c.pack_a = (act + bias) % 2, c.pack_b = (act + res) % 2;
        check_case(isa, c, rng);
      }
}

void random_sizes_at(Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  tiny::Rng rng(7 + int(isa));
  for (int t = 0; t < 60; ++t) {
    Case c{1 + rng.below(300), 1 + rng.below(300), 1 + rng.below(300)};
    c.act = int32_t(rng.below(8));
    c.bias_kind = int32_t(rng.below(3));
    c.residual = rng.below(2);
    c.pack_a = rng.below(2);
    c.pack_b = rng.below(2);
    if (!check_case(isa, c, rng)) return;
  }
}

// Sizes past every cache block (K > kc, M > mc, N > nc) so partial sums go through C.
void blocks_at(Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const GemmKernels& g = *ds::kernels_for(isa).gemm;
  tiny::Rng rng(5);
  Case c{g.mc + g.mr + 1, g.nc + g.nr - 1, 2 * g.kc + 7};
  c.act = 1, c.bias_kind = 1, c.residual = true, c.pack_a = true;
  check_case(isa, c, rng);
  Case d{g.mc + 5, g.nc + 3, g.kc + 1};
  d.act = 6, d.bias_kind = 2, d.pack_b = true;
  check_case(isa, d, rng);
  // Pixels as rows of a 7x7 1x1 layer: few M tiles per packed B panel (each prefetches a share of
  // the next panel), A read in place, several K and N blocks.
  Case e{49, g.nc + 2 * g.nr + 5, g.kc + 33};
  e.act = 1, e.bias_kind = 2, e.pack_b = true, e.a_trans = true;
  check_case(isa, e, rng);
}

// GemmKernels::gemm_rows (B rows at arbitrary or evenly spaced offsets of one buffer) against double loops: edge
// sizes around the tile and random ones, every activation and bias kind, a residual, padded C rows
// left untouched; contiguous rows or columns wrapping at widths of 8-15 (where gemm_rows_wraps
// allows them) and 16-40, from any first column. B ends right before an inaccessible page, and one
// row starts n floats before it: the kernel may read nothing past column n of a row. Then again with
// B starting right after an inaccessible page at the lowest row's column col0, so that nothing
// before a row's first column may be read either; A, the bias, the residual and C sit against such
// pages after their ends in the first run and before their starts in the second.
void gemm_rows_at(Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available on this CPU/build");
  const GemmKernels& g = *ds::kernels_for(isa).gemm;
  if (!g.gemm_rows) SKIP(std::string(ds::isa_name(isa)) + " has no gemm_rows");
  tiny::Rng rng(31 + int(isa));
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (m, n): every edge pair, then random sizes
  for (int64_t m : edge_sizes(g.mr))
    for (int64_t n : edge_sizes(g.nr)) shapes.emplace_back(m, n);
  for (int r = 0; r < 80; ++r) shapes.emplace_back(1 + rng.below(uint32_t(4 * g.mr + 3)), 1 + rng.below(uint32_t(6 * g.nr + 5)));
  int failures = 0;
  for (const auto& [m, n] : shapes) {
    const int64_t k = 1 + rng.below(600), ldc = n + (rng.below(2) ? 3 : 0);
    const int32_t act = int32_t(rng.below(8)), bias_kind = int32_t(rng.below(3));
    const bool residual = rng.below(2);
    std::vector<int64_t> offs(static_cast<size_t>(k));
    const int64_t span = 4 * k + 50;  // rows overlap and come in any order, as conv taps do
    for (int64_t q = 0; q < k; ++q) offs[size_t(q)] = rng.below(uint32_t(span));
    offs[size_t(rng.below(uint32_t(k)))] = span;  // a row that ends at the end of the buffer
    if (rng.below(3) == 0) {  // evenly spaced rows (a 1x1 layer's channels), up or down, the highest at span
      const int64_t stride = int64_t(rng.below(9)) - 4;
      for (int64_t q = 0; q < k; ++q) offs[size_t(q)] = stride >= 0 ? span - (k - 1 - q) * stride : span + q * stride;
    }
    // Contiguous rows, or columns that wrap every `width` over a skip (output rows in a padded
    // plane), from column col0 on (a thread's slice).
    ds::GemmRowsB rows;
    rows.offsets = offs.data();
    if (rng.below(2)) rows.width = 16 + rng.below(25), rows.skip = rng.below(8);
    rows.col0 = rng.below(2) ? rng.below(50) : 0;
    if (rng.below(4) == 0) {  // a narrow width whose vectors still cross one row at most
      const int64_t narrow[] = {8, 12, 14, 15};
      rows.width = narrow[rng.below(4)], rows.skip = rng.below(8), rows.col0 = 16 * rng.below(4);
      CHECK(ds::gemm_rows_wraps(rows.width, rows.col0));
    } else if (rng.below(4) == 0) {  // any narrow width and first column the check allows
      const int64_t width = 8 + rng.below(8), col0 = rng.below(64);
      if (ds::gemm_rows_wraps(width, col0)) rows.width = width, rows.skip = rng.below(8), rows.col0 = col0;
    }
    auto at = [&](int64_t x) { return rows.width ? (x / rows.width) * (rows.width + rows.skip) + x % rows.width : x; };
    // B ends right before a guard page (a row ends at the buffer's end); for a second run a copy
    // starts right after one, at the first float the kernel may read (the lowest row, column
    // col0): b.data then points that many floats before the copy, into its guard page.
    guarded::Floats src(size_t(span + at(rows.col0 + n - 1) + 1));
    for (size_t i = 0; i < src.size(); ++i) src.data()[i] = rng.uniform(-1.0f, 1.0f);
    const size_t b_lo = size_t(*std::min_element(offs.begin(), offs.end()) + at(rows.col0));
    const guarded::Floats src_before(std::vector<float>(src.data() + b_lo, src.data() + src.size()),
                                     guarded::Guard::kBefore);
    std::vector<float> a(size_t(m * k)), bias(size_t(std::max(m, n))), res(size_t(m * n));
    for (float& v : a) v = rng.uniform(-1.0f, 1.0f);
    for (float& v : bias) v = rng.uniform(-1.0f, 1.0f);
    for (float& v : res) v = rng.uniform(-1.0f, 1.0f);
    std::vector<float> ap(size_t(ds::gemm_packed_a_size(g, m, k)));
    ds::gemm_pack_a(g, m, k, a.data(), k, 1, ap.data());
    // A, the bias, the residual and C against guard pages after their ends, then before their starts.
    const guarded::Floats ap_after(ap, guarded::Guard::kAfter), ap_before(ap, guarded::Guard::kBefore);
    const guarded::Floats bias_after(bias, guarded::Guard::kAfter), bias_before(bias, guarded::Guard::kBefore);
    const guarded::Floats res_after(res, guarded::Guard::kAfter), res_before(res, guarded::Guard::kBefore);
    guarded::Floats c(std::vector<float>(size_t(m * ldc), -7.0f), guarded::Guard::kAfter);
    guarded::Floats c_before(std::vector<float>(size_t(m * ldc), -7.0f), guarded::Guard::kBefore);
    GemmParams p;
    p.m = m, p.n = n, p.k = k;
    p.a = {ap_after.data(), 0, 0, true};
    p.b.data = src.data();
    p.c = c.data();
    p.c_row_stride = ldc;
    p.bias = bias_kind ? bias_after.data() : nullptr;
    p.bias_kind = bias_kind;
    p.residual = residual ? res_after.data() : nullptr;
    p.residual_row_stride = n;
    p.act = act, p.alpha = 0.1f, p.beta = 0.9f;
    const std::string what = std::string(ds::isa_name(isa)) + " gemm_rows m=" + std::to_string(m) + " n=" +
                             std::to_string(n) + " k=" + std::to_string(k) + " act=" + std::to_string(act) +
                             " width=" + std::to_string(rows.width) + " skip=" + std::to_string(rows.skip) +
                             " col0=" + std::to_string(rows.col0);
    guarded::set_case(what + ", guard pages after");
    g.gemm_rows(p, rows);
    GemmParams pb = p;
    pb.a.data = ap_before.data();
    pb.b.data = src_before.data() - b_lo;
    pb.c = c_before.data();
    if (bias_kind) pb.bias = bias_before.data();
    if (residual) pb.residual = res_before.data();
    guarded::set_case(what + ", guard pages before");
    g.gemm_rows(pb, rows);
    int64_t bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const float v = c.data()[size_t(i * ldc + j)], vb = c_before.data()[size_t(i * ldc + j)];
        if (j >= n) {
          bad += v != -7.0f;
          bad += vb != -7.0f;
          continue;
        }
        double t = 0, mag = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double x = double(a[size_t(i * k + q)]) * src.data()[size_t(offs[size_t(q)] + at(rows.col0 + j))];
          t += x, mag += std::fabs(x);
        }
        if (bias_kind) {
          const float b = bias[size_t(bias_kind == 1 ? i : j)];
          t += b, mag += std::fabs(b);
        }
        if (residual) t += res[size_t(i * n + j)], mag += std::fabs(res[size_t(i * n + j)]);
        const float w = ds::gemm_activate(act, float(t), p.alpha, p.beta);
        const double allowed = tol::kGemm * mag + tol::kActivationUlps * FLT_EPSILON * std::fabs(w) + 1e-30;
        bad += !(std::fabs(double(v) - w) <= allowed);
        bad += !(std::fabs(double(vb) - w) <= allowed);
      }
    CHECK_MSG(bad == 0, what + ": " + std::to_string(bad) + " elements off (both runs)");
    if (bad && ++failures > 5) return;
    // Cut at a panel and a row tile boundary as the threads' tasks are (col0 moves on with the
    // columns): the same bits.
    if (n > g.nr || m > g.mr) {
      const int64_t js = n > g.nr ? g.nr * (1 + rng.below(uint32_t((n - 1) / g.nr))) : n;
      const int64_t is = m > g.mr ? g.mr * (1 + rng.below(uint32_t((m - 1) / g.mr))) : m;
      std::vector<float> c2(size_t(m * ldc), -7.0f);
      p.c = c2.data();
      const int64_t cuts[4][4] = {{0, is, 0, js}, {0, is, js, n}, {is, m, 0, js}, {is, m, js, n}};
      for (const auto& cut : cuts) {
        if (cut[0] == cut[1] || cut[2] == cut[3]) continue;
        GemmParams t = ds::gemm_slice(p, g.mr, g.nr, cut[0], cut[1], cut[2], cut[3]);
        t.b.data = src.data();
        ds::GemmRowsB part = rows;
        part.col0 = rows.col0 + cut[2];
        g.gemm_rows(t, part);
      }
      CHECK_MSG(c2 == c.vector(), std::string(ds::isa_name(isa)) + " gemm_rows m=" + std::to_string(m) + " n=" +
                             std::to_string(n) + " cut at " + std::to_string(is) + ", " + std::to_string(js) +
                             ": differs from the whole");
    }
  }
}

}  // namespace

TEST(gemm_avx2_rows) { gemm_rows_at(Isa::kAvx2); }
TEST(gemm_avx512_rows) { gemm_rows_at(Isa::kAvx512); }

// The driver's prefetch targets (f32-gemm-driver.h): walking the loop nest (N blocks, K blocks, M
// blocks, B panels), each panel's next_b_panel is the panel read next, with its kc steps, and the
// tiles' shares of it cover its lines once, at most kc lines each.
TEST(gemm_prefetch_targets_the_next_panel) {
  using Cfg = ds::x86::GemmBlocking<12, 32, 384, 240, 768>;
  constexpr int64_t kLineFloats = 16;
  const int64_t shapes[][3] = {{49, 1280, 320}, {49, 160, 960}, {196, 96, 576}, {500, 1600, 800}, {7, 33, 5}};
  // kc_max: the K block of a packed A (Cfg::kKc) and a smaller one, as for an A read in place.
  for (const int64_t kc_max : {Cfg::kKc, int64_t(128)})
  for (const auto& sh : shapes) {
    GemmParams p;
    p.m = sh[0], p.n = sh[1], p.k = sh[2];
    p.b = {nullptr, 0, 0, true};
    struct Visit {
      const float* panel;
      int64_t lines;
      ds::x86::GemmPrefetch next;
      int64_t tiles, kc;
    };
    std::vector<Visit> order;
    const float* base = reinterpret_cast<const float*>(uintptr_t(1) << 20);
    p.b.data = base;
    for (int64_t jc = 0; jc < p.n; jc += Cfg::kNc) {
      const int64_t nc = std::min(Cfg::kNc, p.n - jc);
      for (int64_t pc = 0; pc < p.k; pc += kc_max) {
        const int64_t kc = std::min(kc_max, p.k - pc);
        for (int64_t ic = 0; ic < p.m; ic += Cfg::kMc) {
          const int64_t mc = std::min(Cfg::kMc, p.m - ic);
          for (int64_t jr = 0; jr < nc; jr += Cfg::kNr)
            order.push_back({base + ((jc + jr) / Cfg::kNr) * Cfg::kNr * p.k + pc * Cfg::kNr, kc * Cfg::kNr / kLineFloats,
                             ds::x86::next_b_panel<Cfg>(p, jc, nc, pc, kc, ic, mc, jr, kc_max), (mc + 11) / 12, kc});
        }
      }
    }
    const std::string shape = std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) +
                              " kc " + std::to_string(kc_max);
    for (size_t v = 0; v < order.size(); ++v) {
      const Visit& cur = order[v];
      if (v + 1 == order.size()) {
        CHECK_MSG(cur.next.at == nullptr, shape + ": the last panel prefetches nothing");
        continue;
      }
      CHECK_MSG(cur.next.at == order[v + 1].panel && cur.next.lines == order[v + 1].lines,
                shape + ": panel " + std::to_string(v) + " prefetches the wrong panel");
      int64_t covered = 0;
      for (int64_t t = 0; t < cur.tiles; ++t) {
        const ds::x86::GemmPrefetch s = ds::x86::prefetch_share(cur.next, t, cur.tiles, cur.kc);
        if (!s.at) continue;
        CHECK(s.at == cur.next.at + covered * kLineFloats);
        CHECK(s.lines <= cur.kc);
        covered += s.lines;
      }
      CHECK_MSG(covered == (cur.tiles >= 3 ? cur.next.lines : 0), shape + ": shares cover " + std::to_string(covered));
    }
  }
}

TEST(reference_gemm_on_known_values) {
  // A = [[1, 2], [3, 4], [5, 6]], B = [[1, 0, -1], [2, 1, 0]]: C = A.B = [[5, 2, -1], [11, 4, -3],
  // [17, 6, -5]]; + per-row bias [1, 2, 3]; + residual 0.5; relu.
  const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 0, -1, 2, 1, 0}, bias[] = {1, 2, 3};
  const std::vector<float> res(9, 0.5f);
  float c[9];
  GemmParams p;
  p.m = 3, p.n = 3, p.k = 2;
  p.a = {a, 2, 1, false};
  p.b = {b, 3, 1, false};
  p.c = c, p.c_row_stride = 3;
  p.bias = bias, p.bias_kind = ds::kGemmBiasPerRow;
  p.residual = res.data(), p.residual_row_stride = 3;
  p.act = 1;
  ds::ds_f32_gemm__scalar(p, nullptr);
  const float want[] = {6.5f, 3.5f, 0.5f, 13.5f, 6.5f, 0.0f, 20.5f, 9.5f, 0.0f};
  for (int i = 0; i < 9; ++i) CHECK_NEAR(c[i], want[i], 0.0);
  // Packed with the scalar level's 1x1 tile gives the same numbers.
  const GemmKernels& g = ds::ds_f32_gemm_kernels__scalar;
  std::vector<float> ap(size_t(ds::gemm_packed_a_size(g, 3, 2))), bp(size_t(ds::gemm_packed_b_size(g, 2, 3)));
  ds::gemm_pack_a(g, 3, 2, a, 2, 1, ap.data());
  ds::gemm_pack_b(g, 2, 3, b, 3, 1, bp.data());
  p.a = {ap.data(), 0, 0, true};
  p.b = {bp.data(), 0, 0, true};
  float c2[9];
  p.c = c2;
  ds::ds_f32_gemm__scalar(p, nullptr);
  for (int i = 0; i < 9; ++i) CHECK_NEAR(c2[i], want[i], 0.0);
}

TEST(pack_layout_zero_pads_the_last_panel) {
  // 5 rows, tile 4, depth 2: panel 0 rows 0-3, panel 1 row 4 then three zero rows.
  const float src[] = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41};  // row-major 5 x 2
  std::vector<float> dst(size_t(ds::ds_f32_gemm_packed_size(4, 5, 2)), NAN);
  REQUIRE(dst.size() == 16);
  ds::ds_f32_gemm_pack(4, 5, 2, src, 2, 1, dst.data());
  const float want[] = {0, 10, 20, 30, 1, 11, 21, 31, 40, 0, 0, 0, 41, 0, 0, 0};
  for (int i = 0; i < 16; ++i) CHECK_NEAR(dst[size_t(i)], want[i], 0.0);
}

TEST(gemm_avx2_edges) { edges_at(Isa::kAvx2); }
TEST(gemm_avx2_epilogues) { epilogues_at(Isa::kAvx2); }
TEST(gemm_avx2_random_sizes) { random_sizes_at(Isa::kAvx2); }
TEST(gemm_avx2_cache_blocks) { blocks_at(Isa::kAvx2); }
TEST(gemm_avx512_edges) { edges_at(Isa::kAvx512); }
TEST(gemm_avx512_epilogues) { epilogues_at(Isa::kAvx512); }
TEST(gemm_avx512_random_sizes) { random_sizes_at(Isa::kAvx512); }
TEST(gemm_avx512_cache_blocks) { blocks_at(Isa::kAvx512); }

TEST(gemm_threads_give_bitwise_identical_results) {
  tiny::Rng rng(3);
  ds::ThreadPool pool1(1), pool2(2), pool3(3);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!ds::isa_available(isa)) continue;
    const GemmKernels& g = *ds::kernels_for(isa).gemm;
    // Split along N (wide), along M (N = 1), and with few tiles each way, A raw and packed; 37 and
    // 49 rows end in a 13-row tile (AVX-512) unsplit and in a 1-row tile when the rows are split;
    // then A read in place (rows adjacent, as conv2d's pixels path passes an NCHW plane) with B
    // packed: N split into several tasks per thread; last, B packed with 2-3 panels and more row
    // tiles (FaceNet-1M's conv3 as pixels, 64 x 96 x 1200): tasks of one panel x a row chunk
    // where N > M, chunks ending in 1- and 13-row tiles; the row split where N <= M; A in place
    // with a few panels the threads cannot share evenly (5 at AVX-512: panel x row chunk tasks)
    // or up to 8 a thread (one panel a task: 13 panels of 16 columns at AVX2).
    Case cases[] = {{64, 1000, 300}, {1000, 1, 333}, {37, 70, 129}, {200, 33, 64}, {64, 1000, 300}, {1000, 1, 333},
                    {37, 70, 129},   {200, 33, 64},  {49, 20, 300}, {61, 500, 70}, {13, 300, 20}, {64, 96, 1200},
                    {200, 33, 64},   {49, 70, 129},  {61, 90, 30},  {49, 160, 96}, {49, 320, 64}, {25, 150, 40},
                    {49, 200, 64}};
    for (int i = 4; i < 8; ++i) cases[i].pack_a = true;
    for (int i = 9; i < 19; ++i) cases[i].a_trans = i < 12 || i >= 15, cases[i].pack_b = true;
    for (Case c : cases) {
      c.act = 6, c.bias_kind = 1, c.residual = true;
      Problem pr(c, rng);
      std::vector<float> out[3];
      ds::ThreadPool* pools[3] = {&pool1, &pool2, &pool3};
      for (int t = 0; t < 3; ++t) {
        out[t].assign(size_t(c.m * c.n), 0.0f);
        std::vector<float> ws(size_t(ds::gemm_workspace_floats(g, pools[t]->size())) + 16);
        float* wsa = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t(63));
        ds::gemm(g, pr.params(g, out[t].data(), true), wsa, *pools[t]);
      }
      CHECK_MSG(out[0] == out[1] && out[0] == out[2], std::string(ds::isa_name(isa)) + " " + describe(c));
    }
  }
}

// The batch-1 dense kernels (GEMV over the level's packed B) against the scalar dense kernel:
// column counts around the panel width (partial panels, partial vectors), K around the 4-step
// unroll, every activation code, bias or not.
void gemv_at(Isa isa) {
  if (!ds::isa_available(isa)) SKIP(std::string(ds::isa_name(isa)) + " is not available here");
  const ds::KernelTable& t = ds::kernels_for(isa);
  REQUIRE(t.gemv != nullptr);
  tiny::Rng rng(31);
  const ds::Activation acts[] = {{0, 0, 0}, {1, 0, 0}, {2, -0.5f, 0.5f}, {3, 0.1f, 0}, {4, 0, 0},
                                 {5, 0.2f, 0.5f}, {6, 0, 0}, {7, 0, 0}};
  int bad_cases = 0;
  for (int64_t cols : {1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 64, 100, 300}) {
    for (int64_t k : {1, 2, 3, 4, 5, 9, 64, 100, 784}) {
      const ds::Activation act = acts[rng.below(8)];
      const bool with_bias = rng.below(3) != 0;
      std::vector<float> w = random_vec(rng, size_t(cols * k)), x = random_vec(rng, size_t(k)),
                         bias = random_vec(rng, size_t(cols));
      std::vector<float> packed(size_t(ds::gemm_packed_b_size(*t.gemm, k, cols)));
      ds::gemm_pack_b(*t.gemm, k, cols, w.data(), 1, k, packed.data());
      ds::DenseParams d{1, k, cols, act};
      std::vector<float> want(static_cast<size_t>(cols)), got(static_cast<size_t>(cols) + 1, 7.0f);
      ds::ds_f32_dense__scalar(d, x.data(), w.data(), with_bias ? bias.data() : nullptr, want.data());
      t.gemv(k, cols, packed.data(), x.data(), with_bias ? bias.data() : nullptr, act, got.data());
      int bad = 0;
      for (int64_t j = 0; j < cols; ++j) {
        double mag = with_bias ? std::fabs(bias[size_t(j)]) : 0.0;
        for (int64_t q = 0; q < k; ++q) mag += std::fabs(double(x[size_t(q)]) * w[size_t(j * k + q)]);
        const double allowed = tol::kGemm * mag + tol::kActivationUlps * FLT_EPSILON * std::fabs(want[size_t(j)]);
        if (!(std::fabs(double(got[size_t(j)]) - want[size_t(j)]) <= allowed)) ++bad;
      }
      if (bad || got.back() != 7.0f) {
        ++bad_cases;
        CHECK_MSG(false, std::string(ds::isa_name(isa)) + " gemv cols " + std::to_string(cols) + " k " +
                             std::to_string(k) + " act " + std::to_string(act.kind) + ": " + std::to_string(bad) +
                             " wrong" + (got.back() != 7.0f ? ", wrote past the end" : ""));
      }
      if (bad_cases > 5) return;
    }
  }
}

TEST(gemv_avx2) { gemv_at(Isa::kAvx2); }
TEST(gemv_avx512) { gemv_at(Isa::kAvx512); }
