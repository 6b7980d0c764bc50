// conv2d (op id 1): x (N,C,H,W), weight (O,C/group,kh,kw), optional bias (O).
//
// With a constant weight the session prepares one of these paths (docs/kernels.md, "conv2d"):
//   - depthwise 3x3 (group == C == O, stride 1 or 2, no dilation): the table's dwconv3x3 kernel
//     per channel plane, planes split across threads;
//   - 1x1, stride 1, no padding: GEMM on the [C/g, H*W] input plane itself, read in place by
//     the level's gemm_rows (direct_1x1), else its columns packed block by block as in the im2col
//     path;
//   - few output pixels per channel (N = OH*OW <= 4 * O/group, from the input's declared H, W;
//     for 1x1 see pixels_pay): Y^T = im2col^T . W^T with pixels as GEMM rows, then a transpose
//     into NCHW;
//   - 3x3, stride 1, dilation 1, group 1 where it pays (winograd_rule): Winograd F(4x4, 3x3), the
//     filter transformed and packed once, 36 GEMMs per block of tiles between the table's tile
//     transforms; a larger kernel (6x6 by the rule, up to 9x9 when tuned or forced) as 3x3
//     pieces, each piece a channel of its own over the input shifted by its offset; F(2x2, 3x3)
//     (16 GEMMs, kernel "winograd23") where F(4x4)'s tiles are too few, or deepslim tune measures
//     it faster;
//   - 1x1 with stride > 1 (no padding): the strided pixels gathered into a compact plane, then
//     the 1x1 GEMM;
//   - anything else: the input rewritten once as its column phases (stride s: every s-th column),
//     then im2col written straight into packed GEMM panels with contiguous copies, one block of
//     output columns per task, then the GEMM on it with the weight packed once at session creation.
// Bias and the fused activation run in the GEMM epilogue. Without a constant weight the scalar
// reference kernel runs.
//
// A fourth input (kResidualInput, declared in the OpDef), which only the session passes (never a
// graph), is a residual of the output's shape added before the activation: the session fuses
// conv2d -> add into one node that way. A direct 1x1 node may also run the depthwise 3x3 node
// that feeds it (fuse_producer): inputs kProducerInput.. are then the depthwise node's input,
// weight and bias, and the 1x1's own input is never written (run_depthwise_1x1).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/error.h"
#include "common/huge_page_buffer.h"
#include "core/dispatch.h"
#include "ops/op.h"
#include "ops/parallel.h"

namespace ds {
namespace {

// Input 3 (after the bias): the residual the session passes when it fuses a following add
// (OpDef::residual_input).
constexpr int kResidualInput = 3;
// Inputs 4-6: the input, weight and bias of a depthwise 3x3 node this 1x1 node runs first
// (OpDef::producer_input).
constexpr int kProducerInput = 4;

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "conv2d");
  OpParams p;
  parse_conv_window(a, p);
  p.act = parse_epilogue(a);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.size() != 4)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  if (w.size() != 4)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): weight ", shape_str(w), " is not rank 4 (O,C/group,kh,kw)");
  if (x[1] % p.group != 0 || w[0] % p.group != 0 || w[1] != x[1] / p.group)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): weight ", shape_str(w), " does not fit input ",
         shape_str(x), " with group ", p.group);
  if (in.size() > 2 && in[2] && (in[2]->size() != 1 || (*in[2])[0] != w[0]))
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): bias ", shape_str(*in[2]), " is not [", w[0], "]");
  if (w[2] > kMaxWindowParam || w[3] > kMaxWindowParam)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): kernel ", shape_str(w), " is too large");
  const int64_t oh = window_output_size(x[2], p.pads[0], p.pads[2], w[2], p.strides[0], p.dilations[0], false);
  const int64_t ow = window_output_size(x[3], p.pads[1], p.pads[3], w[3], p.strides[1], p.dilations[1], false);
  if (oh < 1 || ow < 1)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): kernel ", w[2], "x", w[3],
         " (with dilation and pads) does not fit input ", shape_str(x));
  return {x[0], w[0], oh, ow};
}

Conv2dParams conv_params(const OpParams& p, const Shape& x, const Shape& w, const Shape& os) {
  Conv2dParams c;
  c.n = x[0], c.c = x[1], c.h = x[2], c.w = x[3];
  c.o = os[1], c.oh = os[2], c.ow = os[3];
  c.kh = w[2], c.kw = w[3];
  c.stride_h = p.strides[0], c.stride_w = p.strides[1];
  c.pad_top = p.pads[0], c.pad_left = p.pads[1];
  c.dil_h = p.dilations[0], c.dil_w = p.dilations[1];
  c.group = p.group;
  c.act = p.act;
  return c;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os, const KernelTable& k) {
  const Conv2dParams c = conv_params(p, *in[0].shape, *in[1].shape, os);
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  k.conv2d(c, in[0].data, in[1].data, bias, out);
}

// ---- prepared paths ----

// kGemmPixels computes Y^T = im2col^T . W^T (output pixels as GEMM rows, channels as columns)
// then transposes Y^T into the NCHW output: with few pixels per channel (deep layers, N <= 4 M)
// the weight streams once as packed B panels, and the 12x32 tile is filled across channels
// instead of being cut by a short row (measured 1.1-1.6x faster on ResNet-18's stages 1-3).
//
// kGemm1x1Strided (1x1, stride > 1, no padding) first gathers the strided input pixels into a
// compact [C, OH*OW] plane, then runs the 1x1 GEMM on it: the im2col of a 1x1 conv is that gather,
// without the panel-by-panel copies and (in the pixels orientation) the transpose.
enum class Path { kDepthwise3x3, kGemm1x1, kGemm1x1Strided, kGemmIm2col, kGemmPixels, kWinograd };

struct State {
  Path path;
  const GemmKernels* g;
  const WinogradKernels* wk = nullptr;
  int64_t m, k;               // per group: output channels, C/group * kh * kw
  int64_t group_floats;       // packed weight floats per group
  HugePageBuffer storage;     // the packed weights (common/huge_page_buffer.h), at `packed`
  const float* packed = nullptr;
};

// Packed im2col blocks: at most this many floats (2 MB: the GEMM streams them panel by panel, so
// they need not fit in L2) and the GEMM's nc columns.
constexpr int64_t kIm2colBlockFloats = 512 * 1024;
constexpr int64_t kIm2colMaxColumns = 768;

