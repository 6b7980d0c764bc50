// Shared by add, sub, mul, div (op ids 10-13): numpy broadcasting of two inputs.
#pragma once

#include "ops/op.h"

namespace ds {

// The broadcast shape of a and b (aligned at the last axis; each pair equal or one of them 1).
// Throws DS_ERR_SHAPE "node 'x' (add): shapes [..] and [..] do not broadcast".
Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& node, const char* op);
Shape binary_infer_shape(const std::vector<const Shape*>& in, const std::string& node, const char* op);
// Kernel parameters: input strides in the output's index space (0 where an input broadcasts).
BinaryParams binary_params(const Shape& a, const Shape& b, const Shape& out, const Activation& act);

}  // namespace ds
