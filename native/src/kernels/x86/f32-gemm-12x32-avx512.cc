// AVX-512 f32 GEMM: 12x32 register tile (24 ZMM accumulators, two B vectors, A broadcast from
// memory), masked stores for partial columns, one instantiation per row count for partial rows.
// Compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma (native/cmake/x86_kernels.cmake).
#include <immintrin.h>

#include <algorithm>

// GCC 12 flags the _mm512_undefined_ps() inside _mm512_max_ps/_mm512_min_ps as maybe-uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/x86/f32-gemm-driver.h"

namespace ds {
namespace {

constexpr int kMr = 12, kNr = 32;
// A packed A panel is prefetched this many k steps ahead of its use (64 x 48 B = 3 KB; near a
// panel's end that is the lines after it: the next panel when K fits one K block). Winograd's
// position matrices (weights of 256 x 256 and up, each weight used for few tiles) stream from L3
// or memory faster than the hardware prefetcher brings them in: ResNet-18 stage 2 (3x3 256 -> 256
// at 14 x 14, in-model p10, 1 thread) 1.07-1.10 -> 0.85-0.89 ms; 16 / 32 / 128 / 256 steps ahead:
// 0.94-0.99 / 0.88-0.94 / 0.86-0.92 / 0.87-0.91 (BENCHMARKS.md, thirteenth round).
constexpr int kPrefetchASteps = 64;
// One 16-column vector of B (NV = 1) makes a k step half as long, so the same distance in time is
// twice the steps: ResNet-18 stage 3 (F(2x2, 3x3) at 7 x 7, 16 tiles: 512 x 512 matrices of one
// vector, in-model p10, 1 thread) 1.59-1.61 ms at 64 steps, 1.50-1.52 at 128; 96 / 160 / 192 /
// 256 steps: 1.65-1.66 / 1.59-1.65 / 1.69-1.72 / 1.60-1.65.
constexpr int kPrefetchAStepsOneVector = 128;
// With GemmPrefetch::far_a, also into L2 this many steps ahead (24 KB); 256-1024 measured alike.
constexpr int kPrefetchAFarSteps = 512;
// kc x 32 B panel = 48 KB (the L1d size: it streams from L2 when it does not stay); mc x kc A
// block = 360 KB of the 1 MB L2; kc x nc B block = 1.1 MB. Chosen by measurement (docs/kernels.md).
using Cfg = x86::GemmBlocking<kMr, kNr, 384, 240, 768>;

inline __m512 activate(__m512 v, int32_t act, __m512 alpha, __m512 beta) {
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
    default: return v;  // 0; 4 and 7 by the driver's scalar pass
  }
}

// Where the two B vectors of a gemm_rows tile sit in each B row (kWrap): vector v is the lo_v
// lanes at o_v and the hi_v lanes at o_v + skip (the next output row of a padded plane).
struct RowsPanel {
  int64_t o0, o1, skip;
  __mmask16 lo0, hi0, lo1, hi1;
};

// ds_f32_gemm_ukernel_12x32__avx512 for R = 12 rows; R < 12 for the last rows of M. With
// offsets (kRows), B step q is the nr floats at b + offs[q] instead of a packed panel: read with
// masks when the tile is partial (kMaskB), so nothing past column nr is touched, and with one
// vector (NV = 1, a 12x16 tile: half the multiply-adds) when nr <= 16. kWrap: each vector is
// assembled from two masked loads as *rp says (columns that cross an output row).
// R = 13 (kMr + 1, the last rows of an M block that would leave a 1-row tile): row 12 is read
// from a_next (row 0 of the next A panel) with the same step.
template <int R, bool kRows, int NV = 2, bool kMaskB = false, bool kWrap = false>
inline void ukernel_core(int64_t nr, int64_t kc, const float* a, const float* b, const int64_t* offs, float* c,
                         int64_t c_rs, bool accumulate, const x86::GemmTileEpilogue* ep,
                         const RowsPanel* rp = nullptr, int64_t a_step = kMr, x86::GemmPrefetch pf = {},
                         const float* a_next = nullptr) {
  // The C tile is read (or written) after the K loop; fetch its lines now so they arrive in time.
#pragma GCC unroll 13
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs), _MM_HINT_T0);
    if (NV == 2) _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs + 31), _MM_HINT_T0);
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : nr <= 16 ? __mmask16(0) : __mmask16((1u << (nr - 16)) - 1);
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 13
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  // Up to 3 rows, 2-6 accumulator chains cannot hide the FMA latency (4 cycles, 2 pipes): odd k
  // steps go to a second set (the 1-row tile of a 49- or 169-pixel GEMM ran at a third of the
  // full tile's speed).
  constexpr bool kTwoSets = R <= 3;
  constexpr int kOdd = kTwoSets ? R : 1;
  // With 13 rows, row 12 is summed as the 1-row tile sums it (odd k steps into the second set):
  // a row's result must not depend on the tile that computes it (a thread split of M can leave
  // that row alone in a 1-row tile; results are bitwise identical for any thread count).
  constexpr bool kPlus = R > kMr;
  __m512 odd0[kOdd], odd1[kOdd];
