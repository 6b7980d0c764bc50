// Compile-time unrolling for register-blocked kernels: arrays of SIMD vectors indexed only through
// unroll<N>'s constant index stay in registers at any optimisation level (a runtime loop index
// that the compiler does not fully unroll, e.g. at -O2, puts the whole array on the stack).
#pragma once

#include <type_traits>
#include <utility>

#define DS_ALWAYS_INLINE __attribute__((always_inline)) inline
// For a lambda that must be inlined into its caller: [&](auto i) DS_ALWAYS_INLINE_LAMBDA { ... }.
#define DS_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))

namespace ds {

template <class F, int... Is>
DS_ALWAYS_INLINE void unroll_seq(F&& f, std::integer_sequence<int, Is...>) {
  (f(std::integral_constant<int, Is>{}), ...);
}

// f(std::integral_constant<int, i>{}) for i = 0 .. N-1, in order.
template <int N, class F>
DS_ALWAYS_INLINE void unroll(F&& f) {
  unroll_seq(f, std::make_integer_sequence<int, N>{});
}

}  // namespace ds
