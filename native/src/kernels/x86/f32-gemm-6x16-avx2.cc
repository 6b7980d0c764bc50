// AVX2+FMA f32 GEMM: 6x16 register tile (12 YMM accumulators, two B vectors, one broadcast),
// masked loads/stores (vmaskmov) only on partial-column tiles, one instantiation per row count.
// Compiled with -mavx2 -mfma (native/cmake/x86_kernels.cmake).
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/unroll.h"
#include "kernels/x86/f32-gemm-driver.h"

namespace ds {
namespace {

constexpr int kMr = 6, kNr = 16;
// Sized for the smallest caches of the CPUs this level runs on (32 KB L1d, 256-512 KB L2: Haswell
// to Zen 3): the kc x 16 B panel (16 KB) and the 6 x kc A sliver (6 KB) stay in L1d, the mc x kc A
// block (168 KB) in L2. kc = 384 (24 + 9 KB) overflowed a 32 KB L1d: the 1024^3 GEMM under
// cachegrind with Zen 3's caches, 18.9M L1d misses at 384 x 240 against 11.9M at 256 x 168.
// With A read in place (1x1 layers as pixels) a k step's 6 floats take a line (1.4 on average at
// a 7x7 plane), so 256 steps (22 KB) and the B panel overflowed the L1d: kc = 128 there
// (BENCH_P10=1 bench_conv layer, 1 thread, ms: 7x7 320->1280 0.587 -> 0.497, 960->160 0.216 ->
// 0.181, 6x6 512->512 0.233 -> 0.213, 14x14 576->96 0.247 -> 0.238; 8x8 512->512 0.384 -> 0.398).
using Cfg = x86::GemmBlocking<kMr, kNr, 256, 168, 768, 128>;
// A packed A panel is prefetched this many k steps ahead of its use (128 x 24 B = 3 KB): Winograd's
// position matrices stream from L3 or memory (see the AVX-512 kernel).
// ResNet-18 stage 2 at this level on a Zen 4 (in-model p10, 1 thread): 1.05-1.07 -> 0.81-0.83 ms.
constexpr int kPrefetchASteps = 128;
// With GemmPrefetch::far_a, also into L2 this many steps ahead (24 KB, as at AVX-512).
constexpr int kPrefetchAFarSteps = 1024;

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
    default: return v;  // 0; 4 and 7 by the driver's scalar pass
  }
}

struct Cols {
  bool full;
  __m256i m0, m1;
  __m256 load0(const float* p) const { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m0); }
  __m256 load1(const float* p) const { return full ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, m1); }
};

// Where the two B vectors of a gemm_rows tile sit in each B row (kRowsPieces, kRowsApart):
// vector v is the lo_v lanes at o_v and the hi_v lanes at o_v + skip (the next output row of a
// padded plane).
struct RowsPanel {
  __m256i lo0, hi0, lo1, hi1;
  int64_t o0, o1, skip;
};

// How a gemm_rows tile reads its B vectors from a B row.
enum RowsLoad : int {
  kRowsContiguous = 0,  // nr adjacent columns at b (masked when the tile is partial, kMaskB)
  kRowsPieces = 1,      // each vector two masked pieces (its columns cross an output row), *rp
  kRowsApart = 2,       // each vector whole inside an output row, at its own offset o_v of *rp
};

