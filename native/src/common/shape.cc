#include "common/shape.h"

#include "common/error.h"

namespace ds {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int64_t element_count(const Shape& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 1) fail(DS_ERR_SHAPE, what, ": shape ", shape_str(shape), " has a dimension < 1");
    if (d > kMaxElements || n > kMaxElements / d)
      fail(DS_ERR_SHAPE, what, ": shape ", shape_str(shape), " has more than 2^31 elements");
    n *= d;
  }
  return n;
}

}  // namespace ds
