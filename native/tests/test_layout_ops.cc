// Data-movement ops against plain loops and hand-written values: concat, reshape, transpose,
// pad, slice, channel_shuffle.
#include <algorithm>
#include <limits>
#include <numeric>

#include "harness.h"
#include "kernels/kernels.h"
#include "kernels/qu8.h"
#include "op_runner.h"
#include "tiny_net.h"

using opt::Dims;
using opt::Result;

namespace {

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

}  // namespace

TEST(concat_any_axis_matches_loops) {
  tiny::Rng rng(21);
  struct Case { std::vector<Dims> in; int64_t axis; };
  const Case cases[] = {
      {{{2, 3, 4, 5}, {2, 1, 4, 5}, {2, 7, 4, 5}}, 1},
      {{{2, 3, 4, 5}, {2, 3, 4, 2}}, -1},
      {{{1, 3, 5}, {2, 3, 5}, {3, 3, 5}}, 0},
      {{{2, 3, 4}, {2, 3, 1}}, 2},
      {{{3, 2, 5}}, -2},  // one input: a copy
      {{{1}, {1}, {1}}, 0},
  };
  for (const Case& c : cases) {
    std::vector<std::vector<float>> xs;
    for (const Dims& d : c.in) xs.push_back(opt::random_vec(rng, opt::count(d)));
    const Result r = opt::run(opt::one_node(14, c.in, {}, {dsw::attr_int("axis", c.axis)}), xs, c.in);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    const size_t axis = size_t(c.axis < 0 ? c.axis + int64_t(c.in[0].size()) : c.axis);
    Dims out = c.in[0];
    out[axis] = 0;
    for (const Dims& d : c.in) out[axis] += d[axis];
    CHECK(r.shape == out);
    REQUIRE(r.y.size() == opt::count(out));
    for (size_t e = 0; e < r.y.size(); ++e) {
      Dims idx = opt::unravel(e, out);
      size_t i = 0;
      while (idx[axis] >= c.in[i][axis]) idx[axis] -= c.in[i++][axis];
      const Dims s = opt::strides(c.in[i]);
      size_t flat = 0;
      for (size_t k = 0; k < idx.size(); ++k) flat += size_t(idx[k] * s[k]);
      CHECK(r.y[e] == xs[i][flat]);
    }
  }
}

TEST(concat_of_255_inputs_with_constants) {
  // x (2, 1) then 254 constants (2, 1) holding 100*i + row: output (2, 255).
  dsw::File f;
  const uint32_t x = f.add_value("x", {2, 1});
  f.inputs = {x};
  std::vector<uint32_t> in = {x};
  for (int i = 1; i < 255; ++i)
    in.push_back(f.add_constant(dsw::dense_tensor("c" + std::to_string(i), {2, 1}, {100.0f * i, 100.0f * i + 1})));
  const uint32_t y = f.add_value("y", {2, 255});
  f.outputs = {y};
  f.add_node(14, "cat", in, y, {dsw::attr_int("axis", 1)});
  const Result r = opt::run(f, {-1, -2}, {2, 1});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  CHECK((r.shape == Dims{2, 255}));
  CHECK(r.y[0] == -1 && r.y[255] == -2);
  for (int i = 1; i < 255; ++i) {
    CHECK(r.y[size_t(i)] == 100.0f * i);
    CHECK(r.y[size_t(255 + i)] == 100.0f * i + 1);
  }
}

TEST(reshape_copies_and_infers) {
  const std::vector<float> x = iota(3 * 4 * 5 * 2);
  struct Case { std::vector<int64_t> spec; Dims out; };
  const Case cases[] = {{{0, -1}, {3, 40}},          {{-1, 20}, {6, 20}},  {{0, 0, 10}, {3, 4, 10}},
                        {{0, 4, -1, 1}, {3, 4, 10, 1}}, {{120}, {120}},     {{-1}, {120}}};
  for (const Case& c : cases) {
    const Result r = opt::run(opt::one_node(18, {{3, 4, 5, 2}}, {}, {dsw::attr_ints("shape", c.spec)}), x, {3, 4, 5, 2});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK(r.shape == c.out);
    CHECK(r.y == x);
  }
  // A spec that does not fit this batch: shape error at set_input (the batch-1 load check passes).
  const Result e = opt::run(opt::one_node(18, {{-1, 4, 5, 2}}, {}, {dsw::attr_ints("shape", {1, 40})}), x, {3, 4, 5, 2});
  CHECK(e.status == DS_ERR_SHAPE);
  CHECK_MSG(e.error.find("node 'op' (reshape): input [3, 4, 5, 2] (120 elements) cannot take shape [1, 40]") !=
                std::string::npos,
            e.error);
  const Result g = opt::load(opt::one_node(18, {{2, 4}}, {}, {dsw::attr_ints("shape", {-1, 3})}));
  CHECK(g.status == DS_ERR_SHAPE);
  const Result z = opt::load(opt::one_node(18, {{2, 4}}, {}, {dsw::attr_ints("shape", {0, 0, 0})}));
  CHECK(z.status == DS_ERR_SHAPE);
  CHECK(z.error.find("copies axis 2") != std::string::npos);
}

