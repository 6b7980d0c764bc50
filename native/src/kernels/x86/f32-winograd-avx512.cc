// F(4x4, 3x3) transforms at the avx512 level: 16 tiles per call, one per vector lane.
//
// Input: each of the 6 window rows is 66 floats of a padded plane row (tile k at 4k); four loads
// and a stride-4 deinterleave (vpermt2ps, then 256-bit halves) give d0..d3 with tile k in lane k,
// d4 and d5 are d0 and d1 moved one lane down with the 65th / 66th float shifted in. B^T runs
// along the row, then down the columns, and V goes straight into the packed B panel rows.
// Output: M^T is summed by A^T down the columns, then along the rows (the bias rides on M[1][1],
// which reaches every output with weight 1); each output row is re-interleaved into 4 vectors of
// 16 columns, and the residual, the activation and masked stores at the patch edge follow.
#include <immintrin.h>

// GCC 12 flags the _mm512_undefined_ps() inside some intrinsics (max, min, masked mul) as uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/x86/f32-winograd-act.h"

namespace ds {
namespace {

constexpr int kLanes = 16;

// t = B^T d (docs in f32-winograd-impl.h).
inline void input_1d(const __m512 d[6], __m512 t[6]) {
  const __m512 c2 = _mm512_set1_ps(2.0f), c4 = _mm512_set1_ps(4.0f), c5 = _mm512_set1_ps(5.0f);
  const __m512 d31 = _mm512_sub_ps(d[3], d[1]), d42 = _mm512_sub_ps(d[4], d[2]);
  t[0] = _mm512_fmadd_ps(c4, d[0], _mm512_fnmadd_ps(c5, d[2], d[4]));
  t[1] = _mm512_fnmadd_ps(c4, _mm512_add_ps(d[1], d[2]), _mm512_add_ps(d[3], d[4]));
  t[2] = _mm512_fmadd_ps(c4, _mm512_sub_ps(d[1], d[2]), _mm512_sub_ps(d[4], d[3]));
  t[3] = _mm512_fmadd_ps(c2, d31, d42);
  t[4] = _mm512_fnmadd_ps(c2, d31, d42);
  t[5] = _mm512_fmadd_ps(c4, d[1], _mm512_fnmadd_ps(c5, d[3], d[5]));
}

// o = A^T m.
inline void output_1d(const __m512 m[6], __m512 o[4]) {
  const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
  const __m512 c = _mm512_add_ps(m[3], m[4]), d = _mm512_sub_ps(m[3], m[4]);
  o[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
  o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.0f), d, b);
  o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.0f), c, a);
  o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.0f), d, b), m[5]);
}

// d[j][k] = r[4k + j], j = 0..5, k = 0..15 (reads r[0..65]).
inline void load_row(const float* r, __m512 d[6]) {
  // Pairs of 64-float halves: lo = (j = 0 of the 8 tiles, j = 1 of them), hi = (j = 2, j = 3).
  const __m512i lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i hi = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  const __m512 a0 = _mm512_loadu_ps(r), a1 = _mm512_loadu_ps(r + 16);
  const __m512 a2 = _mm512_loadu_ps(r + 32), a3 = _mm512_loadu_ps(r + 48);
  const __m512 p01 = _mm512_permutex2var_ps(a0, lo, a1), p23 = _mm512_permutex2var_ps(a0, hi, a1);
  const __m512 q01 = _mm512_permutex2var_ps(a2, lo, a3), q23 = _mm512_permutex2var_ps(a2, hi, a3);
  d[0] = _mm512_shuffle_f32x4(p01, q01, 0x44);
  d[1] = _mm512_shuffle_f32x4(p01, q01, 0xEE);
  d[2] = _mm512_shuffle_f32x4(p23, q23, 0x44);
  d[3] = _mm512_shuffle_f32x4(p23, q23, 0xEE);
  d[4] = _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_castps_si512(_mm512_set1_ps(r[64])), _mm512_castps_si512(d[0]), 1));
  d[5] = _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_castps_si512(_mm512_set1_ps(r[65])), _mm512_castps_si512(d[1]), 1));
}

