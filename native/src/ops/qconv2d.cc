// qconv2d (op id 27): x u8 or i16 (N,C,H,W), weight i8 (O,C/group,kh,kw), bias/multiplier/shift i32 (O).
// acc[o] = bias[o] + sum (x - x_zp) * w over the window (padding takes x = x_zp);
// y = clamp(y_zp + requant(acc, multiplier[o], shift[o]), act_min, act_max), u8 or i16.
//
// x or y i16 (docs/format.md, "int16 activations"): State::int16, its own path chosen at prepare
// from the value dtypes. On a level with Q16Kernels (u8 x widened to x - x_zp in int16 first): the
// weights widened to int16 once, and per panel of 32 output pixels (stride 1: grid columns of the
// padded planes, packed from rows in place; else an im2col gather) the vpmaddwd GEMM with exact
// int64 sums and a vector epilogue; otherwise the reference kernel. The rest of this comment is
// the u8 path.
//
// With SIMD kernels: the zero-point term is folded into the bias once (bias - x_zp * sum w), the
// weights are packed once per session, and each run packs a block of output pixels and runs the
// int8 GEMM with the requantization in its epilogue. 1x1 stride-1 convolutions pack the input
// directly; other windows pack their taps in place from phase planes of the padded input
// (State::shifted) when the level has pack_x_rows, else from an im2col block. Depthwise
// convolutions run a direct kernel. Blocks of pixels (and of output channels when there are few
// pixels) go to the thread pool.
#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/qcommon.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "qconv2d");
  OpParams p;
  parse_conv_window(a, p);
  p.zp = q_zero_point(a, "x_zero_point");
  p.y_zp = q_zero_point(a, "y_zero_point");
  q_parse_act_range(a, p);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  const std::string who = node_where(node, "qconv2d");
  if (x.size() != 4) fail(DS_ERR_SHAPE, who, ": input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  if (w.size() != 4) fail(DS_ERR_SHAPE, who, ": weight ", shape_str(w), " is not rank 4 (O,C/group,kh,kw)");
  if (x[1] % p.group != 0 || w[0] % p.group != 0 || w[1] != x[1] / p.group)
    fail(DS_ERR_SHAPE, who, ": weight ", shape_str(w), " does not fit input ", shape_str(x), " with group ", p.group);
  const int64_t oh = window_output_size(x[2], p.pads[0], p.pads[2], w[2], p.strides[0], p.dilations[0], false);
  const int64_t ow = window_output_size(x[3], p.pads[1], p.pads[3], w[3], p.strides[1], p.dilations[1], false);
  if (oh < 1 || ow < 1)
    fail(DS_ERR_SHAPE, who, ": kernel ", w[2], "x", w[3], " (with dilation and pads) does not fit input ", shape_str(x));
  return {x[0], w[0], oh, ow};
}

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  return q_check_linear(p, in, who, 4);
}

Conv2dParams conv_params(const OpParams& p, const Shape& x, const Shape& w, int64_t oh, int64_t ow) {
  Conv2dParams c;
  c.n = x[0], c.c = x[1], c.h = x[2], c.w = x[3];
  c.o = w[0], c.oh = oh, c.ow = ow;
  c.kh = w[2], c.kw = w[3];
  c.stride_h = p.strides[0], c.stride_w = p.strides[1];
  c.pad_top = p.pads[0], c.pad_left = p.pads[1];
  c.dil_h = p.dilations[0], c.dil_w = p.dilations[1];
  c.group = p.group;
  return c;
}

struct State {
  bool int16 = false;                  // x or y i16: run_int16
  const Q16Kernels* q16 = nullptr;     // int16 (x i16, or u8 with y i16): the GEMM, over w16
  std::vector<int16_t> w16;            // weights widened, rows of 2 * k2 (K padded with 0 to even)
  int64_t k2 = 0;                      // and hq x wq: the input planes padded with zeros
  Shape q16_input;                     // the (C, H, W) the workspace was sized for
  const QGemmKernels* gemm = nullptr;  // GEMM path
  QDwConvKernel dw = nullptr;          // depthwise path
  // Depthwise with per-channel constants packed once (QKernels::dwconv_packed), when the level has
  // a kernel for the shape.
  void (*dw_packed)(const QConv2dParams&, const uint8_t*, const void*, uint8_t*, uint8_t*, int64_t, int64_t) = nullptr;
  std::vector<uint8_t> dw_consts;
  std::vector<int32_t> bias;           // zero-point term folded in
  std::vector<uint8_t> packed_w;       // per group, group_bytes each
  int64_t group_bytes = 0;
  bool direct = false;                 // 1x1, stride 1, no padding: the input is the GEMM's B
  // Windows other than 1x1 stride 1: the input is copied once, padded with x_zp, into phase
  // planes, and the GEMM runs over the pixels q = oy * wq + ox of their grid, whose tap
  // (ky, kx) of channel c is the byte at q + row_offsets[(c, ky, kx)]: packed in place, no
  // im2col. Phase (a, b) of a channel holds the padded input's rows a, a + stride_h, ... and
  // columns b, b + stride_w, ... (hq x wq); with stride 1 there is one phase, the padded plane.
  // Grid columns ox >= ow are computed and dropped when copying out (not with pixel columns,
  // below).
  bool shifted = false;
  int64_t hq = 0, wq = 0, phases = 0;  // phase plane size; phases used per channel
  std::vector<int32_t> phase_of;       // per (a, b): its index among the used phases, or -1
  std::vector<int64_t> row_offsets;
  // Shifted with C/group a multiple of 4 on levels with interleave4: the phase planes hold four
  // channels interleaved ([quad][phase][pixel][4]) and the GEMM reads them in place through
  // x_offsets (one per depth group: a channel quad at one tap), no packing; the weights' depth is
  // ordered (quad, tap, channel in quad) to match. With rows of >= 16 output pixels the GEMM's
  // columns are the output pixels (QGemmParams::pixel_cols), none computed and dropped.
  bool implicit = false;
  std::vector<int64_t> x_offsets;
  // Implicit with few output pixels and a deep K (ResNet's 14x14 and 7x7 layers): the transposed
  // GEMM (QGemmTParams), output channels in the lanes and exactly the output pixels broadcast
  // (pix: their grid positions), so no lane computes a dropped grid column or a padded pixel.
  bool transposed = false;
  std::vector<uint8_t> packed_wt;
  std::vector<int32_t> pix;
  // Shifted, not implicit, rows up to kQuantizedRowMax: the input may come as f32 with
  // OpParams::quantize, each row quantized once while the phase planes are filled.
  bool takes_f32 = false;
  int64_t padded_bytes = 0;            // the phase planes and their slack, in the workspace
  int64_t chunk = 0;                   // output pixels per task (multiple of nr)
  int64_t ws_bytes = 0;                // per thread, in the workspace after the phase planes
};