// How the im2col path splits one (image, group) GEMM [m x k] . [k x n] into tasks: column blocks
// of whole nr-wide panels and row chunks of whole mr-high tiles. Threads share the columns when
// the weight is the smaller operand (m <= n), about kPiecesPerThread blocks each (while there are
// panels), and the rows otherwise, one chunk each, so the larger operand is read once; a row
// chunk repeats the im2col of its block, which costs k*n against m*k*n.
struct Im2colSplit {
  int64_t block_panels, blocks;
  int64_t chunk_rows, chunks;
  int64_t thread_floats;  // per-thread workspace: the GEMM's, then one packed block
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

Im2colSplit split_im2col(const GemmKernels& g, int64_t m, int64_t k, int64_t n, int threads) {
  Im2colSplit s;
  const int64_t panels = ceil_div(n, g.nr), m_tiles = ceil_div(m, g.mr);
  const int64_t cap = std::max<int64_t>(1, std::min(kIm2colBlockFloats / (k * g.nr), kIm2colMaxColumns / g.nr));
  int64_t blocks = ceil_div(panels, cap), chunks = 1;
  if (threads > 1) {
    if (m > n && m_tiles >= threads) chunks = threads;
    else blocks = std::min(panels, std::max(blocks, kPiecesPerThread * threads));
  }
  s.block_panels = ceil_div(panels, blocks);
  s.blocks = ceil_div(panels, s.block_panels);
  s.chunk_rows = ceil_div(m_tiles, chunks) * g.mr;
  s.chunks = ceil_div(m, s.chunk_rows);
  s.thread_floats = round16(g.workspace_floats) + round16(s.block_panels * g.nr * k);
  return s;
}

// Copies of the short runs (at most nr or mr floats) im2col moves; 16-byte vectors where the
// baseline has them (this file is not compiled per ISA level).
inline void zero_run(float* dst, int64_t n) {
  int64_t t = 0;
#if defined(__SSE2__)
  for (; t + 4 <= n; t += 4) _mm_storeu_ps(dst + t, _mm_setzero_ps());
#endif
  for (; t < n; ++t) dst[t] = 0.0f;
}

// dst[t] = src[t], t < n.
inline void copy_run(float* dst, const float* src, int64_t n) {
  int64_t t = 0;
#if defined(__SSE2__)
  for (; t + 8 <= n; t += 8) {
    const __m128 a = _mm_loadu_ps(src + t), b = _mm_loadu_ps(src + t + 4);
    _mm_storeu_ps(dst + t, a);
    _mm_storeu_ps(dst + t + 4, b);
  }
  for (; t + 4 <= n; t += 4) _mm_storeu_ps(dst + t, _mm_loadu_ps(src + t));
#endif
  for (; t < n; ++t) dst[t] = src[t];
}

// dst[t] = src[2 t], t < n; reads nothing past src[2 (n - 1)].
inline void copy_run_stride2(float* dst, const float* src, int64_t n) {
  int64_t t = 0;
#if defined(__SSE2__)
  for (; t + 5 <= n; t += 4) {  // reads src[2t .. 2t + 7]
    const __m128 a = _mm_loadu_ps(src + 2 * t), b = _mm_loadu_ps(src + 2 * t + 4);
    _mm_storeu_ps(dst + t, _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
  }
#endif
  for (; t < n; ++t) dst[t] = src[2 * t];
}

// Columns [j0, j0 + cols) of the matrix src [k rows, row_stride apart] as packed B panels of nr
// columns: dst[q*k*nr + d*nr + r] = src[d*row_stride + j0 + q*nr + r], zero past cols.
void pack_panels(const float* src, int64_t row_stride, int64_t k, int64_t j0, int64_t cols, int64_t nr, float* dst) {
  for (int64_t q = 0; q * nr < cols; ++q) {
    const int64_t n = std::min(nr, cols - q * nr);
    const float* sq = src + j0 + q * nr;
    float* o = dst + q * k * nr;
    for (int64_t d = 0; d < k; ++d, o += nr) {
      copy_run(o, sq + d * row_stride, n);
      if (n < nr) zero_run(o + n, nr - n);
    }
  }
}

// Output rows the GEMM's vectors can wrap over (gemm_rows_wraps: at least 16 wide, or 8, 12, 14;
// the tasks' columns start at multiples of nr) run the implicit path with wrapping GEMM columns
// (gemm.h, GemmRowsB::width); narrower ones over the padded rows, then compacted.
bool rows_wrap(const Conv2dParams& c) { return gemm_rows_wraps(c.ow, 0); }

// ---- im2col blocks from column phases ----
//
// The im2col path first rewrites the input (once per image, shared by the tasks) as its column
// phases: for stride s along W, phase px of row yy holds the zero-padded row's columns px, px + s,
// px + 2s, ... Tap (ky, kx) of output pixel (oy, ox) is then phase (kx*dil_w) % s, row
// oy*stride_h + ky*dil_h, column ox + (kx*dil_w) / s: every run of an output row is a plain
// contiguous copy without bounds checks (for stride 1 the one phase is the padded plane).
// With row phases too (the implicit im2col at stride_h > 1), phase (py, px) row r holds padded
// row r*stride_h + py: tap (ky, kx) of (oy, ox) is then row oy + (ky*dil_h) / stride_h, column
// ox + (kx*dil_w) / stride_w of phase ((ky*dil_h) % stride_h, (kx*dil_w) % stride_w), so output
// pixel (oy, ox) sits at oy*wq + ox plus a per-tap offset, whatever the stride.
struct Phases {
  int64_t sh, s, hp, wq;  // row phases, column phases, rows and columns per phase
  int64_t floats() const { return sh * s * hp * wq; }  // per channel
};

Phases column_phases(const Conv2dParams& c, bool row_phases = false) {
  Phases q;
  q.sh = row_phases ? c.stride_h : 1;
  q.s = c.stride_w;
  q.hp = row_phases ? c.oh + (c.kh - 1) * c.dil_h / c.stride_h : (c.oh - 1) * c.stride_h + (c.kh - 1) * c.dil_h + 1;
  q.wq = c.ow + (c.kw - 1) * c.dil_w / c.stride_w;
  return q;
}

// Convolutions on a level with GemmKernels::gemm_rows: implicit im2col. With output rows the
// GEMM can wrap over (rows_wrap; any stride) the GEMM's columns are the output pixels, wrapping at each
// output row over the phases' extra columns (GemmRowsB::width), so row d = (ci, ky, kx) of B is
// the phases from the tap's offset and the result is the NCHW output: no im2col copy, no
// compaction. Measured 1 thread, ms, packed im2col vs implicit (BENCH_P10=1 bench_conv layer,
// DS_CONV_WINOGRAD=0, medians of 3): the stems 3x224x224 -> 64 3x3 s2 (SqueezeNet 1.1) 0.289 vs
// 0.263, -> 32 s2 p1 (MobileNet V2) 0.177 vs 0.147, -> 64 7x7 s2 p3 (ResNet-18) 1.39 vs 1.17;
// 16x55x55 -> 64 3x3 0.328 vs 0.269; 64x27x27 -> 32 3x3 0.209 vs 0.133.
// Narrower stride-1 layers: the GEMM runs
// over the padded plane's full rows (n' = oh * wq columns, column oy*wq + x for x < wq; those
// with x >= ow are computed and dropped), so row d = (ci, ky, kx) of B is the padded plane itself
// from offset ci*hp*wq + ky*dil_h*wq + kx*dil_w: no im2col copy at all. Then the [o, n'] result is
// compacted into NCHW (adding the residual, if any). It saves the im2col copy (k*n floats) and
// adds the compaction (m*n) and the dropped columns, so it runs where k >= 3m and the dropped
// columns cost at most a quarter extra (wq <= 1.25 ow). Measured 1 thread, ms, packed vs implicit
// (bench_conv layer): FaceNet-1M 16x41x41 -> 48 6x6 0.48 vs 0.40, 1x88x88 -> 16 7x7 0.107 vs
// 0.071; 64x27x27 -> 32 3x3 0.26 vs 0.23; 32x30x30 -> 32 5x5 p2 0.55 vs 0.33; LeNet-5 1x28x28 -> 6
// 5x5 p2 0.0079 vs 0.0036; but SqueezeNet 1.1 16x55x55 -> 64 3x3 (k = 2.25 m) 0.156 vs 0.166.
// DS_CONV_ROWS=0 turns it off.
// The distinct B rows a gemm_rows panel of the implicit im2col reads: per channel one per tap
// row and column phase.
int64_t implicit_b_rows(int64_t cg, int64_t kh, int64_t kw, int64_t dil_w, int64_t stride_w) {
  int64_t phases = 0;
  for (int64_t px = 0; px < stride_w; ++px)
    for (int64_t kx = 0; kx < kw; ++kx)
      if ((kx * dil_w) % stride_w == px) {
        ++phases;
        break;
      }
  return cg * kh * phases;
}

// Whether the level's gemm_rows pays for a layer of m output channels (per group) over b_rows
// distinct B rows (GemmKernels::rows_reuse_limit) of an input of in_floats per group. An input
// of at most kRowsSmallInputFloats (64 KB) stays near L1 whatever a panel reads: at AVX2
// FaceNet-1M conv3 (48 x 12 x 12 -> 96 5x5, 96 x 240 rows) in place 0.152 ms, packed im2col
// 0.190, pixels as rows 0.224 (BENCH_P10=1 bench_conv layer 48 12 12 96 5 1 0 1, 3 alternating
// runs).
constexpr int64_t kRowsSmallInputFloats = 16 * 1024;

bool rows_reuse_pays(const GemmKernels& g, int64_t m, int64_t b_rows, int64_t in_floats) {
  return !g.rows_reuse_limit || m * b_rows <= g.rows_reuse_limit || in_floats <= kRowsSmallInputFloats;
}

bool implicit_rows(const GemmKernels& g, const Conv2dParams& c, int64_t m, int64_t k) {
  if (!g.gemm_rows) return false;
  const char* force = std::getenv("DS_CONV_ROWS");
  if (force && force[0] == '0') return false;
  if (!rows_reuse_pays(g, m, implicit_b_rows(c.c / c.group, c.kh, c.kw, c.dil_w, rows_wrap(c) ? c.stride_w : 1),
                       c.c / c.group * c.h * c.w))
    return false;
  if (rows_wrap(c)) return true;
  if (c.stride_h != 1 || c.stride_w != 1 || k < 3 * m) return false;
  const int64_t wq = c.ow + (c.kw - 1) * c.dil_w;
  return wq * 4 <= c.ow * 5;
}

// 1x1 convolutions (stride 1, or after the strided gather) on a level with gemm_rows read B, the
// [C/g, H*W] plane, in place: row q at offset q * H*W, no packed copy of the input (which cost
// K x N floats per call: 10-30% of the small-N layers of MobileNet V2 and SqueezeNet 1.1).
// DS_CONV_ROWS=0 turns it off (and the implicit im2col with it). gemm_rows streams the whole
// packed weight (m x k) once per column panel, so on a level with GemmKernels::rows_a_floats a
// larger weight keeps the packed plane (M blocks of the weight reused across the panels).
bool rows_on(const GemmKernels& g) {
  if (!g.gemm_rows) return false;
  const char* force = std::getenv("DS_CONV_ROWS");
  return !(force && force[0] == '0');
}
bool direct_1x1(const GemmKernels& g, int64_t m, int64_t k) {
  return rows_on(g) && (!g.rows_a_floats || m * k <= g.rows_a_floats);
}

// Tasks of the direct 1x1 GEMM: column ranges of whole nr panels x row ranges of whole mr tiles.
// One task on one thread; else about 4 per thread, so that the dynamic hand-out evens out the
// edge tiles, cut along the columns while there are enough panels, then along the rows too (7x7
// and 14x14 layers have 2 and 7 panels). The panels (tiles) are dealt out evenly, the ranges
// differing by at most one: FaceNet-1M's conv2 (41 panels) was 7 tasks of 6 panels and 5, which
// left one thread 23 panels against 18 at 2 threads; now 8 tasks of 5-6 panels.
struct Direct1x1Split {
  int64_t panels, col_tasks, m_tiles, row_tasks;
  int64_t tasks() const { return col_tasks * row_tasks; }
  // Columns [j0, j1) and rows [m0, m1) of a task, for n columns and m rows.
  void ranges(const GemmKernels& g, int64_t task, int64_t n, int64_t m, int64_t& j0, int64_t& j1, int64_t& m0,
              int64_t& m1) const {
    const int64_t ct = task % col_tasks, rt = task / col_tasks;
    j0 = std::min(n, ct * panels / col_tasks * g.nr), j1 = std::min(n, (ct + 1) * panels / col_tasks * g.nr);
    m0 = std::min(m, rt * m_tiles / row_tasks * g.mr), m1 = std::min(m, (rt + 1) * m_tiles / row_tasks * g.mr);
  }
};

Direct1x1Split split_direct_1x1(const GemmKernels& g, int64_t m, int64_t n, int threads) {
  const int64_t panels = ceil_div(n, g.nr), m_tiles = ceil_div(m, g.mr), want = threads > 1 ? kPiecesPerThread * threads : 1;
  int64_t col_tasks = 1, row_tasks = 1;
  if (want > 1) {
    if (panels >= want) col_tasks = want;
    else {
      col_tasks = panels;
      row_tasks = std::min(m_tiles, ceil_div(want, panels));
    }
  }
  return {panels, col_tasks, m_tiles, row_tasks};
}

// Workspace of the implicit path after the phases: the zeroed tail the last rows' dropped columns
// read, the k offsets (int64), the [o, n'] result.
int64_t rows_tail_floats(const Conv2dParams& c, int64_t nr) { return round16((c.kw - 1) * c.dil_w + nr + 16); }

// The wrapping GEMM's B rows (ci, ky, kx) over the row and column phases of column_phases(c,
// true): the tap's phase plus its row and column inside it (GemmRowsB::offsets, c.c / c.group).
void wrap_offsets(const Conv2dParams& c, const Phases& ph, int64_t* offs) {
  for (int64_t ci = 0, d = 0; ci < c.c / c.group; ++ci)
    for (int64_t ky = 0; ky < c.kh; ++ky)
      for (int64_t kx = 0; kx < c.kw; ++kx, ++d) {
        const int64_t dy = ky * c.dil_h, dx = kx * c.dil_w;
        offs[d] = (((ci * ph.sh + dy % ph.sh) * ph.s + dx % ph.s) * ph.hp + dy / ph.sh) * ph.wq + dx / ph.s;
      }
}

// At stride 1 without padding the one phase is the input itself (a 1x1, or a window that fits).
bool phases_are_input(const Conv2dParams& c, const Phases& ph) {
  return ph.sh == 1 && ph.s == 1 && c.pad_top == 0 && c.pad_left == 0 && ph.hp == c.h && ph.wq == c.w;
}

// Row phases [u0, u1) of one image (u = ci*sh + py: a channel's row phases, so that a stem of 3
// channels at stride 2 splits into 6 pieces) into their column phases:
// out[(((ci*sh + py)*s + px)*hp + r)*wq + j] = x[ci][r*sh + py - pad_top][j*s + px - pad_left],
// zero outside the input.
void build_phases(const Conv2dParams& c, const Phases& q, const float* x, int64_t u0, int64_t u1, float* out) {
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t ci = u / q.sh, py = u % q.sh;
    const float* xc = x + ci * c.h * c.w;
    for (int64_t px = 0; px < q.s; ++px) {
      // Columns j with the input column j*s + px - pad_left inside [0, w).
      const int64_t first = px - c.pad_left;  // input column of j = 0
      const int64_t lo = std::min(q.wq, first >= 0 ? 0 : ceil_div(-first, q.s));
      const int64_t hi = std::max(lo, std::min(q.wq, c.w - 1 - first < 0 ? 0 : (c.w - 1 - first) / q.s + 1));
      float* o = out + ((ci * q.sh + py) * q.s + px) * q.hp * q.wq;
      for (int64_t r = 0; r < q.hp; ++r, o += q.wq) {
        const int64_t iy = r * q.sh + py - c.pad_top;
        if (iy < 0 || iy >= c.h || hi == lo) {
          zero_run(o, q.wq);
          continue;
        }
        const float* src = xc + iy * c.w + lo * q.s + first;
        zero_run(o, lo);
        if (q.s == 1) copy_run(o + lo, src, hi - lo);
        else if (q.s == 2) copy_run_stride2(o + lo, src, hi - lo);
        else
          for (int64_t j = lo; j < hi; ++j) o[j] = src[(j - lo) * q.s];
        zero_run(o + hi, q.wq - hi);
      }
    }
  }
}

// Columns [j0, j0 + cols) of one group's im2col matrix (row d = (ci, ky, kx), column j = output
// pixel oy * ow + ox) as packed B panels of nr columns: dst[q*k*nr + d*nr + r], zero past cols;
// from the group's phases ph.
void im2col_pack_phases(const Conv2dParams& c, const Phases& q, const float* ph, int64_t cg, int64_t j0, int64_t cols,
                        int64_t nr, float* dst) {
  const int64_t k = cg * c.kh * c.kw;
  struct Run {
    int64_t r, len, at;  // panel column, length, offset of the output row's first pixel in a phase
  };
  Run runs[64];
  for (int64_t pq = 0; pq * nr < cols; ++pq) {
    const int64_t n = std::min(nr, cols - pq * nr);
    int nruns = 0;
    for (int64_t r = 0, j = j0 + pq * nr; r < n;) {
      const int64_t oy = j / c.ow, ox = j % c.ow, len = std::min(c.ow - ox, n - r);
      runs[nruns++] = {r, len, oy * c.stride_h * q.wq + ox};
      r += len;
      j += len;
    }
    float* o = dst + pq * k * nr;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t ky = 0; ky < c.kh; ++ky) {
        for (int64_t kx = 0; kx < c.kw; ++kx, o += nr) {
          const int64_t dx = kx * c.dil_w;
          const float* base = ph + ((ci * q.s + dx % q.s) * q.hp + ky * c.dil_h) * q.wq + dx / q.s;
          for (int i = 0; i < nruns; ++i) copy_run(o + runs[i].r, base + runs[i].at, runs[i].len);
          if (n < nr) zero_run(o + n, nr - n);
        }
      }
    }
  }
}

// ---- pixels as rows: im2col^T from a padded plane ----
//
// The pixels path packs im2col^T as A panels of mr pixels (mr = 12 or 6), where a panel often
// spans two or three output rows: run-by-run copies with bounds checks cost ~2 cycles a float.
// Instead the input is first copied once into a zero-padded plane holding every window (skipped
// when no window leaves the input), and each (channel, tap) row of a panel is mr loads at offsets
// computed once per panel.
struct PaddedPlane {
  int64_t hp, wp;  // rows and columns the windows reach
  bool copy;       // false: the input itself (no padding needed)
};

