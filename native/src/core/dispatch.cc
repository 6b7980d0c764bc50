#include "core/dispatch.h"

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "core/cpu_features.h"
#include "kernels/qi16.h"

namespace ds {
namespace {

const KernelTable kScalarTable = {
    "scalar",
    ds_f32_conv2d__scalar,
    ds_f32_dense__scalar,
    ds_f32_maxpool2d__scalar,
    ds_f32_avgpool2d__scalar,
    ds_f32_relu__scalar,
    ds_f32_softmax__scalar,
    ds_f32_batchnorm__scalar,
    ds_f32_activation__scalar,
    ds_f32_vadd__scalar,
    ds_f32_vsub__scalar,
    ds_f32_vmul__scalar,
    ds_f32_vdiv__scalar,
    ds_x32_concat__scalar,
    ds_f32_conv_transpose2d__scalar,
    ds_f32_lrn__scalar,
    ds_x32_copy_nd__scalar,
    ds_f32_pad__scalar,
    ds_f32_resize_nearest__scalar,
    ds_f32_resize_linear__scalar,
    ds_f32_global_avgpool__scalar,
    ds_f32_global_maxpool__scalar,
};

// The Winograd transforms of a level, by its name: F(4x4, 3x3) (tile 4) or F(2x2, 3x3) (tile 2).
const WinogradKernels* winograd_for(const char* isa, int tile) {
#if defined(DEEPSLIM_X86_KERNELS)
  // F(2x2, 3x3) has no AVX-512 version: the AVX2 one (8 tiles per call) serves that level too.
  if (std::strcmp(isa, "avx512") == 0)
    return tile == 2 ? &ds_f32_winograd23_kernels__avx2 : &ds_f32_winograd43_kernels__avx512;
  if (std::strcmp(isa, "avx2") == 0)
    return tile == 2 ? &ds_f32_winograd23_kernels__avx2 : &ds_f32_winograd43_kernels__avx2;
#endif
  return tile == 2 ? &ds_f32_winograd23_kernels__scalar : &ds_f32_winograd43_kernels__scalar;
}

KernelTable with_level(const char* isa, const GemmKernels* gemm, DwConv3x3Fn dwconv3x3) {
  KernelTable t = kScalarTable;
  t.isa = isa;
  t.gemm = gemm;
  t.dwconv3x3 = dwconv3x3;
  t.winograd43 = winograd_for(isa, 4);
  t.winograd23 = winograd_for(isa, 2);
  return t;
}

KernelTable with_elementwise(KernelTable t, BinaryKernel add, BinaryKernel sub, BinaryKernel mul, BinaryKernel div,
                             ReluKernel relu, ActivationKernel activation, GemvKernel gemv,
                             GlobalPoolKernel global_avgpool) {
  t.add = add, t.sub = sub, t.mul = mul, t.div = div;
  t.relu = relu;
  t.activation = activation;
  t.gemv = gemv;
  t.global_avgpool = global_avgpool;
  return t;
}

KernelTable with_maxpool_softmax(KernelTable t, Pool2dKernel maxpool2d, SoftmaxKernel softmax = ds_f32_softmax__scalar) {
  t.maxpool2d = maxpool2d;
  t.softmax = softmax;
  return t;
}

KernelTable with_q(KernelTable t, const char* isa, const QKernels* q, const Q16Kernels* q16 = nullptr) {
  t.isa = isa;
  t.q = q;
  t.q16 = q16;
  return t;
}

bool built(Isa isa) {
#if defined(DEEPSLIM_X86_KERNELS)
  (void)isa;
  return true;
#else
  return isa == Isa::kScalar;
#endif
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvxVnni: return "avxvnni";
    default: return "scalar";
  }
}

bool isa_available(Isa isa) {
  if (!built(isa)) return false;
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return f.avx2 && f.fma;
    case Isa::kAvx512: return f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl;
    case Isa::kAvx512Vnni: return isa_available(Isa::kAvx512) && f.avx512vnni;
    case Isa::kAvxVnni: return isa_available(Isa::kAvx2) && f.avxvnni;
  }
  return false;
}

Isa best_isa() {
  // AVX-VNNI below AVX-512: the AVX-512 levels' fp32 kernels are twice as wide.
  for (Isa isa : {Isa::kAvx512Vnni, Isa::kAvx512, Isa::kAvxVnni, Isa::kAvx2})
    if (isa_available(isa)) return isa;
  return Isa::kScalar;
}

