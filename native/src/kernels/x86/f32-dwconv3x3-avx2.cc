// AVX2 depthwise 3x3, stride 1 or 2, on one plane: 8 output columns per vector, the AVX2 twin of
// f32-dwconv3x3-avx512.cc. Stride 1: one load per tap. Stride 2: per input row, the 16 columns
// from the window start give the even (kx = 0) and odd (kx = 1) taps by shufps + vpermpd, the 16
// from two columns on give kx = 2. Loads are masked to the row (vmaskmovps fills zeros = the
// padding); the store is masked to the row's end. Up to 4 output rows of a column block are
// computed together, as in the AVX-512 kernel (4 accumulators + 9 weights + 3 taps = 16 registers).
// Compiled with -mavx2 -mfma.
#include <immintrin.h>

#include "kernels/dwconv3x3.h"
#include "kernels/gemm.h"
#include "kernels/unroll.h"

namespace ds {
namespace {

// Lanes of an 8-float load at column `col` that fall inside [0, w), as an all-ones/zero mask.
inline __m256i row_mask(int64_t col, int64_t w) {
  const __m256i e = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int64_t a = col < 0 ? -col : 0;
  const int64_t b = w - col < 8 ? w - col : 8;
  const __m256i ge_a = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(int(a > 8 ? 8 : a) - 1));
  const __m256i lt_b = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(b < 0 ? 0 : b)), e);
  return _mm256_and_si256(ge_a, lt_b);
}

// Even or odd elements of the 16 floats lo:hi, in order.
DS_ALWAYS_INLINE __m256 take_even(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
DS_ALWAYS_INLINE __m256 take_odd(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

DS_ALWAYS_INLINE __m256 activate(__m256 v, int32_t act, __m256 alpha, __m256 beta) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  switch (act) {
    case 1: return _mm256_max_ps(v, zero);
    case 2: return _mm256_min_ps(_mm256_max_ps(v, alpha), beta);
    case 3: return _mm256_blendv_ps(v, _mm256_mul_ps(v, alpha), _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    case 5: return _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(alpha, v), beta)));
    case 6: {
      const __m256 t = _mm256_add_ps(_mm256_div_ps(v, _mm256_set1_ps(6.0f)), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(v, _mm256_max_ps(zero, _mm256_min_ps(one, t)));
    }
    default: return v;  // 0; 4 and 7 by a scalar pass
  }
}

// One column block (8 lanes from input column `base`) of what does not change from row to row.
struct Block {
  const DwConv3x3Params* p;
  const float* x;
  float* y;
  int64_t ox0, n, base;
  __m256i m[4], out_mask;
  __m256 wv[9], bias, alpha, beta;
};