// The int16 GEMM's int64 block per thread: kQ16Mr rows of kQ16Nr, and one row of slack because
// the store kernels read whole rows from a column offset below kQ16Nr.
constexpr int64_t kQ16AccBytes = (kQ16Mr + 1) * kQ16Nr * 8;

constexpr int64_t kQuantizedRowMax = 4096;  // bytes of one quantized input row, on the stack
constexpr int64_t kPrefetchRows = 4;

// The run's scratch lives in the session's workspace, shared by all nodes, rather than in each
// node's state: a buffer of the node's own is cold in the caches when the node runs again after
// the rest of the network (the phase planes of a 64x56x56 input: 215 KB written per run).
int64_t workspace_bytes(const State& s, int threads) { return (s.padded_bytes + 63) / 64 * 64 + s.ws_bytes * threads; }

// State::hq, wq, phases, phase_of and row_offsets (see State::shifted) for an input of dims xd,
// cg channels a group, a kh x kw window and ow output columns.
void set_phases(const OpParams& p, const Shape& xd, int64_t cg, int64_t kh, int64_t kw, int64_t ow,
                bool shared_pad_columns, State& s) {
  const int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilations[0], dw = p.dilations[1];
  s.hq = (xd[2] + p.pads[0] + p.pads[2] + sh - 1) / sh;
  s.wq = (xd[3] + p.pads[1] + p.pads[3] + sw - 1) / sw;
  // shared_pad_columns, column stride 1: a row's right padding is the next row's left padding
  // (both x_zp), so the rows need W + max(pad_left, pad_right) columns, not W + both pads: every
  // grid row computes one dropped column fewer (3x3 pad 1 at 56 columns: 57 instead of 58). A tap
  // reading past a row's end lands on the next row's (or the next plane's, or the slack's) first
  // pad_left columns, which hold x_zp in every row.
  if (shared_pad_columns && sw == 1) s.wq = std::max(ow, xd[3] + std::max(p.pads[1], p.pads[3]));
  s.phase_of.assign(size_t(sh * sw), -1);
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t kx = 0; kx < kw; ++kx) {
      int32_t& idx = s.phase_of[size_t((ky * dh % sh) * sw + kx * dw % sw)];
      if (idx < 0) idx = int32_t(s.phases++);
    }
  const int64_t plane = s.hq * s.wq;
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t phase = s.phase_of[size_t((ky * dh % sh) * sw + kx * dw % sw)];
        s.row_offsets.push_back((ci * s.phases + phase) * plane + ky * dh / sh * s.wq + kx * dw / sw);
      }
}