// Two rows of 8 tiles in one vector: d[j][k] = ra[4k + j] in lanes k = 0..7 and rb[4(k - 8) + j] in
// lanes 8..15 (reads 34 floats of each row).
inline void load_row_pair(const float* ra, const float* rb, __m512 d[6]) {
  const __m512i lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i hi = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  const __m512 a0 = _mm512_loadu_ps(ra), a1 = _mm512_loadu_ps(ra + 16);
  const __m512 b0 = _mm512_loadu_ps(rb), b1 = _mm512_loadu_ps(rb + 16);
  const __m512 p01 = _mm512_permutex2var_ps(a0, lo, a1), p23 = _mm512_permutex2var_ps(a0, hi, a1);
  const __m512 q01 = _mm512_permutex2var_ps(b0, lo, b1), q23 = _mm512_permutex2var_ps(b0, hi, b1);
  d[0] = _mm512_shuffle_f32x4(p01, q01, 0x44);
  d[1] = _mm512_shuffle_f32x4(p01, q01, 0xEE);
  d[2] = _mm512_shuffle_f32x4(p23, q23, 0x44);
  d[3] = _mm512_shuffle_f32x4(p23, q23, 0xEE);
  // Lane 7 of d4 / d5 is ra[32] / ra[33], not the first floats of rb that the shift brings in.
  d[4] = _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_castps_si512(_mm512_set1_ps(rb[32])), _mm512_castps_si512(d[0]), 1));
  d[5] = _mm512_castsi512_ps(
      _mm512_alignr_epi32(_mm512_castps_si512(_mm512_set1_ps(rb[33])), _mm512_castps_si512(d[1]), 1));
  d[4] = _mm512_mask_broadcastss_ps(d[4], __mmask16(0x80), _mm_load_ss(ra + 32));
  d[5] = _mm512_mask_broadcastss_ps(d[5], __mmask16(0x80), _mm_load_ss(ra + 33));
}

// count <= 8: rows 2p and 2p + 1 share the row pass, then columns b and b + 1 the column pass.
void input_8(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  __m512 rows[3][6];  // rows[p][b]: B^T along input rows 2p (lanes 0..7) and 2p + 1 (lanes 8..15)
#pragma GCC unroll 3
  for (int p = 0; p < 3; ++p) {
    __m512 d[6];
    load_row_pair(x + 2 * p * x_stride, x + (2 * p + 1) * x_stride, d);
    input_1d(d, rows[p]);
  }
  const __mmask16 lo = __mmask16((1u << count) - 1), hi = __mmask16(lo << 8);
#pragma GCC unroll 3
  for (int b = 0; b < 6; b += 2) {
    __m512 col[6], t[6];  // col[i]: row i of column b (lanes 0..7) and of column b + 1 (lanes 8..15)
#pragma GCC unroll 3
    for (int p = 0; p < 3; ++p) {
      col[2 * p] = _mm512_shuffle_f32x4(rows[p][b], rows[p][b + 1], 0x44);
      col[2 * p + 1] = _mm512_shuffle_f32x4(rows[p][b], rows[p][b + 1], 0xEE);
    }
    input_1d(col, t);
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) {
      _mm512_mask_storeu_ps(v + (a * 6 + b) * v_stride, lo, t[a]);
      _mm512_mask_storeu_ps(v + (a * 6 + b + 1) * v_stride - 8, hi, t[a]);  // lanes 8.. only
    }
  }
}

void input__avx512(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  if (count <= 8) return input_8(x, x_stride, count, v, v_stride);
  __m512 rows[6][6];  // rows[i][b]: B^T along input row i
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    __m512 d[6];
    load_row(x + i * x_stride, d);
    input_1d(d, rows[i]);
  }
  const __mmask16 mask = count >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
#pragma GCC unroll 6
  for (int b = 0; b < 6; ++b) {
    const __m512 col[6] = {rows[0][b], rows[1][b], rows[2][b], rows[3][b], rows[4][b], rows[5][b]};
    __m512 t[6];
    input_1d(col, t);
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) _mm512_mask_storeu_ps(v + (a * 6 + b) * v_stride, mask, t[a]);
  }
}

