#include "core/dispatch.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"

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
};

}  // namespace

const KernelTable& select_kernels() {
  const char* forced = std::getenv("DS_FORCE_ISA");
  if (forced && *forced && std::strcmp(forced, "scalar") != 0)
    fail(DS_ERR_INVALID_ARG, "DS_FORCE_ISA=", forced, " is not available in this build (available: scalar)");
  return kScalarTable;
}

}  // namespace ds