TEST(transpose_any_rank_matches_loops) {
  tiny::Rng rng(22);
  const std::vector<std::pair<Dims, std::vector<int64_t>>> cases = {
      {{5}, {0}},
      {{3, 7}, {1, 0}},
      {{2, 3, 5}, {2, 0, 1}},
      {{2, 3, 4, 5}, {0, 2, 3, 1}},  // NCHW -> NHWC
      {{2, 3, 4, 5}, {0, 3, 1, 2}},
      {{3, 1, 2, 5, 1, 3}, {5, 3, 0, 4, 2, 1}},
      {{2, 1, 3, 2, 1, 2, 3, 2}, {7, 6, 5, 4, 3, 2, 1, 0}},
  };
  for (const auto& [dims, perm] : cases) {
    const std::vector<float> x = opt::random_vec(rng, opt::count(dims));
    for (int given = 0; given <= 1; ++given) {
      std::vector<int64_t> p = perm;
      if (!given) {  // absent perm: reversed axes (ONNX default)
        p.resize(dims.size());
        for (size_t k = 0; k < p.size(); ++k) p[k] = int64_t(p.size() - 1 - k);
      }
      std::vector<dsw::Attr> attrs;
      if (given) attrs.push_back(dsw::attr_ints("perm", perm));
      const Result r = opt::run(opt::one_node(19, {dims}, {}, attrs), x, dims);
      REQUIRE_MSG(r.status == DS_OK, r.error);
      Dims out(dims.size());
      for (size_t k = 0; k < dims.size(); ++k) out[k] = dims[size_t(p[k])];
      CHECK(r.shape == out);
      const Dims s = opt::strides(dims);
      for (size_t e = 0; e < r.y.size(); ++e) {
        const Dims idx = opt::unravel(e, out);
        size_t flat = 0;
        for (size_t k = 0; k < idx.size(); ++k) flat += size_t(idx[k] * s[size_t(p[k])]);
        CHECK(r.y[e] == x[flat]);
      }
    }
  }
}