// Input row I of the group (from the first row of output oy0's window): its taps are loaded once
// and added to every output they feed, in increasing row order (each output: ky = 0, 1, 2).
template <int S, int I, int R>
DS_ALWAYS_INLINE void input_rows(const Block& b, int64_t iy0, __m256 (&acc)[R], const __m256 (&wv)[9]) {
  constexpr int kRows = (R - 1) * S + 3;
  if constexpr (I < kRows) {
    const DwConv3x3Params& p = *b.p;
    const int64_t iy = iy0 + I;
    if (iy >= 0 && iy < p.h) {
      const float* row = b.x + iy * p.w + b.base;
      __m256 t0, t1, t2;
      if constexpr (S == 1) {
        t0 = _mm256_maskload_ps(row, b.m[0]);
        t1 = _mm256_maskload_ps(row + 1, b.m[1]);
        t2 = _mm256_maskload_ps(row + 2, b.m[2]);
      } else {
        const __m256 lo = _mm256_maskload_ps(row, b.m[0]), hi = _mm256_maskload_ps(row + 8, b.m[1]);
        const __m256 lo2 = _mm256_maskload_ps(row + 2, b.m[2]), hi2 = _mm256_maskload_ps(row + 10, b.m[3]);
        t0 = take_even(lo, hi);
        t1 = take_odd(lo, hi);
        t2 = take_even(lo2, hi2);
      }
      // Output r uses this row as its tap row ky = I - r * S when that is 0..2.
      unroll<R>([&](auto rc) {
        constexpr int ky = I - decltype(rc)::value * S;
        if constexpr (ky >= 0 && ky <= 2) {
          __m256& a = acc[decltype(rc)::value];
          a = _mm256_fmadd_ps(t0, wv[ky * 3], a);
          a = _mm256_fmadd_ps(t1, wv[ky * 3 + 1], a);
          a = _mm256_fmadd_ps(t2, wv[ky * 3 + 2], a);
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
  __m256 wv[9];
  unroll<9>([&](auto t) { wv[t] = b.wv[t]; });
  __m256 acc[R];
  unroll<R>([&](auto r) { acc[r] = _mm256_setzero_ps(); });
  input_rows<S, 0, R>(b, oy0 * S - p.pad_top, acc, wv);
  unroll<R>([&](auto r) {
    float* yr = b.y + (oy0 + r) * p.ow + b.ox0;
    _mm256_maskstore_ps(yr, b.out_mask, activate(_mm256_add_ps(acc[r], b.bias), p.act, b.alpha, b.beta));
  });
  if (p.act == 4 || p.act == 7)
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < b.n; ++j) {
        float* yr = b.y + (oy0 + r) * p.ow + b.ox0;
        yr[j] = gemm_activate(p.act, yr[j], p.alpha, p.beta);
      }
}

// All rows of the block: groups of 4, then the remainder in one group.
template <int S>
void block(const Block& b) {
  const int64_t oh = b.p->oh;
  int64_t oy = 0;
  for (; oy + 4 <= oh; oy += 4) block_rows<4, S>(b, oy);
  switch (oh - oy) {
    case 3: block_rows<3, S>(b, oy); break;
    case 2: block_rows<2, S>(b, oy); break;
    case 1: block_rows<1, S>(b, oy); break;
    default: break;
  }
}

void plane(const DwConv3x3Params& p, const float* x, const float* w, float bias, float* y) {
  Block b;
  b.p = &p, b.x = x, b.y = y;
  b.bias = _mm256_set1_ps(bias);
  b.alpha = _mm256_set1_ps(p.alpha), b.beta = _mm256_set1_ps(p.beta);
  for (int t = 0; t < 9; ++t) b.wv[t] = _mm256_set1_ps(w[t]);
  const int64_t s = p.stride;
  for (int64_t ox0 = 0; ox0 < p.ow; ox0 += 8) {
    b.ox0 = ox0;
    b.n = p.ow - ox0 < 8 ? p.ow - ox0 : 8;
    b.out_mask = row_mask(0, b.n);
    b.base = ox0 * s - p.pad_left;  // input column of lane 0, tap kx = 0
    // Masks of the loads, the same for every row: stride 1 at base + kx; stride 2 at base,
    // base + 8 (kx = 0, 1) and base + 2, base + 10 (kx = 2).
    if (s == 1) {
      for (int kx = 0; kx < 3; ++kx) b.m[kx] = row_mask(b.base + kx, p.w);
      block<1>(b);
    } else {
      b.m[0] = row_mask(b.base, p.w), b.m[1] = row_mask(b.base + 8, p.w);
      b.m[2] = row_mask(b.base + 2, p.w), b.m[3] = row_mask(b.base + 10, p.w);
      block<2>(b);
    }
  }
}

}  // namespace

void ds_f32_dwconv3x3__avx2(const DwConv3x3Params& p, int64_t planes, const float* x, const float* w,
                            const float* bias, float* y) {
  for (int64_t c = 0; c < planes; ++c)
    plane(p, x + c * p.in_plane(), w + 9 * c, bias ? bias[c] : 0.0f, y + c * p.out_plane());
}

}  // namespace ds
