// The elementwise kernels shared by the x86 levels (add/sub/mul/div with broadcasting, relu, the
// activation op), instantiated in each ISA's translation unit with its vector type V (so each is
// compiled with that ISA's flags). Results equal the scalar kernels bit for bit: the same IEEE
// operation per element, no FMA contraction, sigmoid and tanh through the same scalar function.
#pragma once

// GCC would fuse hard sigmoid's alpha * x + beta into an FMA, which rounds differently from the
// scalar kernel's multiply then add.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/ref/activation.h"

namespace ds {
namespace x86 {

#if defined(__AVX2__)
struct V256 {
  using T = __m256;
  static constexpr int kWidth = 8;
  static __m256i mask(int64_t n) {  // lanes [0, n) set
    static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + 8 - n));
  }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T load_n(const float* p, int64_t n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store_n(float* p, int64_t n, T v) { _mm256_maskstore_ps(p, mask(n), v); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T add(T u, T v) { return _mm256_add_ps(u, v); }
  static T sub(T u, T v) { return _mm256_sub_ps(u, v); }
  static T mul(T u, T v) { return _mm256_mul_ps(u, v); }
  static T div(T u, T v) { return _mm256_div_ps(u, v); }
  static T fma(T u, T v, T w) { return _mm256_fmadd_ps(u, v, w); }
  static T max(T u, T v) { return _mm256_max_ps(u, v); }
  static T min(T u, T v) { return _mm256_min_ps(u, v); }
  static T leaky(T v, T alpha) {
    return _mm256_blendv_ps(v, _mm256_mul_ps(v, alpha), _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
};
#endif

#if defined(__AVX512F__)
struct V512 {
  using T = __m512;
  static constexpr int kWidth = 16;
  static __mmask16 mask(int64_t n) { return __mmask16((1u << n) - 1); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store_n(float* p, int64_t n, T v) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T add(T u, T v) { return _mm512_add_ps(u, v); }
  static T sub(T u, T v) { return _mm512_sub_ps(u, v); }
  static T mul(T u, T v) { return _mm512_mul_ps(u, v); }
  static T div(T u, T v) { return _mm512_div_ps(u, v); }
  static T fma(T u, T v, T w) { return _mm512_fmadd_ps(u, v, w); }
  static T max(T u, T v) { return _mm512_max_ps(u, v); }
  static T min(T u, T v) { return _mm512_min_ps(u, v); }
  static T leaky(T v, T alpha) {
    return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, alpha);
  }
};
#endif

// V provides: T, kWidth, load/store (full), load_n/store_n (first n < kWidth lanes), set1, add,
// sub, mul, div, max, min, and leaky (x < 0 ? a * x : x).
template <class V>
struct VAct {
  typename V::T alpha, beta;
  int32_t kind;
  explicit VAct(const Activation& a) : alpha(V::set1(a.alpha)), beta(V::set1(a.beta)), kind(a.kind) {}
  // Codes 4 and 7 (sigmoid, tanh) pass through: scalar_pass() applies them afterwards.
  typename V::T operator()(typename V::T v) const {
    const typename V::T zero = V::set1(0.0f), one = V::set1(1.0f);
    switch (kind) {
      case kActRelu: return V::max(v, zero);  // max(x, 0) returns 0 for -0 and NaN, as x > 0 ? x : 0
      case kActClip: return V::min(V::max(v, alpha), beta);
      case kActLeakyRelu: return V::leaky(v, alpha);
      // min/max return their second operand when one is NaN: ordered to give fmin/fmax's results.
      case kActHardSigmoid: return V::max(V::min(V::add(V::mul(alpha, v), beta), one), zero);
      case kActHardSwish:
        return V::mul(v, V::max(V::min(V::add(V::div(v, V::set1(6.0f)), V::set1(0.5f)), one), zero));
      default: return v;
    }
  }
  bool scalar_pass() const { return kind == kActSigmoid || kind == kActTanh; }
};

template <class V, class Op>
inline void vbinary_row(int64_t n, const float* a, int64_t sa, const float* b, int64_t sb, float* y, Op op,
                        const VAct<V>& act) {
  constexpr int W = V::kWidth;
  using T = typename V::T;
  if (sa == 1 && sb == 1) {
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      V::store(y + i, act(op(V::load(a + i), V::load(b + i))));
      V::store(y + i + W, act(op(V::load(a + i + W), V::load(b + i + W))));
    }
    for (; i + W <= n; i += W) V::store(y + i, act(op(V::load(a + i), V::load(b + i))));
    if (i < n) V::store_n(y + i, n - i, act(op(V::load_n(a + i, n - i), V::load_n(b + i, n - i))));
  } else if (sa == 0 && sb == 1) {
    const T va = V::set1(*a);
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, act(op(va, V::load(b + i))));
    if (i < n) V::store_n(y + i, n - i, act(op(va, V::load_n(b + i, n - i))));
  } else if (sa == 1 && sb == 0) {
    const T vb = V::set1(*b);
    int64_t i = 0;
    for (; i + W <= n; i += W) V::store(y + i, act(op(V::load(a + i), vb)));
    if (i < n) V::store_n(y + i, n - i, act(op(V::load_n(a + i, n - i), vb)));
  } else {
    // Other strides (an input transposed by broadcasting, or both broadcast): lane by lane.
    for (int64_t i = 0; i < n; ++i) {
      const T r = act(op(V::set1(a[i * sa]), V::set1(b[i * sb])));
      V::store_n(y + i, 1, r);
    }
  }
}

// Merges adjacent axes that both inputs walk contiguously (or both broadcast) and drops size-1
// axes, so a same-shape add is one row and a per-channel op is [C, H*W].
inline BinaryParams collapse(const BinaryParams& p) {
  BinaryParams q = p;
  int r = 0;
  for (int k = 0; k < p.rank; ++k) {
    if (p.dims[k] == 1) continue;
    if (r > 0 && q.a_strides[r - 1] == p.a_strides[k] * p.dims[k] &&
        q.b_strides[r - 1] == p.b_strides[k] * p.dims[k]) {
      q.dims[r - 1] *= p.dims[k];
      q.a_strides[r - 1] = p.a_strides[k];
      q.b_strides[r - 1] = p.b_strides[k];
      continue;
    }
    q.dims[r] = p.dims[k];
    q.a_strides[r] = p.a_strides[k];
    q.b_strides[r] = p.b_strides[k];
    ++r;
  }
  if (r == 0) {
    q.dims[0] = 1;
    q.a_strides[0] = q.b_strides[0] = 0;
    r = 1;
  }
  q.rank = r;
  return q;
}

template <class V, class Op>
void vbinary(const BinaryParams& p0, const float* a, const float* b, float* y, Op op) {
  const BinaryParams p = collapse(p0);
  const VAct<V> act(p.act);
  const int last = p.rank - 1;
  const int64_t n = p.dims[last], sa = p.a_strides[last], sb = p.b_strides[last];
  int64_t index[kMaxRank] = {0};
  int64_t rows = 1;
  for (int k = 0; k < last; ++k) rows *= p.dims[k];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t ia = 0, ib = 0;
    for (int k = 0; k < last; ++k) ia += index[k] * p.a_strides[k], ib += index[k] * p.b_strides[k];
    vbinary_row<V>(n, a + ia, sa, b + ib, sb, y, op, act);
    if (act.scalar_pass())
      for (int64_t i = 0; i < n; ++i) y[i] = ref_activate(p.act, y[i]);
    y += n;
    for (int k = last - 1; k >= 0; --k) {  // next row
      if (++index[k] < p.dims[k]) break;
      index[k] = 0;
    }
  }
}

template <class V>
void vactivation(int64_t n, const Activation& a, const float* x, float* y) {
  if (a.kind == kActSigmoid || a.kind == kActTanh) {
    for (int64_t i = 0; i < n; ++i) y[i] = ref_activate(a, x[i]);
    return;
  }
  constexpr int W = V::kWidth;
  const VAct<V> act(a);
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V::store(y + i, act(V::load(x + i)));
    V::store(y + i + W, act(V::load(x + i + W)));
  }
  for (; i + W <= n; i += W) V::store(y + i, act(V::load(x + i)));
  if (i < n) V::store_n(y + i, n - i, act(V::load_n(x + i, n - i)));
}

}  // namespace x86
}  // namespace ds