// act(x) for the codes done in vectors (0, 1, 2, 3, 5, 6); the others are applied afterwards.
template <int Act>
inline __m512 activate(__m512 x, __m512 alpha, __m512 beta) {
  const __m512 zero = _mm512_setzero_ps();
  switch (Act) {
    case 1: return _mm512_max_ps(x, zero);
    case 2: return _mm512_min_ps(_mm512_max_ps(x, alpha), beta);
    case 3: return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, alpha);
    case 5: return _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(alpha, x, beta), zero), _mm512_set1_ps(1.0f));
    case 6: {
      const __m512 g = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(x, _mm512_min_ps(_mm512_max_ps(g, zero), _mm512_set1_ps(1.0f)));
    }
    default: return x;
  }
}

// Row r of the patch from its (up to) 4 vectors of 16 columns: + residual, act, masked at the edge.
template <int Act>
inline void store_row(const __m512* q, int64_t groups, __mmask16 last, const WinogradOutput& o, int64_t r, float* y,
                      int64_t y_stride, __m512 alpha, __m512 beta) {
  float* yr = y + r * y_stride;
  const float* res = o.residual ? o.residual + r * o.residual_stride : nullptr;
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    if (g >= groups) break;
    const __mmask16 mask = g + 1 < groups ? __mmask16(0xFFFF) : last;
    __m512 val = q[g];
    if (res) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(mask, res + 16 * g));
    _mm512_mask_storeu_ps(yr + 16 * g, mask, activate<Act>(val, alpha, beta));
  }
}

template <int Act>
void output_act(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y, int64_t y_stride) {
  __m512 s[4][6];  // s[r][b] = sum over a of A^T[r][a] M[a][b]
#pragma GCC unroll 6
  for (int b = 0; b < 6; ++b) {
    __m512 col[6], t[4];
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) col[a] = _mm512_loadu_ps(m + (a * 6 + b) * m_stride);
    if (b == 1) col[1] = _mm512_add_ps(col[1], _mm512_set1_ps(o.bias));  // + bias at every output
    output_1d(col, t);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) s[r][b] = t[r];
  }
  const int64_t cols = o.cols < 4 * count ? o.cols : 4 * count;
  const int64_t groups = (cols + 15) / 16;  // 1..4 vectors of 16 columns
  const __mmask16 last = __mmask16(0xFFFFu >> (16 * groups - cols));
  const __m512 alpha = _mm512_set1_ps(o.alpha), beta = _mm512_set1_ps(o.beta);
  // (t0, t1) and (t2, t3) interleaved per tile, then 4-float groups: tile k's 4 columns at 4k.
  const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i quad_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i quad_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    if (r >= o.rows) break;
    __m512 t[4];
    output_1d(s[r], t);
    const __m512 u0 = _mm512_permutex2var_ps(t[0], pair_lo, t[1]), u1 = _mm512_permutex2var_ps(t[0], pair_hi, t[1]);
    const __m512 w0 = _mm512_permutex2var_ps(t[2], pair_lo, t[3]), w1 = _mm512_permutex2var_ps(t[2], pair_hi, t[3]);
    const __m512 q[4] = {_mm512_permutex2var_ps(u0, quad_lo, w0), _mm512_permutex2var_ps(u0, quad_hi, w0),
                         _mm512_permutex2var_ps(u1, quad_lo, w1), _mm512_permutex2var_ps(u1, quad_hi, w1)};
    store_row<Act>(q, groups, last, o, r, y, y_stride, alpha, beta);
  }
}

void output__avx512(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                    int64_t y_stride) {
  x86::winograd_output_act(o, 4, count, y, y_stride, [&](auto act) {
    output_act<decltype(act)::value>(m, m_stride, count, o, y, y_stride);
  });
}

}  // namespace

const WinogradKernels ds_f32_winograd43_kernels__avx512 = {
    "ds_f32_winograd43__avx512", 4, kLanes, input__avx512, output__avx512, ds_f32_winograd43_filter};

}  // namespace ds
