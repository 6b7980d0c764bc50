#include "ops/binary.h"

#include <algorithm>

#include "common/error.h"

namespace ds {

Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& node, const char* op) {
  const size_t rank = std::max(a.size(), b.size());
  if (rank > size_t(kMaxRank))
    fail(DS_ERR_SHAPE, node_where(node, op), ": rank ", rank, " is over the limit of ", kMaxRank);
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {  // i counts from the last axis
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      fail(DS_ERR_SHAPE, node_where(node, op), ": shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast");
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  if (out.empty()) out.push_back(1);  // two rank-0 inputs: treat as [1]
  return out;
}

Shape binary_infer_shape(const std::vector<const Shape*>& in, const std::string& node, const char* op) {
  return broadcast_shape(*in[0], *in[1], node, op);
}

BinaryParams binary_params(const Shape& a, const Shape& b, const Shape& out, const Activation& act) {
  BinaryParams p;
  p.rank = int32_t(out.size());
  p.act = act;
  int64_t sa = 1, sb = 1;
  for (int k = p.rank - 1; k >= 0; --k) {
    const size_t i = size_t(p.rank - 1 - k);  // distance from the last axis
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    p.dims[k] = out[size_t(k)];
    p.a_strides[k] = da == 1 ? 0 : sa;
    p.b_strides[k] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  return p;
}

}  // namespace ds
