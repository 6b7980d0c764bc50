// maxpool2d (op id 3): x (N,C,H,W), f32, u8 or i16.
#include "kernels/qi16.h"
#include "ops/pool2d.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  return pool2d_parse(attrs, node, "maxpool2d", false);
}

Shape infer_shape(const OpParams& p, const std::vector<const Shape*>& in, const std::string& node) {
  return pool2d_infer_shape(p, *in[0], node, "maxpool2d");
}

void run_prepared(const OpParams& p, const RunContext& ctx, const std::vector<OpInput>& in, void* out,
                  const Shape& os, const KernelTable& k) {
  const Pool2dParams q = pool2d_kernel_params(p, *in[0].shape, os);
  if (in[0].dtype == kDtypeI16)
    pool2d_run_planes(ctx.pool, q, in[0].as<int16_t>(), static_cast<int16_t*>(out), ds_i16_maxpool2d__scalar);
  else if (in[0].dtype == kDtypeU8)
    pool2d_run_planes(ctx.pool, q, in[0].as<uint8_t>(), static_cast<uint8_t*>(out),
                      k.q && k.q->maxpool2d ? k.q->maxpool2d : ds_u8_maxpool2d__scalar);
  else pool2d_run_planes(ctx.pool, q, in[0].data, static_cast<float*>(out), k.maxpool2d);
}

}  // namespace

extern const OpDef kMaxPool2dOp = {3, "maxpool2d", 1, 1, parse, infer_shape, nullptr, false, same_dtype_f32_u8_or_i16,
                                   nullptr, run_prepared};

}  // namespace ds