PaddedPlane padded_plane(const Conv2dParams& c) {
  PaddedPlane q;
  q.hp = (c.oh - 1) * c.stride_h + (c.kh - 1) * c.dil_h + 1;
  q.wp = (c.ow - 1) * c.stride_w + (c.kw - 1) * c.dil_w + 1;
  q.copy = c.pad_top > 0 || c.pad_left > 0 || q.hp > c.h || q.wp > c.w;
  if (!q.copy) q.hp = c.h, q.wp = c.w;
  return q;
}

// Channels [c0, c1) of one image: p[ci][yy][xx] = x[ci][yy - pad_top][xx - pad_left], zero outside.
void pad_plane(const Conv2dParams& c, const PaddedPlane& q, const float* x, int64_t c0, int64_t c1, float* p) {
  const int64_t x0 = std::min(c.pad_left, q.wp), x1 = std::min(c.pad_left + c.w, q.wp);
  for (int64_t ci = c0; ci < c1; ++ci) {
    const float* xc = x + ci * c.h * c.w;
    float* pc = p + ci * q.hp * q.wp;
    for (int64_t yy = 0; yy < q.hp; ++yy) {
      float* row = pc + yy * q.wp;
      const int64_t iy = yy - c.pad_top;
      if (iy < 0 || iy >= c.h) {
        zero_run(row, q.wp);
        continue;
      }
      zero_run(row, x0);
      copy_run(row + x0, xc + iy * c.w, x1 - x0);
      zero_run(row + x1, q.wp - x1);
    }
  }
}

// The pixels path's workspace starts with the padded plane, which the GEMM's workspace then reuses
// (the plane is read before the GEMM starts).
int64_t pixels_head_floats(const GemmKernels& g, const Conv2dParams& c, int threads) {
  const PaddedPlane q = padded_plane(c);
  return round16(std::max(gemm_workspace_floats(g, threads), q.copy ? c.c * q.hp * q.wp : 0));
}

template <int MR>
inline void gather_row(float* dst, const float* src, const int64_t* idx) {
  for (int r = 0; r < MR; ++r) dst[r] = src[idx[r]];
}

// Pixels [j0, j0 + cols) of one group's im2col^T as packed A panels of mr rows (mr <= 32):
// dst[q*k*mr + d*mr + r] = im2col[d][j0 + q*mr + r], zero past cols. p: the group's first channel
// of the padded plane.
void im2col_pack_rows(const Conv2dParams& c, const PaddedPlane& q, const float* p, int64_t cg, int64_t j0,
                      int64_t cols, int64_t mr, float* dst) {
  const int64_t k = cg * c.kh * c.kw, plane = q.hp * q.wp;
  int64_t idx[32], run_at[32], run_len[32];
  for (int64_t pq = 0; pq * mr < cols; ++pq) {
    const int64_t n = std::min(mr, cols - pq * mr);
    // Runs of pixels at consecutive offsets (a piece of one output row at stride 1): a panel that
    // spans 2-3 short output rows is copied run by run, not gathered (FaceNet-1M's conv3, 48 ->
    // 96 5x5 at 12x12, BENCH_P10 bench_conv layer: 0.096 -> 0.090 ms; ResNet-18 512 x 7 x 7 level).
    int nruns = 0;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = j0 + pq * mr + r, oy = j / c.ow, ox = j % c.ow;
      idx[r] = oy * c.stride_h * q.wp + ox * c.stride_w;
      if (r > 0 && idx[r] == idx[r - 1] + 1) ++run_len[nruns - 1];
      else run_at[nruns] = r, run_len[nruns++] = 1;
    }
    float* o = dst + pq * k * mr;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t ky = 0; ky < c.kh; ++ky) {
        for (int64_t kx = 0; kx < c.kw; ++kx, o += mr) {
          const float* src = p + ci * plane + ky * c.dil_h * q.wp + kx * c.dil_w;
          if (nruns <= 3)
            for (int i = 0; i < nruns; ++i) copy_run(o + run_at[i], src + idx[run_at[i]], run_len[i]);
          else if (n == 12 && mr == 12) gather_row<12>(o, src, idx);
          else if (n == 6 && mr == 6) gather_row<6>(o, src, idx);
          else
            for (int64_t r = 0; r < n; ++r) o[r] = src[idx[r]];
          if (n < mr) zero_run(o + n, mr - n);
        }
      }
    }
  }
}

// ---- Winograd F(4x4, 3x3) ----
//
// Per image: the input is copied once into a zero-padded buffer of whole 6x6 windows (Hp x Wp per
// channel, so the tile transform needs no bounds checks; with threads sharing the blocks, each
// block's rows into its task's workspace: pad_by_block), then per task one block of nb tiles
// (whole nr-wide panels): the input transform writes V[xi] [C x nb] as packed B panels, 36 GEMMs
// M[xi] [O x nb] = U[xi] . V[xi] run with the transformed filter U[xi] packed as A, and the output
// transform writes act(A^T M A + bias + residual) into the NCHW output.
//
// A kh x kw kernel other than 3x3 runs as ph x pw pieces of 3x3 (ph = ceil(kh / 3); taps past the
// kernel are zero): piece (a, b) is the taps 3a..3a+2 down, 3b..3b+2 across, and
//   y[oy][ox] = sum over pieces and channels of the piece's 3x3 correlation at (oy + 3a, ox + 3b),
// so each (channel, piece) pair is one channel of a 3x3 layer whose input is the padded plane
// seen from (3a, 3b): the input transform reads it there (the padded plane is 3 (ph - 1) rows
// and 3 (pw - 1) columns larger), and the GEMMs' K is C * ph * pw. FaceNet-1M's 6x6 layer
// (16 x 41 x 41 -> 48) does 4x fewer multiply-adds than as a GEMM.
// The transforms (WinogradKernels) are F(4x4, 3x3) or F(2x2, 3x3): tiles of m = 4 or 2 outputs
// a side, (m + 2)^2 = 36 or 16 GEMMs per block ("positions"). F(2x2, 3x3) does 16 / 36 of the
// GEMM work per tile but 4x the tiles; it pays where F(4x4, 3x3)'s tiles would fill few of a
// vector's lanes and its 36 transformed filters are many MB (ResNet-18's 7x7 stage: 4 tiles, 37.7
// MB): by winograd_rule where F(4x4, 3x3) has under 16 tiles, else where deepslim tune measures
// it faster (kernel "winograd23").

struct WinogradGeometry {
  int64_t m, positions;       // the output tile's side, the GEMMs per block ((m + 2)^2)
  int64_t ph, pw;             // the kernel's 3x3 pieces down and across (1 x 1 for 3x3)
  int64_t th, tw, tiles;      // tile rows, tiles per row, tiles per image
  int64_t hp, wp;             // padded plane
  bool pad_by_block;          // each block's task pads the rows it reads (see winograd_geometry)
  int64_t pad_floats;         // else: the padded input, with the reading slack of the input transform
  int64_t block_rows;         // by block: the padded rows one block's tiles read, at most
  int64_t block_pad_floats;   // by block: the task's padded rows of every channel, with the slack
  int64_t block_panels, blocks, nb;
  bool by_tile;                // the threads split each block's 3 steps (see winograd_geometry)
  int64_t v_floats, m_floats;  // V of one block (positions x C x nb), M (positions x O x nb + slack)
  int64_t v_xi, m_xi;          // floats from V[xi] (M[xi]) to V[xi + 1]: C * nb (O * nb) + 16
  int64_t thread_floats;       // per thread: the GEMM's workspace, then (by block) V, M and the
                               // block's padded rows (pad_by_block)
  int64_t shared_floats;       // by tile position: V and M of the block, shared by the threads
};

// The padded rows [0, end) that tile rows [0, tile_rows) read: m per tile row, the window's
// 2 more, and 3 more per 3x3 piece below the first.
int64_t winograd_rows_end(const WinogradGeometry& q, int64_t tile_rows) {
  return q.m * tile_rows + 2 + 3 * (q.ph - 1);
}

// Floats of V (the transformed input of one block) kept near L2: the block's V and M stay in the
// 2 MB L2 while the 36 transformed filters stream through.
constexpr int64_t kWinogradBlockFloats = 128 * 1024;

// How the threads share the work. By block (at least one panel per thread): each task runs one
// block's input transform, 36 GEMMs and output transform, the blocks cut down to single panels
// until there are about kPiecesPerThread tasks per thread, so that the dynamic hand-out lets the
// caller take over the share of a worker that is late (asleep, or descheduled). With fewer
// panels than threads (SqueezeNet 1.1's 13x13 layers have one), each block's steps are split in
// turn: the input transform by channels, the 36 GEMMs by tile position xi (every thread reads
// only its own transformed filters), the output transform by output channels. Splitting O in
// row chunks instead repeats the input transform per chunk and cuts each of the 36 GEMMs short:
// one chunk per thread waits for the slowest (SqueezeNet 1.1 48->192 at 13x13: 2 threads 2x
// slower than 1 with cold caches), many chunks multiply the GEMM calls. The three steps cost two
// more hand-offs: at 2 panels and 2 threads (27x27) they measured no faster than two
// single-panel blocks in-model (SqueezeNet 1.1 32->128: 0.102 vs 0.091 ms in one run).
// c_in input channels, a kh x kw kernel: the GEMMs' K is c_in times its pieces.
WinogradGeometry winograd_geometry(const GemmKernels& g, const WinogradKernels& wk, int64_t c_in, int64_t o,
                                   int64_t oh, int64_t ow, int64_t kh, int64_t kw, int threads) {
  WinogradGeometry q;
  q.m = wk.tile, q.positions = wk.positions();
  q.ph = ceil_div(kh, 3), q.pw = ceil_div(kw, 3);
  q.th = ceil_div(oh, q.m), q.tw = ceil_div(ow, q.m), q.tiles = q.th * q.tw;
  q.hp = winograd_rows_end(q, q.th), q.wp = q.m * q.tw + 2 + 3 * (q.pw - 1);
  const int64_t c = c_in * q.ph * q.pw;
  const int64_t panels = ceil_div(q.tiles, g.nr);
  const int64_t cap = std::max<int64_t>(1, kWinogradBlockFloats / (q.positions * c * g.nr));
  int64_t blocks = ceil_div(panels, cap);
  q.by_tile = threads > 1 && panels < threads;
  if (threads > 1 && !q.by_tile) blocks = std::max(blocks, std::min(panels, kPiecesPerThread * threads));
  q.block_panels = ceil_div(panels, blocks);
  q.blocks = ceil_div(panels, q.block_panels);
  q.nb = q.block_panels * g.nr;
  // The V[xi] (M[xi]) of a block sit 16 floats further apart than their size: C * nb is a
  // multiple of 4 KB, and the transforms' 36 stores (loads) per tile group would all share one L1 set.
  q.v_xi = c * q.nb + 16, q.m_xi = o * q.nb + 16;
  // With threads sharing the blocks, each task pads the rows its tiles read into its own
  // workspace: one shared padded plane, written in a job of its own, cost more at 2 threads than
  // at 1 (ResNet-18's stage 0, 64 x 56 x 56: 48 us of 0.43 ms against 30 of 0.74), each core
  // writing lines the other had read. The rows blocks share are padded by each (1.6x the rows at
  // 56 x 56, 7 blocks of 32 tiles), so 1 thread keeps the one plane (0.74 -> 0.76 ms by block).
  // A block of nb tiles spans at most (nb - 2) / tw + 2 tile rows (and at most th). The input
  // transform's reads past a block's last padded row (the slack of its last tile row, for lanes
  // whose results are dropped) land on rows the task did not write, as past the last plane.
  const int64_t slack = q.m * int64_t(wk.lanes) + 8;
  const int64_t span = std::min(q.th, (q.nb + q.tw - 2) / q.tw + 1);
  q.pad_by_block = threads > 1 && !q.by_tile;
  q.block_rows = q.pad_by_block ? winograd_rows_end(q, span) : 0;
  q.block_pad_floats = q.pad_by_block ? round16(c_in * q.block_rows * q.wp + slack) : 0;
  q.pad_floats = q.pad_by_block ? 0 : round16(c_in * q.hp * q.wp + slack);
  q.v_floats = round16(q.positions * q.v_xi);
  q.m_floats = round16(q.positions * q.m_xi + wk.lanes);
  q.thread_floats = round16(g.workspace_floats) + (q.by_tile ? 0 : q.v_floats + q.m_floats) + q.block_pad_floats;
  q.shared_floats = q.by_tile ? q.v_floats + q.m_floats : 0;
  return q;
}