std::shared_ptr<const void> prepare(const OpParams& p, const std::vector<ValueInfo>& in, const KernelTable& kt,
                                    int threads) {
  auto s = std::make_shared<State>();
  if (in[0].dtype != kDtypeU8 || p.y_dtype != kDtypeU8) {
    s->int16 = true;
    if (kt.q16) {  // x i16, or u8 with y i16
      const Shape& wd = *in[1].dims;
      const int64_t o = wd[0], k = product(wd, 1);
      const int8_t* w = static_cast<const int8_t*>(in[1].data);
      s->q16 = kt.q16;
      s->k2 = (k + 1) / 2;
      s->w16.assign(size_t(o * 2 * s->k2), 0);
      for (int64_t j = 0; j < o; ++j)
        for (int64_t t = 0; t < k; ++t) s->w16[size_t(j * 2 * s->k2 + t)] = w[j * k + t];
      // The GEMM runs over the grid q = oy * wq + ox of the phase planes (State::shifted) of the
      // input padded with zeros, whose tap (c, ky, kx) is at q + row_offsets[(c, ky, kx)], so a B
      // panel is packed from rows read in place; the grid columns ox >= ow are computed and not
      // stored. An i16 input with stride 1 and no padding is its own (single) phase plane.
      const Shape& xd = *in[0].dims;
      // Each row with both its pads: the masked loads of pack_rows read nothing past the planes.
      const int64_t ow = window_output_size(xd[3], p.pads[1], p.pads[3], wd[3], p.strides[1], p.dilations[1], false);
      set_phases(p, xd, wd[1], wd[2], wd[3], ow, false, *s);
      s->q16_input = {xd[1], xd[2], xd[3]};
      const bool in_place = in[0].dtype == kDtypeI16 && s->phases == 1 && s->hq == xd[2] && s->wq == xd[3];
      s->padded_bytes = in_place ? 0 : xd[1] * s->phases * s->hq * s->wq * 2;
      // Per thread: the B panel, the int64 block with one row of slack (store reads whole rows from
      // a column offset below kQ16Nr), then one input row widened from u8 while filling the planes.
      s->ws_bytes = (s->k2 * kQ16Nr * 2 * 2 + 63) / 64 * 64 + kQ16AccBytes + (xd[3] * 2 + 63) / 64 * 64;
    }
    return s;
  }
  if (!kt.q) return s;
  const Shape& xd = *in[0].dims;
  const Shape& wd = *in[1].dims;
  const int64_t o = wd[0], cg = wd[1], kh = wd[2], kw = wd[3], k = cg * kh * kw, og = o / p.group;
  const int8_t* w = static_cast<const int8_t*>(in[1].data);
  const int32_t* bias = static_cast<const int32_t*>(in[2].data);
  const int64_t limit = (int64_t(1) << 31) - 1 - k * 255 * 128;
  for (int64_t j = 0; j < o; ++j) {
    int64_t sum = 0;
    for (int64_t t = 0; t < k; ++t) sum += w[j * k + t];
    const int64_t b = int64_t(bias[j]) - int64_t(p.zp) * sum;
    if (b > limit || b < -limit) return std::make_shared<State>();  // int32 would not be exact
    s->bias.push_back(int32_t(b));
  }
  // Shapes other than the batch are fixed at load.
  const int64_t oh = window_output_size(xd[2], p.pads[0], p.pads[2], kh, p.strides[0], p.dilations[0], false);
  const int64_t ow = window_output_size(xd[3], p.pads[1], p.pads[3], kw, p.strides[1], p.dilations[1], false);
  const Shape x1 = {1, xd[1], xd[2], xd[3]};
  const Conv2dParams c = conv_params(p, x1, wd, oh, ow);
  if (cg == 1 && og == 1 && kt.q->dwconv) {
    s->dw = kt.q->dwconv;
    s->ws_bytes = (ds_qu8_dwconv_workspace(c) + 63) / 64 * 64;
    const QConv2dParams qc{c, p.zp, {p.y_zp, p.act_min, p.act_max}};
    const int64_t bytes = kt.q->dw_packed_bytes ? kt.q->dw_packed_bytes(qc) : 0;
    if (bytes > 0) {
      s->dw_consts.resize(size_t(bytes));
      kt.q->dw_pack(qc, w, {s->bias.data(), static_cast<const int32_t*>(in[3].data), static_cast<const int32_t*>(in[4].data)},
                    s->dw_consts.data());
      s->dw_packed = kt.q->dwconv_packed;
    }
  } else if (kt.q->gemm) {
    const QGemmKernels& g = *kt.q->gemm;
    s->gemm = &g;
    s->direct = kh == 1 && kw == 1 && p.strides[0] == 1 && p.strides[1] == 1 && p.pads[0] == 0 && p.pads[1] == 0 &&
                p.pads[2] == 0 && p.pads[3] == 0;
    s->shifted = !s->direct && g.pack_x_rows;
    s->implicit = s->shifted && g.interleave4 && cg % 4 == 0;
    const int64_t taps = kh * kw;
    std::vector<int8_t> reordered;
    if (s->implicit) {
      reordered.resize(size_t(o * k));
      for (int64_t j = 0; j < o; ++j)
        for (int64_t c4 = 0; c4 < cg / 4; ++c4)
          for (int64_t t = 0; t < taps; ++t)
            for (int64_t r = 0; r < 4; ++r)
              reordered[size_t(j * k + (c4 * taps + t) * 4 + r)] = w[j * k + (c4 * 4 + r) * taps + t];
    }
    const int8_t* wsrc = s->implicit ? reordered.data() : w;
    s->group_bytes = g.packed_w_bytes(og, k);
    s->packed_w.resize(size_t(s->group_bytes * p.group));
    for (int64_t gi = 0; gi < p.group; ++gi)
      g.pack_w(og, k, wsrc + gi * og * k, s->packed_w.data() + gi * s->group_bytes);
    int64_t pixels = oh * ow;
    if (s->shifted) {
      const int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilations[0], dw = p.dilations[1];
      set_phases(p, xd, cg, kh, kw, ow, true, *s);
      const int64_t plane = s->hq * s->wq;
      if (s->implicit)
        for (int64_t c4 = 0; c4 < cg / 4; ++c4)
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t phase = s->phase_of[size_t((ky * dh % sh) * sw + kx * dw % sw)];
              s->x_offsets.push_back(((c4 * s->phases + phase) * plane + ky * dh / sh * s->wq + kx * dw / sw) * 4);
            }
      if (s->implicit && g.gemm_t && p.group == 1 && k >= 512 && oh * ow <= 196) {
        s->transposed = true;
        s->packed_wt.resize(size_t(g.packed_wt_bytes(o, k)));
        g.pack_wt(o, k, reordered.data(), s->packed_wt.data());
        for (int64_t t = 0; t < oh * ow; ++t) s->pix.push_back(int32_t(t / ow * s->wq + t % ow));
      }
      s->takes_f32 = !s->implicit && xd[3] <= kQuantizedRowMax;
      pixels = (oh - 1) * s->wq + ow;  // the grid up to the last output pixel
      // The last plane's taps read up to a row past it (dropped columns only); interleaved, the
      // GEMM reads whole 32-column panels.
      s->padded_bytes = xd[1] * s->phases * plane + (s->implicit ? 4 * (s->wq + 64) + 256 : s->wq + 64);
    }
    // A block of pixels whose packed activations stay in the L2 cache (about 384 KiB): with
    // few pixels (deep layers) one block holds them all, so the weights pass once.
    const int64_t nr = g.nr;
    const int64_t round_up = (pixels + nr - 1) / nr * nr;
    int64_t chunk = std::max<int64_t>(nr, (384 * 1024 / (k * g.elem_bytes)) / nr * nr);
    chunk = std::min(chunk, round_up);
    // With several blocks, a multiple of the thread count of them, evenly sized, so that no
    // thread waits on a last odd block.
    const int64_t blocks = (round_up + chunk - 1) / chunk;
    if (blocks > 1 && threads > 1) {
      const int64_t even = (blocks + threads - 1) / threads * threads;
      chunk = ((pixels + even - 1) / even + nr - 1) / nr * nr;
    }
    s->chunk = chunk;
    // Per thread: the im2col block (or, shifted, the GEMM's output block) and the packed block.
    const int64_t og_rounded = (og + g.mr - 1) / g.mr * g.mr;
    const int64_t staging = s->direct ? 0 : s->shifted ? (g.grid_out ? 0 : og_rounded * chunk) : k * chunk;
    s->ws_bytes = (staging + 63) / 64 * 64 + (g.packed_x_bytes(k, chunk) + 63) / 64 * 64;
  } else {
    return std::make_shared<State>();
  }
  return s;
}