TEST(pad_modes_hand_values) {
  const std::vector<float> x = {1, 2, 3};
  struct Case { const char* mode; std::vector<float> want; };
  const Case cases[] = {{"constant", {9, 9, 1, 2, 3, 9, 9}}, {"reflect", {3, 2, 1, 2, 3, 2, 1}},
                        {"edge", {1, 1, 1, 2, 3, 3, 3}}};
  for (const Case& c : cases) {
    const Result r = opt::run(opt::one_node(20, {{3}}, {},
                                            {dsw::attr_ints("pads", {2, 2}), opt::attr_str("mode", c.mode),
                                             opt::attr_float("value", 9)}),
                              x, {3});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK(r.y == c.want);
  }
  // Default mode is constant 0; 2-D reflect [[1,2,3],[4,5,6]] with pads (1,2) before, (0,1) after:
  const Result d = opt::run(opt::one_node(20, {{2}}, {}, {dsw::attr_ints("pads", {1, 0})}), {5, 6}, {2});
  REQUIRE_MSG(d.status == DS_OK, d.error);
  CHECK((d.y == std::vector<float>{0, 5, 6}));
  const Result m = opt::run(opt::one_node(20, {{2, 3}}, {},
                                          {dsw::attr_ints("pads", {1, 2, 0, 1}), opt::attr_str("mode", "reflect")}),
                            {1, 2, 3, 4, 5, 6}, {2, 3});
  REQUIRE_MSG(m.status == DS_OK, m.error);
  CHECK((m.shape == Dims{3, 6}));
  // numpy.pad(a, ((1, 0), (2, 1)), mode="reflect")
  CHECK((m.y == std::vector<float>{6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
}

TEST(pad_matches_loops_rank4) {
  tiny::Rng rng(23);
  const Dims dims = {2, 3, 5, 4};
  const std::vector<float> x = opt::random_vec(rng, opt::count(dims));
  const std::vector<int64_t> pads = {0, 1, 2, 3, 1, 0, 4, 3};  // reflect needs pad < size: 4 < 5, 3 < 4
  for (const char* mode : {"constant", "reflect", "edge"}) {
    const Result r = opt::run(opt::one_node(20, {{2, 3, 5, 4}}, {},
                                            {dsw::attr_ints("pads", pads), opt::attr_str("mode", mode),
                                             opt::attr_float("value", -7.5f)}),
                              x, dims);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    Dims out(4);
    for (size_t k = 0; k < 4; ++k) out[k] = dims[k] + pads[k] + pads[4 + k];
    CHECK(r.shape == out);
    const Dims s = opt::strides(dims);
    for (size_t e = 0; e < r.y.size(); ++e) {
      const Dims idx = opt::unravel(e, out);
      bool inside = true;
      size_t flat = 0;
      for (size_t k = 0; k < 4; ++k) {
        int64_t i = idx[k] - pads[k];
        const int64_t n = dims[k];
        if (i < 0 || i >= n) {
          if (mode[0] == 'c') inside = false;
          else if (mode[0] == 'e') i = std::min<int64_t>(std::max<int64_t>(i, 0), n - 1);
          else i = i < 0 ? -i : 2 * n - 2 - i;
        }
        flat += size_t(i * s[k]);
      }
      CHECK(r.y[e] == (inside ? x[flat] : -7.5f));
    }
  }
}

TEST(slice_numpy_semantics) {
  const std::vector<float> x10 = iota(10);
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  struct Case { int64_t s, e; std::vector<float> want; };
  const Case cases[] = {{2, 5, {2, 3, 4}},      {-3, big, {7, 8, 9}}, {-1000, 2, {0, 1}},
                        {8, 1000, {8, 9}},      {small, -8, {0, 1}},  {0, -1, {0, 1, 2, 3, 4, 5, 6, 7, 8}}};
  for (const Case& c : cases) {
    const Result r = opt::run(opt::one_node(24, {{10}}, {},
                                            {dsw::attr_ints("axes", {0}), dsw::attr_ints("starts", {c.s}),
                                             dsw::attr_ints("ends", {c.e})}),
                              x10, {10});
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK(r.y == c.want);
  }
  // ShuffleNet channel split of (N, 6, 3, 2) and a multi-axis slice with negative axes, and
  // starts/ends without axes (axes default to 0..n-1).
  tiny::Rng rng(24);
  const Dims dims = {2, 6, 3, 5};
  const std::vector<float> x = opt::random_vec(rng, opt::count(dims));
  struct Multi { std::vector<int64_t> axes, starts, ends; std::vector<int64_t> b, e; };
  const Multi multis[] = {
      {{1}, {3}, {6}, {0, 3, 0, 0}, {2, 6, 3, 5}},
      {{1}, {0}, {3}, {0, 0, 0, 0}, {2, 3, 3, 5}},
      {{-1, 2}, {1, -2}, {-1, 100}, {0, 0, 1, 1}, {2, 6, 3, 4}},
      {{}, {1, 2}, {2, 5}, {1, 2, 0, 0}, {2, 5, 3, 5}},
  };
  for (const Multi& m : multis) {
    std::vector<dsw::Attr> attrs = {dsw::attr_ints("starts", m.starts), dsw::attr_ints("ends", m.ends)};
    if (!m.axes.empty()) attrs.push_back(dsw::attr_ints("axes", m.axes));
    const Result r = opt::run(opt::one_node(24, {{2, 6, 3, 5}}, {}, attrs), x, dims);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    Dims out(4);
    for (size_t k = 0; k < 4; ++k) out[k] = m.e[k] - m.b[k];
    CHECK(r.shape == out);
    const Dims s = opt::strides(dims);
    for (size_t e = 0; e < r.y.size(); ++e) {
      const Dims idx = opt::unravel(e, out);
      size_t flat = 0;
      for (size_t k = 0; k < 4; ++k) flat += size_t((idx[k] + m.b[k]) * s[k]);
      CHECK(r.y[e] == x[flat]);
    }
  }
}

TEST(channel_shuffle_hand_values_and_loops) {
  // One pixel per channel: the output lists the input channels in shuffled order.
  const std::vector<float> c6 = iota(6);
  const Result g2 = opt::run(opt::one_node(17, {{1, 6, 1, 1}}, {}, {dsw::attr_int("group", 2)}), c6, {1, 6, 1, 1});
  REQUIRE_MSG(g2.status == DS_OK, g2.error);
  CHECK((g2.y == std::vector<float>{0, 3, 1, 4, 2, 5}));
  const Result g3 = opt::run(opt::one_node(17, {{1, 6, 1, 1}}, {}, {dsw::attr_int("group", 3)}), c6, {1, 6, 1, 1});
  REQUIRE_MSG(g3.status == DS_OK, g3.error);
  CHECK((g3.y == std::vector<float>{0, 2, 4, 1, 3, 5}));
  tiny::Rng rng(25);
  const Dims dims = {2, 12, 3, 5};
  const std::vector<float> x = opt::random_vec(rng, opt::count(dims));
  for (int64_t g : {1, 2, 3, 4, 12}) {
    const Result r = opt::run(opt::one_node(17, {{-1, 12, 3, 5}}, {}, {dsw::attr_int("group", g)}), x, dims);
    REQUIRE_MSG(r.status == DS_OK, r.error);
    CHECK(r.shape == dims);
    const int64_t cg = 12 / g;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t gi = 0; gi < g; ++gi)
        for (int64_t i = 0; i < cg; ++i)
          for (int64_t p = 0; p < 15; ++p)
            CHECK(r.y[size_t((n * 12 + i * g + gi) * 15 + p)] == x[size_t((n * 12 + gi * cg + i) * 15 + p)]);
  }
}

// The strided copy behind transpose, slice and channel_shuffle merges dimensions before copying:
// on random views (sizes 0-4, some 1, strides contiguous or not, a positive offset) both the f32
// and the u8 copies give what plain index arithmetic over the unmerged view gives.
TEST(copy_nd_with_merged_dimensions_matches_index_arithmetic) {
  tiny::Rng rng(31);
  for (int trial = 0; trial < 400; ++trial) {
    ds::CopyNdParams p;
    p.rank = 1 + int(rng.below(5));
    int64_t count = 1;
    for (int k = 0; k < p.rank; ++k) {
      p.dims[k] = int64_t(rng.below(trial < 50 ? 5 : 4)) + (trial < 50 ? 0 : 1);
      count *= p.dims[k];
    }
    // Contiguous C-order strides, then some stretched (a slice) or swapped (a transpose).
    int64_t stride = 1 + int64_t(rng.below(2));
    for (int k = p.rank - 1; k >= 0; --k) {
      p.strides[k] = stride;
      stride *= p.dims[k] + int64_t(rng.below(3) == 0 ? rng.below(3) : 0);
      if (stride == 0) stride = 1;
    }
    if (p.rank > 1 && rng.below(3) == 0) std::swap(p.strides[0], p.strides[p.rank - 1]);
    p.offset = int64_t(rng.below(4));
    int64_t extent = p.offset + 1;
    for (int k = 0; k < p.rank; ++k) extent += (p.dims[k] > 0 ? p.dims[k] - 1 : 0) * p.strides[k];
    std::vector<float> x(static_cast<size_t>(extent));
    std::vector<uint8_t> xb(static_cast<size_t>(extent));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i), xb[i] = uint8_t(i * 7);
    std::vector<float> want(static_cast<size_t>(count)), got(static_cast<size_t>(count) + 1, -1.0f);
    std::vector<uint8_t> want_b(static_cast<size_t>(count)), got_b(static_cast<size_t>(count) + 1, 0xEE);
    int64_t index[ds::kMaxRank] = {0};
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = p.offset;
      for (int k = 0; k < p.rank; ++k) at += index[k] * p.strides[k];
      want[size_t(i)] = x[size_t(at)];
      want_b[size_t(i)] = xb[size_t(at)];
      for (int k = p.rank - 1; k >= 0; --k) {
        if (++index[k] < p.dims[k]) break;
        index[k] = 0;
      }
    }
    ds::ds_x32_copy_nd__scalar(p, x.data(), got.data());
    ds::ds_x8_copy_nd__scalar(p, xb.data(), got_b.data());
    CHECK_MSG(std::equal(want.begin(), want.end(), got.begin()) && got.back() == -1.0f,
              "f32 trial " + std::to_string(trial));
    CHECK_MSG(std::equal(want_b.begin(), want_b.end(), got_b.begin()) && got_b.back() == 0xEE,
              "u8 trial " + std::to_string(trial));
  }
}
