// Quantized (u8 activations, i8 weights, i32 accumulation) kernels and u8 data movement
// (docs/format.md, "Quantized inference (int8)"). Names: ds_qu8_* compute on quantized values,
// ds_u8_* / ds_x8_* move bytes. Pure functions on pointers, like kernels/kernels.h.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/kernels.h"

namespace ds {

// ---- fixed-point requantization, exactly as docs/format.md (numpy int64 semantics: the
// product and the rounding addition wrap modulo 2^64; >> is arithmetic). ----
inline int64_t qu8_round_shift(int64_t v, int n) {  // n in 1..62
  const uint64_t u = uint64_t(v) + (uint64_t(1) << (n - 1));
  return int64_t(u) >> n;
}
inline int64_t qu8_requant(int64_t acc, int32_t multiplier, int32_t shift) {
  return qu8_round_shift(int64_t(uint64_t(acc) * uint64_t(int64_t(multiplier))), 31 + shift);
}
inline uint8_t qu8_clamp(int64_t v, int32_t lo, int32_t hi) {
  return uint8_t(v < lo ? lo : v > hi ? hi : v);
}

// The output epilogue of qconv2d/qdense: clamp(y_zp + requant(acc), act_min, act_max).
struct QuantOut {
  int32_t y_zp = 0, act_min = 0, act_max = 255;
};

// Per output channel o: bias[o] (i32), multiplier[o], shift[o].
struct QChannelParams {
  const int32_t* bias;
  const int32_t* multiplier;
  const int32_t* shift;
};

// NCHW u8 convolution with i8 weights (O, C/group, kh, kw); padded positions take x = x_zp.
struct QConv2dParams {
  Conv2dParams conv;  // conv.act unused
  int32_t x_zp = 0;
  QuantOut out;
};

// Reference kernels (src/kernels/ref).
void ds_qu8_conv2d__scalar(const QConv2dParams& p, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                           uint8_t* y);
// y (n, m) from x (n, k) and w (m, k).
void ds_qu8_dense__scalar(int64_t n, int64_t k, int64_t m, int32_t x_zp, const QuantOut& q, const uint8_t* x,
                          const int8_t* w, const QChannelParams& ch, uint8_t* y);
// y = clamp(y_zp + round_shift((a - a_zp) * a_mult + (b - b_zp) * b_mult, 31 + shift), lo, hi)
struct QAddParams {
  int32_t a_zp, b_zp;
  int64_t a_mult, b_mult;
  int32_t shift;
  QuantOut out;
};
void ds_qu8_vadd__scalar(const BinaryParams& p, const QAddParams& q, const uint8_t* a, const uint8_t* b, uint8_t* y);
// qadd's unclamped result y_zp + q, q = round_shift(v, n), n = 31 + shift, on int32 lanes with
// 16-bit products (vpmaddwd): negated, -q = floor(X / 2^n) with
//   X = a (-a_mult) + b (-b_mult) + K,  K = a_zp a_mult + b_zp b_mult + 2^(n-1) - 1
// (floor(-y / d) = -floor((y + d - 1) / d)). Each negated multiplier m = hi 2^16 + lo with lo the
// signed low 16 bits (hi fits int16 because m > -2^31), and K = k_hi 2^16 + k_lo (0 <= k_lo < 2^16),
// so X = 2^16 H + L with H = a a_hi + b b_hi + k_hi, L = a a_lo + b b_lo + k_lo, and
//   floor(X / 2^n) = (H + (L >> 16)) >> (n - 16)
// exactly, with H and L in int32 when n is in 16..46.
struct QAddSplit {
  int16_t a_lo = 0, b_lo = 0, a_hi = 0, b_hi = 0;
  int32_t k_lo = 0, k_hi = 0, count = 0, y_zp = 0;
};
// False when the split does not apply (n outside 16..46 or a multiplier outside 0..2^31 - 1).
inline bool qu8_qadd_split(const QAddParams& q, QAddSplit& s) {
  const int n = 31 + q.shift;
  const int64_t limit = int64_t(1) << 31;
  if (n < 16 || n > 46 || q.a_mult < 0 || q.a_mult >= limit || q.b_mult < 0 || q.b_mult >= limit) return false;
  auto split = [](int64_t m, int16_t& hi, int16_t& lo) {
    lo = int16_t(uint16_t(uint64_t(-m) & 0xFFFF));
    hi = int16_t((-m - lo) >> 16);
  };
  split(q.a_mult, s.a_hi, s.a_lo);
  split(q.b_mult, s.b_hi, s.b_lo);
  const int64_t k = int64_t(q.a_zp) * q.a_mult + int64_t(q.b_zp) * q.b_mult + (int64_t(1) << (n - 1)) - 1;
  s.k_lo = int32_t(k & 0xFFFF);
  s.k_hi = int32_t(k >> 16);  // < 2^25 + 2^29
  s.count = n - 16;
  s.y_zp = q.out.y_zp;
  return true;
}
// The split's arithmetic on one pair (a, b of 0..255), as the vector kernels compute it.
inline int32_t qu8_qadd_split_eval(const QAddSplit& s, int32_t a, int32_t b) {
  const int32_t lo = a * s.a_lo + b * s.b_lo + s.k_lo, hi = a * s.a_hi + b * s.b_hi + s.k_hi;
  return s.y_zp - ((hi + (lo >> 16)) >> s.count);
}
// The 256-entry table of clamp(y_zp + requant(v - zp, mult, shift), 0, 255) for v = 0..255.
void ds_qu8_requant_table__scalar(int32_t zp, int32_t mult, int32_t shift, int32_t y_zp, uint8_t* table);
void ds_u8_lut__scalar(int64_t n, const uint8_t* x, const uint8_t* table, uint8_t* y);
// Per plane: clamp(y_zp + requant(sum(x - x_zp), mult, shift), 0, 255).
void ds_qu8_global_avgpool__scalar(int64_t planes, int64_t size, int32_t x_zp, int32_t y_zp, int32_t mult,
                                   int32_t shift, const uint8_t* x, uint8_t* y);
void ds_qu8_quantize__scalar(int64_t n, float scale, int32_t zp, const float* x, uint8_t* y);
void ds_qu8_dequantize__scalar(int64_t n, float scale, int32_t zp, const uint8_t* x, float* y);

// u8 data movement (the f32 kernels' semantics on bytes).
void ds_u8_maxpool2d__scalar(const Pool2dParams& p, const uint8_t* x, uint8_t* y);
void ds_u8_global_maxpool__scalar(int64_t planes, int64_t size, const uint8_t* x, uint8_t* y);
void ds_x8_copy_nd__scalar(const CopyNdParams& p, const uint8_t* x, uint8_t* y);
// concat; with tables (one 256-byte table per input, or null) each byte is mapped on the way.
void ds_x8_concat__scalar(const ConcatParams& p, const uint8_t* const* xs, const uint8_t* const* tables, uint8_t* y);
void ds_u8_pad__scalar(const PadParams& p, const uint8_t* x, uint8_t* y);  // constant: uint8_t(p.value)
void ds_u8_resize_nearest__scalar(const ResizeParams& p, const uint8_t* x, uint8_t* y);

// im2col of output pixels [p0, p1) of one group: rows (c, ky, kx) of C/group*kh*kw, each of
// p1 - p0 bytes, row r at dst + r * (p1 - p0); padded taps take x_zp. x is the group's first channel.
void ds_u8_im2col__scalar(const Conv2dParams& p, int64_t channels, int32_t x_zp, const uint8_t* x, int64_t p0,
                          int64_t p1, uint8_t* dst);

// ---- packed int8 GEMM (per ISA, src/kernels/x86/qs8-gemm-*) ----
//
//   y[i, j] = clamp(y_zp + requant(bias[i] + sum_k w[i, k] * x[k, j], mult[i], shift[i]), lo, hi)
//
// with x u8 (raw, the zero-point term folded into bias by the op) and w i8. Rows i are output
// channels (tile mr), columns j pixels (tile nr). Both operands are packed in groups of kr depth
// steps: weights into panels of mr rows, [group][row][kr] elements; activations into panels of
// nr columns, [group][column][kr] elements; zero past the edges. The element types are the ISA's
// (VNNI: u8 x and i8 w; AVX2: both widened to int16). The accumulator is int32: the op checks
// |bias| + K*255*128 < 2^31 before choosing these kernels.
struct QGemmParams {
  int64_t m, n, k;
  const void* w;  // packed, starting at a panel
  const void* x;  // packed, starting at a panel
  uint8_t* y;
  int64_t y_row_stride;
  QChannelParams ch;  // starting at row 0 of this call
  QuantOut out;
  // Non-null (levels with interleave4): x is not packed; the 32 columns from j of depth group g
  // are the 128 bytes at (const uint8_t*)x + x_offsets[g] + 4 * j, [column][4] (the activations
  // stored four channels interleaved, each depth group a channel quad at one tap).
  const int64_t* x_offsets = nullptr;
  // Non-zero (levels with QGemmKernels::grid_out): column j is position q = grid0 + j of a grid
  // grid_w wide whose first out_w columns of each row are output pixels, out_w to a row of y:
  // stored at y[i * y_row_stride + q - (q / grid_w) * (grid_w - out_w)] when q % grid_w < out_w,
  // dropped otherwise (the columns a convolution computes past its output rows, State::shifted).
  int64_t grid_w = 0, out_w = 0, grid0 = 0;
  // With grid_w and x_offsets, and out_w >= 16 (levels with QGemmKernels::pixel_cols): column j
  // is output pixel t = grid0 + j instead, read at its grid position q = t + (t / out_w) *
  // (grid_w - out_w) (x_offsets[g] + 4 * q from x) and stored at y[i * y_row_stride + t], so
  // no column is computed and dropped.
  bool pixel_cols = false;
  // Non-null (levels with QGemmKernels::fused_add): a qadd runs in the epilogue, on the clamped u8
  // result c as its operand a and the residual byte r at y's offset from `residual` as b,
  //   y = clamp(qu8_qadd_split_eval(add, c, r), add_out.act_min, add_out.act_max)
  // (bit for bit qconv2d then qadd; the op puts the conv's operand first in `add`).
  const uint8_t* residual = nullptr;
  QAddSplit add;
  QuantOut add_out;
};

struct QGemmKernels {
  const char* name;
  int32_t mr, nr, kr;
  int32_t elem_bytes;  // of a packed activation element (1 or 2)
  int64_t (*packed_w_bytes)(int64_t m, int64_t k);
  // w (m, k) row-major -> dst (packed_w_bytes)
  void (*pack_w)(int64_t m, int64_t k, const int8_t* w, void* dst);
  int64_t (*packed_x_bytes)(int64_t k, int64_t n);
  // x (k, n) with row stride -> dst (packed_x_bytes)
  void (*pack_x)(int64_t k, int64_t n, const uint8_t* x, int64_t row_stride, void* dst);
  void (*gemm)(const QGemmParams& p);
  // ds_u8_im2col__scalar's contract; null: that kernel.
  void (*im2col)(const Conv2dParams& p, int64_t channels, int32_t x_zp, const uint8_t* x, int64_t p0, int64_t p1,
                 uint8_t* dst) = nullptr;
  // pack_x with row kk of x at x + row_offsets[kk] (the taps of a convolution read in place from
  // a padded input); null: not available.
  void (*pack_x_rows)(int64_t k, int64_t n, const uint8_t* x, const int64_t* row_offsets, void* dst) = nullptr;
  // dst[j] = src[j * stride] for j < n (the columns of a phase plane); null: a plain loop.
  void (*gather_row)(int64_t n, const uint8_t* src, int64_t stride, uint8_t* dst) = nullptr;
  // A padded row of four channels interleaved (the layout that QGemmParams::x_offsets reads):
  // dst[4 * j + r] = s[r][(j - lo) * stride] for lo <= j < hi, x_zp for the other j < n (r < 4;
  // 0 <= lo <= hi <= n; s[r] is the input for column lo). Null: the GEMM does not take x_offsets.
  void (*interleave4)(int64_t n, int64_t lo, int64_t hi, const uint8_t* const s[4], int64_t stride, int32_t x_zp,
                      uint8_t* dst) = nullptr;
  // The transposed form for few pixels and a deep K (QGemmTParams); null: not available.
  int64_t (*packed_wt_bytes)(int64_t m, int64_t k) = nullptr;
  void (*pack_wt)(int64_t m, int64_t k, const int8_t* w, void* dst) = nullptr;
  void (*gemm_t)(const struct QGemmTParams& p) = nullptr;
  bool grid_out = false;  // gemm takes QGemmParams::grid_w
  bool fused_add = false;  // gemm takes QGemmParams::residual
  bool pixel_cols = false;  // gemm takes QGemmParams::pixel_cols
};

// Output channels in the vector lanes (panels of 32, weights packed [panel][k/4][32][4]) and
// pixels broadcast (any count, none wasted): for output pixel t (0..n) of rows [m0, m1)
//   y[i * y_row_stride + t] = epilogue(bias[i] + sum_g w[i, g] . x4(g, t))
// where x4(g, t) is the int32 (four u8) at x + x_offsets[g] + 4 * pix[t] (the channel-quad
// layout of QGemmParams::x_offsets). ch starts at row 0 of w; m0 is a multiple of 32.
struct QGemmTParams {
  int64_t m0, m1, n, k;
  const void* w;  // packed, panel 0
  const uint8_t* x;
  const int64_t* x_offsets;
  const int32_t* pix;
  uint8_t* y;
  int64_t y_row_stride;
  QChannelParams ch;
  QuantOut out;
};

// Depthwise convolution (group == C == O, one input channel per output), any window, per ISA.
// ch already has the zero-point term folded into bias (the kernel sums raw x * w), and x is
// read with padding x_zp as in ds_qu8_conv2d__scalar. workspace: ds_qu8_dwconv_workspace bytes.
int64_t ds_qu8_dwconv_workspace(const Conv2dParams& p);
// Row length of that padded plane: the widest read of any output row, plus 64 bytes of slack for
// full-vector loads, rounded to 64.
inline int64_t ds_qu8_dw_padded_width(const Conv2dParams& p) {
  return ((p.ow - 1) * p.stride_w + (p.kw - 1) * p.dil_w + 1 + 64 + 63) / 64 * 64;
}
// The 3x3 depthwise kernels (stride 1 or 2 across, dilation 1) widen a few channels at a time
// into int16 planes padded with x_zp, rows of wq elements (the padded input width, or what the
// outputs read), before computing any of them; with stride 1 both ways the outputs go to a u8
// grid of the same row length first (kernels/x86/qu8-dwconv3x3-avx512vnni.cc).
struct QDw3x3Layout {
  int64_t hp, wq;         // plane rows and row length
  int64_t plane_len;      // int16 elements of a plane: 32 past its last row, and every read
  int64_t grid_len;       // u8 outputs of the stride-1 grid; 0 for the other strides
  int64_t channel_bytes;  // 2 * plane_len + grid_len, rounded up to 64
  int64_t group;          // channels widened together
};
inline QDw3x3Layout ds_qu8_dw3x3_layout(const Conv2dParams& p) {
  QDw3x3Layout l;
  if (p.stride_h == 1 && p.stride_w == 1) {
    l.hp = p.oh + 2, l.wq = p.ow + 2;
    const int64_t blocks = ((p.oh - 1) * l.wq + p.ow + 31) / 32;  // 32 grid positions each
    l.plane_len = (std::max(blocks * 32 + 2 * l.wq + 2, l.hp * l.wq + 32) + 31) / 32 * 32;
    l.grid_len = blocks * 32;
  } else {
    l.hp = (p.oh - 1) * p.stride_h + 3, l.wq = (p.ow - 1) * p.stride_w + 3;
    l.plane_len = (l.hp * l.wq + 2 * p.ow + 64 + 31) / 32 * 32;
    l.grid_len = 0;
  }
  l.channel_bytes = (2 * l.plane_len + l.grid_len + 63) / 64 * 64;
  l.group = std::max<int64_t>(1, std::min<int64_t>(8, 32768 / l.channel_bytes));
  return l;
}

// The channels-in-lanes 3x3 depthwise kernel (kernels/x86/qu8-dwconv3x3-avx512vnni.cc): blocks
// of 16 channels transposed into rows of 16-byte pixels (channel c at byte c), each padded row
// split into its even and odd pixels (`we` pixels each), a strip of output rows at a time.
struct QDw3x3ClLayout {
  int64_t windows;    // per output row: 4-pixel windows at even columns (stride 1: two outputs each),
                      // run 4 (stride 1) or 8 at a time
  int64_t we;         // pixels of each half row
  int64_t row_bytes;  // 2 * we * 16
  int64_t strip;      // output rows per strip
  int64_t rows_in;    // padded rows per strip
  int64_t bytes;      // workspace
};
inline QDw3x3ClLayout ds_qu8_dw3x3_cl_layout(const Conv2dParams& p) {
  QDw3x3ClLayout l;
  l.windows = p.stride_w == 1 ? (p.ow + 1) / 2 : p.ow;
  const int64_t step = p.stride_w == 1 ? 4 : 8;  // windows per step
  const int64_t windows = (l.windows + step - 1) / step * step;
  l.we = std::max(windows + 1, (p.pad_left + (p.w + 15) / 16 * 16 + 1) / 2 + 1);
  l.row_bytes = 2 * l.we * 16;
  const int64_t budget = std::max<int64_t>(3, 24576 / l.row_bytes);
  l.strip = std::max<int64_t>(1, std::min<int64_t>(p.oh, (budget - 3) / p.stride_h + 1));
  l.rows_in = (l.strip - 1) * p.stride_h + 3;
  l.bytes = l.rows_in * l.row_bytes + 64;
  return l;
}

// The channel-rows 3x3 depthwise kernel (kernels/x86/qu8-dwconv3x3-avx512vnni.cc), same stride
// (1 or 2) both ways: one channel's input padded with x_zp into plane rows (stride 2: the even and
// the odd padded rows in two planes), outputs computed as a flat grid of rows of gw positions
// (ow plus 2, or plus 1 at stride 2) into the workspace at grid_offset, then copied out.
struct QDw3x3RowsLayout {
  bool applies;
  int64_t rows;         // padded input rows
  int64_t row_bytes;    // bytes written per padded row (a multiple of 64, from the row's start)
  int64_t pitch;        // plane row length: gw (stride 1) or 2 gw (stride 2)
  int64_t gw;           // grid row length
  int64_t grid_len;     // grid positions computed: 64-position blocks covering the outputs
  int64_t odd_offset;   // stride 2: start of the odd rows' plane
  int64_t grid_offset;  // start of the grid
  int64_t bytes;        // workspace
};
inline QDw3x3RowsLayout ds_qu8_dw3x3_rows_layout(const Conv2dParams& p) {
  QDw3x3RowsLayout l{};
  l.applies = p.stride_h == p.stride_w && (p.stride_w == 1 || p.stride_w == 2);
  const int64_t s = p.stride_w;
  l.rows = (p.oh - 1) * s + 3;
  l.gw = s == 1 ? p.ow + 2 : p.ow + 1;
  l.pitch = s * l.gw;  // at least the (ow - 1) * s + 3 columns the outputs read
  l.row_bytes = (std::max<int64_t>(p.pad_left + p.w, l.pitch) + 63) / 64 * 64;
  l.grid_len = ((p.oh - 1) * l.gw + p.ow + 63) / 64 * 64;
  // A plane holds its rows, the last row's 64-byte stores and the reads of the last grid block
  // (kernel row 2 from row 2 (stride 1) or 1 (stride 2), up to 64 + 66 bytes past stride * g).
  const int64_t plane_rows = s == 1 ? l.rows : (l.rows + 1) / 2;
  const int64_t plane = (std::max((plane_rows - 1) * l.pitch + l.row_bytes,
                                  (3 - s) * l.pitch + s * l.grid_len + 130) + 63) / 64 * 64;
  l.odd_offset = plane;
  l.grid_offset = (s == 1 ? 1 : 2) * plane;
  l.bytes = l.grid_offset + l.grid_len;
  return l;
}

using QDwConvKernel = void (*)(const QConv2dParams& p, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                               uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
// Any window (src/kernels/x86/qu8-dwconv-impl.h), and 3x3 with stride 1 or 2 across, which runs
// the former for other windows.
void ds_qu8_dwconv__avx2(const QConv2dParams& p, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                         uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
void ds_qu8_dwconv__avx512vnni(const QConv2dParams& p, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                               uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
void ds_qu8_dwconv3x3__avx2(const QConv2dParams& p, const uint8_t* x, const int8_t* w, const QChannelParams& ch,
                            uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
void ds_qu8_dwconv3x3__avx512vnni(const QConv2dParams& p, const uint8_t* x, const int8_t* w,
                                  const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
// 3x3, dilation 1, stride 1 or 2 across only: the channels-in-lanes kernel (QDw3x3ClLayout), the
// channel-rows kernel (QDw3x3RowsLayout; channels in lanes where the strides differ), and the
// per-channel plane kernel; ds_qu8_dwconv3x3__avx512vnni picks channel rows or lanes by shape.
void ds_qu8_dwconv3x3_cl__avx512vnni(const QConv2dParams& p, const uint8_t* x, const int8_t* w,
                                     const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
void ds_qu8_dwconv3x3_rows__avx512vnni(const QConv2dParams& p, const uint8_t* x, const int8_t* w,
                                       const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0,
                                       int64_t c1);
void ds_qu8_dwconv3x3_planes__avx512vnni(const QConv2dParams& p, const uint8_t* x, const int8_t* w,
                                         const QChannelParams& ch, uint8_t* workspace, uint8_t* y, int64_t c0,
                                         int64_t c1);
// The channels-in-lanes or channel-rows kernel (picked as above) with its per-channel constants
// (weights, bias, requantization) packed once per session: packed_bytes is 0 when the shape does not run that kernel (then use
// dwconv); pack fills packed_bytes for all q.conv.c channels; c0 a multiple of 16, and c1 too
// unless it is q.conv.c.
int64_t ds_qu8_dw3x3_packed_bytes__avx512vnni(const QConv2dParams& p);
void ds_qu8_dw3x3_pack__avx512vnni(const QConv2dParams& p, const int8_t* w, const QChannelParams& ch, void* dst);
void ds_qu8_dwconv3x3_packed__avx512vnni(const QConv2dParams& p, const uint8_t* x, const void* packed,
                                         uint8_t* workspace, uint8_t* y, int64_t c0, int64_t c1);
// dot products for qdense: y[j] for rows [m0, m1) of w with raw-x sums folded as in QGemmParams.
using QDenseKernel = void (*)(int64_t k, const uint8_t* x, const int8_t* w, int64_t m0, int64_t m1,
                              const QChannelParams& ch, const QuantOut& q, uint8_t* y);

// Elementwise kernels on n contiguous elements (qadd: a and b of the output's shape).
using QAddKernel = void (*)(int64_t n, const QAddParams& q, const uint8_t* a, const uint8_t* b, uint8_t* y);
using QuantizeKernel = void (*)(int64_t n, float scale, int32_t zp, const float* x, uint8_t* y);
using DequantizeKernel = void (*)(int64_t n, float scale, int32_t zp, const uint8_t* x, float* y);
void ds_qu8_vadd__avx512(int64_t n, const QAddParams& q, const uint8_t* a, const uint8_t* b, uint8_t* y);
void ds_qu8_quantize__avx512(int64_t n, float scale, int32_t zp, const float* x, uint8_t* y);
void ds_qu8_dequantize__avx512(int64_t n, float scale, int32_t zp, const uint8_t* x, float* y);
void ds_u8_maxpool2d__avx512(const Pool2dParams& p, const uint8_t* x, uint8_t* y);
void ds_qu8_global_avgpool__avx512(int64_t planes, int64_t size, int32_t x_zp, int32_t y_zp, int32_t mult,
                                   int32_t shift, const uint8_t* x, uint8_t* y);

// The int8 part of one ISA level's kernel table.
struct QKernels {
  const char* isa;
  const QGemmKernels* gemm;  // null: qconv2d runs ds_qu8_conv2d__scalar
  QDwConvKernel dwconv;      // null likewise
  QDenseKernel dense;        // null: qdense runs ds_qu8_dense__scalar
  QAddKernel vadd = nullptr;  // null: the scalar kernels
  QuantizeKernel quantize = nullptr;
  DequantizeKernel dequantize = nullptr;
  void (*maxpool2d)(const Pool2dParams& p, const uint8_t* x, uint8_t* y) = nullptr;  // null: the scalar one
  // ds_qu8_global_avgpool__scalar's contract; null: that kernel.
  void (*global_avgpool)(int64_t planes, int64_t size, int32_t x_zp, int32_t y_zp, int32_t mult, int32_t shift,
                         const uint8_t* x, uint8_t* y) = nullptr;
  // qdense with the weights packed once (dense_pack into dense_packed_bytes): QDenseKernel's
  // contract with w the packed weights and m0 a multiple of dense_rows; null: `dense`.
  int64_t (*dense_packed_bytes)(int64_t m, int64_t k) = nullptr;
  void (*dense_pack)(int64_t m, int64_t k, const int8_t* w, void* dst) = nullptr;
  QDenseKernel dense_packed = nullptr;
  int64_t dense_rows = 1;
  // Optional: the depthwise kernel with per-session constants (ds_qu8_dw3x3_packed_bytes__*).
  int64_t (*dw_packed_bytes)(const QConv2dParams& p) = nullptr;
  void (*dw_pack)(const QConv2dParams& p, const int8_t* w, const QChannelParams& ch, void* dst) = nullptr;
  void (*dwconv_packed)(const QConv2dParams& p, const uint8_t* x, const void* packed, uint8_t* workspace, uint8_t* y,
                        int64_t c0, int64_t c1) = nullptr;
};

extern const QKernels ds_qkernels__scalar;
extern const QKernels ds_qkernels__avx2;
extern const QKernels ds_qkernels__avx512vnni;
extern const QKernels ds_qkernels__avxvnni;  // AVX2 + AVX-VNNI (256-bit vpdpbusd)

}  // namespace ds
