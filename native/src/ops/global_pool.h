// Shared by global_avgpool and global_maxpool (op ids 22, 23): x (N,C,H,W) -> (N,C,1,1). Any rank
// >= 3 is taken as ONNX does (every axis after the channels is pooled).
#pragma once

#include "common/error.h"
#include "ops/op.h"

namespace ds {

inline Shape global_pool_infer_shape(const Shape& x, const std::string& node, const char* op) {
  if (x.size() < 3)
    fail(DS_ERR_SHAPE, node_where(node, op), ": input ", shape_str(x), " has no spatial axes (rank < 3)");
  Shape out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  return out;
}

}  // namespace ds
