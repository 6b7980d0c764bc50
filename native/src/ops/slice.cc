// slice (op id 24): `starts`, `ends` (required) and `axes` (default 0..n-1, as ONNX) of equal
// length; step 1; negative values count from the end; clamped to the axis as in numpy/ONNX.
// An empty result is a shape error (activations have sizes >= 1).
#include <algorithm>

#include "common/error.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "slice");
  OpParams p;
  if (!a.get_int_list("starts", kMaxRank, &p.list)) fail(DS_ERR_FORMAT, a.where(), ": attribute 'starts' is missing");
  if (!a.get_int_list("ends", kMaxRank, &p.ends)) fail(DS_ERR_FORMAT, a.where(), ": attribute 'ends' is missing");
  const bool has_axes = a.get_int_list("axes", kMaxRank, &p.axes);
  a.finish();
  if (!has_axes)
    for (size_t i = 0; i < p.list.size(); ++i) p.axes.push_back(int64_t(i));
  if (p.list.size() != p.ends.size() || p.list.size() != p.axes.size())
    fail(DS_ERR_FORMAT, a.where(), ": starts, ends and axes have ", p.list.size(), ", ", p.ends.size(), " and ",
         p.axes.size(), " values; they must have the same length");
  for (size_t i = 0; i < p.axes.size(); ++i) {
    if (p.axes[i] < -kMaxRank || p.axes[i] >= kMaxRank)
      fail(DS_ERR_FORMAT, a.where(), ": axis ", p.axes[i], " is outside -8..7");
    for (size_t j = 0; j < i; ++j)
      if (p.axes[j] == p.axes[i]) fail(DS_ERR_FORMAT, a.where(), ": axis ", p.axes[i], " appears twice in axes");
  }
  return p;
}

// Begin and end of every axis of x (the whole axis where no slice names it).
void slice_bounds(const OpParams& p, const Shape& x, const std::string& node, int64_t* begin, int64_t* end) {
  const int64_t rank = int64_t(x.size());
  for (size_t k = 0; k < x.size(); ++k) begin[k] = 0, end[k] = x[k];
  bool seen[kMaxRank] = {false};
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const int64_t axis = p.axes[i] < 0 ? p.axes[i] + rank : p.axes[i];
    if (axis < 0 || axis >= rank)
      fail(DS_ERR_SHAPE, node_where(node, "slice"), ": axis ", p.axes[i], " is out of range for input ", shape_str(x));
    if (seen[axis])
      fail(DS_ERR_SHAPE, node_where(node, "slice"), ": axes ", shape_str(p.axes), " name axis ", axis,
           " twice for input ", shape_str(x));
    seen[axis] = true;
    const int64_t d = x[size_t(axis)];
    int64_t s = p.list[i], e = p.ends[i];
    if (s < 0) s = s < -d ? 0 : s + d;  // no overflow: s >= INT64_MIN, d >= 1
    if (e < 0) e = e < -d ? 0 : e + d;
    begin[axis] = std::min(s, d);
    end[axis] = std::min(e, d);
  }
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  int64_t begin[kMaxRank], end[kMaxRank];
  slice_bounds(p, x, node, begin, end);
  Shape out(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    if (end[k] <= begin[k])
      fail(DS_ERR_SHAPE, node_where(node, "slice"), ": axis ", k, " of input ", shape_str(x), " is sliced to ",
           begin[k], "..", end[k], ", which is empty");
    out[k] = end[k] - begin[k];
  }
  return out;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  if (x.empty()) {  // a scalar
    out[0] = in[0].data[0];
    return;
  }
  int64_t begin[kMaxRank], end[kMaxRank];
  slice_bounds(p, x, std::string(), begin, end);  // validated by infer_shape: does not throw
  CopyNdParams c;
  c.rank = int32_t(x.size());
  c.offset = 0;
  int64_t stride = 1;
  for (size_t i = x.size(); i-- > 0;) {
    c.dims[i] = os[i];
    c.strides[i] = stride;
    c.offset += begin[i] * stride;
    stride *= x[i];
  }
  if (in[0].dtype == kDtypeU8)
    ds_x8_copy_nd__scalar(c, in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
  else
    k.copy_nd(c, in[0].data, out);
}

}  // namespace

extern const OpDef kSliceOp = {24, "slice", 1, 1, parse, infer_shape, run, false, same_dtype_f32_or_u8};

}  // namespace ds
