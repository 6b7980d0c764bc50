// F(4x4, 3x3) transforms at the avx2 level: 8 tiles per call, one per vector lane.
//
// Input: each of the 6 window rows is 34 floats of a padded plane row (tile k at 4k). Vectors
// holding tiles (k, k + 4) in their 128-bit halves go through the 4x4 in-lane transpose to give
// d0..d3 (tile k in lane k); the tiles one further, (k + 1, k + 5), give d4 and d5 the same way.
// B^T runs along the row, then down the columns, and V goes straight into the packed B panel rows.
// Output: M is summed by A^T down the columns, then along the rows (the bias rides on M[1][1],
// which reaches every output with weight 1); each output row is re-interleaved into 4 vectors of
// 8 columns, and the residual, the activation and masked stores at the patch edge follow.
//
// F(2x2, 3x3) transforms, 8 tiles per call, at the avx2 and the avx512 level (below).
#include <immintrin.h>

#include "kernels/x86/f32-winograd-act.h"
#include "kernels/x86/f32-store-avx2.h"

namespace ds {
namespace {

constexpr int kLanes = 8;

// t = B^T d (docs in f32-winograd-impl.h).
inline void input_1d(const __m256 d[6], __m256 t[6]) {
  const __m256 c2 = _mm256_set1_ps(2.0f), c4 = _mm256_set1_ps(4.0f), c5 = _mm256_set1_ps(5.0f);
  const __m256 d31 = _mm256_sub_ps(d[3], d[1]), d42 = _mm256_sub_ps(d[4], d[2]);
  t[0] = _mm256_fmadd_ps(c4, d[0], _mm256_fnmadd_ps(c5, d[2], d[4]));
  t[1] = _mm256_fnmadd_ps(c4, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
  t[2] = _mm256_fmadd_ps(c4, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
  t[3] = _mm256_fmadd_ps(c2, d31, d42);
  t[4] = _mm256_fnmadd_ps(c2, d31, d42);
  t[5] = _mm256_fmadd_ps(c4, d[1], _mm256_fnmadd_ps(c5, d[3], d[5]));
}

// o = A^T m.
inline void output_1d(const __m256 m[6], __m256 o[4]) {
  const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
  const __m256 c = _mm256_add_ps(m[3], m[4]), d = _mm256_sub_ps(m[3], m[4]);
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d, b);
  o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), c, a);
  o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), d, b), m[5]);
}

// Tiles k and k + 4 (4 floats each, tile k at p + 4k) in the two halves.
inline __m256 tile_pair(const float* p) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(p)), _mm_loadu_ps(p + 16), 1);
}

// d[j][k] = r[4k + j], j = 0..5, k = 0..7 (reads r[0..33]).
inline void load_row(const float* r, __m256 d[6]) {
  const __m256 a0 = tile_pair(r), a1 = tile_pair(r + 4), a2 = tile_pair(r + 8), a3 = tile_pair(r + 12);
  // Tiles 4 and 8; only the first 2 floats of tile 8 exist (a 64-bit load, any alignment).
  const __m128 t8 = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + 32)));
  const __m256 a4 = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(r + 16)), t8, 1);
  const __m256 u0 = _mm256_unpacklo_ps(a0, a1), u1 = _mm256_unpackhi_ps(a0, a1);
  const __m256 u2 = _mm256_unpacklo_ps(a2, a3), u3 = _mm256_unpackhi_ps(a2, a3);
  d[0] = _mm256_shuffle_ps(u0, u2, 0x44);
  d[1] = _mm256_shuffle_ps(u0, u2, 0xEE);
  d[2] = _mm256_shuffle_ps(u1, u3, 0x44);
  d[3] = _mm256_shuffle_ps(u1, u3, 0xEE);
  const __m256 v0 = _mm256_unpacklo_ps(a1, a2), v1 = _mm256_unpacklo_ps(a3, a4);
  d[4] = _mm256_shuffle_ps(v0, v1, 0x44);
  d[5] = _mm256_shuffle_ps(v0, v1, 0xEE);
}

// Lanes below n set (n clamped to 0..8).
inline __m256i lane_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(n < 0 ? 0 : n > 8 ? 8 : n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

void input__avx2(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  __m256 rows[6][6];  // rows[i][b]: B^T along input row i
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    __m256 d[6];
    load_row(x + i * x_stride, d);
    input_1d(d, rows[i]);
  }
  const bool full = count >= kLanes;
#pragma GCC unroll 6
  for (int b = 0; b < 6; ++b) {
    const __m256 col[6] = {rows[0][b], rows[1][b], rows[2][b], rows[3][b], rows[4][b], rows[5][b]};
    __m256 t[6];
    input_1d(col, t);
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) {
      float* dst = v + (a * 6 + b) * v_stride;
      if (full) _mm256_storeu_ps(dst, t[a]);
      else x86::store_partial(dst, t[a], count);
    }
  }
}