// Lanes [0, n) of a vector (n clamped to 0..8).
inline __m256i lanes(int64_t n) {
  const int32_t c = n <= 0 ? 0 : n >= 8 ? 8 : int32_t(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// ds_f32_gemm_ukernel_6x16__avx2 for R = 6 rows; R < 6 for the last rows of M. With offsets
// (kRows), B step q is the nr floats at b + offs[q] (kStrided: at b + q * b_stride, rows evenly
// spaced) instead of a packed panel: read with masks
// when the tile is partial (kMaskB), so nothing past column nr is touched, and with one vector
// (NV = 1, a 6x8 tile: half the multiply-adds) when nr <= 8. kLoad (RowsLoad): contiguous
// columns, each vector assembled from two masked loads as *rp says (columns that cross an output
// row), or two whole vectors apart (output rows of a multiple of 8 columns: plain loads).
template <int R, bool kRows, int NV = 2, bool kMaskB = false, int kLoad = kRowsContiguous, bool kStrided = false>
DS_ALWAYS_INLINE void ukernel_core(int64_t nr, int64_t kc, const float* a, const float* b, const int64_t* offs,
                                    float* c, int64_t c_rs, bool accumulate, const x86::GemmTileEpilogue* ep,
                                    const RowsPanel* rp = nullptr, int64_t a_step = kMr, x86::GemmPrefetch pf = {},
                                    int64_t b_stride = 0) {
  // The C tile is read (or written) after the K loop; fetch its lines now so they arrive in time.
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs), _MM_HINT_T0);
    if (NV == 2) _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs + 15), _MM_HINT_T0);
  }
  // gemm_rows panels of two whole vectors (contiguous, apart, strided: variants 0, 5, 6, which
  // ds_f32_gemm_rows__avx2 takes only for nr == kNr) are full: no column masks to compute per tile.
  constexpr bool kFull = kRows && NV == 2 && !kMaskB && kLoad != kRowsPieces;
  Cols cols;
  cols.full = kFull || nr == kNr;
  cols.m0 = cols.m1 = _mm256_setzero_si256();
  if (!kFull) cols.m0 = lanes(nr), cols.m1 = lanes(nr - 8);
  __m256 acc0[R], acc1[R];
  int64_t o0 = 0, o1 = 8, skip = 0;
  __m256i lo0 = cols.m0, hi0 = lo0, lo1 = cols.m1, hi1 = lo1;
  if (kLoad != kRowsContiguous)
    o0 = rp->o0, o1 = rp->o1, skip = rp->skip, lo0 = rp->lo0, hi0 = rp->hi0, lo1 = rp->lo1, hi1 = rp->hi1;
  // One k step: the B vectors of step q, times each row's A value.
  // kFirst: the accumulators start as the step's products (a multiply-add onto +0 gives the same
  // value, up to the sign of a zero product), which saves zeroing them per tile.
  auto step = [&](int64_t q, auto first) DS_ALWAYS_INLINE_LAMBDA {
    constexpr bool kFirst = decltype(first)::value;
    const float* bq = !kRows ? b + q * kNr : kStrided ? b + q * b_stride : b + offs[q];
    __m256 b0, b1;
    if (kLoad == kRowsApart) {
      b0 = _mm256_loadu_ps(bq + o0);
      b1 = NV == 1 ? b0 : _mm256_loadu_ps(bq + o1);
    } else if (kLoad == kRowsPieces) {  // masked-off lanes load as +0.0, so OR merges the two pieces exactly
      b0 = _mm256_or_ps(_mm256_maskload_ps(bq + o0, lo0), _mm256_maskload_ps(bq + o0 + skip, hi0));
      b1 = NV == 1 ? b0 : _mm256_or_ps(_mm256_maskload_ps(bq + o1, lo1), _mm256_maskload_ps(bq + o1 + skip, hi1));
    } else {
      b0 = kMaskB ? _mm256_maskload_ps(bq, lo0) : _mm256_loadu_ps(bq);
      b1 = NV == 1 ? b0 : kMaskB ? _mm256_maskload_ps(bq + 8, lo1) : _mm256_loadu_ps(bq + 8);
    }
    const float* aq = a + q * a_step;
    if (!kRows && a_step == kMr) {
      _mm_prefetch(reinterpret_cast<const char*>(aq + kPrefetchASteps * kMr), _MM_HINT_T0);
      if (pf.far_a) _mm_prefetch(reinterpret_cast<const char*>(aq + kPrefetchAFarSteps * kMr), _MM_HINT_T1);
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(aq + r);
      acc0[r] = kFirst ? _mm256_mul_ps(av, b0) : _mm256_fmadd_ps(av, b0, acc0[r]);
      if (NV == 2) acc1[r] = kFirst ? _mm256_mul_ps(av, b1) : _mm256_fmadd_ps(av, b1, acc1[r]);
      else if (kFirst) acc1[r] = acc0[r];  // unused with one vector; set so that nothing reads garbage
    }
  };
  // The first step (it starts the accumulators), the steps that also prefetch a line of the next
  // panel, then the rest unrolled by 4: the loop's own instructions (counter, pointers, prefetch
  // test) were 6-9 of ~27 per step.
  int64_t q = 0;
  const int64_t lines = kRows ? 0 : std::min(kc, pf.lines);
  if (kc > 0) {
    step(0, std::true_type{});
    if (lines > 0) _mm_prefetch(reinterpret_cast<const char*>(pf.at), _MM_HINT_T0);
    q = 1;
  } else {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  }
  for (; q < lines; ++q) {
    step(q, std::false_type{});
    _mm_prefetch(reinterpret_cast<const char*>(pf.at + 16 * q), _MM_HINT_T0);
  }