#pragma GCC unroll 3
  for (int r = 0; r < kOdd; ++r) odd0[r] = odd1[r] = _mm512_setzero_ps();
  int64_t o0 = 0, o1 = 16, skip = 0;
  __mmask16 lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;
  if (kWrap) o0 = rp->o0, o1 = rp->o1, skip = rp->skip, lo0 = rp->lo0, hi0 = rp->hi0, lo1 = rp->lo1, hi1 = rp->hi1;
  for (int64_t q = 0; q < kc; ++q) {
    const float* bq = kRows ? b + offs[q] : b;
    __m512 b0, b1;
    if (kWrap) {
      b0 = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(lo0, bq + o0), hi0, bq + o0 + skip);
      b1 = NV == 1 ? b0 : _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(lo1, bq + o1), hi1, bq + o1 + skip);
    } else {
      b0 = kMaskB ? _mm512_maskz_loadu_ps(m0, bq) : _mm512_loadu_ps(bq);
      b1 = NV == 1 ? b0 : kMaskB ? _mm512_maskz_loadu_ps(m1, bq + 16) : _mm512_loadu_ps(bq + 16);
    }
    if (kTwoSets && (q & 1)) {
#pragma GCC unroll 3
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(a[r]);
        odd0[r] = _mm512_fmadd_ps(av, b0, odd0[r]);
        if (NV == 2) odd1[r] = _mm512_fmadd_ps(av, b1, odd1[r]);
      }
    } else {
#pragma GCC unroll 13
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(r < kMr ? a[r] : *a_next);
        if (kPlus && r == kMr && (q & 1)) {
          odd0[0] = _mm512_fmadd_ps(av, b0, odd0[0]);
          odd1[0] = _mm512_fmadd_ps(av, b1, odd1[0]);
        } else {
          acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
          if (NV == 2) acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
        }
      }
    }
    if (!kRows && q < pf.lines) _mm_prefetch(reinterpret_cast<const char*>(pf.at + 16 * q), _MM_HINT_T0);
    if (!kRows && a_step == kMr) {
      constexpr int steps = NV == 1 ? kPrefetchAStepsOneVector : kPrefetchASteps;
      _mm_prefetch(reinterpret_cast<const char*>(a + steps * kMr), _MM_HINT_T0);
      if (pf.far_a) _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchAFarSteps * kMr), _MM_HINT_T1);
    }
    a += a_step;
    if (R > kMr) a_next += a_step;
    if (!kRows) b += kNr;
  }
  if (kTwoSets) {
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) acc0[r] = _mm512_add_ps(acc0[r], odd0[r]), acc1[r] = _mm512_add_ps(acc1[r], odd1[r]);
  }
  if (kPlus) acc0[kMr] = _mm512_add_ps(acc0[kMr], odd0[0]), acc1[kMr] = _mm512_add_ps(acc1[kMr], odd1[0]);
  __m512 bc0 = _mm512_setzero_ps(), bc1 = _mm512_setzero_ps(), alpha = bc0, beta = bc0;
  if (ep) {
    if (ep->bias_col) bc0 = _mm512_maskz_loadu_ps(m0, ep->bias_col), bc1 = _mm512_maskz_loadu_ps(m1, ep->bias_col + 16);
    alpha = _mm512_set1_ps(ep->alpha);
    beta = _mm512_set1_ps(ep->beta);
  }