// DS_CONV_WINOGRAD (tests, benchmarks): '0' Winograd off, '1' F(4x4, 3x3) for every eligible
// layer, '2' F(2x2, 3x3) there instead; 0 when unset or empty (the rule decides).
char winograd_forced() {
  const char* force = std::getenv("DS_CONV_WINOGRAD");
  return force ? force[0] : 0;
}

// The Winograd transforms that pay for a kh x kw kernel (3x3, or its 3x3 pieces), by measurement
// (docs/kernels.md, "conv2d"): F(4x4, 3x3), F(2x2, 3x3) where F(4x4)'s tiles are too few, or none
// (nullptr); unless DS_CONV_WINOGRAD decides (winograd_forced).
const WinogradKernels* winograd_rule(int64_t c, int64_t o, int64_t oh, int64_t ow, int64_t kh, int64_t kw,
                                     const KernelTable& t) {
  if (const char force = winograd_forced())
    return force == '1' ? t.winograd43 : force == '2' ? (t.winograd23 ? t.winograd23 : t.winograd43) : nullptr;
  // Pieces with taps past the kernel (5x5, 7x7) only where deepslim tune measures them faster:
  // FaceNet-1M's 5x5 and 7x7 layers ran 1.6-1.9x slower (few channels or few tiles).
  if (kh % 3 != 0 || kw % 3 != 0) return nullptr;
  const int64_t pieces = (kh / 3) * (kw / 3);
  // Pieces of a kernel that 3x3 tiles exactly (6x6) save more against their GEMM (36 multiply-adds
  // per channel pair and pixel -> 9, where 3x3 saves 9 -> 2.25), so fewer output channels pay:
  // FaceNet-1M 16 x 41 x 41 -> 48 6x6, 1 thread, 0.82 -> 0.40 ms.
  c *= pieces;
  // The transforms cost ~C and ~O per tile against C*O in the GEMMs: both must be wide enough
  // (with the vectorised transforms C >= 16 and O >= 64 win: SqueezeNet 1.1's expand 3x3, 16->64
  // at 55x55 0.17 vs 0.35 ms in-model, 64->256 at 13x13 0.22 vs 0.26).
  if (c < 16 || o < (pieces > 1 ? 32 : 64)) return nullptr;
  // The transformed filters (36 or 16 x C*O floats) come from memory on every run of a whole
  // network, so they must be spread over enough tiles: at most 256K (262,144) floats per tile
  // for F(4x4, 3x3). ResNet-18 stage 2 (256 x 256 at 14 x 14, F(4x4): 147K per tile) took
  // 0.87-0.93 ms in-model against 2.27-2.29 as pixels (deepslim tune, 1 thread, Zen 4 AVX-512;
  // before the GEMMs prefetched A, 1.19 against 1.09 on a Zen 5, whose GEMMs run twice as fast).
  // 36*C*O must also stay well inside the L3: C*O <= 256 x 256.
  const int64_t bound = 256 * 1024;
  const int64_t tiles43 = ceil_div(oh, 4) * ceil_div(ow, 4);
  if (c * o <= 256 * 256 && tiles43 >= 16 && 36 * c * o <= bound * tiles43) return t.winograd43;
  // F(2x2, 3x3) where F(4x4) has under 16 tiles (at most a quarter of AVX-512's 16 lanes, two
  // of AVX2's 8; 3x3 only, not pieces): ResNet-18 stage 3 (512 x 512 at 7 x 7, 16 tiles) 1.67-1.71
  // ms in-model against 2.24-2.27 as pixels and 3.8-3.9 as F(4x4). Its filters come to 256K floats
  // per tile exactly, so F(2x2)'s bound is twice F(4x4)'s, off that edge. Narrower layers at 7 x 7
  // win too (BENCH_P10=1 bench_conv layer C 7 7 C 3 1 1 1, hot caches, pixels -> F(2x2), ms:
  // C = 64 0.054 -> 0.033, 128 0.171 -> 0.102, 256 0.591 -> 0.350).
  const int64_t tiles23 = ceil_div(oh, 2) * ceil_div(ow, 2);
  if (t.winograd23 && pieces == 1 && tiles43 < 16 && tiles23 >= 16 && 16 * c * o <= 2 * bound * tiles23)
    return t.winograd23;
  return nullptr;
}

// Piece (a, b) of a kh x kw filter g: taps 3a..3a+2 down, 3b..3b+2 across, zero past the kernel.
void winograd_piece(const float* g, int64_t kh, int64_t kw, int64_t a, int64_t b, float* g3) {
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t ky = 3 * a + i, kx = 3 * b + j;
      g3[i * 3 + j] = ky < kh && kx < kw ? g[ky * kw + kx] : 0.0f;
    }
}

// Padded copy of rows [r0, r1) of one image, planes of `rows` rows apart:
// p[ci][yy - r0][xx] = x[ci][yy - pad_top][xx - pad_left], zero outside.
void winograd_pad(const Conv2dParams& c, const WinogradGeometry& q, const float* x, int64_t c0, int64_t c1,
                  int64_t r0, int64_t r1, int64_t rows, float* p) {
  for (int64_t ci = c0; ci < c1; ++ci) {
    const float* xc = x + ci * c.h * c.w;
    float* pc = p + ci * rows * q.wp;
    const int64_t x0 = std::min(c.pad_left, q.wp), x1 = std::min(c.pad_left + c.w, q.wp);
    for (int64_t yy = r0; yy < r1; ++yy) {
      float* row = pc + (yy - r0) * q.wp;
      const int64_t iy = yy - c.pad_top;
      if (iy < 0 || iy >= c.h) {
        std::memset(row, 0, size_t(q.wp) * sizeof(float));
        continue;
      }
      std::memset(row, 0, size_t(x0) * sizeof(float));
      std::memcpy(row + x0, xc + iy * c.w, size_t(x1 - x0) * sizeof(float));
      std::memset(row + x1, 0, size_t(q.wp - x1) * sizeof(float));
    }
  }
}

// Tiles [t, t + len) of one tile row inside the block at t0, cut where a lane group or (with
// `panel`) a packed panel ends.
template <typename Fn>
void winograd_segments(const WinogradGeometry& q, int64_t t0, int64_t t1, int64_t lanes, int64_t panel, const Fn& fn) {
  for (int64_t t = t0; t < t1;) {
    const int64_t ty = t / q.tw, tx = t % q.tw;
    int64_t len = std::min({t1 - t, q.tw - tx, lanes});
    if (panel > 0) len = std::min(len, panel - (t - t0) % panel);
    fn(t, ty, tx, len);
    t += len;
  }
}

// Pixels as rows where it pays (few pixels per channel: n <= 4 m); DS_CONV_PIXELS=0 turns it off
// and =1 takes it for every layer that is not depthwise, strided 1x1 or Winograd (tests,
// benchmarks). A 1x1 layer needs no im2col in either orientation (the GEMM reads the plane in
// place as B, direct_1x1, or as A with adjacent rows), but pixels as rows pays the transpose of
// the output (n*m floats). Where the level has direct_1x1 it pays when the n columns fill less than
// 85% of their nr-wide panels (MobileNet V2 at 7x7: 49 of 64), when the weight is 1 MB or more (in
// the other orientation it would stream from L3 once per column panel; SqueezeNet 1.1's classifier
// 512->1000), or when the m channels fill >= 85% of their panels and k >= 3 m (long dot products
// amortise the transpose). Measured (bench_conv layer, 1 thread, 10th percentile of calls, ms)
// direct vs pixels: MobileNet V2 at 14x14 384->64 0.047 vs 0.042, 576->96 0.097 vs 0.094, 64->384
// 0.047 vs 0.050; at 7x7 960->320 0.170 vs 0.146; SqueezeNet 1.1 at 13x13 384->48 0.028 vs 0.036,
// 512->64 0.052 vs 0.049. Without direct_1x1 (packed B): pixels also when k >= m or k >= 256
// (MobileNet V2 at 14x14 576->96 in-model 0.135 vs 0.122).
bool pixels_pay(int64_t n, int64_t m, int64_t k, int64_t ow, bool pointwise, const GemmKernels& g, int64_t b_rows,
                int64_t in_floats) {
  const char* force = std::getenv("DS_CONV_PIXELS");
  if (force && *force) return force[0] == '1';
  if (n > 4 * m) return false;
  // Rows of 8, 12 or 14 outputs the implicit im2col wraps over: no im2col^T, no transpose, the
  // weight as A re-read per panel from L2 while it fits there (FaceNet-1M conv3, 48x12x12 -> 96
  // 5x5, 1 thread: 0.089-0.091 -> 0.066-0.068 ms; ResNet-18's 256x14x14 3x3, 2.4 MB, level).
  if (!pointwise && ow < 16 && rows_on(g) && gemm_rows_wraps(ow, 0) && m * k < 256 * 1024 &&
      rows_reuse_pays(g, m, b_rows, in_floats))
    return false;
  if (!pointwise) return true;
  auto fills = [&](int64_t x, int64_t tile) { return x * 100 >= 85 * (ceil_div(x, tile) * tile); };
  if (!fills(n, g.nr) || m * k >= 256 * 1024) return true;
  if (direct_1x1(g, m, k)) return fills(m, g.nr) && k >= 3 * m;
  return k >= m || k >= 256;
}

bool is_depthwise3x3(const OpParams& p, const Shape& w) {
  return w[1] == 1 && w[2] == 3 && w[3] == 3 && p.strides[0] == p.strides[1] &&
         (p.strides[0] == 1 || p.strides[0] == 2) && p.dilations[0] == 1 && p.dilations[1] == 1;
  // group == C == O is checked at run time (C comes with the input): group == O with w[1] == 1.
}

