// f32 GEMM with packed operands, fused epilogue and per-ISA microkernels (docs/kernels.md).
//
//   C[M,N] = act(A[M,K] . B[K,N] + bias + residual)
//
// C is row-major with unit column stride (rows may be padded: c_row_stride >= N). Each operand is
// either a plain strided matrix or "packed": split into panels of `mr` rows of A (or `nr` columns
// of B), each panel holding all K steps for its rows/columns with zero padding past the edge.
// Panels hold the whole K extent, so a packed operand serves any K blocking and any thread split
// aligned to the tile. Weights are packed once at load time with the session's GemmKernels.
//
// Convention for ops:
//   conv2d (NCHW, group g): A = weight [O/g, C/g*kh*kw], packed once (pack_a); B = the input
//     (1x1 stride 1: the [C, H*W] plane itself; otherwise an im2col buffer [C*kh*kw, OH*OW]),
//     passed unpacked and packed per cache block inside the GEMM; C = output [O/g, OH*OW];
//     bias per row.
//   dense: A = x [batch, K] unpacked; B = weight^T, packed once from the (M_out, K) weight with
//     pack_b(row_stride = 1, col_stride = K); C = y [batch, M_out]; bias per column.
#pragma once

#include <cmath>
#include <cstdint>

namespace ds {

// The activation codes of docs/format.md on one float (the SIMD epilogues compute the same).
inline float gemm_activate(int32_t code, float x, float alpha, float beta) {
  switch (code) {
    case 1: return x > 0.0f ? x : 0.0f;
    case 2: return std::fmin(std::fmax(x, alpha), beta);
    case 3: return x >= 0.0f ? x : alpha * x;
    case 4: return 1.0f / (1.0f + std::exp(-x));
    case 5: return std::fmax(0.0f, std::fmin(1.0f, alpha * x + beta));
    case 6: return x * std::fmax(0.0f, std::fmin(1.0f, x / 6.0f + 0.5f));
    case 7: return std::tanh(x);
    default: return x;
  }
}

struct GemmOperand {
  const float* data = nullptr;
  int64_t row_stride = 0;  // element (r, c) at data[r * row_stride + c * col_stride] when unpacked
  int64_t col_stride = 1;
  bool packed = false;     // data holds panels made by pack_a / pack_b of the same GemmKernels
};

enum GemmBias : int32_t { kGemmBiasNone = 0, kGemmBiasPerRow = 1, kGemmBiasPerCol = 2 };

struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  GemmOperand a, b;
  float* c = nullptr;
  int64_t c_row_stride = 0;
  const float* bias = nullptr;  // m (per row) or n (per column) values
  int32_t bias_kind = kGemmBiasNone;
  const float* residual = nullptr;  // C-shaped, added before the activation; must not alias c
  int64_t residual_row_stride = 0;
  int32_t act = 0;                  // activation code 0-7 (docs/format.md)
  float alpha = 0.0f, beta = 0.0f;
};

// workspace: GemmKernels::workspace_floats floats, 64-byte aligned, owned by the calling thread.
using GemmFn = void (*)(const GemmParams& p, float* workspace);

// GEMM with B given by row offsets (1x1 convolutions on the input plane itself, implicit im2col
// of stride-1 convolutions on a padded plane): C[m, n] = act(A . B + bias + residual) with A packed
// (pack_a) and B (p, j) = p.b.data[offsets[p] + at(col0 + j)]: C's columns are B's columns col0
// .. col0 + n - 1 (a thread's slice). Without a width each B row is one contiguous run, at(x) = x.
// With a width (gemm_rows_wraps), B's columns wrap as an output image's pixels do in a padded plane whose
// rows are width + skip long: at(x) = (x / width) * (width + skip) + x % width. p.b.packed and the
// strides are ignored.
// Only B's columns are read (partial tiles load with masks, the skip is never read), so B may be
// any tensor. The whole K in one pass per tile.
struct GemmRowsB {
  const int64_t* offsets = nullptr;
  int64_t width = 0, skip = 0;
  int64_t col0 = 0;
};

// Whether gemm_rows can wrap B's columns every `width` from col0 on: each 16-column vector (the
// columns col0 + 16 t ..) may cross at most one output row. Any width >= 16; a narrower one when
// every vector starts at most 2 width - 16 columns into its row (with col0 a multiple of 16:
// widths 8, 12 and 14, an 8x8 or 14x14 output).
inline bool gemm_rows_wraps(int64_t width, int64_t col0) {
  if (width >= 16) return true;
  if (width < 8) return false;
  for (int64_t t = 0; t < width; ++t)
    if ((col0 + 16 * t) % width > 2 * width - 16) return false;
  return true;
}
using GemmRowsFn = void (*)(const GemmParams& p, const GemmRowsB& b);