#pragma GCC unroll 13
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * c_rs;
    __m512 v0 = acc0[r], v1 = acc1[r];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
      if (NV == 2) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
    }
    if (ep) {
      if (ep->bias_row) {
        const __m512 br = _mm512_set1_ps(ep->bias_row[r]);
        v0 = _mm512_add_ps(v0, br);
        v1 = _mm512_add_ps(v1, br);
      }
      if (ep->bias_col) {
        v0 = _mm512_add_ps(v0, bc0);
        v1 = _mm512_add_ps(v1, bc1);
      }
      if (ep->residual) {
        const float* rr = ep->residual + r * ep->residual_row_stride;
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, rr));
        if (NV == 2) v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, rr + 16));
      }
      v0 = activate(v0, ep->act, alpha, beta);
      if (NV == 2) v1 = activate(v1, ep->act, alpha, beta);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    if (NV == 2) _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
}

// A panel of at most 16 columns (the last one of an N that is not a multiple of 32, or all of a
// Winograd GEMM over 16 tiles: SqueezeNet 1.1's 13x13 layers) runs as a 12x16 tile, half the
// multiply-adds; every lane sees the same operations either way.
template <int R>
void ukernel(int64_t nr, int64_t kc, const float* a, const float* b, float* c, int64_t c_rs, bool accumulate,
             const x86::GemmTileEpilogue* ep, int64_t a_step, x86::GemmPrefetch pf) {
  if (nr <= 16) ukernel_core<R, false, 1>(nr, kc, a, b, nullptr, c, c_rs, accumulate, ep, nullptr, a_step, pf);
  else ukernel_core<R, false>(nr, kc, a, b, nullptr, c, c_rs, accumulate, ep, nullptr, a_step, pf);
}

using RowsMicrokernel = void (*)(int64_t nr, int64_t kc, const float* a, const float* b, const int64_t* offs,
                                 float* c, int64_t c_rs, const x86::GemmTileEpilogue* ep, const RowsPanel* rp);

template <int R, int NV, bool kMaskB, bool kWrap>
void ukernel_rows(int64_t nr, int64_t kc, const float* a, const float* b, const int64_t* offs, float* c, int64_t c_rs,
                  const x86::GemmTileEpilogue* ep, const RowsPanel* rp) {
  ukernel_core<R, true, NV, kMaskB, kWrap>(nr, kc, a, b, offs, c, c_rs, false, ep, rp);
}

template <int NV, bool kMaskB, bool kWrap>
struct RowsTable {
  static constexpr RowsMicrokernel k[kMr] = {
      ukernel_rows<1, NV, kMaskB, kWrap>,  ukernel_rows<2, NV, kMaskB, kWrap>,  ukernel_rows<3, NV, kMaskB, kWrap>,
      ukernel_rows<4, NV, kMaskB, kWrap>,  ukernel_rows<5, NV, kMaskB, kWrap>,  ukernel_rows<6, NV, kMaskB, kWrap>,
      ukernel_rows<7, NV, kMaskB, kWrap>,  ukernel_rows<8, NV, kMaskB, kWrap>,  ukernel_rows<9, NV, kMaskB, kWrap>,
      ukernel_rows<10, NV, kMaskB, kWrap>, ukernel_rows<11, NV, kMaskB, kWrap>, ukernel_rows<12, NV, kMaskB, kWrap>};
};
// [variant][rows - 1]: 0 = 32 contiguous columns, 1 = 17..31 (masked), 2 = 1..16 (one masked
// vector); 3, 4 = two / one vector(s) that cross an output row.
const RowsMicrokernel* const kRowsUkernels[5] = {RowsTable<2, false, false>::k, RowsTable<2, true, false>::k,
                                                 RowsTable<1, true, false>::k, RowsTable<2, false, true>::k,
                                                 RowsTable<1, false, true>::k};

__mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1); }

