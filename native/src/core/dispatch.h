// Kernel selection: done once per session. Only the scalar reference kernels exist so far; per-ISA
// tables (chosen from CPU features) join here, and DS_FORCE_ISA pins one.
#pragma once

#include "kernels/kernels.h"

namespace ds {

// Throws DS_ERR_INVALID_ARG when DS_FORCE_ISA names an ISA this build does not have.
const KernelTable& select_kernels();

}  // namespace ds
