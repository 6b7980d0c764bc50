#include "ops/pool2d.h"

#include "common/error.h"

namespace ds {

OpParams pool2d_parse(const std::vector<Attr>& attrs, const std::string& node, const char* op,
                      bool is_avg) {
  AttrParser a(attrs, node, op);
  OpParams p;
  if (!a.get_ints("kernel", 2, p.kernel)) fail(DS_ERR_FORMAT, a.where(), ": attribute 'kernel' is missing");
  if (!a.get_ints("strides", 2, p.strides)) {
    p.strides[0] = p.kernel[0];
    p.strides[1] = p.kernel[1];
  }
  a.get_ints("pads", 4, p.pads);
  if (!is_avg) a.get_ints("dilations", 2, p.dilations);
  p.ceil_mode = a.get_int("ceil_mode", 0);
  if (is_avg) p.count_include_pad = a.get_int("count_include_pad", 0);
  a.finish();
  for (int64_t v : p.kernel)
    if (v < 1 || v > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": kernel size ", v, " is outside 1..2^20");
  for (int64_t v : p.strides)
    if (v < 1 || v > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": stride ", v, " is outside 1..2^20");
  for (int64_t v : p.dilations)
    if (v < 1 || v > kMaxWindowParam) fail(DS_ERR_FORMAT, a.where(), ": dilation ", v, " is outside 1..2^20");
  // A pad smaller than the kernel keeps every window on at least one input element.
  for (int i = 0; i < 4; ++i)
    if (p.pads[i] < 0 || p.pads[i] >= p.kernel[i % 2])
      fail(DS_ERR_FORMAT, a.where(), ": pad ", p.pads[i], " is outside 0..kernel-1 (", p.kernel[i % 2] - 1, ")");
  if (p.ceil_mode != 0 && p.ceil_mode != 1)
    fail(DS_ERR_FORMAT, a.where(), ": ceil_mode ", p.ceil_mode, " is not 0 or 1");
  if (p.count_include_pad != 0 && p.count_include_pad != 1)
    fail(DS_ERR_FORMAT, a.where(), ": count_include_pad ", p.count_include_pad, " is not 0 or 1");
  return p;
}

Shape pool2d_infer_shape(const OpParams& p, const Shape& x, const std::string& node, const char* op) {
  if (x.size() != 4)
    fail(DS_ERR_SHAPE, "node '", node, "' (", op, "): input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  const bool ceil = p.ceil_mode == 1;
  const int64_t oh = window_output_size(x[2], p.pads[0], p.pads[2], p.kernel[0], p.strides[0], p.dilations[0], ceil);
  const int64_t ow = window_output_size(x[3], p.pads[1], p.pads[3], p.kernel[1], p.strides[1], p.dilations[1], ceil);
  if (oh < 1 || ow < 1)
    fail(DS_ERR_SHAPE, "node '", node, "' (", op, "): kernel ", p.kernel[0], "x", p.kernel[1],
         " does not fit input ", shape_str(x));
  return {x[0], x[1], oh, ow};
}

Pool2dParams pool2d_kernel_params(const OpParams& p, const Shape& x, const Shape& out) {
  Pool2dParams k;
  k.n = x[0], k.c = x[1], k.h = x[2], k.w = x[3], k.oh = out[2], k.ow = out[3];
  k.kh = p.kernel[0], k.kw = p.kernel[1];
  k.stride_h = p.strides[0], k.stride_w = p.strides[1];
  k.pad_top = p.pads[0], k.pad_left = p.pads[1], k.pad_bottom = p.pads[2], k.pad_right = p.pads[3];
  k.dil_h = p.dilations[0], k.dil_w = p.dilations[1];
  k.count_include_pad = p.count_include_pad == 1;
  return k;
}

}  // namespace ds