#pragma GCC unroll 4
  for (; q < kc; ++q) step(q, std::false_type{});
  // The epilogue one step at a time over all the tile's rows, so each test (accumulate, which
  // bias, residual, activation code, full columns) runs once per tile, not once per row: per row
  // they had been ~20 instructions, about a fifth of a tile's at K = 16 (MobileNet V2's expand).
  // Each element still sees the same operations in the same order.
  if (accumulate)
    unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
      acc0[r] = _mm256_add_ps(acc0[r], cols.load0(c + r * c_rs));
      if (NV == 2) acc1[r] = _mm256_add_ps(acc1[r], cols.load1(c + r * c_rs));
    });
  if (ep) {
    if (ep->bias_row)
      unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
        const __m256 br = _mm256_set1_ps(ep->bias_row[r]);
        acc0[r] = _mm256_add_ps(acc0[r], br);
        acc1[r] = _mm256_add_ps(acc1[r], br);
      });
    if (ep->bias_col) {
      const __m256 bc0 = cols.load0(ep->bias_col), bc1 = NV == 2 ? cols.load1(ep->bias_col) : bc0;
      unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
        acc0[r] = _mm256_add_ps(acc0[r], bc0);
        acc1[r] = _mm256_add_ps(acc1[r], bc1);
      });
    }
    if (ep->residual)
      unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
        const float* rr = ep->residual + r * ep->residual_row_stride;
        acc0[r] = _mm256_add_ps(acc0[r], cols.load0(rr));
        if (NV == 2) acc1[r] = _mm256_add_ps(acc1[r], cols.load1(rr));
      });
    const __m256 alpha = _mm256_set1_ps(ep->alpha), beta = _mm256_set1_ps(ep->beta);
    auto activate_rows = [&](auto code) DS_ALWAYS_INLINE_LAMBDA {
      unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
        acc0[r] = activate(acc0[r], code, alpha, beta);
        if (NV == 2) acc1[r] = activate(acc1[r], code, alpha, beta);
      });
    };
    switch (ep->act) {  // 0, 4 and 7: nothing here (4 and 7 by the driver's scalar pass)
      case 1: activate_rows(std::integral_constant<int32_t, 1>{}); break;
      case 2: activate_rows(std::integral_constant<int32_t, 2>{}); break;
      case 3: activate_rows(std::integral_constant<int32_t, 3>{}); break;
      case 5: activate_rows(std::integral_constant<int32_t, 5>{}); break;
      case 6: activate_rows(std::integral_constant<int32_t, 6>{}); break;
      default: break;
    }
  }
  if (NV == 2 && cols.full)
    unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
      _mm256_storeu_ps(c + r * c_rs, acc0[r]);
      _mm256_storeu_ps(c + r * c_rs + 8, acc1[r]);
    });
  else if (NV == 2)
    unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA {
      _mm256_maskstore_ps(c + r * c_rs, cols.m0, acc0[r]);
      _mm256_maskstore_ps(c + r * c_rs + 8, cols.m1, acc1[r]);
    });
  else if (nr == 8)
    unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA { _mm256_storeu_ps(c + r * c_rs, acc0[r]); });
  else
    unroll<R>([&](auto r) DS_ALWAYS_INLINE_LAMBDA { _mm256_maskstore_ps(c + r * c_rs, cols.m0, acc0[r]); });
}

template <int R>
void ukernel(int64_t nr, int64_t kc, const float* a, const float* b, float* c, int64_t c_rs, bool accumulate,
             const x86::GemmTileEpilogue* ep, int64_t a_step, x86::GemmPrefetch pf) {
  ukernel_core<R, false>(nr, kc, a, b, nullptr, c, c_rs, accumulate, ep, nullptr, a_step, pf);
}

