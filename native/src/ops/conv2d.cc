// conv2d (op id 1): x (N,C,H,W), weight (O,C/group,kh,kw), optional bias (O).
#include "common/error.h"
#include "ops/op.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser a(attrs, node, "conv2d");
  OpParams p;
  parse_conv_window(a, p);
  p.act = parse_epilogue(a);
  a.finish();
  return p;
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  const Shape& x = *in[0];
  const Shape& w = *in[1];
  if (x.size() != 4)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): input ", shape_str(x), " is not rank 4 (N,C,H,W)");
  if (w.size() != 4)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): weight ", shape_str(w), " is not rank 4 (O,C/group,kh,kw)");
  if (x[1] % p.group != 0 || w[0] % p.group != 0 || w[1] != x[1] / p.group)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): weight ", shape_str(w), " does not fit input ",
         shape_str(x), " with group ", p.group);
  if (in.size() > 2 && in[2] && (in[2]->size() != 1 || (*in[2])[0] != w[0]))
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): bias ", shape_str(*in[2]), " is not [", w[0], "]");
  if (w[2] > kMaxWindowParam || w[3] > kMaxWindowParam)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): kernel ", shape_str(w), " is too large");
  const int64_t oh = window_output_size(x[2], p.pads[0], p.pads[2], w[2], p.strides[0], p.dilations[0], false);
  const int64_t ow = window_output_size(x[3], p.pads[1], p.pads[3], w[3], p.strides[1], p.dilations[1], false);
  if (oh < 1 || ow < 1)
    fail(DS_ERR_SHAPE, "node '", node, "' (conv2d): kernel ", w[2], "x", w[3],
         " (with dilation and pads) does not fit input ", shape_str(x));
  return {x[0], w[0], oh, ow};
}

void run(const OpParams& p, const std::vector<OpInput>& in, float* out, const Shape& os,
         const KernelTable& k) {
  const Shape& x = *in[0].shape;
  const Shape& w = *in[1].shape;
  Conv2dParams c;
  c.n = x[0], c.c = x[1], c.h = x[2], c.w = x[3];
  c.o = os[1], c.oh = os[2], c.ow = os[3];
  c.kh = w[2], c.kw = w[3];
  c.stride_h = p.strides[0], c.stride_w = p.strides[1];
  c.pad_top = p.pads[0], c.pad_left = p.pads[1];
  c.dil_h = p.dilations[0], c.dil_w = p.dilations[1];
  c.group = p.group;
  c.act = p.act;
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  k.conv2d(c, in[0].data, in[1].data, bias, out);
}

}  // namespace

extern const OpDef kConv2dOp = {1, "conv2d", 2, 3, parse, infer_shape, run};

}  // namespace ds