int64_t workspace_floats(const OpParams&, const void* state, const std::vector<const Shape*>&, const Shape&,
                         int threads) {
  return state ? (workspace_bytes(*static_cast<const State*>(state), threads) + 3) / 4 : 0;
}

// A qadd fused by the session (OpParams::qadd): y[i] = qadd(c[i], r[i]) for the conv's clamped u8
// output c (read from the GEMM's staging or from y itself, in place) and the residual r at y's
// offset, with the conv's output as the add's operand a or b: bit for bit the two nodes.
struct FusedAdd {
  QAddParams q;
  int conv_side = 0;
  QAddKernel vadd = nullptr;  // null: the scalar formula
  const uint8_t* r = nullptr;
  const uint8_t* y = nullptr;  // the output's start (r's offsets follow it)
  // The GEMM's epilogue runs it instead (QGemmParams::residual) when the level takes it and the
  // 16-bit split applies: the conv's operand first, so the formula is symmetric in the swap.
  bool in_gemm = false;
  QAddSplit split;

  void set_gemm(const QGemmKernels& g) {
    QAddParams c = q;
    if (conv_side == 1) std::swap(c.a_zp, c.b_zp), std::swap(c.a_mult, c.b_mult);
    in_gemm = g.fused_add && qu8_qadd_split(c, split);
  }
  // The GEMM's output y (at the output's offset) gets the add in its epilogue; true when it does.
  bool into(QGemmParams& gp) const {
    if (!in_gemm) return false;
    gp.residual = r + (gp.y - y);
    gp.add = split;
    gp.add_out = q.out;
    return true;
  }

  void operator()(const uint8_t* c, uint8_t* dst, int64_t n) const {
    const uint8_t* res = r + (dst - y);
    const uint8_t* a = conv_side == 0 ? c : res;
    const uint8_t* b = conv_side == 0 ? res : c;
    if (vadd) {
      vadd(n, q, a, b, dst);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = (int64_t(a[i]) - q.a_zp) * q.a_mult + (int64_t(b[i]) - q.b_zp) * q.b_mult;
      dst[i] = qu8_clamp(q.out.y_zp + qu8_round_shift(v, 31 + q.shift), q.out.act_min, q.out.act_max);
    }
  }
};