const x86::GemmMicrokernel kUkernels[kMr] = {ukernel<1>, ukernel<2>, ukernel<3>,
                                              ukernel<4>, ukernel<5>, ukernel<6>};

// One column panel of gemm_rows: every mr-high tile of its M rows, the tile loop inside the
// kernel (with the whole K per tile, a 1x1 layer of few input channels spent 7% of its time in
// the per-tile call and epilogue set-up when the loop called a microkernel per tile).
using RowsPanelKernel = void (*)(const GemmParams& p, int64_t j, int64_t nr, const float* b, const int64_t* offs,
                                 const RowsPanel* rp, int64_t b_stride);

template <int R, int NV, bool kMaskB, int kLoad, bool kStrided>
DS_ALWAYS_INLINE void rows_tile(const GemmParams& p, int64_t i, int64_t j, int64_t nr, const float* b,
                                const int64_t* offs, const RowsPanel* rp, int64_t b_stride) {
  float* c = p.c + i * p.c_row_stride + j;
  const x86::GemmTileEpilogue ep = x86::GemmTileEpilogue::at(p, i, j);
  ukernel_core<R, true, NV, kMaskB, kLoad, kStrided>(nr, p.k, p.a.data + i * p.k, b, offs, c, p.c_row_stride, false,
                                                     &ep, rp, kMr, {}, b_stride);
  if (p.act == 4 || p.act == 7) x86::gemm_tile_transcendental(R, nr, c, p.c_row_stride, ep);
}

template <int NV, bool kMaskB, int kLoad, bool kStrided = false>
void rows_panel(const GemmParams& p, int64_t j, int64_t nr, const float* b, const int64_t* offs, const RowsPanel* rp,
                int64_t b_stride) {
  int64_t i = 0;
  for (; i + kMr <= p.m; i += kMr) rows_tile<kMr, NV, kMaskB, kLoad, kStrided>(p, i, j, nr, b, offs, rp, b_stride);
  switch (p.m - i) {
    case 1: rows_tile<1, NV, kMaskB, kLoad, kStrided>(p, i, j, nr, b, offs, rp, b_stride); break;
    case 2: rows_tile<2, NV, kMaskB, kLoad, kStrided>(p, i, j, nr, b, offs, rp, b_stride); break;
    case 3: rows_tile<3, NV, kMaskB, kLoad, kStrided>(p, i, j, nr, b, offs, rp, b_stride); break;
    case 4: rows_tile<4, NV, kMaskB, kLoad, kStrided>(p, i, j, nr, b, offs, rp, b_stride); break;
    case 5: rows_tile<5, NV, kMaskB, kLoad, kStrided>(p, i, j, nr, b, offs, rp, b_stride); break;
    default: break;
  }
}

// By variant: 0 = 16 contiguous columns, 1 = 9..15 (masked), 2 = 1..8 (one masked vector);
// 3, 4 = two / one vector(s) that cross an output row; 5 = two whole vectors apart; 6-8 = 0-2
// with B's rows evenly spaced (StridedRows).
const RowsPanelKernel kRowsPanels[9] = {
    rows_panel<2, false, kRowsContiguous>,       rows_panel<2, true, kRowsContiguous>,
    rows_panel<1, true, kRowsContiguous>,        rows_panel<2, false, kRowsPieces>,
    rows_panel<1, false, kRowsPieces>,           rows_panel<2, false, kRowsApart>,
    rows_panel<2, false, kRowsContiguous, true>, rows_panel<2, true, kRowsContiguous, true>,
    rows_panel<1, true, kRowsContiguous, true>};

// B's rows evenly spaced (offsets[q] = offsets[0] + q * stride: a 1x1 layer's input channels)
// are read as b + q * stride, which addresses a step's loads from the panel's base without an
// offset load and add per step.
struct StridedRows {
  bool even = false;
  int64_t stride = 0;
};
StridedRows strided_rows(const int64_t* offs, int64_t k) {
  StridedRows s;
  s.stride = k > 1 ? offs[1] - offs[0] : 0;
  for (int64_t q = 2; q < k; ++q)
    if (offs[q] - offs[q - 1] != s.stride) return s;
  s.even = k >= 1;  // (no rows: the offsets are not read)
  return s;
}

}  // namespace

