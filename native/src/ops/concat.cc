// concat (op id 14): 1 to 255 inputs joined along `axis` (required; negative counts from the end).
#include "common/error.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
namespace {

constexpr int kMaxInputs = 255;

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "concat");
  OpParams p;
  if (!a.has("axis")) fail(DS_ERR_FORMAT, a.where(), ": attribute 'axis' is missing");
  p.axis = a.get_int("axis", 0);
  a.finish();
  if (p.axis < -kMaxRank || p.axis >= kMaxRank)
    fail(DS_ERR_FORMAT, a.where(), ": axis ", p.axis, " is outside -8..7");
  return p;
}

int64_t normalized_axis(const OpParams& p, size_t rank) { return p.axis < 0 ? p.axis + int64_t(rank) : p.axis; }

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x0 = *in[0];
  const int64_t axis = normalized_axis(p, x0.size());
  if (axis < 0 || axis >= int64_t(x0.size()))
    fail(DS_ERR_SHAPE, node_where(node, "concat"), ": axis ", p.axis, " is out of range for input 0 ", shape_str(x0));
  Shape out = x0;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& x = *in[i];
    bool ok = x.size() == x0.size();
    for (size_t k = 0; ok && k < x.size(); ++k) ok = int64_t(k) == axis || x[k] == x0[k];
    if (!ok)
      fail(DS_ERR_SHAPE, node_where(node, "concat"), ": input ", i, " ", shape_str(x), " does not match input 0 ",
           shape_str(x0), " outside axis ", axis);
    out[size_t(axis)] += x[size_t(axis)];  // each <= 2^31, at most 255 of them
  }
  return out;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const size_t axis = size_t(normalized_axis(p, os.size()));
  const int64_t inner = product(os, axis + 1);
  const float* xs[kMaxInputs];
  int64_t sizes[kMaxInputs];
  for (size_t i = 0; i < in.size(); ++i) {
    xs[i] = in[i].data;
    sizes[i] = (*in[i].shape)[axis] * inner;
  }
  const ConcatParams c{product(os, 0, axis), int32_t(in.size()), sizes};
  if (in[0].dtype == kDtypeU8) {
    const uint8_t* bs[kMaxInputs];
    for (size_t i = 0; i < in.size(); ++i) bs[i] = in[i].as<uint8_t>();
    ds_x8_concat__scalar(c, bs, nullptr, reinterpret_cast<uint8_t*>(out));
  } else {
    k.concat(c, xs, out);
  }
}

}  // namespace

extern const OpDef kConcatOp = {14, "concat", 1, kMaxInputs, parse, infer_shape, run, true, same_dtype_f32_or_u8};

}  // namespace ds
