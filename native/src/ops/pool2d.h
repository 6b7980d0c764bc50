// Shared parsing and shape rules of maxpool2d and avgpool2d.
#pragma once

#include "ops/op.h"

namespace ds {

OpParams pool2d_parse(const std::vector<Attr>& attrs, const std::string& node, const char* op,
                      bool is_avg);
Shape pool2d_infer_shape(const OpParams& p, const Shape& x, const std::string& node, const char* op);
Pool2dParams pool2d_kernel_params(const OpParams& p, const Shape& x, const Shape& out);

}  // namespace ds
