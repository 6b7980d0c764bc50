// AVX-512 depthwise 3x3 on one plane, stride 1: 16 output columns per vector, each tap one load at
// its column offset, masked to the row (zero fill = the padding), so borders need no separate
// code; the output store is masked to the row's end. Up to 8 output rows of a column block are
// computed together: each input row is loaded once for all the outputs it feeds, and the 8
// independent accumulators hide the FMA latency (one row at a time is a chain of 9 dependent
// FMAs: 1.3-1.6x slower on MobileNet V2's layers). Each accumulator still sums its taps in the
// reference's order (ky, kx), then bias, then the activation.
// Stride 2 and planes at most 8 columns wide go to the AVX2 kernel, measured faster there (8-lane
// vectors waste fewer lanes on narrow rows; its stride-2 shuffles beat vpermt2ps here: 112x112 x
// 96 channels 0.17 vs 0.22 ms, 14x14 x 576 0.019 vs 0.034 ms). Compiled with the AVX-512 flags.
#include <immintrin.h>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"
#include "kernels/unroll.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace ds {
namespace {

// Lanes of a 16-float load at column `col` that fall inside [0, w).
inline __mmask16 row_mask(int64_t col, int64_t w) {
  const int64_t a = col < 0 ? -col : 0;
  const int64_t b = w - col < 16 ? w - col : 16;
  if (b <= a) return 0;
  return __mmask16(((b - a >= 16 ? 0xFFFFu : (1u << (b - a)) - 1u) << a) & 0xFFFFu);
}

DS_ALWAYS_INLINE __m512 activate(__m512 v, int32_t act, __m512 alpha, __m512 beta) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  switch (act) {
    case 1: return _mm512_max_ps(v, zero);
    case 2: return _mm512_min_ps(_mm512_max_ps(v, alpha), beta);
    case 3: return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, alpha);
    case 5: return _mm512_max_ps(zero, _mm512_min_ps(one, _mm512_add_ps(_mm512_mul_ps(alpha, v), beta)));
    case 6: {
      const __m512 t = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_max_ps(zero, _mm512_min_ps(one, t)));
    }
    default: return v;  // 0; 4 and 7 by a scalar pass
  }
}

// One column block (16 lanes from input column `base`) of what does not change from row to row.
struct Block {
  const DwConv3x3Params* p;
  const float* x;
  float* y;
  int64_t ox0, n, base;
  __mmask16 m[3], out_mask;
  __m512 wv[9], bias, alpha, beta;
};

// Input row I of the group (from the first row of output oy0's window): load its taps once and
// add them to every output they feed. Rows go in increasing order, so each accumulator adds its
// taps in the order ky = 0, 1, 2. The recursion is resolved at compile time: the accumulators
// stay in registers at any optimisation level.
template <int S, int I, int R>
DS_ALWAYS_INLINE void input_rows(const Block& b, int64_t iy0, __m512 (&acc)[R], const __m512 (&wv)[9]) {
  constexpr int kRows = (R - 1) * S + 3;
  if constexpr (I < kRows) {
    const DwConv3x3Params& p = *b.p;
    const int64_t iy = iy0 + I;
    if (iy >= 0 && iy < p.h) {
      const float* row = b.x + iy * p.w + b.base;
      const __m512 t0 = _mm512_maskz_loadu_ps(b.m[0], row);
      const __m512 t1 = _mm512_maskz_loadu_ps(b.m[1], row + 1);
      const __m512 t2 = _mm512_maskz_loadu_ps(b.m[2], row + 2);
      // Output r uses this row as its tap row ky = I - r * S when that is 0..2.
      unroll<R>([&](auto rc) {
        constexpr int ky = I - decltype(rc)::value * S;
        if constexpr (ky >= 0 && ky <= 2) {
          __m512& a = acc[decltype(rc)::value];
          a = _mm512_fmadd_ps(t0, wv[ky * 3], a);
          a = _mm512_fmadd_ps(t1, wv[ky * 3 + 1], a);
          a = _mm512_fmadd_ps(t2, wv[ky * 3 + 2], a);
        }
      });
    }
    input_rows<S, I + 1, R>(b, iy0, acc, wv);
  }
}

// Output rows oy0 .. oy0 + R - 1 of the block.
template <int R, int S>
void block_rows(const Block& b, int64_t oy0) {
  const DwConv3x3Params& p = *b.p;
  __m512 wv[9];
  unroll<9>([&](auto t) { wv[t] = b.wv[t]; });
  __m512 acc[R];
  unroll<R>([&](auto r) { acc[r] = _mm512_setzero_ps(); });
  input_rows<S, 0, R>(b, oy0 * S - p.pad_top, acc, wv);
  unroll<R>([&](auto r) {
    float* yr = b.y + (oy0 + r) * p.ow + b.ox0;
    _mm512_mask_storeu_ps(yr, b.out_mask, activate(_mm512_add_ps(acc[r], b.bias), p.act, b.alpha, b.beta));
  });
  if (p.act == 4 || p.act == 7)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < b.n; ++j) {
        float* yr = b.y + (oy0 + r) * p.ow + b.ox0;
        yr[j] = gemm_activate(p.act, yr[j], p.alpha, p.beta);
      }
}

// All rows of the block: groups of 8, then the remainder in one group.
template <int S>
void block(const Block& b) {
  const int64_t oh = b.p->oh;
  int64_t oy = 0;
  for (; oy + 8 <= oh; oy += 8) block_rows<8, S>(b, oy);
  switch (oh - oy) {
    case 7: block_rows<7, S>(b, oy); break;
    case 6: block_rows<6, S>(b, oy); break;
    case 5: block_rows<5, S>(b, oy); break;
    case 4: block_rows<4, S>(b, oy); break;
    case 3: block_rows<3, S>(b, oy); break;
    case 2: block_rows<2, S>(b, oy); break;
    case 1: block_rows<1, S>(b, oy); break;
    default: break;
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx512(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  if (p.stride != 1 || p.ow <= 8) {
    ds_f32_dwconv3x3__avx2(p, x, w, bias, y);
    return;
  }
  Block b;
  b.p = &p, b.x = x, b.y = y;
  b.bias = _mm512_set1_ps(bias);
  b.alpha = _mm512_set1_ps(p.alpha), b.beta = _mm512_set1_ps(p.beta);
  for (int t = 0; t < 9; ++t) b.wv[t] = _mm512_set1_ps(w[t]);
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 16) {
    b.ox0 = ox0;
    b.n = p.ow - ox0 < 16 ? p.ow - ox0 : 16;
    b.out_mask = __mmask16((1u << b.n) - 1);
    b.base = ox0 - p.pad_left;  // input column of lane 0, tap kx = 0
    // The load masks at base + kx, the same for every row.
    for (int kx = 0; kx < 3; ++kx) b.m[kx] = row_mask(b.base + kx, p.w);
    block<1>(b);
  }
}

}  // namespace ds
