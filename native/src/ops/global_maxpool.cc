// global_maxpool (op id 23): the max of each (n, c) plane; output (N,C,1,1). f32, u8 or i16.
#include "kernels/qi16.h"
#include "ops/global_pool.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser(attrs, node, "global_maxpool").finish();
  return OpParams();
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return global_pool_infer_shape(*in[0], node, "global_maxpool");
}

void run(const OpParams&, const std::vector<OpInput>& in, float* out, const Shape&, const KernelTable& k) {
  const Shape& x = *in[0].shape;
  if (in[0].dtype == kDtypeI16)
    ds_i16_global_maxpool__scalar(x[0] * x[1], product(x, 2), in[0].as<int16_t>(), reinterpret_cast<int16_t*>(out));
  else if (in[0].dtype == kDtypeU8)
    ds_u8_global_maxpool__scalar(x[0] * x[1], product(x, 2), in[0].as<uint8_t>(), reinterpret_cast<uint8_t*>(out));
  else
    k.global_maxpool(x[0] * x[1], product(x, 2), in[0].data, out);
}

}  // namespace

extern const OpDef kGlobalMaxPoolOp = {23, "global_maxpool", 1, 1, parse, infer_shape, run, false, same_dtype_f32_u8_or_i16};

}  // namespace ds