Isa active_isa() {
  const char* forced = std::getenv("DS_FORCE_ISA");
  if (!forced || !*forced) return best_isa();
  std::string available;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kAvx512Vnni}) {
    if (!isa_available(isa)) continue;
    if (std::strcmp(forced, isa_name(isa)) == 0) return isa;
    available += available.empty() ? isa_name(isa) : cat(", ", isa_name(isa));
  }
  fail(DS_ERR_INVALID_ARG, "DS_FORCE_ISA=", forced, " is not available on this machine and build (available: ",
       available, ")");
}

const KernelTable& kernels_for(Isa isa) {
  if (!isa_available(isa)) fail(DS_ERR_INVALID_ARG, "ISA level ", isa_name(isa), " is not available here");
#if defined(DEEPSLIM_X86_KERNELS)
  static const KernelTable avx2 =
      with_maxpool_softmax(with_level("avx2", &ds_f32_gemm_kernels__avx2, ds_f32_dwconv3x3__avx2), ds_f32_maxpool2d__avx2);
  static const KernelTable avx512 = with_maxpool_softmax(
      with_level("avx512", &ds_f32_gemm_kernels__avx512, ds_f32_dwconv3x3__avx512), ds_f32_maxpool2d__avx512,
      ds_f32_softmax__avx512);
  // The elementwise and dense-at-batch-1 kernels of each level.
  static const KernelTable avx2_e = with_elementwise(avx2, ds_f32_vadd__avx2, ds_f32_vsub__avx2, ds_f32_vmul__avx2,
                                                     ds_f32_vdiv__avx2, ds_f32_relu__avx2, ds_f32_activation__avx2,
                                                     ds_f32_gemv__avx2, ds_f32_global_avgpool__avx2);
  static const KernelTable avx512_e =
      with_elementwise(avx512, ds_f32_vadd__avx512, ds_f32_vsub__avx512, ds_f32_vmul__avx512, ds_f32_vdiv__avx512,
                       ds_f32_relu__avx512, ds_f32_activation__avx512, ds_f32_gemv__avx512,
                       ds_f32_global_avgpool__avx512);
  // int8: AVX2 kernels (vpmaddwd) up to AVX-512 without VNNI; vpdpbusd with AVX-VNNI (on the AVX2
  // fp32 kernels) or AVX-512 VNNI.
  // int16 activations: the ymm vpmaddwd GEMM at both AVX2 levels, the zmm one at avx512 and its
  // vpdpwssd form at avx512vnni.
  static const KernelTable avx2_q = with_q(avx2_e, "avx2", &ds_qkernels__avx2, &ds_q16_kernels__avx2);
  static const KernelTable avxvnni = with_q(avx2_e, "avxvnni", &ds_qkernels__avxvnni, &ds_q16_kernels__avx2);
  static const KernelTable avx512_q = with_q(avx512_e, "avx512", &ds_qkernels__avx2, &ds_q16_kernels__avx512);
  static const KernelTable avx512vnni =
      with_q(avx512_e, "avx512vnni", &ds_qkernels__avx512vnni, &ds_q16_kernels__avx512vnni);
  if (isa == Isa::kAvx2) return avx2_q;
  if (isa == Isa::kAvxVnni) return avxvnni;
  if (isa == Isa::kAvx512) return avx512_q;
  if (isa == Isa::kAvx512Vnni) return avx512vnni;
#endif
  static const KernelTable scalar = with_level("scalar", &ds_f32_gemm_kernels__scalar, ds_f32_dwconv3x3__scalar);
  static const KernelTable scalar_q = with_q(scalar, "scalar", &ds_qkernels__scalar);
  return scalar_q;
}

const KernelTable& select_kernels() { return kernels_for(active_isa()); }

int64_t gemm_workspace_floats(const GemmKernels& g, int threads) {
  return g.workspace_floats * int64_t(threads);
}

