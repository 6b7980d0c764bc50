// CSR dense layer against the dense scalar reference: random densities from empty rows to full,
// odd sizes, batches, every activation; and the CSR built from a dense matrix keeps exactly its
// nonzeros.
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/sparse.h"
#include "tiny_net.h"

namespace {

TEST(csr_keeps_exactly_the_nonzeros) {
  const float w[] = {0, 1.5f, 0, 0, 0, 0, -2, 0, 3};  // 3x3, middle row empty
  const ds::CsrWeights s = ds::csr_from_dense(w, 3, 3);
  CHECK(s.row_start == std::vector<int32_t>({0, 1, 1, 3}));
  CHECK(s.col == std::vector<int32_t>({1, 0, 2}));
  CHECK(s.values == std::vector<float>({1.5f, -2, 3}));
}

TEST(spmm_matches_the_dense_reference) {
  tiny::Rng rng(5);
  const double densities[] = {0.0, 0.03, 0.1, 0.5, 1.0};
  int cases = 0;
  for (int64_t n : {1, 2, 5})
    for (int64_t k : {1, 3, 17, 64, 785})
      for (int64_t m : {1, 7, 33})
        for (double density : densities) {
          std::vector<float> w(static_cast<size_t>(m * k)), x(static_cast<size_t>(n * k)), bias(static_cast<size_t>(m));
          for (float& v : w) v = rng.uniform(0, 1) < density ? rng.uniform(-1, 1) : 0.0f;
          for (float& v : x) v = rng.uniform(-1, 1);
          for (float& v : bias) v = rng.uniform(-1, 1);
          ds::DenseParams p;
          p.n = n, p.k = k, p.m = m;
          p.act.kind = int32_t(rng.below(8));
          p.act.alpha = p.act.kind == 2 ? -0.5f : 0.1f;
          p.act.beta = 0.5f;
          const bool with_bias = rng.below(2) == 0;
          std::vector<float> want(size_t(n * m)), got(want.size() + 1, -7.0f);
          ds::ds_f32_dense__scalar(p, x.data(), w.data(), with_bias ? bias.data() : nullptr, want.data());
          const ds::CsrWeights s = ds::csr_from_dense(w.data(), m, k);
          ds::ds_f32_spmm__scalar(p, x.data(), s, with_bias ? bias.data() : nullptr, got.data());
          int bad = 0;
          for (size_t i = 0; i < want.size(); ++i) {
            // Sums of up to k terms of magnitude <= 1 in another order.
            const double allowed = 4 * FLT_EPSILON * double(k + 1) + 4 * FLT_EPSILON * std::fabs(want[i]);
            if (!(std::fabs(double(got[i]) - want[i]) <= allowed)) ++bad;
          }
          CHECK_MSG(bad == 0 && got.back() == -7.0f,
                    "n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m) +
                        " density=" + std::to_string(density) + ": " + std::to_string(bad) + " off");
          ++cases;
        }
  CHECK(cases == 3 * 5 * 3 * 5);
}

}  // namespace
