// Shapes and element counts, shared by ops and core.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds {

using Shape = std::vector<int64_t>;

// Largest element count of any tensor or activation (format limit for tensors; the same bound keeps
// activation sizes in int64 arithmetic and in memory that a device can have).
constexpr int64_t kMaxElements = int64_t(1) << 31;

// "[1, 3, 224, 224]"
std::string shape_str(const Shape& shape);

// Product of the dims; throws DS_ERR_SHAPE naming `what` when a dim is < 1 or the product is
// over kMaxElements.
int64_t element_count(const Shape& shape, const std::string& what);

}  // namespace ds
