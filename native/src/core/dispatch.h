// Kernel selection, done once per session: the best ISA level the CPU and OS support (cpuid +
// xgetbv, src/core/cpu_features), unless DS_FORCE_ISA=scalar|avx2|avx512|avx512vnni pins a level, which must
// be available. Also the threaded GEMM entry point used by ops.
#pragma once

#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace ds {

// Levels in increasing order; each includes the ones below.
enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3, kAvxVnni = 4 };

const char* isa_name(Isa isa);
// Whether this build has the level's kernels and this CPU (and OS) can run them.
bool isa_available(Isa isa);
Isa best_isa();
// DS_FORCE_ISA if set (DS_ERR_INVALID_ARG when unknown or unavailable), else best_isa().
Isa active_isa();

// The table of one level (DS_ERR_INVALID_ARG when unavailable); select_kernels() is the active one.
const KernelTable& kernels_for(Isa isa);
const KernelTable& select_kernels();

// Floats of workspace gemm() needs for a pool of `threads` threads.
int64_t gemm_workspace_floats(const GemmKernels& g, int threads);

// Runs p on the pool: the N dimension (or M when N has few tiles) is split into tile-aligned
// ranges, one task each, or into panel x row-chunk tasks where a few panels would not share
// evenly (dispatch.cc). Every output element is computed by the same sequence of
// operations whatever the split, so results are bitwise identical for any thread count.
// workspace: gemm_workspace_floats(g, pool.size()) floats, 64-byte aligned.
// done, if set, is called by the thread that computed each task's part of C, rows [m0, m1) x
// columns [j0, j1), once that part is final (the parts tile C; one call for all of C when the GEMM
// runs unsplit): a consumer of C (a transpose) then runs in the same job, on data still in that
// thread's cache, without a job and a wait of its own.
struct GemmPartDone {
  void (*fn)(void* ctx, int64_t m0, int64_t m1, int64_t j0, int64_t j1) = nullptr;
  void* ctx = nullptr;
  void operator()(int64_t m0, int64_t m1, int64_t j0, int64_t j1) const {
    if (fn) fn(ctx, m0, m1, j0, j1);
  }
};
void gemm(const GemmKernels& g, const GemmParams& p, float* workspace, ThreadPool& pool, GemmPartDone done = {});

}  // namespace ds
