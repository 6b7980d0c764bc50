// resize (op id 21): ONNX Resize (opset 13+) of x (N,C,H,W) to `sizes` (H, W); modes nearest and
// linear (bilinear), the coordinate transformation and nearest rounding modes of ONNX.
#include "common/error.h"
#include "kernels/qu8.h"
#include "ops/op.h"

namespace ds {
namespace {

// Index of `value` in names, or fails naming the attribute and the choices.
int32_t choose(const AttrParser& a, const char* key, const std::string& value, const char* const* names, int n) {
  std::string choices;
  for (int i = 0; i < n; ++i) {
    if (value == names[i]) return int32_t(i);
    choices += cat(i ? ", " : "", "\"", names[i], "\"");
  }
  fail(DS_ERR_FORMAT, a.where(), ": ", key, " '", value, "' is not one of ", choices);
}

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  static const char* const modes[] = {"nearest", "linear"};
  // Order of ResizeCoord and ResizeNearest.
  static const char* const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
  static const char* const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  AttrParser a(attrs, node, "resize");
  OpParams p;
  if (!a.get_ints("sizes", 2, p.sizes)) fail(DS_ERR_FORMAT, a.where(), ": attribute 'sizes' is missing");
  const std::string mode = a.get_string("mode", "nearest");
  const std::string coord = a.get_string("coordinate_transformation_mode", "half_pixel");
  const std::string near = a.get_string("nearest_mode", "round_prefer_floor");
  a.finish();
  for (int64_t v : p.sizes)
    if (v < 1 || v > kMaxElements) fail(DS_ERR_FORMAT, a.where(), ": output size ", v, " is outside 1..2^31");
  p.mode = choose(a, "mode", mode, modes, 2);
  p.coord = choose(a, "coordinate_transformation_mode", coord, coords, 4);
  p.nearest = choose(a, "nearest_mode", near, nearest, 4);
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  if (x.size() != 4) fail(DS_ERR_SHAPE, node_where(node, "resize"), ": input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  return {x[0], x[1], p.sizes[0], p.sizes[1]};
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  const ResizeParams r{x[0] * x[1], x[2], x[3], os[2], os[3], p.coord, p.nearest};
  if (in[0].dtype == kDtypeU8) ds_u8_resize_nearest__scalar(r, in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
  else (p.mode == 1 ? k.resize_linear : k.resize_nearest)(r, in[0].data, out);
}

uint8_t check_dtypes(OpParams& p, const std::vector<ValueInfo>& in, const std::string& who) {
  const uint8_t d = same_dtype_f32_or_u8(p, in, who);
  if (d == kDtypeU8 && p.mode != 0)
    fail(DS_ERR_FORMAT, who, ": attribute 'mode' is linear; resizing u8 needs mode nearest");
  return d;
}

}  // namespace

extern const OpDef kResizeOp = {21, "resize", 1, 1, parse, infer_shape, run, false, check_dtypes};

}  // namespace ds