void ds_f32_gemm__avx2(const GemmParams& p, float* workspace) {
  x86::gemm_blocked<Cfg>(p, kUkernels, workspace);
}

// Past M x (distinct B rows per panel) = 16K the panel's rows (16 floats, two lines each) no
// longer stay in the 32 KB L1d over M / 6 row tiles and the implicit im2col loses to the packed
// one (BENCH_P10=1 bench_conv layer, DS_CONV_ROWS=0|1, 1 thread, packed -> implicit ms: 3x3 s2
// 16x56x56 -> 128, 96 rows, 0.65 -> 0.61; 32x56x56 -> 128, 192 rows, 0.81 -> 0.95; 64x56x56 -> 128
// 1.67 -> 1.95; 3x3 s1 64x27x27 -> 32, 192 rows, 0.54 -> 0.44; 80x28x28 -> 64, 240 rows, 1.54 ->
// 1.43; 128x28x28 -> 128, 384 rows, 3.08 -> 3.43).
constexpr int64_t kRowsReuseLimit = 16 * 1024;
// Half the 512 KB L2: ResNet-18's stage-3 shortcut (1x1 s2 256 -> 512, A = 512 KB, 4 panels)
// in-model 0.30 -> 0.39 ms direct, against MobileNet V2's 96 -> 576 at 14x14 (A = 216 KB) hot
// 0.289 -> 0.265.
constexpr int64_t kRowsAFloats = 64 * 1024;

// Column panels outer, row tiles inner: a panel's B rows (a few input rows per channel) stay in
// L1 across the row tiles while the packed A (m x k) streams from L2; the whole K per tile. The
// last, partial panel reads B with masks (nothing past column n) and, up to 8 columns, as a 6x8
// tile. With a width, a vector whose columns cross an output row is read as two masked loads
// (the skip columns of the padded plane are never read nor computed).
void ds_f32_gemm_rows__avx2(const GemmParams& p, const GemmRowsB& rb) {
  const int64_t w = rb.width, pitch = rb.width + rb.skip;
  const StridedRows sr = strided_rows(rb.offsets, p.k);
  for (int64_t j = 0; j < p.n; j += kNr) {
    const int64_t nr = p.n - j < kNr ? p.n - j : kNr;
    RowsPanel rp;
    rp.skip = rb.skip;
    int variant = nr == kNr ? 0 : nr > 8 ? 1 : 2;
    // Vector v holds columns col0 + j + 8 v .. + 7: at o[v] in a B row, w - x of them left in
    // their output row.
    int64_t o[2];
    bool crosses = false;
    for (int v = 0; v < 2; ++v) {
      const int64_t js = rb.col0 + j + 8 * v, valid = p.n - j - 8 * v, x = w > 0 ? js % w : 0;
      o[v] = w > 0 ? (js / w) * pitch + x : js;
      const __m256i all = lanes(valid), lo = lanes(w > 0 ? std::min(w - x, valid) : valid);
      const __m256i hi = _mm256_andnot_si256(lo, all);
      (v == 0 ? rp.lo0 : rp.lo1) = lo;
      (v == 0 ? rp.hi0 : rp.hi1) = hi;
      crosses = crosses || !_mm256_testz_si256(hi, hi);
    }
    rp.o0 = o[0], rp.o1 = o[1];
    const float* b = p.b.data + o[0];
    // Output rows of a multiple of 8 columns: the two vectors never cross one, only sit apart.
    if (!crosses && nr == kNr && o[1] != o[0] + 8) variant = 5, b = p.b.data;
    else if (crosses || (nr > 8 && o[1] != o[0] + 8)) variant = nr > 8 ? 3 : 4, b = p.b.data;
    else if (sr.even) variant += 6, b += rb.offsets[0];
    kRowsPanels[variant](p, j, nr, b, rb.offsets, &rp, sr.stride);
  }
}

const GemmKernels ds_f32_gemm_kernels__avx2 = {"ds_f32_gemm_ukernel_6x16__avx2", kMr, kNr, Cfg::kKc,
                                               Cfg::kMc, Cfg::kNc, Cfg::kWorkspace, ds_f32_gemm__avx2,
                                               ds_f32_gemm_rows__avx2, kRowsReuseLimit, kRowsAFloats};

}  // namespace ds