std::shared_ptr<const void> prepare(const OpParams& p, const std::vector<ValueInfo>& in, const KernelTable& t,
                                    int /*threads*/) {
  if (!in[1].data || !in[1].dims || in[1].dtype != kDtypeF32 || !t.gemm) return nullptr;
  const Shape& w = *in[1].dims;
  auto s = std::make_shared<State>();
  s->g = t.gemm;
  s->m = w[0] / p.group;
  s->k = w[1] * w[2] * w[3];
  if (s->m == 1 && p.group == w[0] && is_depthwise3x3(p, w) && t.dwconv3x3) {
    s->path = Path::kDepthwise3x3;
    return s;
  }
  const bool pointwise = w[2] == 1 && w[3] == 1 && p.strides[0] == 1 && p.strides[1] == 1 && p.pads[0] == 0 &&
                         p.pads[1] == 0 && p.pads[2] == 0 && p.pads[3] == 0;
  const bool strided_pointwise = w[2] == 1 && w[3] == 1 && !pointwise && p.pads[0] == 0 && p.pads[1] == 0 &&
                                 p.pads[2] == 0 && p.pads[3] == 0;
  s->path = pointwise ? Path::kGemm1x1 : strided_pointwise ? Path::kGemm1x1Strided : Path::kGemmIm2col;
  // Output pixels per channel from the input's declared dims (H and W are fixed in the graph).
  const Shape* xd = in[0].dims;
  // Winograd: 3x3, or up to 9x9 as 3x3 pieces. Not under 3 taps down or across: with a 2-tap
  // side (4x2, 2x7) the error reached 3.6e-4 of the result's magnitude, against 2e-5 for 3x3.
  const bool winograd_shape = w[2] >= 3 && w[2] <= 9 && w[3] >= 3 && w[3] <= 9 && p.strides[0] == 1 &&
                              p.strides[1] == 1 && p.dilations[0] == 1 && p.dilations[1] == 1 && p.group == 1 &&
                              t.winograd43;
  if (xd && xd->size() == 4 && (*xd)[2] > 0 && (*xd)[3] > 0) {
    const int64_t oh = window_output_size((*xd)[2], p.pads[0], p.pads[2], w[2], p.strides[0], p.dilations[0], false);
    const int64_t ow = window_output_size((*xd)[3], p.pads[1], p.pads[3], w[3], p.strides[1], p.dilations[1], false);
    const int64_t b_rows = implicit_b_rows(w[1], w[2], w[3], p.dilations[1], p.strides[1]);
    if (oh > 0 && ow > 0 && winograd_shape) s->wk = winograd_rule(w[1], w[0], oh, ow, w[2], w[3], t);
    if (s->wk)
      s->path = Path::kWinograd;
    else if (oh > 0 && ow > 0 && s->g->nr > 1 && !strided_pointwise &&
             pixels_pay(oh * ow, s->m, s->k, ow, pointwise, *s->g, b_rows, w[1] * (*xd)[2] * (*xd)[3]))
      s->path = Path::kGemmPixels;
  }
  // A kernel the session was asked for (deepslim tune measures them in-model) replaces the rule's
  // choice where it applies to this layer.
  if (!p.kernel_choice.empty()) {
    const bool sized = xd && xd->size() == 4 && (*xd)[2] > 0 && (*xd)[3] > 0;
    if (p.kernel_choice == "gemm")
      s->path = pointwise ? Path::kGemm1x1 : strided_pointwise ? Path::kGemm1x1Strided : Path::kGemmIm2col;
    else if ((p.kernel_choice == "winograd" || p.kernel_choice == "winograd23") && sized && winograd_shape)
      s->path = Path::kWinograd;
    else if (p.kernel_choice == "pixels" && sized && s->g->nr > 1 && !strided_pointwise)
      s->path = Path::kGemmPixels;
  }
  if (s->path != Path::kWinograd) s->wk = nullptr;  // the rule's transforms, overridden
  if (s->path == Path::kWinograd) {
    // U[xi] [O x C * pieces] from each 3x3 piece of each filter (column ci * pieces + piece), then
    // packed as A: storage holds one packed matrix per position (36 or 16).
    // A kernel asked for wins; else the rule's (forced or measured) choice.
    if (p.kernel_choice == "winograd23" && t.winograd23)
      s->wk = t.winograd23;
    else if (p.kernel_choice == "winograd" || !s->wk)
      s->wk = t.winograd43;
    const int64_t positions = s->wk->positions();
    const int64_t o = w[0], c = w[1], kh = w[2], kw = w[3], pw = ceil_div(kw, 3);
    const int64_t pieces = ceil_div(kh, 3) * pw, cv = c * pieces;
    s->group_floats = round16(gemm_packed_a_size(*s->g, o, cv));
    std::vector<float> u(size_t(positions * o * cv));
    const float* wd = static_cast<const float*>(in[1].data);
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t piece = 0; piece < pieces; ++piece) {
          float g3[9];
          winograd_piece(wd + (oc * c + ci) * kh * kw, kh, kw, piece / pw, piece % pw, g3);
          s->wk->filter(g3, u.data() + oc * cv + ci * pieces + piece, o * cv);
        }
    float* base = s->storage.allocate(s->group_floats * positions);
    for (int64_t xi = 0; xi < positions; ++xi)
      gemm_pack_a(*s->g, o, cv, u.data() + xi * o * cv, cv, 1, base + xi * s->group_floats);
    s->packed = base;
    return s;
  }
  const bool pixels = s->path == Path::kGemmPixels;
  s->group_floats = round16(pixels ? gemm_packed_b_size(*s->g, s->k, s->m) : gemm_packed_a_size(*s->g, s->m, s->k));
  float* base = s->storage.allocate(s->group_floats * p.group);
  const float* wd = static_cast<const float*>(in[1].data);
  for (int64_t gi = 0; gi < p.group; ++gi) {
    if (pixels) gemm_pack_b(*s->g, s->k, s->m, wd + gi * s->m * s->k, 1, s->k, base + gi * s->group_floats);
    else gemm_pack_a(*s->g, s->m, s->k, wd + gi * s->m * s->k, s->k, 1, base + gi * s->group_floats);
  }
  s->packed = base;
  return s;
}

// Workspace for one image on `threads` threads.
int64_t image_workspace(const OpParams& p, const State* s, const std::vector<const Shape*>& in, const Shape& os,
                        int threads) {
  switch (s->path) {
    case Path::kDepthwise3x3: return 0;
    case Path::kGemm1x1:
    case Path::kGemm1x1Strided: {
      const int64_t sub = s->path == Path::kGemm1x1Strided ? round16((*in[0])[1] * os[2] * os[3]) : 0;
      if (direct_1x1(*s->g, s->m, s->k)) return sub + round16(2 * s->k);  // the offsets (int64)
      return sub + split_im2col(*s->g, s->m, s->k, os[2] * os[3], threads).thread_floats * threads;
    }
    case Path::kGemmIm2col: {
      const Conv2dParams c = conv_params(p, *in[0], *in[1], os);
      if (implicit_rows(*s->g, c, s->m, s->k) && rows_wrap(c))
        return round16(c.c * column_phases(c, true).floats()) + round16(2 * s->k);
      if (implicit_rows(*s->g, c, s->m, s->k)) {
        const Phases ph = column_phases(c);
        return round16(c.c * ph.floats()) + rows_tail_floats(c, s->g->nr) + round16(2 * s->k) +
               round16(c.o * c.oh * ph.wq);
      }
      return round16(c.c * column_phases(c).floats()) +
             split_im2col(*s->g, s->m, s->k, os[2] * os[3], threads).thread_floats * threads;
    }
    case Path::kGemmPixels: {
      const int64_t n = os[2] * os[3];
      return pixels_head_floats(*s->g, conv_params(p, *in[0], *in[1], os), threads) +
             round16(gemm_packed_a_size(*s->g, n, s->k)) + round16(n * s->m);
    }
    case Path::kWinograd: {
      const WinogradGeometry q =
          winograd_geometry(*s->g, *s->wk, (*in[0])[1], os[1], os[2], os[3], (*in[1])[2], (*in[1])[3], threads);
      return q.pad_floats + q.shared_floats + q.thread_floats * threads;
    }
  }
  return 0;
}

// The GEMM paths run a batch of at least `threads` images as whole images per thread.
bool images_per_thread(const State* s, int64_t batch, int threads) {
  return threads > 1 && batch >= threads && s->path != Path::kDepthwise3x3 && s->path != Path::kWinograd;
}

// Depthwise 3x3 -> 1x1 run in bands of output rows of the depthwise (run_depthwise_1x1): per
// band the depthwise writes every channel's rows into a thread's slice of the workspace, and
// the 1x1 GEMM reads them from there while they are in L2, instead of the whole tensor going
// out to L3 and back. Fused where that tensor or the depthwise's input is at least the L2 size
// per image (MobileNet V2's first four blocks, 1.2-1.8 MB; the fourth's input only, 144 x 56 x
// 56 at stride 2, which pays with its expand fused too); on its 28x28 blocks (0.45-0.6 MB)
// fusing measured level.
// Bands of 16 rows measured level with 8, 4 slower. An expanding 1x1 (or a stem conv) before
// the depthwise whose output is that large too runs band by band as well (its rows under the
// depthwise's window; a thread runs adjacent bands and keeps the rows a band shares with the one
// before).
constexpr int64_t kFuseMinFloats = 256 * 1024;

// Bands of a fused depthwise -> 1x1 (and the expanding 1x1 before it): rows of depthwise output
// per band, floats per channel of the depthwise slice and of the expand slice, per thread.
struct FusedBands {
  int64_t rows, band, in_rows, in_band, thread_floats;
};

// ow: the width of the depthwise's output plane (the 1x1's input).
FusedBands fused_bands(const OpParams::FusedDepthwise& dw, int64_t c, int64_t ow) {
  FusedBands f;
  f.rows = 8;  // the AVX-512 depthwise kernel's own band (at AVX2 4 was no better)
  // With an expand, its slice (rows under the window x the input width) kept near half the L2.
  while (dw.expand && f.rows > 2 && c * ((f.rows - 1) * dw.stride + 3) * dw.in_w * 4 > 512 * 1024) f.rows /= 2;
  f.band = round16(f.rows * ow);
  f.in_rows = dw.expand ? (f.rows - 1) * dw.stride + 3 : 0;
  f.in_band = round16(f.in_rows * dw.in_w);
  f.thread_floats = c * (f.band + f.in_band);
  return f;
}

// The fused node's expansion as a conv: its input is the node's input kProducerInput + 3, its
// weight + 4; its output is the depthwise's input (dw.in_h x dw.in_w).
Conv2dParams expand_params(const OpParams::FusedDepthwise& dw, const Shape& x, const Shape& w) {
  Conv2dParams c;
  c.n = x[0], c.c = x[1], c.h = x[2], c.w = x[3];
  c.o = w[0], c.oh = dw.in_h, c.ow = dw.in_w;
  c.kh = w[2], c.kw = w[3];
  c.stride_h = dw.expand_strides[0], c.stride_w = dw.expand_strides[1];
  c.pad_top = dw.expand_pads[0], c.pad_left = dw.expand_pads[1];
  c.dil_h = c.dil_w = 1;
  c.group = 1;
  c.act = dw.expand_act;
  return c;
}

int64_t workspace_floats(const OpParams& p, const void* state, const std::vector<const Shape*>& in,
                         const Shape& os, int threads) {
  const State* s = static_cast<const State*>(state);
  if (!s) return 0;
  if (p.depthwise.on) {  // the offsets of both GEMMs' B rows (int64), the expand's phases, the threads' slices
    const State* e = static_cast<const State*>(p.depthwise.expand);
    return round16(2 * s->k) + (e ? round16(2 * e->k) + p.depthwise.expand_phase_floats : 0) +
           threads * fused_bands(p.depthwise, (*in[0])[1], (*in[0])[3]).thread_floats;
  }
  const int64_t split = image_workspace(p, s, in, os, threads);
  if (!images_per_thread(s, os[0], threads)) return split;
  return std::max(split, round16(image_workspace(p, s, in, os, 1)) * threads);
}

// Below this many floats moved, or multiply-adds, a job hand-off to the pool (about 1-2 us with
// the spinning workers awake) costs more than it saves.
constexpr int64_t kMinParallelFloats = 32 * 1024;
constexpr int64_t kMinParallelMacs = 256 * 1024;
// Copies of the input into a padded plane or its phases move short rows (a memcpy and two
// memsets per row of 13-41 floats): ~0.3 ns a float, so 8K floats already take 2-3 us, more than
// a hand-off. Inline they were the caller's largest serial sections at 2 threads (SqueezeNet 1.1's
// Winograd pads of 15-29K floats: 8-10 us each of caller CPU time while the worker waited).
constexpr int64_t kMinParallelCopyFloats = 8 * 1024;

// fn(task, thread) for every task; on the pool when there is one and `work` >= 0, else inline in
// order. Callers pass work_or_inline(...).
int64_t work_or_inline(int64_t work, int64_t threshold) { return work >= threshold ? work : -1; }

// The session's pool for GEMMs worth splitting, else null (ds::gemm then runs inline).
ThreadPool* pool_for_macs(ThreadPool* pool, int64_t macs) { return macs >= kMinParallelMacs ? pool : nullptr; }

template <typename Fn>
void parallel(ThreadPool* pool, int64_t count, int64_t work, const Fn& fn) {
  if (pool && count > 1 && work >= 0) {
    pool->parallel_for(count, [&fn](int64_t task, int thread) { fn(task, thread); });
  } else {
    for (int64_t t = 0; t < count; ++t) fn(t, 0);
  }
}

// Per image and group: the GEMM of one group with bias, the residual (if any) and the activation
// in its epilogue. `res` is the image's residual or null.
GemmParams group_gemm(const State& s, const Conv2dParams& c, const float* bias, const float* res, int64_t gi,
                      float* y) {
  GemmParams gp;
  gp.m = s.m;
  gp.n = c.oh * c.ow;
  gp.k = s.k;
  gp.a = {s.packed + gi * s.group_floats, 0, 0, true};
  gp.c = y + gi * s.m * gp.n;
  gp.c_row_stride = gp.n;
  if (bias) {
    gp.bias = bias + gi * s.m;
    gp.bias_kind = kGemmBiasPerRow;
  }
  if (res) {
    gp.residual = res + gi * s.m * gp.n;
    gp.residual_row_stride = gp.n;
  }
  gp.act = c.act.kind;
  gp.alpha = c.act.alpha;
  gp.beta = c.act.beta;
  return gp;
}