// Defines the kernels of one level from its vector type (in the ISA's .cc file).
#define DS_DEFINE_VBINARY_KERNELS(V, isa)                                                              \
  void ds_f32_vadd__##isa(const BinaryParams& p, const float* a, const float* b, float* y) {          \
    x86::vbinary<V>(p, a, b, y, [](V::T u, V::T v) { return V::add(u, v); });                        \
  }                                                                                                    \
  void ds_f32_vsub__##isa(const BinaryParams& p, const float* a, const float* b, float* y) {          \
    x86::vbinary<V>(p, a, b, y, [](V::T u, V::T v) { return V::sub(u, v); });                        \
  }                                                                                                    \
  void ds_f32_vmul__##isa(const BinaryParams& p, const float* a, const float* b, float* y) {          \
    x86::vbinary<V>(p, a, b, y, [](V::T u, V::T v) { return V::mul(u, v); });                        \
  }                                                                                                    \
  void ds_f32_vdiv__##isa(const BinaryParams& p, const float* a, const float* b, float* y) {          \
    x86::vbinary<V>(p, a, b, y, [](V::T u, V::T v) { return V::div(u, v); });                        \
  }

#define DS_DEFINE_ACTIVATION_KERNELS(V, isa)                                                           \
  void ds_f32_activation__##isa(int64_t n, const Activation& act, const float* x, float* y) {         \
    x86::vactivation<V>(n, act, x, y);                                                                 \
  }                                                                                                    \
  void ds_f32_relu__##isa(int64_t n, const float* x, float* y) {                                      \
    Activation relu;                                                                                   \
    relu.kind = kActRelu;                                                                              \
    x86::vactivation<V>(n, relu, x, y);                                                                \
  }