// One ISA level's GEMM: its tile and cache blocking.
struct GemmKernels {
  const char* name;           // the microkernel, e.g. "ds_f32_gemm_12x32__avx512"
  int32_t mr, nr;             // register tile: rows of A, columns of B
  int64_t kc, mc, nc;         // cache blocks over K, M, N (0: not blocked)
  int64_t workspace_floats;   // per thread
  GemmFn gemm;
  GemmRowsFn gemm_rows = nullptr;  // where the level has one
  // gemm_rows reads a column panel's B rows again for every row tile: conv2d's implicit im2col
  // pays against a packed im2col only while M x (distinct B rows of a panel) is at most this
  // (0: no bound). Measured per level (docs/kernels.md, "gemm_rows").
  int64_t rows_reuse_limit = 0;
  // gemm_rows streams the packed A once per column panel: conv2d's direct 1x1 pays only while A
  // (m x k) is at most this many floats, so that it stays in L2 across the panels (0: no bound).
  int64_t rows_a_floats = 0;
};

// Packing (src/kernels/ref/f32-gemm-pack.cc): `rows` rows of `depth` steps into ceil(rows/tile)
// panels of depth*tile floats: dst[p*depth*tile + d*tile + r] = src[(p*tile+r)*row_stride +
// d*depth_stride], zero past `rows`.
int64_t ds_f32_gemm_packed_size(int64_t tile, int64_t rows, int64_t depth);
void ds_f32_gemm_pack(int64_t tile, int64_t rows, int64_t depth, const float* src, int64_t row_stride,
                      int64_t depth_stride, float* dst);

// A [m, k] with element (i, p) at a[i*row_stride + p*col_stride].
inline int64_t gemm_packed_a_size(const GemmKernels& g, int64_t m, int64_t k) {
  return ds_f32_gemm_packed_size(g.mr, m, k);
}
inline void gemm_pack_a(const GemmKernels& g, int64_t m, int64_t k, const float* a, int64_t row_stride,
                        int64_t col_stride, float* dst) {
  ds_f32_gemm_pack(g.mr, m, k, a, row_stride, col_stride, dst);
}
// B [k, n] with element (p, j) at b[p*row_stride + j*col_stride].
inline int64_t gemm_packed_b_size(const GemmKernels& g, int64_t k, int64_t n) {
  return ds_f32_gemm_packed_size(g.nr, n, k);
}
inline void gemm_pack_b(const GemmKernels& g, int64_t k, int64_t n, const float* b, int64_t row_stride,
                        int64_t col_stride, float* dst) {
  ds_f32_gemm_pack(g.nr, n, k, b, col_stride, row_stride, dst);
}

// The sub-problem rows [m0, m1) x columns [n0, n1) of p: m0 must be a multiple of mr when A is
// packed, n0 a multiple of nr when B is packed. Used to split a GEMM across threads.
inline GemmParams gemm_slice(const GemmParams& p, int32_t mr, int32_t nr, int64_t m0, int64_t m1,
                             int64_t n0, int64_t n1) {
  GemmParams s = p;
  s.m = m1 - m0;
  s.n = n1 - n0;
  s.a.data += p.a.packed ? (m0 / mr) * mr * p.k : m0 * p.a.row_stride;
  s.b.data += p.b.packed ? (n0 / nr) * nr * p.k : n0 * p.b.col_stride;
  s.c += m0 * p.c_row_stride + n0;
  if (p.bias) s.bias += p.bias_kind == kGemmBiasPerRow ? m0 : n0;
  if (p.residual) s.residual += m0 * p.residual_row_stride + n0;
  return s;
}

// Implementations (scalar: naive loops, the oracle; reads packed operands with tile 1x1).
void ds_f32_gemm__scalar(const GemmParams& p, float* workspace);
void ds_f32_gemm__avx2(const GemmParams& p, float* workspace);
void ds_f32_gemm__avx512(const GemmParams& p, float* workspace);
void ds_f32_gemm_rows__avx2(const GemmParams& p, const GemmRowsB& b);
void ds_f32_gemm_rows__avx512(const GemmParams& p, const GemmRowsB& b);
extern const GemmKernels ds_f32_gemm_kernels__scalar;
extern const GemmKernels ds_f32_gemm_kernels__avx2;
extern const GemmKernels ds_f32_gemm_kernels__avx512;

}  // namespace ds