const x86::GemmMicrokernel kUkernels[kMr] = {ukernel<1>, ukernel<2>, ukernel<3>,  ukernel<4>,
                                              ukernel<5>, ukernel<6>, ukernel<7>,  ukernel<8>,
                                              ukernel<9>, ukernel<10>, ukernel<11>, ukernel<12>};

// 13 rows: 26 accumulators and the two B vectors (the broadcasts are memory operands of the FMAs).
void ukernel_13(int64_t nr, int64_t kc, const float* a, const float* a_next, const float* b, float* c, int64_t c_rs,
                bool accumulate, const x86::GemmTileEpilogue* ep, int64_t a_step, x86::GemmPrefetch pf) {
  if (nr <= 16) ukernel_core<kMr + 1, false, 1>(nr, kc, a, b, nullptr, c, c_rs, accumulate, ep, nullptr, a_step, pf, a_next);
  else ukernel_core<kMr + 1, false>(nr, kc, a, b, nullptr, c, c_rs, accumulate, ep, nullptr, a_step, pf, a_next);
}

}  // namespace

void ds_f32_gemm__avx512(const GemmParams& p, float* workspace) {
  x86::gemm_blocked<Cfg>(p, kUkernels, workspace, ukernel_13);
}

// Column panels outer, row tiles inner: a panel's B rows (a few input rows per channel) stay in
// L1 across the row tiles while the packed A (m x k) streams from L2; the whole K per tile. The
// last, partial panel reads B with masks (nothing past column n) and, up to 16 columns, as a
// 12x16 tile. With a width, a vector whose columns cross an output row is read as two masked
// loads (the skip columns of the padded plane are never read nor computed).
void ds_f32_gemm_rows__avx512(const GemmParams& p, const GemmRowsB& rb) {
  const int64_t w = rb.width, pitch = rb.width + rb.skip;
  for (int64_t j = 0; j < p.n; j += kNr) {
    const int64_t nr = p.n - j < kNr ? p.n - j : kNr;
    RowsPanel rp;
    rp.skip = rb.skip;
    int variant = nr == kNr ? 0 : nr > 16 ? 1 : 2;
    // Vector v holds columns col0 + j + 16 v .. + 15: at o[v] in a B row, w - x of them left in
    // their output row.
    int64_t o[2];
    __mmask16 lo[2], hi[2];
    for (int v = 0; v < 2; ++v) {
      const int64_t js = rb.col0 + j + 16 * v, valid = p.n - j - 16 * v, x = w > 0 ? js % w : 0;
      o[v] = w > 0 ? (js / w) * pitch + x : js;
      lo[v] = lanes(w > 0 ? std::min(w - x, valid) : valid);
      hi[v] = w > 0 ? __mmask16(lanes(valid) & ~lanes(w - x)) : __mmask16(0);
    }
    rp.o0 = o[0], rp.o1 = o[1], rp.lo0 = lo[0], rp.hi0 = hi[0], rp.lo1 = lo[1], rp.hi1 = hi[1];
    const float* b = p.b.data + o[0];
    if (hi[0] || hi[1] || (nr > 16 && o[1] != o[0] + 16)) variant = nr > 16 ? 3 : 4, b = p.b.data;
    for (int64_t i = 0; i < p.m; i += kMr) {
      const int64_t mr = p.m - i < kMr ? p.m - i : kMr;
      float* c = p.c + i * p.c_row_stride + j;
      const x86::GemmTileEpilogue ep = x86::GemmTileEpilogue::at(p, i, j);
      kRowsUkernels[variant][mr - 1](nr, p.k, p.a.data + (i / kMr) * kMr * p.k, b, rb.offsets, c, p.c_row_stride,
                                     &ep, &rp);
      if (p.act == 4 || p.act == 7) x86::gemm_tile_transcendental(mr, nr, c, p.c_row_stride, ep);
    }
  }
}

const GemmKernels ds_f32_gemm_kernels__avx512 = {"ds_f32_gemm_ukernel_12x32__avx512", kMr, kNr,
                                                 Cfg::kKc, Cfg::kMc, Cfg::kNc, Cfg::kWorkspace,
                                                 ds_f32_gemm__avx512, ds_f32_gemm_rows__avx512};

}  // namespace ds