// act(x) for the codes done in vectors (0, 1, 2, 3, 5, 6); the others are applied afterwards.
template <int Act>
inline __m256 activate(__m256 x, __m256 alpha, __m256 beta) {
  const __m256 zero = _mm256_setzero_ps();
  switch (Act) {
    case 1: return _mm256_max_ps(x, zero);
    case 2: return _mm256_min_ps(_mm256_max_ps(x, alpha), beta);
    case 3: return _mm256_blendv_ps(x, _mm256_mul_ps(x, alpha), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    case 5: return _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(alpha, x, beta), zero), _mm256_set1_ps(1.0f));
    case 6: {
      const __m256 g = _mm256_fmadd_ps(x, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(x, _mm256_min_ps(_mm256_max_ps(g, zero), _mm256_set1_ps(1.0f)));
    }
    default: return x;
  }
}

// Row r of an output patch, `groups` vectors of 8 columns (the last holding `last` of them): +
// residual, the activation, the stores (partial at the patch edge).
template <int Act, int G>
inline void store_row(const __m256 (&q)[G], int64_t groups, int64_t last, __m256i last_mask, const WinogradOutput& o,
                      int r, float* y, int64_t y_stride, __m256 alpha, __m256 beta) {
  float* yr = y + r * y_stride;
  const float* res = o.residual ? o.residual + r * o.residual_stride : nullptr;
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    if (g >= groups) break;
    __m256 val = q[g];
    if (g + 1 < groups || last == 8) {
      if (res) val = _mm256_add_ps(val, _mm256_loadu_ps(res + 8 * g));
      _mm256_storeu_ps(yr + 8 * g, activate<Act>(val, alpha, beta));
    } else {
      if (res) val = _mm256_add_ps(val, _mm256_maskload_ps(res + 8 * g, last_mask));
      x86::store_partial(yr + 8 * g, activate<Act>(val, alpha, beta), last);
    }
  }
}

template <int Act>
void output_act(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y, int64_t y_stride) {
  __m256 s[4][6];  // s[r][b] = sum over a of A^T[r][a] M[a][b]
#pragma GCC unroll 6
  for (int b = 0; b < 6; ++b) {
    __m256 col[6], t[4];
#pragma GCC unroll 6
    for (int a = 0; a < 6; ++a) col[a] = _mm256_loadu_ps(m + (a * 6 + b) * m_stride);
    if (b == 1) col[1] = _mm256_add_ps(col[1], _mm256_set1_ps(o.bias));  // + bias at every output
    output_1d(col, t);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) s[r][b] = t[r];
  }
  const int64_t cols = o.cols < 4 * count ? o.cols : 4 * count;
  const int64_t groups = (cols + 7) / 8, last = cols - 8 * (groups - 1);  // 1..4 vectors of 8 columns
  const __m256 alpha = _mm256_set1_ps(o.alpha), beta = _mm256_set1_ps(o.beta);
  const __m256i last_mask = lane_mask(last);
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    if (r >= o.rows) break;
    __m256 t[4];
    output_1d(s[r], t);
    // In-lane 4x4 transpose: x_j holds tiles j and j + 4 (4 columns each), then pairs of tiles.
    const __m256 u0 = _mm256_unpacklo_ps(t[0], t[1]), u1 = _mm256_unpackhi_ps(t[0], t[1]);
    const __m256 u2 = _mm256_unpacklo_ps(t[2], t[3]), u3 = _mm256_unpackhi_ps(t[2], t[3]);
    const __m256 x0 = _mm256_shuffle_ps(u0, u2, 0x44), x1 = _mm256_shuffle_ps(u0, u2, 0xEE);
    const __m256 x2 = _mm256_shuffle_ps(u1, u3, 0x44), x3 = _mm256_shuffle_ps(u1, u3, 0xEE);
    const __m256 q[4] = {_mm256_permute2f128_ps(x0, x1, 0x20), _mm256_permute2f128_ps(x2, x3, 0x20),
                         _mm256_permute2f128_ps(x0, x1, 0x31), _mm256_permute2f128_ps(x2, x3, 0x31)};
    store_row<Act>(q, groups, last, last_mask, o, r, y, y_stride, alpha, beta);
  }
}

void output__avx2(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                  int64_t y_stride) {
  x86::winograd_output_act(o, 4, count, y, y_stride, [&](auto act) {
    output_act<decltype(act)::value>(m, m_stride, count, o, y, y_stride);
  });
}

