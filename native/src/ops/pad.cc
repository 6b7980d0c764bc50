// pad (op id 20): `pads` ints[2*rank] = [begin of each axis..., end of each axis...] (>= 0);
// `mode` "constant" (with `value`), "reflect" (mirror without the edge; pad < size) or "edge".

#include <cstring>

#include "common/error.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "pad");
  OpParams p;
  if (!a.get_int_list("pads", 2 * kMaxRank, &p.list)) fail(DS_ERR_FORMAT, a.where(), ": attribute 'pads' is missing");
  const std::string mode = a.get_string("mode", "constant");
  p.value = a.get_float("value", 0.0f);
  a.finish();
  if (p.list.size() % 2 != 0)
    fail(DS_ERR_FORMAT, a.where(), ": pads ", shape_str(p.list), " has an odd number of values (2 per axis)");
  for (int64_t v : p.list)
    if (v < 0 || v > kMaxWindowParam)
      fail(DS_ERR_FORMAT, a.where(), ": pads ", shape_str(p.list), " has a pad ", v, " outside 0..2^20");
  if (mode == "constant") p.mode = kPadConstant;
  else if (mode == "reflect") p.mode = kPadReflect;
  else if (mode == "edge") p.mode = kPadEdge;
  else fail(DS_ERR_FORMAT, a.where(), ": mode '", mode, "' is not \"constant\", \"reflect\" or \"edge\"");
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const size_t r = x.size();
  if (p.list.size() != 2 * r)
    fail(DS_ERR_SHAPE, node_where(node, "pad"), ": pads ", shape_str(p.list), " has ", p.list.size(),
         " values, input ", shape_str(x), " needs ", 2 * r);
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t b = p.list[k], e = p.list[r + k];
    if (p.mode == kPadReflect && (b >= x[k] || e >= x[k]))
      fail(DS_ERR_SHAPE, node_where(node, "pad"), ": reflect pads ", b, " and ", e, " of axis ", k,
           " must be smaller than its size ", x[k], " (input ", shape_str(x), ")");
    out[k] = x[k] + b + e;
  }
  return out;
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  if (x.empty()) {  // a scalar: nothing to pad
    std::memcpy(out, in[0].data, dtype_size(in[0].dtype));
    return;
  }
  PadParams q;
  q.rank = int32_t(x.size());
  q.mode = p.mode;
  q.value = p.value;
  for (size_t i = 0; i < x.size(); ++i) q.in_dims[i] = x[i], q.dims[i] = os[i], q.begin[i] = p.list[i];
  if (in[0].dtype == kDtypeU8) ds_u8_pad__scalar(q, in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
  else k.pad(q, in[0].data, out);
}

// u8 takes constant padding only with an integer value 0..255 (the zero point).
uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  const uint8_t d = same_dtype_f32_or_u8(p, in, who);
  if (d == kDtypeU8 && p.mode == kPadConstant && !(p.value >= 0.0f && p.value <= 255.0f && p.value == float(int(p.value))))
    fail(DS_ERR_FORMAT, who, ": attribute 'value' is ", p.value,
         "; padding u8 needs an integer 0..255 (the zero point)");
  return d;
}

}  // namespace

extern const OpDef kPadOp = {20, "pad", 1, 1, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