// One image's GEMMs (every group) in blocks of output columns, as split_im2col cuts them: per
// task pack(gi, j0, cols, dst) writes the block's B as packed panels into the thread's slice of
// `ws`, then the GEMM with the packed weight runs on it (a row chunk of it when the threads split
// the rows).
template <typename Pack>
void gemm_blocks(const GemmKernels& g, const State& s, const Conv2dParams& c, const float* bias, const float* rb,
                 float* yb, int threads, ThreadPool* pool, const RunContext& ctx, float* ws, const Pack& pack) {
  const int64_t n = c.oh * c.ow;
  const Im2colSplit sp = split_im2col(g, s.m, s.k, n, threads);
  const int64_t per_group = sp.blocks * sp.chunks;
  parallel(pool, c.group * per_group, work_or_inline(c.group * s.m * s.k * n, kMinParallelMacs), [&](int64_t task, int thread) {
    const int64_t gi = task / per_group, rest = task % per_group;
    const int64_t blk = rest / sp.chunks, chunk = rest % sp.chunks;
    float* tws = ctx.thread_part(ws, sp.thread_floats, thread, pool ? threads : 1);
    float* cols = tws + round16(g.workspace_floats);
    const int64_t j0 = blk * sp.block_panels * g.nr, j1 = std::min(n, j0 + sp.block_panels * g.nr);
    pack(gi, j0, j1 - j0, cols);
    const int64_t m0 = chunk * sp.chunk_rows, m1 = std::min(s.m, m0 + sp.chunk_rows);
    GemmParams gp = group_gemm(s, c, bias, rb, gi, yb);  // then narrowed to the block's columns
    gp.c += j0;
    if (gp.residual) gp.residual += j0;
    gp.n = j1 - j0;
    gp.b = {cols, 0, 0, true};
    g.gemm(gemm_slice(gp, g.mr, g.nr, m0, m1, 0, gp.n), tws);
  });
}

// y = act(y + r) over n elements: the residual for the kernels that do not take one.
void add_residual(float* y, const float* r, int64_t n, const Activation& act) {
  int64_t i = 0;
#if defined(__SSE2__)
  // The vector steps give what the scalar tail gives, NaN included (maxps returns its second
  // operand, 0, for a NaN, as relu's x > 0 ? x : 0 does), so where the tail starts does not matter.
  if (act.kind == 0) {
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(y + i), _mm_loadu_ps(r + i)));
  } else if (act.kind == 1) {
    const __m128 zero = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_max_ps(_mm_add_ps(_mm_loadu_ps(y + i), _mm_loadu_ps(r + i)), zero));
  }
#endif
  for (; i < n; ++i) y[i] = gemm_activate(act.kind, y[i] + r[i], act.alpha, act.beta);
}

// y[o * n + i] = yt[i * m + o] for o in [o0, o1), i in [i0, i1): a block of the pixels path's
// transpose, 4 x 4 at a time.
void transpose_block(const float* yt, int64_t m, int64_t n, int64_t o0, int64_t o1, int64_t i0, int64_t i1, float* y) {
  int64_t o = o0;
#if defined(__SSE2__)
  for (; o + 4 <= o1; o += 4) {
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) {
      __m128 r0 = _mm_loadu_ps(yt + i * m + o), r1 = _mm_loadu_ps(yt + (i + 1) * m + o);
      __m128 r2 = _mm_loadu_ps(yt + (i + 2) * m + o), r3 = _mm_loadu_ps(yt + (i + 3) * m + o);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(y + o * n + i, r0);
      _mm_storeu_ps(y + (o + 1) * n + i, r1);
      _mm_storeu_ps(y + (o + 2) * n + i, r2);
      _mm_storeu_ps(y + (o + 3) * n + i, r3);
    }
    for (; i < i1; ++i)
      for (int64_t q = 0; q < 4; ++q) y[(o + q) * n + i] = yt[i * m + o + q];
  }
#endif
  for (; o < o1; ++o)
    for (int64_t i = i0; i < i1; ++i) y[o * n + i] = yt[i * m + o];
}

void run_winograd(const State& s, const Conv2dParams& c, const RunContext& ctx, const float* x, const float* bias,
                  const float* res, float* out) {
  const GemmKernels& g = *s.g;
  const WinogradKernels& wk = *s.wk;
  const int threads = threads_of(ctx.pool);
  const WinogradGeometry q = winograd_geometry(g, wk, c.c, c.o, c.oh, c.ow, c.kh, c.kw, threads);
  const int64_t pw = q.pw, pieces = q.ph * q.pw, cv = c.c * pieces;
  const int64_t in_image = c.c * c.h * c.w, plane = c.oh * c.ow, out_image = c.o * plane;
  float* padded = ctx.workspace;
  for (int64_t b = 0; b < c.n; ++b) {
    const float* xb = x + b * in_image;
    float* yb = out + b * out_image;
    const float* rb = res ? res + b * out_image : nullptr;
    if (!q.by_tile && !q.pad_by_block) winograd_pad(c, q, xb, 0, c.c, 0, q.hp, q.hp, padded);
    // The three steps of block blk, each over a range of its work: V[xi] as packed B panels (tile
    // t of the block is column t - t0) for channels [c0, c1) (K row ci * pieces + piece: the
    // padded plane seen from the piece's offset); M[xi] = U[xi] . V[xi] for tile positions
    // [x0, x1); the output transform for output channels [o0, o1). The padded planes are `rows`
    // rows apart and start at padded row m * ty0.
    auto input = [&](int64_t blk, int64_t c0, int64_t c1, const float* pad, int64_t rows, int64_t ty0, float* v) {
      const int64_t t0 = blk * q.nb, t1 = std::min(q.tiles, t0 + q.nb);
      for (int64_t ci = c0; ci < c1; ++ci)
        for (int64_t piece = 0; piece < pieces; ++piece) {
          const float* pc = pad + ci * rows * q.wp + 3 * (piece / pw) * q.wp + 3 * (piece % pw);
          const int64_t row = ci * pieces + piece;
          winograd_segments(q, t0, t1, wk.lanes, g.nr, [&](int64_t t, int64_t ty, int64_t tx, int64_t len) {
            const int64_t j = t - t0;
            wk.input(pc + q.m * ((ty - ty0) * q.wp + tx), q.wp, len,
                     v + (j / g.nr) * cv * g.nr + row * g.nr + j % g.nr, q.v_xi);
          });
        }
    };
    auto gemms = [&](int64_t blk, int64_t x0, int64_t x1, const float* v, float* m, float* ws) {
      for (int64_t xi = x0; xi < x1; ++xi) {
        GemmParams gp;
        gp.m = c.o;
        gp.n = std::min(q.tiles - blk * q.nb, q.nb);
        gp.k = cv;
        gp.a = {s.packed + xi * s.group_floats, 0, 0, true};
        gp.b = {v + xi * q.v_xi, 0, 0, true};
        gp.c = m + xi * q.m_xi;
        gp.c_row_stride = q.nb;
        g.gemm(gp, ws);
      }
    };
    auto output = [&](int64_t blk, int64_t o0, int64_t o1, const float* m) {
      const int64_t t0 = blk * q.nb, t1 = std::min(q.tiles, t0 + q.nb);
      WinogradOutput ep;
      ep.act = c.act.kind, ep.alpha = c.act.alpha, ep.beta = c.act.beta;
      for (int64_t oc = o0; oc < o1; ++oc) {
        ep.bias = bias ? bias[oc] : 0.0f;
        winograd_segments(q, t0, t1, wk.lanes, 0, [&](int64_t t, int64_t ty, int64_t tx, int64_t len) {
          const int64_t oy = q.m * ty, ox = q.m * tx, at = oc * plane + oy * c.ow + ox;
          ep.rows = std::min(q.m, c.oh - oy);
          ep.cols = std::min(q.m * len, c.ow - ox);
          ep.residual = rb ? rb + at : nullptr;
          ep.residual_stride = c.ow;
          wk.output(m + oc * q.nb + (t - t0), q.m_xi, len, ep, yb + at, c.ow);
        });
      }
    };
    float* thread_ws = ctx.workspace + q.pad_floats + q.shared_floats;
    if (!q.by_tile) {
      const int64_t macs = q.positions * cv * c.o * q.tiles;
      parallel(ctx.pool, q.blocks, work_or_inline(macs, kMinParallelMacs), [&](int64_t blk, int thread) {
        float* ws = ctx.thread_part(thread_ws, q.thread_floats, thread, threads);
        float* v = ws + round16(g.workspace_floats);
        float* m = v + q.v_floats;
        if (q.pad_by_block) {
          float* pad = m + q.m_floats;
          const int64_t t0 = blk * q.nb, t1 = std::min(q.tiles, t0 + q.nb), ty0 = t0 / q.tw;
          const int64_t r1 = winograd_rows_end(q, (t1 - 1) / q.tw + 1);
          winograd_pad(c, q, xb, 0, c.c, q.m * ty0, r1, q.block_rows, pad);
          input(blk, 0, c.c, pad, q.block_rows, ty0, v);
        } else {
          input(blk, 0, c.c, padded, q.hp, 0, v);
        }
        gemms(blk, 0, q.positions, v, m, ws);
        output(blk, 0, c.o, m);
      });
      continue;
    }
    float* v = ctx.workspace + q.pad_floats;
    float* m = v + q.v_floats;
    const int64_t per_task = items_per_piece(c.c, threads), per_out = items_per_piece(c.o, threads);
    for (int64_t blk = 0; blk < q.blocks; ++blk) {
      parallel(ctx.pool, ceil_div(c.c, per_task), work_or_inline(q.positions * cv * q.nb, kMinParallelFloats),
               [&](int64_t task, int) {
                 const int64_t c0 = task * per_task, c1 = std::min(c.c, c0 + per_task);
                 if (blk == 0) winograd_pad(c, q, xb, c0, c1, 0, q.hp, q.hp, padded);
                 input(blk, c0, c1, padded, q.hp, 0, v);
               });
      parallel(ctx.pool, q.positions, work_or_inline(q.positions * cv * c.o * q.nb, kMinParallelMacs),
               [&](int64_t xi, int thread) {
                 gemms(blk, xi, xi + 1, v, m, ctx.thread_part(thread_ws, q.thread_floats, thread, threads));
               });
      parallel(ctx.pool, ceil_div(c.o, per_out), work_or_inline(q.positions * c.o * q.nb, kMinParallelFloats),
               [&](int64_t task, int) { output(blk, task * per_out, std::min(c.o, (task + 1) * per_out), m); });
    }
  }
}

