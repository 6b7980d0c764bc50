// AVX2+FMA f32 GEMM: 6x16 register tile (12 YMM accumulators, two B vectors, one broadcast),
// masked loads/stores (vmaskmov) only on partial-column tiles, one instantiation per row count.
// Compiled with -mavx2 -mfma (native/cmake/x86_kernels.cmake).
#include <immintrin.h>

#include "kernels/x86/f32-gemm-driver.h"

namespace ds {
namespace {

constexpr int kMr = 6, kNr = 16;
// Sized for the smallest caches of the CPUs this level runs on (32 KB L1d, 256-512 KB L2: Haswell
// to Zen 3): the kc x 16 B panel (16 KB) and the 6 x kc A sliver (6 KB) stay in L1d, the mc x kc A
// block (168 KB) in L2. kc = 384 (24 + 9 KB) overflowed a 32 KB L1d: the 1024^3 GEMM under
// cachegrind with Zen 3's caches, 18.9M L1d misses at 384 x 240 against 11.9M at 256 x 168.
using Cfg = x86::GemmBlocking<kMr, kNr, 256, 168, 768>;

inline __m256 activate(__m256 v, int32_t act, __m256 alpha, __m256 beta) {
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
  void store(float* p, __m256 v0, __m256 v1) const {
    if (full) {
      _mm256_storeu_ps(p, v0);
      _mm256_storeu_ps(p + 8, v1);
    } else {
      _mm256_maskstore_ps(p, m0, v0);
      _mm256_maskstore_ps(p + 8, m1, v1);
    }
  }
};

// ds_f32_gemm_ukernel_6x16__avx2 for R = 6 rows; R < 6 for the last rows of M.
template <int R>
void ukernel(int64_t nr, int64_t kc, const float* a, const float* b, float* c, int64_t c_rs,
             bool accumulate, const x86::GemmTileEpilogue* ep, int64_t a_step, x86::GemmPrefetch pf) {
  // The C tile is read (or written) after the K loop; fetch its lines now so they arrive in time.
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * c_rs + 15), _MM_HINT_T0);
  }
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t q = 0; q < kc; ++q) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
    if (q < pf.lines) _mm_prefetch(reinterpret_cast<const char*>(pf.at + 16 * q), _MM_HINT_T0);
    a += a_step;
    b += kNr;
  }
  Cols cols;
  cols.full = nr == kNr;
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  cols.m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(nr)), iota);
  cols.m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(nr) - 8), iota);
  __m256 bc0 = _mm256_setzero_ps(), bc1 = bc0, alpha = bc0, beta = bc0;
  if (ep) {
    if (ep->bias_col) bc0 = cols.load0(ep->bias_col), bc1 = cols.load1(ep->bias_col);
    alpha = _mm256_set1_ps(ep->alpha);
    beta = _mm256_set1_ps(ep->beta);
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * c_rs;
    __m256 v0 = acc0[r], v1 = acc1[r];
    if (accumulate) {
      v0 = _mm256_add_ps(v0, cols.load0(cr));
      v1 = _mm256_add_ps(v1, cols.load1(cr));
    }
    if (ep) {
      if (ep->bias_row) {
        const __m256 br = _mm256_set1_ps(ep->bias_row[r]);
        v0 = _mm256_add_ps(v0, br);
        v1 = _mm256_add_ps(v1, br);
      }
      if (ep->bias_col) {
        v0 = _mm256_add_ps(v0, bc0);
        v1 = _mm256_add_ps(v1, bc1);
      }
      if (ep->residual) {
        const float* rr = ep->residual + r * ep->residual_row_stride;
        v0 = _mm256_add_ps(v0, cols.load0(rr));
        v1 = _mm256_add_ps(v1, cols.load1(rr));
      }
      v0 = activate(v0, ep->act, alpha, beta);
      v1 = activate(v1, ep->act, alpha, beta);
    }
    cols.store(cr, v0, v1);
  }
}

const x86::GemmMicrokernel kUkernels[kMr] = {ukernel<1>, ukernel<2>, ukernel<3>,
                                              ukernel<4>, ukernel<5>, ukernel<6>};

}  // namespace

void ds_f32_gemm__avx2(const GemmParams& p, float* workspace) {
  x86::gemm_blocked<Cfg>(p, kUkernels, workspace);
}

const GemmKernels ds_f32_gemm_kernels__avx2 = {"ds_f32_gemm_ukernel_6x16__avx2", kMr, kNr, Cfg::kKc,
                                               Cfg::kMc, Cfg::kNc, Cfg::kWorkspace, ds_f32_gemm__avx2};

}  // namespace ds