// F(2x2, 3x3), 8 tiles per call; the AVX-512 level runs these too (the 7x7 planes where F(2x2,
// 3x3) pays have rows of 4 tiles: 16 lanes would be mostly empty; the shared 8-lane templates took
// 17% of ResNet-18's 512 -> 512 at 7x7). The same additions in the same order as the scalar
// templates: V and the output are the scalar level's bit for bit, activations included, except
// codes 5 and 6 (multiply-adds fused here; test_winograd.cc checks both).
//
// Input: each of the 4 window rows is 18 floats of a padded plane row (tile k at 2k): d0 / d1 are
// the even / odd columns of its first 16, d2 / d3 those of the 16 from column 2.
inline __m256 even_lanes(__m256 a, __m256 b) {  // a0 a2 a4 a6 b0 b2 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
}
inline __m256 odd_lanes(__m256 a, __m256 b) {  // a1 a3 a5 a7 b1 b3 b5 b7
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// t = B^T d for F(2x2, 3x3).
inline void input23_1d(const __m256 d[4], __m256 t[4]) {
  t[0] = _mm256_sub_ps(d[0], d[2]);
  t[1] = _mm256_add_ps(d[1], d[2]);
  t[2] = _mm256_sub_ps(d[2], d[1]);
  t[3] = _mm256_sub_ps(d[1], d[3]);
}

void input23__avx2(const float* x, int64_t x_stride, int64_t count, float* v, int64_t v_stride) {
  __m256 rows[4][4];  // rows[i][b]: B^T along window row i
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const float* r = x + i * x_stride;
    const __m256 r0 = _mm256_loadu_ps(r), r1 = _mm256_loadu_ps(r + 8);
    const __m256 r2 = _mm256_loadu_ps(r + 2), r3 = _mm256_loadu_ps(r + 10);
    const __m256 d[4] = {even_lanes(r0, r1), odd_lanes(r0, r1), even_lanes(r2, r3), odd_lanes(r2, r3)};
    input23_1d(d, rows[i]);
  }
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    const __m256 col[4] = {rows[0][b], rows[1][b], rows[2][b], rows[3][b]};
    __m256 t[4];
    input23_1d(col, t);
#pragma GCC unroll 4
    for (int a = 0; a < 4; ++a) {
      float* dst = v + (a * 4 + b) * v_stride;
      if (count >= kLanes) _mm256_storeu_ps(dst, t[a]);
      else x86::store_partial(dst, t[a], count);
    }
  }
}

// o = A^T m for F(2x2, 3x3).
inline void output23_1d(const __m256 m[4], __m256 o[2]) {
  o[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
  o[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
}

// Output: A^T down the columns, then along the rows, + bias; each output row's two columns per
// tile are interleaved into 2 vectors of 8 columns, then the residual, the activation and the
// stores (partial at the patch edge).
template <int Act>
void output23_act(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                  int64_t y_stride) {
  __m256 s[2][4];  // s[r][b] = sum over a of A^T[r][a] M[a][b]
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    __m256 col[4], t[2];
#pragma GCC unroll 4
    for (int a = 0; a < 4; ++a) col[a] = _mm256_loadu_ps(m + (a * 4 + b) * m_stride);
    output23_1d(col, t);
    s[0][b] = t[0], s[1][b] = t[1];
  }
  const int64_t cols = o.cols < 2 * count ? o.cols : 2 * count;
  const int64_t groups = (cols + 7) / 8, last = cols - 8 * (groups - 1);  // 1..2 vectors of 8 columns
  const __m256 bias = _mm256_set1_ps(o.bias), alpha = _mm256_set1_ps(o.alpha), beta = _mm256_set1_ps(o.beta);
  const __m256i last_mask = lane_mask(last);
#pragma GCC unroll 2
  for (int r = 0; r < 2; ++r) {
    if (r >= o.rows) break;
    __m256 t[2];
    output23_1d(s[r], t);
    t[0] = _mm256_add_ps(t[0], bias), t[1] = _mm256_add_ps(t[1], bias);
    const __m256 lo = _mm256_unpacklo_ps(t[0], t[1]), hi = _mm256_unpackhi_ps(t[0], t[1]);
    const __m256 q[2] = {_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)};
    store_row<Act>(q, groups, last, last_mask, o, r, y, y_stride, alpha, beta);
  }
}

void output23__avx2(const float* m, int64_t m_stride, int64_t count, const WinogradOutput& o, float* y,
                    int64_t y_stride) {
  x86::winograd_output_act(o, 2, count, y, y_stride, [&](auto act) {
    output23_act<decltype(act)::value>(m, m_stride, count, o, y, y_stride);
  });
}
}  // namespace

const WinogradKernels ds_f32_winograd43_kernels__avx2 = {
    "ds_f32_winograd43__avx2", 4, kLanes, input__avx2, output__avx2, ds_f32_winograd43_filter};
const WinogradKernels ds_f32_winograd23_kernels__avx2 = {
    "ds_f32_winograd23__avx2", 2, kLanes, input23__avx2, output23__avx2, ds_f32_winograd23_filter};

}  // namespace ds