void gemm(const GemmKernels& g, const GemmParams& p, float* workspace, ThreadPool& pool, GemmPartDone done) {
  const int threads = pool.size();
  const int64_t m_tiles = (p.m + g.mr - 1) / g.mr, n_tiles = (p.n + g.nr - 1) / g.nr;
  // Below ~100 kFLOP a job hand-off costs more than it saves.
  if (threads == 1 || 2 * p.m * p.n * p.k < 100000 || m_tiles * n_tiles < 2) {
    g.gemm(p, workspace);
    done(0, p.m, 0, p.n);
    return;
  }
  // Several tasks per thread, handed out dynamically, so that partial tiles at the edge and a
  // thread that starts late even out (one task per thread left up to a tile's worth idle). Split
  // along M only when N has too few tiles. Each task packs all of the operand it does not split
  // when that one is unpacked (A for an N split, B for an M split): then one task per thread. An
  // A whose rows are adjacent floats (row_stride 1, a transposed NCHW plane) is read in place,
  // never packed (f32-gemm-driver.h), so it splits like a packed one.
  const bool split_n = n_tiles >= 2 * threads || n_tiles >= m_tiles;
  const bool other_packed = split_n ? p.a.packed || p.a.row_stride == 1 : p.b.packed;
  // A few panels that the threads cannot share evenly (5 panels of 32 columns: MobileNet V2's
  // 1x1 layers at 7x7 as pixels, 49 x 160 x 960, 3 on one thread and 2 on the other) are split
  // into row chunks too (with at least a row tile per thread), as below.
  const bool uneven_panels = split_n && other_packed && p.b.packed && n_tiles < 4 * threads &&
                             n_tiles % threads != 0 && m_tiles >= threads;
  if ((!split_n && p.b.packed && n_tiles > 1 && p.n > p.m) || uneven_panels) {
    // Along M with a packed B of a few panels that is larger than A: row ranges of single tiles
    // would each stream all of B for mr rows (FaceNet-1M's conv3 as pixels, 64 x 96 x 1200: 6
    // tasks each reading the whole 460 KB weight). Tasks of one panel x one of `threads` row
    // chunks instead: each panel is read once per chunk and serves a chunk's tiles from L1, and A
    // (the smaller operand) is read once per panel. With A the larger (MobileNet V2's 1x1 layers
    // at 14x14 as pixels, 196 x 96 x 576) the row split stays, which reads A once and B per task.
    const int64_t chunk_tiles = (m_tiles + threads - 1) / threads;
    const int64_t chunks = (m_tiles + chunk_tiles - 1) / chunk_tiles;
    pool.parallel_for(chunks * n_tiles, [&](int64_t task, int thread) {
      const int64_t m0 = task / n_tiles * chunk_tiles * g.mr, j0 = task % n_tiles * g.nr;
      const int64_t m1 = std::min(m0 + chunk_tiles * g.mr, p.m), j1 = std::min(j0 + g.nr, p.n);
      g.gemm(gemm_slice(p, g.mr, g.nr, m0, m1, j0, j1), workspace + int64_t(thread) * g.workspace_floats);
      done(m0, m1, j0, j1);
    });
    return;
  }
  const int64_t tiles = split_n ? n_tiles : m_tiles;
  const int64_t want_tasks = other_packed ? 4 * int64_t(threads) : int64_t(threads);
  // Up to 8 tiles a thread, one tile a task: tasks of 2 (10 panels as 5 tasks) left one thread
  // 3 of them (MobileNet V2's 960 -> 320 at 7x7).
  const int64_t per_task = other_packed && tiles <= 8 * threads
                               ? 1
                               : std::max<int64_t>(1, (tiles + want_tasks - 1) / want_tasks);
  const int64_t tasks = (tiles + per_task - 1) / per_task;
  pool.parallel_for(tasks, [&](int64_t task, int thread) {
    const int64_t t0 = task * per_task, t1 = t0 + per_task < tiles ? t0 + per_task : tiles;
    const int64_t m0 = split_n ? 0 : t0 * g.mr, m1 = split_n ? p.m : std::min(t1 * g.mr, p.m);
    const int64_t j0 = split_n ? t0 * g.nr : 0, j1 = split_n ? std::min(t1 * g.nr, p.n) : p.n;
    g.gemm(gemm_slice(p, g.mr, g.nr, m0, m1, j0, j1), workspace + int64_t(thread) * g.workspace_floats);
    done(m0, m1, j0, j1);
  });
}

}  // namespace ds

// The C API's view of the active level (declared in deepslim/deepslim.h).
extern "C" DS_API const char* ds_isa(void) {
  try {
    return ds::isa_name(ds::active_isa());
  } catch (...) {
    return nullptr;
  }
}