template <typename Fn>
void parallel(ThreadPool* pool, int64_t tasks, Fn&& fn) {
  if (!pool || tasks < 2) {
    for (int64_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  pool->parallel_for(tasks, [&](int64_t t, int thread) { fn(t, thread); });
}

// Into the phase planes of State::shifted (already x_zp everywhere; int16 T: 0), input rows
// [iy0, iy1) of channel ci, row(iy) giving input row iy (as T), fetched once each and in order (the quantizing row
// source streams through the f32 input): row iy is row i = (iy + pad_top) / sh of the phases
// (a, .), a = (iy + pad_top) % sh.
template <typename T, typename RowFn>
void fill_phases(const State& s, const Conv2dParams& c, RowFn&& row, T* planes, int64_t ci, int64_t iy0, int64_t iy1) {
  const int64_t sh = c.stride_h, sw = c.stride_w, plane = s.hq * s.wq;
  for (int64_t iy = iy0; iy < iy1; ++iy) {
    const int64_t a = (iy + c.pad_top) % sh, i = (iy + c.pad_top) / sh;
    bool used = false;  // by a phase (a, .): rows between a stride's taps are not
    for (int64_t b = 0; b < sw; ++b) used = used || s.phase_of[size_t(a * sw + b)] >= 0;
    if (i >= s.hq || !used) continue;
    const T* in = row(iy);
    for (int64_t b = 0; b < sw; ++b) {
      const int32_t phase = s.phase_of[size_t(a * sw + b)];
      if (phase < 0) continue;
      // Columns j of the phase read input column sw * j + b - pad_left: inside for [j0, j1).
      const int64_t j0 = std::min(s.wq, std::max<int64_t>(0, (c.pad_left - b + sw - 1) / sw));
      const int64_t j1 = std::max(j0, std::min(s.wq, (c.w + c.pad_left - b + sw - 1) / sw));
      const int64_t n = j1 - j0;
      T* dst = planes + (ci * s.phases + phase) * plane + i * s.wq + j0;
      const T* src = in + sw * j0 + b - c.pad_left;
      if (sw == 1) {
        std::memcpy(dst, src, size_t(n) * sizeof(T));
      } else if (sizeof(T) == 1 && s.gemm->gather_row) {  // the u8 path's kernels
        s.gemm->gather_row(n, reinterpret_cast<const uint8_t*>(src), sw, reinterpret_cast<uint8_t*>(dst));
      } else if (sw == 2) {  // a constant stride the compiler vectorizes
        for (int64_t j = 0; j < n; ++j) dst[j] = src[j * 2];
      } else {
        for (int64_t j = 0; j < n; ++j) dst[j] = src[j * sw];
      }
    }
  }
}

// fill_phases for State::implicit: channel quads [q0, q1), four channels interleaved. Every byte
// of their planes is written once: the padding rows by memset, each other row whole by
// interleave4 (its padding columns included), so no pass over the planes sets x_zp first.
void fill_phases4(const State& s, const Conv2dParams& c, int32_t x_zp, const uint8_t* x, uint8_t* planes, int64_t q0,
                  int64_t q1) {
  const int64_t sh = c.stride_h, sw = c.stride_w, plane = s.hq * s.wq, row_bytes = s.wq * 4;
  for (int64_t c4 = q0; c4 < q1; ++c4)
    for (int64_t a = 0; a < sh; ++a)
      for (int64_t b = 0; b < sw; ++b) {
        const int32_t phase = s.phase_of[size_t(a * sw + b)];
        if (phase < 0) continue;
        const int64_t j0 = std::min(s.wq, std::max<int64_t>(0, (c.pad_left - b + sw - 1) / sw));
        const int64_t j1 = std::max(j0, std::min(s.wq, (c.w + c.pad_left - b + sw - 1) / sw));
        const int64_t i0 = std::min(s.hq, std::max<int64_t>(0, (c.pad_top - a + sh - 1) / sh));
        const int64_t i1 = std::max(i0, std::min(s.hq, (c.h + c.pad_top - a + sh - 1) / sh));
        uint8_t* dst = planes + (c4 * s.phases + phase) * plane * 4;
        std::memset(dst, x_zp, size_t(i0 * row_bytes));
        std::memset(dst + i1 * row_bytes, x_zp, size_t((s.hq - i1) * row_bytes));
        const uint8_t* src = x + c4 * 4 * c.h * c.w + sw * j0 + b - c.pad_left;
        for (int64_t i = i0; i < i1; ++i) {
          const uint8_t* in = src + (sh * i + a - c.pad_top) * c.w;
          const uint8_t* rows[4] = {in, in + c.h * c.w, in + 2 * c.h * c.w, in + 3 * c.h * c.w};
          s.gemm->interleave4(s.wq, j0, j1, rows, sw, x_zp, dst + i * row_bytes);
        }
      }
}

// The path of State::shifted.
// x: u8, or f32 with `quantize` (State::takes_f32).
void run_shifted(const State& s, const QConv2dParams& q, const void* x, const OpParams::FusedQuantize& quantize,
                 QuantizeKernel quantize_row, const QChannelParams& ch, uint8_t* padded, uint8_t* ws, uint8_t* y,
                 const FusedAdd* fuse, const RunContext& ctx) {
  ThreadPool* pool = ctx.pool;
  const int threads = threads_of(pool);
  const QGemmKernels& g = *s.gemm;
  const Conv2dParams& c = q.conv;
  const int64_t cg = c.c / c.group, og = c.o / c.group, k = cg * c.kh * c.kw;
  const int64_t group_planes = cg * s.phases * s.hq * s.wq, in_plane = c.h * c.w, pixels = c.oh * c.ow;
  // Channel quads read in place with rows of 16 or more pixels: the GEMM's columns are the output
  // pixels themselves (QGemmParams::pixel_cols), none computed and dropped; else the grid.
  const bool by_pixel = s.implicit && g.grid_out && g.pixel_cols && c.ow >= 16;
  const int64_t grid = (c.oh - 1) * s.wq + c.ow, columns = by_pixel ? pixels : grid;
  const int64_t col_tasks = (columns + s.chunk - 1) / s.chunk;
  const int64_t m_tiles = (og + g.mr - 1) / g.mr;
  const int64_t m_blocks = std::min<int64_t>(m_tiles, std::max<int64_t>(1, (threads + col_tasks - 1) / col_tasks));
  const int64_t m_per = (m_tiles + m_blocks - 1) / m_blocks * g.mr;
  const int64_t staging = g.grid_out ? 0 : ((og + g.mr - 1) / g.mr * g.mr * s.chunk + 63) / 64 * 64;
  for (int64_t b = 0; b < c.n; ++b) {
    // The slack past the last plane is read by dropped columns and by the last row's taps past
    // its end (as x_zp padding); channels split between the threads. With pixel columns the last
    // tile's lanes past the last pixel also load (never store) and may reach past the slack into
    // this workspace's per-thread area: inside the workspace, values unused.
    const int64_t planes_bytes = c.c * s.phases * s.hq * s.wq;
    std::memset(padded + planes_bytes, q.x_zp, size_t(s.padded_bytes - planes_bytes));
    const int64_t image = b * c.c * in_plane;
    if (s.implicit) {
      const int64_t quads = c.c / 4, per = (quads + threads - 1) / threads;
      parallel(pool, (quads + per - 1) / per, [&](int64_t t, int) {
        fill_phases4(s, c, q.x_zp, static_cast<const uint8_t*>(x) + image, padded, t * per, std::min(quads, (t + 1) * per));
      });
    } else {
      // Tasks of one channel's rows: with fewer than two channels a thread (a 3-channel stem)
      // each channel's rows split into parts.
      std::memset(padded, q.x_zp, size_t(planes_bytes));
      const int64_t parts = std::max<int64_t>(1, (2 * threads + c.c - 1) / c.c);
      const int64_t rows_per = (c.h + parts - 1) / parts;
      parallel(pool, c.c * parts, [&](int64_t t, int) {
        const int64_t ci = t / parts, iy0 = t % parts * rows_per, iy1 = std::min(c.h, iy0 + rows_per);
        if (quantize.on) {  // each input row quantized once, as the quantize node would
          alignas(64) uint8_t row[kQuantizedRowMax + 64];
          const float* xf = static_cast<const float*>(x) + image + ci * in_plane;
          auto quantized = [&](int64_t iy) {
            const float* src = xf + iy * c.w;
            // The input is usually out of the caches: ask for a row a few rows ahead.
            if (iy + kPrefetchRows < iy1)
              for (int64_t j = 0; j < c.w; j += 16) __builtin_prefetch(src + kPrefetchRows * c.w + j);
            quantize_row(c.w, quantize.scale, quantize.zp, src, row);
            return static_cast<const uint8_t*>(row);
          };
          fill_phases(s, c, quantized, padded, ci, iy0, iy1);
        } else {
          const uint8_t* xc = static_cast<const uint8_t*>(x) + image + ci * in_plane;
          fill_phases(s, c, [&](int64_t iy) { return xc + iy * c.w; }, padded, ci, iy0, iy1);
        }
      });
    }
    if (s.transposed) {  // group 1
      // Each thread a run of whole panels of 32 channels (gemm_t prefetches a panel's successor).
      const int64_t panels = (c.o + 31) / 32, per = (panels + threads - 1) / threads;
      parallel(pool, (panels + per - 1) / per, [&](int64_t t, int) {
        QGemmTParams gp;
        gp.m0 = t * per * 32, gp.m1 = std::min(c.o, gp.m0 + per * 32), gp.n = pixels, gp.k = k;
        gp.w = s.packed_wt.data();
        gp.x = padded;
        gp.x_offsets = s.x_offsets.data();
        gp.pix = s.pix.data();
        gp.y = y + b * c.o * pixels;
        gp.y_row_stride = pixels;
        gp.ch = ch;
        gp.out = q.out;
        g.gemm_t(gp);
        if (fuse) (*fuse)(gp.y + gp.m0 * pixels, gp.y + gp.m0 * pixels, (gp.m1 - gp.m0) * pixels);
      });
      continue;
    }
    for (int64_t gi = 0; gi < c.group; ++gi) {
      const uint8_t* xg = padded + gi * group_planes;
      uint8_t* yg = y + (b * c.o + gi * og) * pixels;
      const uint8_t* wg = s.packed_w.data() + gi * s.group_bytes;
      parallel(pool, col_tasks * m_blocks, [&](int64_t t, int thread) {
        const int64_t col = t / m_blocks, mb = t % m_blocks;
        const int64_t p0 = col * s.chunk, p1 = std::min(columns, p0 + s.chunk);
        const int64_t m0 = mb * m_per, m1 = std::min(og, m0 + m_per);
        if (m0 >= m1) return;
        uint8_t* out = ctx.thread_part(ws, s.ws_bytes, thread, threads);
        uint8_t* packed = out + staging;
        QGemmParams gp;
        if (s.implicit) {
          gp.x = by_pixel ? xg : xg + p0 * 4;
          gp.x_offsets = s.x_offsets.data();
          gp.pixel_cols = by_pixel;
        } else {
          g.pack_x_rows(k, p1 - p0, xg + p0, s.row_offsets.data(), packed);
          gp.x = packed;
        }
        gp.m = m1 - m0, gp.n = p1 - p0, gp.k = k;
        gp.w = wg + (m0 / g.mr) * (g.packed_w_bytes(g.mr, k));
        gp.ch = {ch.bias + gi * og + m0, ch.multiplier + gi * og + m0, ch.shift + gi * og + m0};
        gp.out = q.out;
        if (g.grid_out) {  // the GEMM drops the columns ox >= ow itself
          gp.y = yg + m0 * pixels;
          gp.y_row_stride = pixels;
          gp.grid_w = s.wq, gp.out_w = c.ow, gp.grid0 = p0;
          const bool added = fuse && fuse->into(gp);
          g.gemm(gp);
          if (fuse && !added) {  // the block's output pixels, contiguous in each channel
            auto out_pixel = [&](int64_t q) { return by_pixel ? q : q / s.wq * c.ow + std::min(q % s.wq, c.ow); };
            const int64_t o0 = out_pixel(p0), o1 = out_pixel(p1);
            for (int64_t i = m0; i < m1; ++i) (*fuse)(yg + i * pixels + o0, yg + i * pixels + o0, o1 - o0);
          }
          return;
        }
        gp.y = out;
        gp.y_row_stride = p1 - p0;
        g.gemm(gp);
        // Grid rows back to output rows, without the columns ox >= ow (the fused add on the way).
        for (int64_t oy = p0 / s.wq; oy * s.wq < p1; ++oy) {
          const int64_t q0 = std::max(p0, oy * s.wq), q1 = std::min(p1, oy * s.wq + c.ow);
          if (q1 <= q0) continue;
          for (int64_t i = m0; i < m1; ++i) {
            uint8_t* dst = yg + i * pixels + oy * c.ow + (q0 - oy * s.wq);
            const uint8_t* src = out + (i - m0) * (p1 - p0) + (q0 - p0);
            if (fuse) (*fuse)(src, dst, q1 - q0);
            else std::memcpy(dst, src, size_t(q1 - q0));
          }
        }
      });
    }
  }
}

// State::q16, per image: the phase planes of the input padded with zeros (u8 x as x - x_zp)
// unless read as it is, then tasks of one group and panel of kQ16Nr grid columns each.
template <typename X, typename Y>
void run_int16_gemm(const State& s, const QConv2dParams& q, const X* x, const QChannelParams& ch, Y* y,
                    const RunContext& ctx) {
  ThreadPool* pool = ctx.pool;
  const int threads = threads_of(pool);
  uint8_t* workspace = reinterpret_cast<uint8_t*>(ctx.workspace);
  const Conv2dParams& c = q.conv;
  const int64_t cg = c.c / c.group, og = c.o / c.group, pixels = c.oh * c.ow, planes_per_channel = s.phases * s.hq * s.wq;
  const int64_t columns = (c.oh - 1) * s.wq + c.ow;
  const int64_t panels = (columns + kQ16Nr - 1) / kQ16Nr;
  const int64_t panel_bytes = (s.k2 * kQ16Nr * 2 * 2 + 63) / 64 * 64;
  const Q16Kernels& g = *s.q16;
  const int multiplier_shift = sizeof(X) == 2 ? 16 : 0;  // q_requant_acc<X>
  auto store = [&](const int64_t* acc, int rows, int64_t n, const QChannelParams& rc, Y* dst) {
    if constexpr (sizeof(Y) == 2) g.store_i16(acc, rows, n, rc, multiplier_shift, q.out, dst, pixels);
    else g.store_u8(acc, rows, n, rc, multiplier_shift, q.out, dst, pixels);
  };
  int16_t* padded = reinterpret_cast<int16_t*>(workspace);
  uint8_t* ws = workspace + (s.padded_bytes + 63) / 64 * 64;
  for (int64_t b = 0; b < c.n; ++b) {
    const X* xb = x + b * c.c * c.h * c.w;
    if (s.padded_bytes > 0) {
      const int64_t per = (c.c + threads - 1) / threads;
      parallel(pool, (c.c + per - 1) / per, [&](int64_t t, int thread) {
        // a u8 row as x - x_zp, in this thread's slice (its GEMM part is unused until the planes are filled)
        uint8_t* part = ctx.thread_part(ws, s.ws_bytes, thread, threads);
        int16_t* wide = reinterpret_cast<int16_t*>(part + panel_bytes + kQ16AccBytes);
        for (int64_t ci = t * per; ci < std::min(c.c, (t + 1) * per); ++ci) {
          std::fill(padded + ci * planes_per_channel, padded + (ci + 1) * planes_per_channel, int16_t(0));
          const X* xc = xb + ci * c.h * c.w;
          fill_phases(s, c, [&](int64_t iy) {
            if constexpr (sizeof(X) == 2) {
              return xc + iy * c.w;
            } else {
              for (int64_t ix = 0; ix < c.w; ++ix) wide[size_t(ix)] = int16_t(xc[iy * c.w + ix] - q.x_zp);
              return static_cast<const int16_t*>(wide);
            }
          }, padded, ci, 0, c.h);
        }
      });
    }
    const int16_t* planes = padded;
    if constexpr (sizeof(X) == 2)
      if (s.padded_bytes == 0) planes = xb;
    parallel(pool, c.group * panels, [&](int64_t t, int thread) {
      const int64_t gi = t / panels, p0 = t % panels * kQ16Nr;
      const int64_t n = std::min<int64_t>(kQ16Nr, columns - p0);
      uint8_t* part = ctx.thread_part(ws, s.ws_bytes, thread, threads);
      int16_t* panel = reinterpret_cast<int16_t*>(part);
      int64_t* acc = reinterpret_cast<int64_t*>(part + panel_bytes);
      g.pack_rows(cg * c.kh * c.kw, planes + gi * cg * planes_per_channel + p0, s.row_offsets.data(), n, panel);
      for (int64_t m0 = 0; m0 < og; m0 += kQ16Mr) {
        const int rows = int(std::min<int64_t>(kQ16Mr, og - m0));
        const int64_t o0 = gi * og + m0;
        const int16_t* a[kQ16Mr];
        for (int r = 0; r < rows; ++r) a[r] = s.w16.data() + (o0 + r) * 2 * s.k2;
        g.gemm(s.k2, rows, a, panel, acc);
        const QChannelParams rc{ch.bias + o0, ch.multiplier + o0, ch.shift + o0};
        Y* yo = y + (b * c.o + o0) * pixels;
        // Each grid row's columns ox < ow in the panel, to output row oy.
        for (int64_t oy = p0 / s.wq; oy * s.wq < p0 + n; ++oy) {
          const int64_t q0 = std::max(p0, oy * s.wq), q1 = std::min(p0 + n, oy * s.wq + c.ow);
          if (q1 > q0) store(acc + (q0 - p0), rows, q1 - q0, rc, yo + oy * c.ow + (q0 - oy * s.wq));
        }
      }
    });
  }
}

// State::int16: the GEMM (State::q16), or the reference kernel with the N * O output planes split
// between the threads.
void run_int16(const State& s, const QConv2dParams& q, const std::vector<OpInput>& in, uint8_t y_dtype, void* out,
               const RunContext& ctx) {
  const Conv2dParams& c = q.conv;
  const QChannelParams ch{in[2].as<int32_t>(), in[3].as<int32_t>(), in[4].as<int32_t>()};
  const int8_t* w = in[1].as<int8_t>();
  const int64_t planes = c.n * c.o;
  q_with_types(in[0].dtype, in[0].data, y_dtype, out, [&](auto* x, auto* y) {
    // Declared dims are not the run's shape in a malformed file: then the reference kernel.
    if (s.q16 && s.q16_input == Shape{c.c, c.h, c.w}) {
      run_int16_gemm(s, q, x, ch, y, ctx);
      return;
    }
    parallel_range(ctx.pool, planes, 2, 1, [&](int64_t p0, int64_t p1) { ds_q16_conv2d__scalar(q, x, w, ch, y, p0, p1); });
  });
}

void run(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out, const Shape& os,
         const KernelTable& kt) {
  const State& s = *static_cast<const State*>(ctx.state);
  const Shape& xs = *in[0].shape;
  const Shape& wd = *in[1].shape;
  QConv2dParams q;
  q.conv = conv_params(p, xs, wd, os[2], os[3]);
  q.x_zp = p.zp;
  q.out = {p.y_zp, p.act_min, p.act_max};
  if (s.int16) {
    run_int16(s, q, in, p.y_dtype, out, ctx);
    return;
  }
  const uint8_t* x = in[0].as<uint8_t>();  // f32 with p.quantize (State::takes_f32: run_shifted only)
  const int8_t* w = in[1].as<int8_t>();
  uint8_t* y = static_cast<uint8_t*>(out);
  const int32_t* mult = in[3].as<int32_t>();
  const int32_t* shift = in[4].as<int32_t>();
  FusedAdd fused;
  const FusedAdd* fuse = nullptr;
  if (p.qadd.on) {
    fused.q = {p.qadd.a_zp, p.qadd.b_zp, p.qadd.a_mult, p.qadd.b_mult, p.qadd.shift,
               {p.qadd.y_zp, p.qadd.act_min, p.qadd.act_max}};
    fused.conv_side = p.qadd.conv_side;
    fused.vadd = kt.q ? kt.q->vadd : nullptr;
    fused.r = in[5].as<uint8_t>();
    fused.y = y;
    if (s.gemm) fused.set_gemm(*s.gemm);
    fuse = &fused;
  }
  if (!s.gemm && !s.dw) {
    ds_qu8_conv2d__scalar(q, x, w, {in[2].as<int32_t>(), mult, shift}, y);
    if (fuse) fused(y, y, product(os));
    return;
  }
  const QChannelParams ch{s.bias.data(), mult, shift};
  const int threads = threads_of(ctx.pool);
  uint8_t* padded = reinterpret_cast<uint8_t*>(ctx.workspace);  // 64-byte aligned
  uint8_t* ws = padded + (s.padded_bytes + 63) / 64 * 64;
  const Conv2dParams& c = q.conv;
  const int64_t in_plane = c.h * c.w, pixels = c.oh * c.ow;
  if (s.dw) {
    QConv2dParams one = q;
    one.conv.n = 1;
    // Whole blocks of 16 channels (the lanes of the AVX-512 kernel), about two tasks per thread.
    const int64_t per = std::max<int64_t>(1, (c.c + 15) / 16 / (threads * 2)) * 16;
    const int64_t blocks = (c.c + per - 1) / per;
    for (int64_t b = 0; b < c.n; ++b) {
      const uint8_t* xb = x + b * c.c * in_plane;
      uint8_t* yb = y + b * c.o * pixels;
      parallel(ctx.pool, blocks, [&](int64_t t, int thread) {
        const int64_t c0 = t * per, c1 = std::min(c.c, (t + 1) * per);
        uint8_t* part = ctx.thread_part(ws, s.ws_bytes, thread, threads);
        if (s.dw_packed) s.dw_packed(one, xb, s.dw_consts.data(), part, yb, c0, c1);
        else s.dw(one, xb, w, ch, part, yb, c0, c1);
        if (fuse) (*fuse)(yb + c0 * pixels, yb + c0 * pixels, (c1 - c0) * pixels);
      });
    }
    return;
  }
  const QGemmKernels& g = *s.gemm;
  const int64_t cg = c.c / c.group, og = c.o / c.group, k = cg * c.kh * c.kw;
  if (s.shifted) {
    const QuantizeKernel quantize_row = kt.q && kt.q->quantize ? kt.q->quantize : ds_qu8_quantize__scalar;
    run_shifted(s, q, in[0].data, p.quantize, quantize_row, ch, padded, ws, y, fuse, ctx);
    return;
  }
  const int64_t col_tasks = (pixels + s.chunk - 1) / s.chunk;
  const int64_t m_tiles = (og + g.mr - 1) / g.mr;
  const int64_t m_blocks = std::min<int64_t>(m_tiles, std::max<int64_t>(1, (threads + col_tasks - 1) / col_tasks));
  const int64_t m_per = (m_tiles + m_blocks - 1) / m_blocks * g.mr;
  const int64_t im2col_bytes = s.direct ? 0 : (k * s.chunk + 63) / 64 * 64;
  for (int64_t b = 0; b < c.n; ++b) {
    for (int64_t gi = 0; gi < c.group; ++gi) {
      const uint8_t* xg = x + (b * c.c + gi * cg) * in_plane;
      uint8_t* yg = y + (b * c.o + gi * og) * pixels;
      const uint8_t* wg = s.packed_w.data() + gi * s.group_bytes;
      parallel(ctx.pool, col_tasks * m_blocks, [&](int64_t t, int thread) {
        const int64_t col = t / m_blocks, mb = t % m_blocks;
        const int64_t p0 = col * s.chunk, p1 = std::min(pixels, p0 + s.chunk);
        const int64_t m0 = mb * m_per, m1 = std::min(og, m0 + m_per);
        if (m0 >= m1) return;
        uint8_t* tws = ctx.thread_part(ws, s.ws_bytes, thread, threads);
        const uint8_t* src = xg + p0;
        int64_t stride = in_plane;
        if (!s.direct) {
          (g.im2col ? g.im2col : ds_u8_im2col__scalar)(c, cg, q.x_zp, xg, p0, p1, tws);
          src = tws;
          stride = p1 - p0;
        }
        uint8_t* packed = tws + im2col_bytes;
        g.pack_x(k, p1 - p0, src, stride, packed);
        QGemmParams gp;
        gp.m = m1 - m0, gp.n = p1 - p0, gp.k = k;
        gp.w = wg + (m0 / g.mr) * (g.packed_w_bytes(g.mr, k));
        gp.x = packed;
        gp.y = yg + m0 * pixels + p0;
        gp.y_row_stride = pixels;
        gp.ch = {ch.bias + gi * og + m0, ch.multiplier + gi * og + m0, ch.shift + gi * og + m0};
        gp.out = q.out;
        const bool added = fuse && fuse->into(gp);
        g.gemm(gp);
        if (fuse && !added)
          for (int64_t i = m0; i < m1; ++i) (*fuse)(gp.y + (i - m0) * pixels, gp.y + (i - m0) * pixels, p1 - p0);
      });
    }
  }
}

bool takes_f32_input(const void* state) { return static_cast<const State*>(state)->takes_f32; }

}  // namespace

// Input 5 (never a graph input): the residual of a qadd the session fuses (OpParams::qadd); input
// 0 may be the f32 input of a quantize it fuses (OpParams::quantize).
extern const OpDef kQConv2dOp = {27,           "qconv2d", 5,   5,                parse,   infer_shape, nullptr, false,
                                 check_dtypes, prepare,   run, workspace_floats, nullptr, nullptr,     5,
                                 nullptr,      -1,        takes_f32_input};

}  // namespace ds