// A depthwise 3x3 node (window and activation in dw, input, weight and bias at kProducerInput)
// and this direct 1x1 node (c: its shapes, with the depthwise output as its input) in bands of
// output rows (fused_bands): per band the depthwise writes the band's rows of every channel
// into the thread's slice of the workspace (the depthwise kernel's plane strides), then
// gemm_rows reads them as B and writes the band's columns of the output. With an expanding conv
// before the depthwise (dw.expand, fusable_expand; its input, weight and bias at
// kProducerInput + 3), gemm_rows first computes the rows of its output the band's windows read
// into the thread's expand slice, which the depthwise reads: a 1x1 straight from its input, a
// stem conv as the wrapping GEMM over its input's phases (built once per image). Every output
// element goes through the same operations as when the nodes run apart (tested bit for bit).
void run_depthwise_1x1(const State& s, const OpParams::FusedDepthwise& dw, const Conv2dParams& c,
                       const RunContext& ctx, const std::vector<OpInput>& in, const float* bias, const float* res,
                       float* out, const KernelTable& k) {
  const GemmKernels& g = *s.g;
  const State* e = static_cast<const State*>(dw.expand);
  const OpInput& dx = in[kProducerInput];
  // An optional input past the end of `in` (a producer without bias, nothing after it) is absent.
  auto optional = [&in](int i) { return in.size() > size_t(i) ? in[size_t(i)].data : nullptr; };
  const float* dw_bias = optional(kProducerInput + 2);
  DwConv3x3Params d;
  d.h = dw.in_h, d.w = dw.in_w, d.oh = c.h, d.ow = c.w;
  d.stride = dw.stride;
  d.pad_top = dw.pad_top, d.pad_left = dw.pad_left;
  d.act = dw.act.kind, d.alpha = dw.act.alpha, d.beta = dw.act.beta;
  const FusedBands f = fused_bands(dw, c.c, c.w);
  const int64_t n = c.h * c.w, in_plane = d.h * d.w;
  int64_t* offs = reinterpret_cast<int64_t*>(ctx.workspace);
  for (int64_t q = 0; q < c.c; ++q) offs[q] = q * f.band;
  int64_t* expand_offs = offs + round16(2 * s.k) / 2;
  float* slices = ctx.workspace + round16(2 * s.k);
  Conv2dParams ec{};  // the expansion, run as the wrapping GEMM over its input's phases
  Phases eph{};
  float* phases = nullptr;
  int64_t expand_in_image = 0;
  if (e) {
    ec = expand_params(dw, *in[kProducerInput + 3].shape, *in[kProducerInput + 4].shape);
    eph = column_phases(ec, true);
    wrap_offsets(ec, eph, expand_offs);
    expand_in_image = ec.c * ec.h * ec.w;
    slices += round16(2 * e->k);
    if (dw.expand_phase_floats) {
      phases = slices;
      slices += dw.expand_phase_floats;
    }
  }
  const int64_t macs = s.m * s.k * n + (e ? e->m * e->k * in_plane : 0);
  // Each task runs an equal share of the image's rows (one per thread) in bands of f.rows, so
  // that a band finds the expand rows it shares with the band before (2 at stride 1, 1 at
  // stride 2) in the thread's slice and copies them to the slice's top instead of computing them
  // again (8-row bands at stride 1 computed 25% of the expand twice).
  const int threads = threads_of(ctx.pool);
  const int64_t runs = std::min<int64_t>(ceil_div(c.h, f.rows), threads);
  for (int64_t b = 0; b < c.n; ++b) {
    const float* expand_in = e ? in[kProducerInput + 3].data + b * expand_in_image : nullptr;
    if (phases) {  // the expansion's input as its row and column phases, shared by the bands
      const int64_t units = ec.c * eph.sh;
      parallel(ctx.pool, units, work_or_inline(ec.c * eph.floats(), kMinParallelCopyFloats),
               [&](int64_t u, int) { build_phases(ec, eph, expand_in, u, u + 1, phases); });
      expand_in = phases;
    }
    parallel(ctx.pool, runs, work_or_inline(macs, kMinParallelMacs), [&](int64_t run, int thread) {
      float* slice = ctx.thread_part(slices, f.thread_floats, thread, threads);
      float* ex = slice + c.c * f.band;
      int64_t held0 = 0, held1 = 0;  // the expand's output rows [held0, held1) at the top of ex
      const int64_t run1 = (run + 1) * c.h / runs;
      for (int64_t r0 = run * c.h / runs; r0 < run1; r0 += f.rows) {
        const int64_t r1 = std::min(run1, r0 + f.rows);
        int64_t x_off = 0, y_off = 0;
        DwConv3x3Params q = dwconv3x3_rows(d, r0, r1, &x_off, &y_off);
        q.y_plane = f.band;
        const float* dw_in = dx.data + b * c.c * in_plane + x_off;
        if (e) {  // the expand's output rows under the band: columns x_off .. of its [C, H*W] output
          const int64_t first = x_off / d.w, end = first + q.h;
          const int64_t kept = held0 <= first && first < held1 ? held1 - first : 0;
          if (kept > 0)
            for (int64_t ch = 0; ch < c.c; ++ch)
              std::memmove(ex + ch * f.in_band, ex + ch * f.in_band + (first - held0) * d.w, size_t(kept * d.w) * 4);
          GemmParams gp;
          gp.m = e->m, gp.n = (q.h - kept) * d.w, gp.k = e->k;
          gp.a = {e->packed, 0, 0, true};
          gp.b.data = expand_in;
          gp.c = ex + kept * d.w;
          gp.c_row_stride = f.in_band;
          if (const float* eb = optional(kProducerInput + 5)) {
            gp.bias = eb;
            gp.bias_kind = kGemmBiasPerRow;
          }
          gp.act = dw.expand_act.kind, gp.alpha = dw.expand_act.alpha, gp.beta = dw.expand_act.beta;
          GemmRowsB rows;
          rows.offsets = expand_offs;
          // Output rows wrap over the phases' extra columns (none for a 1x1: plain columns).
          rows.width = eph.wq > ec.ow ? ec.ow : 0;
          rows.skip = eph.wq - ec.ow;
          rows.col0 = x_off + kept * d.w;
          g.gemm_rows(gp, rows);
          held0 = first, held1 = end;
          q.x_plane = f.in_band;
          dw_in = ex;
        }
        k.dwconv3x3(q, c.c, dw_in, in[kProducerInput + 1].data, dw_bias, slice);
        const GemmParams gp = group_gemm(s, c, bias, res ? res + b * c.o * n : nullptr, 0, out + b * c.o * n);
        GemmParams t = gemm_slice(gp, g.mr, g.nr, 0, s.m, y_off, y_off + (r1 - r0) * c.w);
        t.b.data = slice;
        GemmRowsB rows;
        rows.offsets = offs;
        g.gemm_rows(t, rows);
      }
    });
  }
}

// A direct 1x1 conv (group 1) that fuse_producer may take into a depthwise -> 1x1 node.
bool fusable_1x1(const OpParams& p, const State* s) {
  return s && s->path == Path::kGemm1x1 && p.group == 1 && direct_1x1(*s->g, s->m, s->k);
}

// The depthwise's producer the fused node can run band by band (its output rows under each
// band's windows): a direct 1x1, or a conv (group 1, no dilation) the wrapping GEMM runs, such
// as MobileNet V2's 3x3 stride-2 stem; x and w: its input and weight shapes.
bool fusable_expand(const OpParams& dp, const State* ds, const Shape& x, const Shape& w,
                    const OpParams::FusedDepthwise& dw) {
  if (w.size() != 4 || dp.dilations[0] != 1 || dp.dilations[1] != 1) return false;
  const int64_t oh = window_output_size(x[2], dp.pads[0], dp.pads[2], w[2], dp.strides[0], 1, false);
  const int64_t ow = window_output_size(x[3], dp.pads[1], dp.pads[3], w[3], dp.strides[1], 1, false);
  if (oh != dw.in_h || ow != dw.in_w || ds->m * oh * ow < kFuseMinFloats) return false;
  if (fusable_1x1(dp, ds)) return true;
  Conv2dParams c = conv_params(dp, x, w, Shape{x[0], ds->m, oh, ow});
  return ds->path == Path::kGemmIm2col && dp.group == 1 && implicit_rows(*ds->g, c, ds->m, ds->k) && rows_wrap(c);
}

// fuse_producer: a direct 1x1 after a depthwise 3x3 whose output rows are wide enough for the
// row kernels (at least 16) and whose output or input is large (kFuseMinFloats per image); then,
// as the depthwise's producer, an expanding direct 1x1 or a stem conv (fusable_expand) whose
// output is that large too.
bool fuse_producer(const OpParams& p, const void* state, const OpParams& dp, const void* dstate,
                   const std::vector<const Shape*>& din, OpParams* fused) {
  const State* ds = static_cast<const State*>(dstate);
  if (!fusable_1x1(p, static_cast<const State*>(state)) || !ds || din.size() < 2 || !din[0] || din[0]->size() != 4)
    return false;
  const Shape& x = *din[0];
  OpParams::FusedDepthwise& dw = fused->depthwise;
  if (dw.on) {  // the depthwise's producer: its output has the depthwise input's H and W
    if (dw.expand || !din[1] || !fusable_expand(dp, ds, x, *din[1], dw)) return false;
    dw.expand = ds;
    dw.expand_act = dp.act;
    dw.expand_strides[0] = dp.strides[0], dw.expand_strides[1] = dp.strides[1];
    dw.expand_pads[0] = dp.pads[0], dw.expand_pads[1] = dp.pads[1];
    const Conv2dParams ec = expand_params(dw, x, *din[1]);
    const Phases ph = column_phases(ec, true);
    dw.expand_phase_floats = phases_are_input(ec, ph) ? 0 : round16(ec.c * ph.floats());
    return true;
  }
  if (ds->path != Path::kDepthwise3x3 || x[1] != dp.group) return false;
  const int64_t oh = window_output_size(x[2], dp.pads[0], dp.pads[2], 3, dp.strides[0], 1, false);
  const int64_t ow = window_output_size(x[3], dp.pads[1], dp.pads[3], 3, dp.strides[1], 1, false);
  if (ow < 16 || std::max(oh * ow, x[2] * x[3]) * x[1] < kFuseMinFloats) return false;
  dw.on = true;
  dw.stride = dp.strides[0];
  dw.pad_top = dp.pads[0], dw.pad_left = dp.pads[1];
  dw.in_h = x[2], dw.in_w = x[3];
  dw.act = dp.act;
  return true;
}

