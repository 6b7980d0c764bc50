// global_avgpool (op id 22): the avg of each (n, c) plane; output (N,C,1,1).
#include <algorithm>

#include "ops/global_pool.h"
#include "ops/parallel.h"

namespace ds {
namespace {

OpParams parse(const std::vector<Attr>& attrs, const std::string& node) {
  AttrParser(attrs, node, "global_avgpool").finish();
  return OpParams();
}

Shape infer_shape(const OpParams&, const std::vector<const Shape*>& in, const std::string& node) {
  return global_pool_infer_shape(*in[0], node, "global_avgpool");
}

// The planes split over the session's threads from 32K input elements (one piece per thread, as
// the pooling ops: memory-bound): SqueezeNet 1.1's 1000 x 13 x 13 ran on the caller alone, its
// largest serial section at 2 threads (12-17 us of caller CPU time). Each plane is summed alone,
// so the split does not change the results.
void run_prepared(const OpParams&, const RunContext& ctx, const std::vector<OpInput>& in, void* out, const Shape&,
                  const KernelTable& k) {
  const Shape& x = *in[0].shape;
  const int64_t size = product(x, 2);
  float* y = static_cast<float*>(out);
  parallel_range(ctx.pool, x[0] * x[1], 32768 / std::max<int64_t>(1, size) + 1, 1,
                 [&](int64_t b, int64_t e) { k.global_avgpool(e - b, size, in[0].data + b * size, y + b); });
}

}  // namespace

extern const OpDef kGlobalAvgPoolOp = {22, "global_avgpool", 1, 1, parse, infer_shape, nullptr, false, nullptr,
                                       nullptr, run_prepared};

}  // namespace ds
