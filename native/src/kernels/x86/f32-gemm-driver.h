// The cache-blocked GEMM loop nest shared by the x86 levels, instantiated in each ISA's translation
// unit with its microkernel (so it is compiled with that ISA's flags). Loop order (outer to inner):
// N blocks of nc, K blocks of kc, M blocks of mc (A block packed into the workspace unless A is
// packed already or its rows are adjacent floats), then nr-wide and mr-high register tiles; an unpacked B is packed panel by panel
// into the workspace during the first M block and reused by the others. A B panel
// (kc x nr) stays in L1 while the mr x kc A panels of the M block stream from L2.
#pragma once

#include <cstdint>

#include "kernels/gemm.h"

namespace ds {
namespace x86 {

// What a microkernel applies after the last K block; pointers are at the tile's origin.
struct GemmTileEpilogue {
  const float* bias_row;  // per row, or null
  const float* bias_col;  // per column, or null
  const float* residual;  // or null
  int64_t residual_row_stride;
  int32_t act;
  float alpha, beta;

  // The epilogue of p's tile at row i, column j.
  static GemmTileEpilogue at(const GemmParams& p, int64_t i, int64_t j) {
    GemmTileEpilogue ep;
    ep.bias_row = p.bias_kind == kGemmBiasPerRow ? p.bias + i : nullptr;
    ep.bias_col = p.bias_kind == kGemmBiasPerCol ? p.bias + j : nullptr;
    ep.residual = p.residual ? p.residual + i * p.residual_row_stride + j : nullptr;
    ep.residual_row_stride = p.residual_row_stride;
    ep.act = p.act;
    ep.alpha = p.alpha;
    ep.beta = p.beta;
    return ep;
  }
};

// Lines of the next packed B panel a tile prefetches while it computes, one per k step (T0: into
// L1 as well; T1 gained less in-model, docs/kernels.md), and the distance of A's L2 prefetch.
struct GemmPrefetch {
  const float* at = nullptr;
  int64_t lines = 0;
  bool far_a = false;  // A also into L2, the kernel's kPrefetchAFarSteps ahead (kFarPrefetchMinAFloats)
};

// Microkernel: C tile (mr x nr, mr <= MR, nr <= NR) = (accumulate ? C : 0) + a . b over kc steps,
// then the epilogue when ep is not null. a: kc steps of mr floats, a_step floats apart (MR in a
// packed panel); b: kc steps of NR floats. pf: lines to prefetch, at most kc.
using GemmMicrokernel = void (*)(int64_t nr, int64_t kc, const float* a, const float* b, float* c,
                                 int64_t c_row_stride, bool accumulate, const GemmTileEpilogue* ep,
                                 int64_t a_step, GemmPrefetch pf);

// The same for MR + 1 rows, where the last rows of an M block would leave a 1-row tile (MobileNet
// V2's and ResNet-18's 7x7 layers as pixels: 49 = 3 x 12 + 13): rows 0..MR-1 from a, row MR from
// a_next (row 0 of the next A panel), both a_step floats per k step. The 1-row tile's pass over
// the B panel cost ~7% of the layer.
using GemmMicrokernelPlusRow = void (*)(int64_t nr, int64_t kc, const float* a, const float* a_next, const float* b,
                                        float* c, int64_t c_row_stride, bool accumulate, const GemmTileEpilogue* ep,
                                        int64_t a_step, GemmPrefetch pf);

// Sigmoid and tanh are applied by this scalar pass after the vector epilogue stored the tile.
inline void gemm_tile_transcendental(int64_t mr, int64_t nr, float* c, int64_t c_row_stride,
                                     const GemmTileEpilogue& ep) {
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j) c[r * c_row_stride + j] = gemm_activate(ep.act, c[r * c_row_stride + j], ep.alpha, ep.beta);
}

// Config: MR, NR, KC, MC (multiple of MR), NC (multiple of NR); ukernels[mr - 1] handles mr rows.
// KC_A_IN_PLACE: the K block when A is read in place (rows adjacent, an NCHW plane as pixels):
// each k step's mr floats then sit on a cache line of their own, so the A sliver holds ~kc lines
// of L1 beside the B panel instead of kc * mr floats.
template <int MR, int NR, int64_t KC, int64_t MC, int64_t NC, int64_t KC_A_IN_PLACE = KC>
struct GemmBlocking {
  static constexpr int kMr = MR, kNr = NR;
  static constexpr int64_t kKc = KC, kMc = MC, kNc = NC, kKcAInPlace = KC_A_IN_PLACE;
  static_assert(MC % MR == 0 && NC % NR == 0, "blocks are whole tiles");
  static_assert(KC_A_IN_PLACE <= KC, "the workspace is sized for KC");
  // Floats of workspace: the packed A block, then the packed B block, each 64-byte aligned.
  static constexpr int64_t kWorkspace = (MC * KC + 15) / 16 * 16 + NC * KC;
};

// The packed B panel the loop nest reads after the one at (jc, pc, ic, jr), as 64-byte lines: the
// next panel of the N block, else its first panel for the next M block, at the next K block, or
// of the next N block. kc_max: the loop nest's K block (Cfg::kKc, or kKcAInPlace).
template <class Cfg>
GemmPrefetch next_b_panel(const GemmParams& p, int64_t jc, int64_t nc, int64_t pc, int64_t kc, int64_t ic,
                          int64_t mc, int64_t jr, int64_t kc_max) {
  constexpr int NR = Cfg::kNr;
  int64_t j = jc + jr + NR, k0 = pc, steps = kc;
  if (jr + NR >= nc) {
    if (ic + mc < p.m) j = jc;
    else if (pc + kc < p.k) j = jc, k0 = pc + kc;
    else if (jc + nc < p.n) j = jc + nc, k0 = 0;
    else return {};
    if (k0 != pc) steps = p.k - k0 < kc_max ? p.k - k0 : kc_max;
  }
  return {p.b.data + (j / NR) * NR * p.k + k0 * NR, steps * NR / 16};
}

// Tile t of the `tiles` M tiles that share a B panel prefetches its share of the next panel, so
// that panel arrives spread over the current one's tiles instead of stalling the first tile that
// reads it (weights that stream from L3 or memory in a whole network: few pixels per channel put
// few tiles on each panel). Panels of one or two tiles (at most 24 rows) are left to the
// hardware prefetcher: not measured there. A share is at most kc lines (one per k step).
inline GemmPrefetch prefetch_share(const GemmPrefetch& next, int64_t t, int64_t tiles, int64_t kc) {
  if (!next.at || tiles < 3) return {};
  const int64_t per = (next.lines + tiles - 1) / tiles, first = t * per;
  const int64_t lines = next.lines - first < per ? next.lines - first : per;
  if (lines <= 0) return {};
  return {next.at + first * 16, lines < kc ? lines : kc};
}

// A pre-packed A (a slice of it, as the threads split it) of at least this many floats is also
// prefetched into L2, 24 KB ahead, while the first column panel of its M block streams it: a
// network's large weights come from memory at batch 1 (ResNet-18's do not fit the L3), further
// ahead than the L1 prefetch reaches; the later panels find the block in L2. At K = 512 (AVX-512)
// that is the next tile's panel at the same k step; the panel stride as the distance measured
// slower (stage 3 1.40 ms against 1.31). ResNet-18 (in-model p10, 1 thread): stage 3 F(2x2, 3x3)
// 1.51 -> 1.30 ms, stage 2 F(4x4, 3x3) 0.87-0.91 -> 0.82. Smaller weights (SqueezeNet 1.1's,
// resident in L3) were 2-7% slower with it on their Winograd layers. The pixels path's packed
// im2col (in cache) of a large layer takes it too: ResNet-18's 7x7 stride-2 layer measured level.
constexpr int64_t kFarPrefetchMinAFloats = 64 * 1024;

// plus_row: the level's MR + 1 row tile, or null.
template <class Cfg>
void gemm_blocked(const GemmParams& p, const GemmMicrokernel* ukernels, float* workspace,
                  GemmMicrokernelPlusRow plus_row = nullptr) {
  constexpr int MR = Cfg::kMr, NR = Cfg::kNr;
  const int64_t M = p.m, N = p.n, K = p.k;
  if (M <= 0 || N <= 0) return;
  float* a_buf = workspace;
  float* b_buf = workspace + (Cfg::kMc * Cfg::kKc + 15) / 16 * 16;
  // A's rows are adjacent floats (A is a transposed matrix, e.g. an NCHW plane with pixels as
  // rows): the microkernel reads each k step's mr floats in place, no packing.
  const bool a_in_place = !p.a.packed && p.a.row_stride == 1;
  const int64_t kc_max = a_in_place ? Cfg::kKcAInPlace : Cfg::kKc;
  const bool far_a = p.a.packed && M * K >= kFarPrefetchMinAFloats;
  for (int64_t jc = 0; jc < N; jc += Cfg::kNc) {
    const int64_t nc = N - jc < Cfg::kNc ? N - jc : Cfg::kNc;
    for (int64_t pc = 0;; pc += kc_max) {
      const int64_t kc = K - pc < kc_max ? K - pc : kc_max;
      const bool first = pc == 0, last = pc + kc >= K;
      const float* b_blk;
      int64_t b_panel_stride;
      if (p.b.packed) {
        b_blk = p.b.data + (jc / NR) * NR * K + pc * NR;
        b_panel_stride = NR * K;
      } else {
        b_blk = b_buf;  // each panel is packed just before its first use (ic == 0), while hot in L1
        b_panel_stride = NR * kc;
      }
      for (int64_t ic = 0; ic < M; ic += Cfg::kMc) {
        const int64_t mc = M - ic < Cfg::kMc ? M - ic : Cfg::kMc;
        const float* a_blk;
        int64_t a_panel_stride, a_step = MR;
        if (p.a.packed) {
          a_blk = p.a.data + (ic / MR) * MR * K + pc * MR;
          a_panel_stride = MR * K;
        } else if (a_in_place) {
          a_blk = p.a.data + ic + pc * p.a.col_stride;
          a_panel_stride = MR;
          a_step = p.a.col_stride;
        } else {
          ds_f32_gemm_pack(MR, mc, kc, p.a.data + ic * p.a.row_stride + pc * p.a.col_stride,
                           p.a.row_stride, p.a.col_stride, a_buf);
          a_blk = a_buf;
          a_panel_stride = MR * kc;
        }
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t nr = nc - jr < NR ? nc - jr : NR;
          const int64_t j = jc + jr;
          const float* b_panel = b_blk + (jr / NR) * b_panel_stride;
          if (!p.b.packed && ic == 0)
            ds_f32_gemm_pack(NR, nr, kc, p.b.data + pc * p.b.row_stride + j * p.b.col_stride, p.b.col_stride,
                             p.b.row_stride, b_buf + (jr / NR) * b_panel_stride);
          const GemmPrefetch next = p.b.packed ? next_b_panel<Cfg>(p, jc, nc, pc, kc, ic, mc, jr, kc_max) : GemmPrefetch{};
          const bool merge_last = plus_row && mc > MR && mc % MR == 1;
          const int64_t tiles = (mc + MR - 1) / MR - (merge_last ? 1 : 0);
          // Read in place, A's rows can start any tile: without the plus-row tile the rows are
          // spread evenly over the tiles (49 = 4 x 6 + 5 x 5 rather than 8 x 6 + 1, whose 1-row
          // tile's pass over the B panel cost as much as 4 rows). A row's result does not depend
          // on its tile's height.
          const bool even = a_in_place && !plus_row;
          for (int64_t t = 0, ir = 0; ir < mc; ++t) {
            const int64_t plus = merge_last && mc - ir == MR + 1;
            const int64_t mr = plus           ? MR + 1
                               : even         ? mc / tiles + (t < mc % tiles ? 1 : 0)
                               : mc - ir < MR ? mc - ir
                                              : MR;
            const int64_t i = ic + ir;
            float* c = p.c + i * p.c_row_stride + j;
            GemmTileEpilogue ep;
            if (last) ep = GemmTileEpilogue::at(p, i, j);
            const float* a = even ? a_blk + ir : a_blk + (ir / MR) * a_panel_stride;
            GemmPrefetch pf = prefetch_share(next, t, tiles, kc);
            pf.far_a = far_a && jr == 0;
            if (plus)
              plus_row(nr, kc, a, a + a_panel_stride, b_panel, c, p.c_row_stride, !first, last ? &ep : nullptr, a_step, pf);
            else
              ukernels[mr - 1](nr, kc, a, b_panel, c, p.c_row_stride, !first, last ? &ep : nullptr, a_step, pf);
            if (last && (p.act == 4 || p.act == 7)) gemm_tile_transcendental(mr, nr, c, p.c_row_stride, ep);
            ir += mr;
          }
        }
      }
      if (last) break;
    }
  }
}

}  // namespace x86
}  // namespace ds