void run_prepared(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out_v,
                  const Shape& os, const KernelTable& k) {
  float* out = static_cast<float*>(out_v);
  const State* s = static_cast<const State*>(ctx.state);
  Conv2dParams c = conv_params(p, *in[0].shape, *in[1].shape, os);
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  const float* res = in.size() > size_t(kResidualInput) ? in[kResidualInput].data : nullptr;  // the session's fused add
  const int64_t in_image = c.c * c.h * c.w, out_image = c.o * c.oh * c.ow;
  if (!s || (s->path == Path::kDepthwise3x3 && (c.c != c.group || c.o != c.group))) {
    const Activation act = c.act;
    if (res) c.act = Activation{};
    k.conv2d(c, in[0].data, in[1].data, bias, out);
    if (res) add_residual(out, res, c.n * out_image, act);
    return;
  }
  const int threads = threads_of(ctx.pool);
  if (p.depthwise.on) {
    run_depthwise_1x1(*s, p.depthwise, c, ctx, in, bias, res, out, k);
    return;
  }
  const float* x = in[0].data;
  if (s->path == Path::kWinograd) {
    run_winograd(*s, c, ctx, x, bias, res, out);
    return;
  }
  if (s->path == Path::kDepthwise3x3) {
    DwConv3x3Params d;
    d.h = c.h, d.w = c.w, d.oh = c.oh, d.ow = c.ow;
    d.stride = c.stride_h;
    d.pad_top = c.pad_top, d.pad_left = c.pad_left;
    d.act = c.act.kind, d.alpha = c.act.alpha, d.beta = c.act.beta;
    if (res) d.act = 0;  // the activation comes after the residual
    const float* w = in[1].data;
    const int64_t planes = c.n * c.c, in_plane = c.h * c.w, out_plane = c.oh * c.ow;
    // Tasks of whole planes, about 8 per thread for balance.
    const int64_t per_task = threads > 1 ? std::max<int64_t>(1, planes / (8 * threads)) : planes;
    const int64_t outputs = planes * out_plane;  // ~0.2-0.4 ns each (AVX-512)
    parallel(ctx.pool, ceil_div(planes, per_task), work_or_inline(outputs, kMinParallelFloats / 4), [&](int64_t task, int) {
      const int64_t p1 = std::min(planes, (task + 1) * per_task);
      // One kernel call per run of planes inside one image (the weights restart at each image).
      for (int64_t pl = task * per_task, run; pl < p1; pl += run) {
        const int64_t ch = pl % c.c;
        run = std::min(p1 - pl, c.c - ch);
        k.dwconv3x3(d, run, x + pl * in_plane, w + ch * 9, bias ? bias + ch : nullptr, out + pl * out_plane);
        if (res) add_residual(out + pl * out_plane, res + pl * out_plane, run * out_plane, c.act);
      }
    });
    return;
  }
  const GemmKernels& g = *s->g;
  const int64_t cg = c.c / c.group;
  // One image on `nth` threads of pool tp (null: inline) with workspace wsb.
  auto image = [&](int64_t b, ThreadPool* tp, int nth, float* wsb) {
    const float* xb = x + b * in_image;
    float* yb = out + b * out_image;
    const float* rb = res ? res + b * out_image : nullptr;
    if (s->path == Path::kGemm1x1 || s->path == Path::kGemm1x1Strided) {
      const int64_t n = c.oh * c.ow;
      const float* src = xb;
      int64_t src_plane = c.h * c.w;
      float* blocks_ws = wsb;
      if (s->path == Path::kGemm1x1Strided) {
        // The pixels the 1x1 window visits, as a compact [C, OH*OW] plane.
        float* sub = wsb;
        blocks_ws = sub + round16(c.c * n);
        const int64_t per_task = items_per_piece(c.c, nth);
        parallel(tp, ceil_div(c.c, per_task), work_or_inline(c.c * n, kMinParallelCopyFloats), [&](int64_t task, int) {
          for (int64_t ci = task * per_task, c1 = std::min(c.c, ci + per_task); ci < c1; ++ci)
            for (int64_t oy = 0; oy < c.oh; ++oy) {
              const float* row = xb + ci * c.h * c.w + oy * c.stride_h * c.w;
              float* d = sub + ci * n + oy * c.ow;
              if (c.stride_w == 1) copy_run(d, row, c.ow);
              else if (c.stride_w == 2) copy_run_stride2(d, row, c.ow);
              else
                for (int64_t ox = 0; ox < c.ow; ++ox) d[ox] = row[ox * c.stride_w];
            }
        });
        src = sub;
        src_plane = n;
      }
      if (direct_1x1(g, s->m, s->k)) {
        // gemm_rows reads B straight from the plane (row q of a group at q * src_plane): no packing.
        int64_t* offs = reinterpret_cast<int64_t*>(blocks_ws);
        for (int64_t q = 0; q < cg; ++q) offs[q] = q * src_plane;
        const Direct1x1Split sp = split_direct_1x1(g, s->m, n, nth);
        for (int64_t gi = 0; gi < c.group; ++gi) {
          const GemmParams gp = group_gemm(*s, c, bias, rb, gi, yb);
          const float* bg = src + gi * cg * src_plane;
          parallel(tp, sp.tasks(), work_or_inline(s->m * s->k * n, kMinParallelMacs), [&](int64_t task, int) {
            int64_t j0, j1, m0, m1;
            sp.ranges(g, task, n, s->m, j0, j1, m0, m1);
            GemmParams t = gemm_slice(gp, g.mr, g.nr, m0, m1, j0, j1);
            t.b.data = bg;
            GemmRowsB rows;
            rows.offsets = offs;
            rows.col0 = j0;
            g.gemm_rows(t, rows);
          });
        }
        return;
      }
      // The plane's columns packed block by block (16-byte copies, inline) rather than by the
      // GEMM's packing (a memcpy per k step of a panel), then the GEMM on the packed block.
      gemm_blocks(g, *s, c, bias, rb, yb, nth, tp, ctx, blocks_ws,
                  [&](int64_t gi, int64_t j0, int64_t cols, float* dst) {
                    pack_panels(src + gi * cg * src_plane, src_plane, cg, j0, cols, g.nr, dst);
                  });
      return;
    }
    const int64_t n = c.oh * c.ow;
    if (s->path == Path::kGemmPixels) {
      // im2col^T as packed A panels of mr pixels, the GEMM into Y^T [n, m], then the transpose
      // (which adds the residual and applies the activation when there is a residual).
      float* cols = wsb + pixels_head_floats(g, c, nth);
      float* yt = cols + round16(gemm_packed_a_size(g, n, s->k));
      const PaddedPlane pq = padded_plane(c);
      const int64_t panels = ceil_div(n, g.mr);
      const int64_t per_task = items_per_piece(panels, nth);
      // A 1x1 stride-1 layer's im2col^T is the input plane transposed: the GEMM reads it in place
      // (A with adjacent rows, f32-gemm-driver.h) instead of a packed copy (~12% of MobileNet V2's
      // 960->320 at 7x7).
      const bool plane_a = c.kh == 1 && c.kw == 1 && c.stride_h == 1 && c.stride_w == 1 && !pq.copy;
      for (int64_t gi = 0; gi < c.group; ++gi) {
        const float* pg = xb + gi * cg * pq.hp * pq.wp;
        if (pq.copy) {  // the group's channels, into the head of the workspace (the GEMM's afterwards)
          float* pp = wsb;
          const int64_t per_ch = items_per_piece(cg, nth);
          parallel(tp, ceil_div(cg, per_ch), work_or_inline(cg * pq.hp * pq.wp, kMinParallelCopyFloats), [&](int64_t task, int) {
            const int64_t c0 = gi * cg + task * per_ch;
            pad_plane(c, pq, xb, c0, std::min((gi + 1) * cg, c0 + per_ch), pp);
          });
          pg = pp + gi * cg * pq.hp * pq.wp;
        }
        if (!plane_a)
          parallel(tp, ceil_div(panels, per_task), work_or_inline(n * s->k, kMinParallelFloats), [&](int64_t task, int) {
            const int64_t q0 = task * per_task, q1 = std::min(panels, q0 + per_task);
            const int64_t j0 = q0 * g.mr, j1 = std::min(n, q1 * g.mr);
            im2col_pack_rows(c, pq, pg, cg, j0, j1 - j0, g.mr, cols + q0 * g.mr * s->k);
          });
        GemmParams gp;
        gp.m = n;
        gp.n = s->m;
        gp.k = s->k;
        gp.a = plane_a ? GemmOperand{pg, 1, n, false} : GemmOperand{cols, 0, 0, true};
        gp.b = {s->packed + gi * s->group_floats, 0, 0, true};
        gp.c = yt;
        gp.c_row_stride = s->m;
        if (bias) {
          gp.bias = bias + gi * s->m;
          gp.bias_kind = kGemmBiasPerCol;
        }
        if (!rb) {
          gp.act = c.act.kind;
          gp.alpha = c.act.alpha;
          gp.beta = c.act.beta;
        }
        // Y^T [n, m] -> y [m, n] part by part as the GEMM's tasks finish them (pixels [i0, i1) x
        // channels [o0, o1)), in blocks of 16 channels x 64 pixels: in the GEMM's job, on the
        // thread that computed the part (it had been a job of its own, 16 channels per task).
        float* yg = yb + gi * s->m * n;
        const float* rg = rb ? rb + gi * s->m * n : nullptr;
        auto transpose = [&](int64_t i0, int64_t i1, int64_t o0, int64_t o1) {
          for (int64_t ob = o0; ob < o1; ob += 16) {
            const int64_t oe = std::min(o1, ob + 16);
            for (int64_t ib = i0; ib < i1; ib += 64) {
              const int64_t ie = std::min(i1, ib + 64);
              transpose_block(yt, s->m, n, ob, oe, ib, ie, yg);
              if (rg)
                for (int64_t o = ob; o < oe; ++o) add_residual(yg + o * n + ib, rg + o * n + ib, ie - ib, c.act);
            }
          }
        };
        using Transpose = decltype(transpose);
        GemmPartDone done;
        done.fn = [](void* ctx, int64_t m0, int64_t m1, int64_t j0, int64_t j1) {
          (*static_cast<Transpose*>(ctx))(m0, m1, j0, j1);
        };
        done.ctx = &transpose;
        if (ThreadPool* pool = pool_for_macs(tp, gp.m * gp.n * gp.k)) {
          gemm(g, gp, wsb, *pool, done);
        } else {  // a GEMM too small for the pool: the transpose still may not be (few input channels)
          g.gemm(gp, wsb);
          parallel(tp, ceil_div(s->m, 16), work_or_inline(n * s->m, kMinParallelFloats),
                   [&](int64_t task, int) { transpose(0, n, task * 16, std::min(s->m, task * 16 + 16)); });
        }
      }
      return;
    }
    const bool implicit = implicit_rows(g, c, s->m, s->k), wrap = implicit && rows_wrap(c);
    const Phases ph = column_phases(c, wrap);
    float* phases = wsb;
    // At stride 1 without padding the one phase is the input itself: the wrapping GEMM reads it
    // in place (it reads only the windows' columns), without the copy and its job.
    const bool in_place = wrap && phases_are_input(c, ph);
    const int64_t units = c.c * ph.sh, per_unit = items_per_piece(units, nth);
    if (!in_place)
      parallel(tp, ceil_div(units, per_unit), work_or_inline(c.c * ph.floats(), kMinParallelCopyFloats), [&](int64_t task, int) {
        build_phases(c, ph, xb, task * per_unit, std::min(units, (task + 1) * per_unit), phases);
      });
    if (wrap) {
      // The GEMM's columns are the output pixels, wrapping at the end of each output row over the
      // phases' wq - ow extra columns: it writes the NCHW output with its epilogue directly.
      int64_t* offs = reinterpret_cast<int64_t*>(phases + round16(c.c * ph.floats()));
      const float* planes = in_place ? xb : phases;
      wrap_offsets(c, ph, offs);
      const Direct1x1Split sp = split_direct_1x1(g, s->m, n, nth);
      for (int64_t gi = 0; gi < c.group; ++gi) {
        const GemmParams gp = group_gemm(*s, c, bias, rb, gi, yb);
        parallel(tp, sp.tasks(), work_or_inline(s->m * s->k * n, kMinParallelMacs), [&](int64_t task, int) {
          int64_t j0, j1, m0, m1;
          sp.ranges(g, task, n, s->m, j0, j1, m0, m1);
          GemmParams t = gemm_slice(gp, g.mr, g.nr, m0, m1, j0, j1);
          t.b.data = planes + gi * cg * ph.floats();
          GemmRowsB rows;
          rows.offsets = offs;
          rows.width = c.ow;
          rows.skip = ph.wq - c.ow;
          rows.col0 = j0;
          g.gemm_rows(t, rows);
        });
      }
      return;
    }
    if (implicit) {
      float* tail = phases + c.c * ph.floats();
      float* tail_end = phases + round16(c.c * ph.floats()) + rows_tail_floats(c, g.nr);
      zero_run(tail, tail_end - tail);
      int64_t* offs = reinterpret_cast<int64_t*>(tail_end);
      float* wide = tail_end + round16(2 * s->k);
      for (int64_t ci = 0, d = 0; ci < cg; ++ci)
        for (int64_t ky = 0; ky < c.kh; ++ky)
          for (int64_t kx = 0; kx < c.kw; ++kx) offs[d++] = (ci * ph.hp + ky * c.dil_h) * ph.wq + kx * c.dil_w;
      const int64_t nw = c.oh * ph.wq, panels = ceil_div(nw, g.nr);
      const int64_t per_task = ceil_div(panels, nth > 1 ? kPiecesPerThread * nth : 1);
      for (int64_t gi = 0; gi < c.group; ++gi) {
        GemmParams gp;
        gp.m = s->m;
        gp.n = nw;
        gp.k = s->k;
        gp.a = {s->packed + gi * s->group_floats, 0, 0, true};
        gp.b.data = phases + gi * cg * ph.floats();
        gp.c = wide + gi * s->m * nw;
        gp.c_row_stride = nw;
        if (bias) {
          gp.bias = bias + gi * s->m;
          gp.bias_kind = kGemmBiasPerRow;
        }
        if (!rb) {
          gp.act = c.act.kind;
          gp.alpha = c.act.alpha;
          gp.beta = c.act.beta;
        }
        parallel(tp, ceil_div(panels, per_task), work_or_inline(s->m * s->k * nw, kMinParallelMacs), [&](int64_t task, int) {
          const int64_t j0 = task * per_task * g.nr, j1 = std::min(nw, j0 + per_task * g.nr);
          GemmParams t = gp;
          t.n = j1 - j0;
          t.c += j0;
          GemmRowsB rows;
          rows.offsets = offs;
          rows.col0 = j0;
          g.gemm_rows(t, rows);
        });
      }
      // [o, oh * wq] -> [o, oh * ow], with the residual (and then the activation) if any.
      const int64_t per_o = items_per_piece(c.o, nth);
      parallel(tp, ceil_div(c.o, per_o), work_or_inline(c.o * n, kMinParallelFloats), [&](int64_t task, int) {
        for (int64_t o = task * per_o, o1 = std::min(c.o, o + per_o); o < o1; ++o)
          for (int64_t oy = 0; oy < c.oh; ++oy) {
            float* dst = yb + o * n + oy * c.ow;
            std::memcpy(dst, wide + o * nw + oy * ph.wq, size_t(c.ow) * sizeof(float));
            if (rb) add_residual(dst, rb + o * n + oy * c.ow, c.ow, c.act);
          }
      });
      return;
    }
    gemm_blocks(g, *s, c, bias, rb, yb, nth, tp, ctx, phases + round16(c.c * ph.floats()),
                [&](int64_t gi, int64_t j0, int64_t cols, float* dst) {
                  im2col_pack_phases(c, ph, phases + gi * cg * ph.floats(), cg, j0, cols, g.nr, dst);
                });
  };
  // A batch of at least as many images as threads runs whole images per thread (each image's
  // GEMM unsplit, on its own slice of the workspace: image_floats); else image by image, each
  // split across the threads.
  if (images_per_thread(s, c.n, threads)) {
    const int64_t per = round16(image_workspace(p, s, {in[0].shape, in[1].shape}, os, 1));
    ctx.pool->parallel_for(c.n, [&](int64_t b, int thread) {
      image(b, nullptr, 1, ctx.thread_part(ctx.workspace, per, thread, threads));
    });
  } else {
    for (int64_t b = 0; b < c.n; ++b) image(b, ctx.pool, threads, ctx.workspace);
  }
}

// The kernels a session can ask for per node (OpParams::kernel_choice) and what a state runs.
const char* const kKernels[] = {"gemm", "pixels", "winograd", "winograd23", nullptr};

const char* kernel_of(const void* state) {
  const State* s = static_cast<const State*>(state);
  switch (s->path) {
    case Path::kDepthwise3x3: return "depthwise3x3";
    case Path::kGemmPixels: return "pixels";
    case Path::kWinograd: return s->wk->tile == 2 ? "winograd23" : "winograd";
    default: return "gemm";
  }
}

}  // namespace

extern const OpDef kConv2dOp = {1,       "conv2d",     2,       3, parse, infer_shape, run, false, nullptr,
                                prepare, run_prepared, workspace_floats, kKernels, kernel_of, kResidualInput,
                                fuse_producer, kProducerInput};

}  // namespace ds
