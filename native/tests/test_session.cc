// Whole-session tests: a residual block and a ShuffleNet V2 unit (slice, concat, channel_shuffle)
// against plain loops; the activation arena (no two live buffers overlap, outputs and inputs stay
// intact, re-planning on a new batch, ds_session_memory_info); concats written in place; run()
// allocates nothing; short files.
#include <cstdio>

#include "alloc_counter.h"
#include "common/error.h"
#include "core/model.h"
#include "core/session.h"
#include "ops/op.h"
#include "harness.h"
#include "op_runner.h"
#include "tiny_net.h"

using opt::Dims;
using opt::Result;

namespace {

constexpr uint32_t kAbsent = 0xFFFFFFFFu;

// Checks the plan: aligned offsets inside the arena, and no overlap between buffers whose
// lifetimes meet.
void check_plan(const std::vector<ds::BufferPlan>& plan, size_t arena, int line) {
  for (size_t i = 0; i < plan.size(); ++i) {
    const ds::BufferPlan& a = plan[i];
    if (a.offset % 64 != 0 || a.offset + a.bytes > arena)
      harness::record_failure(__FILE__, line, "buffer " + std::to_string(i) + " misplaced");
    for (size_t j = i + 1; j < plan.size(); ++j) {
      const ds::BufferPlan& b = plan[j];
      const bool live_together = a.first <= b.last && b.first <= a.last;
      const bool overlap = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      if (live_together && overlap)
        harness::record_failure(__FILE__, line, "buffers " + std::to_string(i) + " and " + std::to_string(j) +
                                                    " are live together and overlap");
    }
  }
}

// x (N,8,6,6) -> conv3x3 (relu) -> conv3x3 -> add(skip x, relu fused) = y.
struct Residual {
  dsw::File f;
  std::vector<float> w1, b1, w2, b2;
};

Residual residual_block(tiny::Rng& rng) {
  Residual r;
  r.w1 = opt::random_vec(rng, 8 * 8 * 9, -0.3f, 0.3f), r.b1 = opt::random_vec(rng, 8);
  r.w2 = opt::random_vec(rng, 8 * 8 * 9, -0.3f, 0.3f), r.b2 = opt::random_vec(rng, 8);
  dsw::File& f = r.f;
  const uint32_t x = f.add_value("x", {-1, 8, 6, 6});
  f.inputs = {x};
  const uint32_t w1 = f.add_constant(dsw::dense_tensor("w1", {8, 8, 3, 3}, r.w1));
  const uint32_t b1 = f.add_constant(dsw::dense_tensor("b1", {8}, r.b1));
  const uint32_t w2 = f.add_constant(dsw::dense_tensor("w2", {8, 8, 3, 3}, r.w2));
  const uint32_t b2 = f.add_constant(dsw::dense_tensor("b2", {8}, r.b2));
  const uint32_t a = f.add_value("a", {1, 8, 6, 6}), b = f.add_value("b", {1, 8, 6, 6}), y = f.add_value("y", {1, 8, 6, 6});
  f.outputs = {y};
  f.add_node(1, "conv1", {x, w1, b1}, a, {dsw::attr_ints("pads", {1, 1, 1, 1}), dsw::attr_int("activation", 1)});
  f.add_node(1, "conv2", {a, w2, b2}, b, {dsw::attr_ints("pads", {1, 1, 1, 1})});
  f.add_node(10, "add_3", {b, x}, y, {dsw::attr_int("activation", 1)});
  return r;
}

std::vector<float> residual_ref(const Residual& r, const std::vector<float>& x, int64_t n) {
  const tiny::Conv c1{8, 8, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, true}, c2{8, 8, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, false};
  int64_t h, w;
  const std::vector<float> a = tiny::conv(x, n, 8, 6, 6, r.w1, r.b1, c1, &h, &w);
  std::vector<float> b = tiny::conv(a, n, 8, 6, 6, r.w2, r.b2, c2, &h, &w);
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::max(b[i] + x[i], 0.0f);
  return b;
}

}  // namespace

TEST(residual_block_through_a_session) {
  tiny::Rng rng(41);
  const Residual r = residual_block(rng);
  for (int64_t n : {1, 3}) {
    const std::vector<float> x = opt::random_vec(rng, size_t(n * 8 * 36));
    const Result out = opt::run(r.f, x, {n, 8, 6, 6});
    REQUIRE_MSG(out.status == DS_OK, out.error);
    CHECK((out.shape == Dims{n, 8, 6, 6}));
    const std::vector<float> want = residual_ref(r, x, n);
    for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(out.y[i], want[i], 1e-4);
    // Three activations of n*8*36 floats; conv2 reads conv1's output, add reads conv2's: the
    // arena needs two of them (conv1's buffer is free again when add runs).
    const size_t one = size_t(n * 8 * 36 * 4);
    CHECK(out.sum_bytes == 3 * one);
    CHECK(out.arena_bytes < 3 * one);
    CHECK(out.arena_bytes >= 2 * one);
  }
}

// The image pass (a batch of at least `threads` images run image by image through the first
// nodes, each thread whole images) gives bit for bit what the nodes give run over the whole batch:
// the tiny network (conv, max pool, grouped dilated conv, avg pool, relu, then flatten, dense and
// softmax over the batch) and the residual block (a conv with a fused add, the graph output
// written by the pass), at 1-3 threads and odd batches; each output checked against plain loops.
TEST(image_pass_matches_the_batch) {
  tiny::Rng rng(45);
  const tiny::Net net = tiny::build(7);
  const Residual res = residual_block(rng);
  struct Case {
    const dsw::File* f;
    Dims image;
    size_t pass_nodes;  // nodes before the flatten / all of them
  };
  for (const Case& c : {Case{&net.file, {1, 8, 8}, 5}, Case{&res.f, {8, 6, 6}, 3}}) {
    const dsw::Bytes bytes = dsw::serialize(*c.f);
    std::unique_ptr<ds::Model> model = ds::load_model(bytes.data(), bytes.size());
    for (const int threads : {1, 2, 3}) {
      for (const int64_t n : {1, 2, 3, 5}) {
        const Dims shape = {n, c.image[0], c.image[1], c.image[2]};
        const std::vector<float> x = opt::random_vec(rng, opt::count(shape), -2, 2);
        std::vector<float> got[2];
        for (const char* on : {"0", "1"}) {
          setenv("DS_SESSION_IMAGES", on, 1);
          ds::Session session(*model, threads);
          session.set_input(0, x.data(), shape);
          session.run();
          const bool pass = on[0] == '1' && n >= threads && n > 1;
          CHECK(session.image_pass_nodes() == (pass ? c.pass_nodes : 0u));
          check_plan(session.buffer_plan(), session.arena_bytes(), __LINE__);
          // the image arenas (threads <= images) hold activations only: never more than the sum
          CHECK(session.arena_bytes() <= session.activation_bytes());
          std::vector<float>& y = got[on[0] - '0'];
          y.resize(opt::count(session.output_shape(0)));
          session.get_output(0, y.data(), y.size());
          session.run();  // again, on the same plan
          std::vector<float> again(y.size());
          session.get_output(0, again.data(), again.size());
          CHECK(again == y);
        }
        unsetenv("DS_SESSION_IMAGES");
        CHECK(got[0] == got[1]);
        const std::vector<float> want = c.f == &net.file ? tiny::forward(net, x, n) : residual_ref(res, x, n);
        REQUIRE(want.size() == got[1].size());
        for (size_t i = 0; i < want.size(); ++i) CHECK_NEAR(got[1][i], want[i], 1e-4);
      }
    }
  }
}

// Unforced, the image pass runs where the batch's tensors pass 1 MB and the weights stay under
// 2 MB: a 16 -> 16 3x3 conv at batch 20 (1.3 MB out) takes it, at batch 8 (0.5 MB) not; a
// 256 -> 256 3x3 conv (2.4 MB of weights) never.
TEST(image_pass_rule) {
  tiny::Rng rng(46);
  for (const int64_t c : {16, 256}) {
    dsw::File f;
    const int64_t hw = c == 16 ? 32 : 8;
    const uint32_t x = f.add_value("x", {-1, c, hw, hw});
    f.inputs = {x};
    const uint32_t w = f.add_constant(dsw::dense_tensor("w", {uint64_t(c), uint64_t(c), 3, 3},
                                                        opt::random_vec(rng, size_t(c * c * 9), -0.1f, 0.1f)));
    const uint32_t y = f.add_value("y", {1, c, hw, hw});
    f.outputs = {y};
    f.add_node(1, "conv", {x, w}, y, {dsw::attr_ints("pads", {1, 1, 1, 1}), dsw::attr_int("activation", 1)});
    const dsw::Bytes bytes = dsw::serialize(f);
    std::unique_ptr<ds::Model> model = ds::load_model(bytes.data(), bytes.size());
    ds::Session session(*model, 1);
    for (const int64_t n : {8, 20, 40}) {
      const std::vector<float> xv(size_t(n * c * hw * hw), 0.5f);
      session.set_input(0, xv.data(), {n, c, hw, hw});
      CHECK(session.image_pass_nodes() == (c == 16 && n * c * hw * hw * 4 >= (1 << 20) ? 1u : 0u));
    }
  }
}

TEST(shufflenet_unit_through_a_session) {
  // x (N,8,5,5) -> slice channels [0,4) = a and [4,8) = b -> b' = conv1x1(b) relu6 ->
  // concat(a, b') on axis 1 -> channel_shuffle(2) = y.
  tiny::Rng rng(42);
  const std::vector<float> w = opt::random_vec(rng, 4 * 4), bias = opt::random_vec(rng, 4);
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, 8, 5, 5});
  f.inputs = {x};
  const uint32_t wv = f.add_constant(dsw::dense_tensor("w", {4, 4, 1, 1}, w));
  const uint32_t bv = f.add_constant(dsw::dense_tensor("bias", {4}, bias));
  const uint32_t a = f.add_value("a", {1, 4, 5, 5}), b = f.add_value("b", {1, 4, 5, 5});
  const uint32_t b2 = f.add_value("b2", {1, 4, 5, 5}), c = f.add_value("c", {1, 8, 5, 5});
  const uint32_t y = f.add_value("y", {1, 8, 5, 5});
  f.outputs = {y};
  f.add_node(24, "split_a", {x}, a, {dsw::attr_ints("axes", {1}), dsw::attr_ints("starts", {0}), dsw::attr_ints("ends", {4})});
  f.add_node(24, "split_b", {x}, b, {dsw::attr_ints("axes", {-3}), dsw::attr_ints("starts", {-4}), dsw::attr_ints("ends", {1000})});
  f.add_node(1, "pw", {b, wv, bv}, b2,
             {dsw::attr_int("activation", 2), opt::attr_float("act_alpha", 0), opt::attr_float("act_beta", 6)});
  f.add_node(14, "cat", {a, b2}, c, {dsw::attr_int("axis", -3)});
  f.add_node(17, "shuffle", {c}, y, {dsw::attr_int("group", 2)});
  const int64_t n = 2;
  const std::vector<float> xv = opt::random_vec(rng, size_t(n * 8 * 25), -4, 4);
  const Result r = opt::run(f, xv, {n, 8, 5, 5});
  REQUIRE_MSG(r.status == DS_OK, r.error);
  CHECK((r.shape == Dims{n, 8, 5, 5}));
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t ch = 0; ch < 8; ++ch)
      for (int64_t p = 0; p < 25; ++p) {
        // Output channel i*2 + g comes from concat channel g*4 + i.
        const int64_t i = ch / 2, g = ch % 2, cc = g * 4 + i;
        double want;
        if (cc < 4) {
          want = xv[size_t((bn * 8 + cc) * 25 + p)];
        } else {
          want = bias[size_t(cc - 4)];
          for (int64_t k = 0; k < 4; ++k) want += double(w[size_t((cc - 4) * 4 + k)]) * xv[size_t((bn * 8 + 4 + k) * 25 + p)];
          want = std::min(std::max(want, 0.0), 6.0);
        }
        CHECK_NEAR(r.y[size_t((bn * 8 + ch) * 25 + p)], want, opt::kTol);
      }
}

TEST(memory_plan_of_a_branchy_graph) {
  // x -> r = relu(x) [output 1]; m = r * 3; s = m - x; t = r + s; u = concat(s, t, m);
  // v = global_maxpool(u) [output 0]; w = transpose(u) [output 2], read after everything.
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, 2, 3, 4});
  f.inputs = {x};
  const uint32_t k = f.add_constant(dsw::dense_tensor("three", {1}, {3.0f}));
  const uint32_t r = f.add_value("r", {1}), m = f.add_value("m", {1}), s = f.add_value("s", {1});
  const uint32_t t = f.add_value("t", {1}), u = f.add_value("u", {1}), v = f.add_value("v", {1});
  const uint32_t w = f.add_value("w", {1}), z = f.add_value("z", {1});
  f.outputs = {v, r, w};
  f.add_node(5, "relu", {x}, r);
  f.add_node(12, "mul", {r, k}, m);
  f.add_node(11, "sub", {m, x}, s);
  f.add_node(10, "add", {r, s}, t);
  f.add_node(14, "cat", {s, t, m}, u, {dsw::attr_int("axis", 1)});
  f.add_node(23, "gmax", {u}, v);
  f.add_node(19, "tr", {u}, w, {dsw::attr_ints("perm", {0, 2, 3, 1})});
  f.add_node(9, "unused", {v}, z, {dsw::attr_int("kind", 7)});  // read by nobody
  const dsw::Bytes bytes = dsw::serialize(f);
  std::unique_ptr<ds::Model> model = ds::load_model(bytes.data(), bytes.size());
  ds::Session session(*model, 1);
  tiny::Rng rng(43);
  for (int64_t n : {2, 1, 5}) {  // re-planned for every batch
    const std::vector<float> xv = opt::random_vec(rng, size_t(n * 24), -2, 2);
    const std::vector<float> keep = xv;
    session.set_input(0, xv.data(), {n, 2, 3, 4});
    session.run();
    CHECK(xv == keep);  // the graph input is never written
    check_plan(session.buffer_plan(), session.arena_bytes(), __LINE__);
    CHECK(session.buffer_plan().size() == 8);
    CHECK(session.activation_bytes() == size_t(n * 24 * 4 * 4 + n * 72 * 4 * 2 + n * 6 * 4 * 2));
    CHECK(session.arena_bytes() < session.activation_bytes());
    // Per-element reference.
    std::vector<float> rr(xv.size()), mm(xv.size()), ss(xv.size()), tt(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      rr[i] = std::max(xv[i], 0.0f);
      mm[i] = rr[i] * 3.0f;
      ss[i] = mm[i] - xv[i];
      tt[i] = rr[i] + ss[i];
    }
    std::vector<float> y_r(xv.size()), y_v(size_t(n * 6)), y_w(size_t(n * 72));
    session.get_output(1, y_r.data(), y_r.size());
    session.get_output(0, y_v.data(), y_v.size());
    session.get_output(2, y_w.data(), y_w.size());
    CHECK(y_r == rr);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < 6; ++c) {
        const std::vector<float>& src = c < 2 ? ss : c < 4 ? tt : mm;
        float mx = -1e30f;
        for (int64_t p = 0; p < 12; ++p) mx = std::max(mx, src[size_t((b * 2 + c % 2) * 12 + p)]);
        CHECK(y_v[size_t(b * 6 + c)] == mx);
        for (int64_t p = 0; p < 12; ++p)  // w = u in NHWC
          CHECK(y_w[size_t((b * 12 + p) * 6 + c)] == src[size_t((b * 2 + c % 2) * 12 + p)]);
      }
  }
}

TEST(concat_inputs_are_written_in_place) {
  // u = concat(relu(x), 3 x) along channels: at batch 1 both inputs are written straight into u
  // (3 x first, into the second slice), and the concat is skipped. w = concat(relu(y), x + x) is
  // not: its second slice would start 48 bytes in. At batch 2 the slices are not contiguous and
  // every value has its own buffer.
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, 16, 2, 2}), y = f.add_value("y", {-1, 3, 2, 2});
  f.inputs = {x, y};
  const uint32_t k = f.add_constant(dsw::dense_tensor("three", {1}, {3.0f}));
  const uint32_t a = f.add_value("a", {1}), b = f.add_value("b", {1}), u = f.add_value("u", {1});
  const uint32_t r = f.add_value("r", {1}), g = f.add_value("g", {1}), w = f.add_value("w", {1});
  f.outputs = {u, w};
  f.add_node(12, "times3", {x, k}, b);
  f.add_node(5, "relu", {x}, a);
  f.add_node(14, "cat", {a, b}, u, {dsw::attr_int("axis", 1)});
  f.add_node(5, "relu_y", {y}, r);
  f.add_node(10, "twice", {x, x}, g);
  f.add_node(14, "cat_misaligned", {r, g}, w, {dsw::attr_int("axis", -3)});
  const dsw::Bytes bytes = dsw::serialize(f);
  std::unique_ptr<ds::Model> model = ds::load_model(bytes.data(), bytes.size());
  {  // inputs whose batches still disagree at run time are refused there
    ds::Session session(*model, 1);
    const std::vector<float> xv(2 * 64, 1.0f), yv(12, 1.0f);
    session.set_input(0, xv.data(), {2, 16, 2, 2});
    session.set_input(1, yv.data(), {1, 3, 2, 2});
    try {
      session.run();
      CHECK(false);
    } catch (const ds::Error& e) {
      CHECK(e.status() == DS_ERR_SHAPE);
      CHECK(e.message().find("cat_misaligned") != std::string::npos);
    }
  }
  tiny::Rng rng(44);
  for (const int threads : {1, 2}) {
    ds::Session session(*model, threads);
    for (int64_t n : {1, 2, 1}) {  // both inputs change batch, one after the other
      const std::vector<float> xv = opt::random_vec(rng, size_t(n * 64), -2, 2);
      const std::vector<float> yv = opt::random_vec(rng, size_t(n * 12), -2, 2);
      session.set_input(0, xv.data(), {n, 16, 2, 2});
      session.set_input(1, yv.data(), {n, 3, 2, 2});
      session.run();
      check_plan(session.buffer_plan(), session.arena_bytes(), __LINE__);
      CHECK(session.buffer_plan().size() == (n == 1 ? 4u : 6u));
      std::vector<float> got_u(size_t(n * 128)), got_w(size_t(n * 76));
      session.get_output(0, got_u.data(), got_u.size());
      session.get_output(1, got_w.data(), got_w.size());
      std::vector<float> want_u, want_w;
      for (int64_t bi = 0; bi < n; ++bi) {
        for (int64_t i = 0; i < 64; ++i) want_u.push_back(std::max(xv[size_t(bi * 64 + i)], 0.0f));
        for (int64_t i = 0; i < 64; ++i) want_u.push_back(xv[size_t(bi * 64 + i)] * 3.0f);
        for (int64_t i = 0; i < 12; ++i) want_w.push_back(std::max(yv[size_t(bi * 12 + i)], 0.0f));
        for (int64_t i = 0; i < 64; ++i) want_w.push_back(xv[size_t(bi * 64 + i)] + xv[size_t(bi * 64 + i)]);
      }
      CHECK(got_u == want_u);
      CHECK(got_w == want_w);
    }
  }
}

TEST(assign_offsets_never_overlaps_live_buffers) {
  tiny::Rng rng(44);
  for (int round = 0; round < 50; ++round) {
    std::vector<ds::BufferPlan> plan;
    const size_t count = 1 + rng.below(60);
    for (size_t i = 0; i < count; ++i) {
      const size_t first = rng.below(40);
      plan.push_back({uint32_t(i), 0, size_t(1 + rng.below(5000)), first, first + rng.below(10)});
    }
    const size_t arena = ds::assign_offsets(plan);
    check_plan(plan, arena, __LINE__);
    size_t sum = 0, peak = 0;
    for (const ds::BufferPlan& b : plan) sum += (b.bytes + 63) / 64 * 64;
    for (size_t step = 0; step < 50; ++step) {
      size_t live = 0;
      for (const ds::BufferPlan& b : plan)
        if (b.first <= step && step <= b.last) live += b.bytes;
      peak = std::max(peak, live);
    }
    CHECK(arena >= peak);  // no plan can do better than the peak of live bytes
    CHECK(arena <= sum);
  }
}

TEST(memory_info_through_the_c_api) {
  tiny::Rng rng(45);
  const Residual r = residual_block(rng);
  const dsw::Bytes bytes = dsw::serialize(r.f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  REQUIRE(ds_model_load_memory(bytes.data(), bytes.size(), &m) == DS_OK);
  REQUIRE(ds_session_create(m, nullptr, &s) == DS_OK);
  size_t arena = 0, sum = 0;
  CHECK(ds_session_memory_info(s, &arena, &sum) == DS_ERR_INVALID_ARG);  // no input bound yet
  CHECK(std::string(ds_last_error()).find("input 0 ('x') is not set") != std::string::npos);
  CHECK(ds_session_memory_info(nullptr, &arena, &sum) == DS_ERR_INVALID_ARG);
  const std::vector<float> x(4 * 8 * 36, 0.5f);
  const int64_t dims[] = {4, 8, 6, 6};
  REQUIRE(ds_session_set_input(s, 0, x.data(), dims, 4) == DS_OK);
  CHECK(ds_session_memory_info(s, &arena, &sum) == DS_OK);  // planned at set_input, before run
  CHECK(sum == 3 * 4 * 8 * 36 * 4);
  CHECK(arena == 2 * 4 * 8 * 36 * 4);  // 4608-byte buffers are 64-byte multiples: exactly two
  CHECK(ds_session_memory_info(s, nullptr, &sum) == DS_OK);
  ds_session_free(s);
  ds_model_free(m);
}

TEST(run_allocates_nothing) {
  tiny::Rng rng(46);
  const Residual r = residual_block(rng);
  const dsw::Bytes bytes = dsw::serialize(r.f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  REQUIRE(ds_model_load_memory(bytes.data(), bytes.size(), &m) == DS_OK);
  REQUIRE(ds_session_create(m, nullptr, &s) == DS_OK);
  const std::vector<float> x(2 * 8 * 36, 0.25f);
  const int64_t dims[] = {2, 8, 6, 6};
  REQUIRE(ds_session_set_input(s, 0, x.data(), dims, 4) == DS_OK);
  REQUIRE(ds_session_run(s) == DS_OK);
  const long before = alloc_counter::count();
  for (int i = 0; i < 3; ++i) CHECK(ds_session_run(s) == DS_OK);
  CHECK(alloc_counter::count() == before);
  ds_session_free(s);
  ds_model_free(m);
}

TEST(every_new_op_runs_without_allocating) {
  // batchnorm, lrn, conv_transpose2d (2,4,4,4 -> 2,2,8,8), resize (-> 5x7), reflect pad (-> 7x9),
  // channel_shuffle, slice (-> 5x9), transpose, reshape (-> 2,90), concat (-> 2,180), div, activation.
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, 4, 4, 4});
  f.inputs = {x};
  std::vector<uint32_t> v;
  for (int i = 0; i < 12; ++i) v.push_back(f.add_value("v" + std::to_string(i), {1}));
  const uint32_t wt = f.add_constant(dsw::dense_tensor("wt", {4, 2, 2, 2}, std::vector<float>(32, 0.1f)));
  const uint32_t p = f.add_constant(dsw::dense_tensor("p", {4}, {1, 2, 3, 4}));
  f.outputs = {v[11]};
  f.add_node(8, "bn", {x, p, p, p, p}, v[0]);
  f.add_node(16, "lrn", {v[0]}, v[1], {dsw::attr_int("size", 3)});
  f.add_node(15, "up", {v[1], wt, kAbsent}, v[2], {dsw::attr_ints("strides", {2, 2})});
  f.add_node(21, "rs", {v[2]}, v[3], {dsw::attr_ints("sizes", {5, 7}), opt::attr_str("mode", "linear")});
  f.add_node(20, "pad", {v[3]}, v[4], {dsw::attr_ints("pads", {0, 0, 1, 1, 0, 0, 1, 1}), opt::attr_str("mode", "reflect")});
  f.add_node(17, "cs", {v[4]}, v[5], {dsw::attr_int("group", 2)});
  f.add_node(24, "sl", {v[5]}, v[6], {dsw::attr_ints("axes", {2}), dsw::attr_ints("starts", {1}), dsw::attr_ints("ends", {-1})});
  f.add_node(19, "tr", {v[6]}, v[7], {dsw::attr_ints("perm", {0, 2, 3, 1})});
  f.add_node(18, "rh", {v[7]}, v[8], {dsw::attr_ints("shape", {0, -1})});
  f.add_node(14, "cat", {v[8], v[8]}, v[9], {dsw::attr_int("axis", 1)});
  f.add_node(13, "div", {v[9], p}, v[10]);
  f.add_node(22, "gap", {v[10]}, v[11]);
  const Result r = opt::run(f, std::vector<float>(2 * 64, 0.5f), {2, 4, 4, 4});
  REQUIRE_MSG(r.status == DS_ERR_SHAPE, "div [2, 180] by [4] must not broadcast: " + r.error);
  f.nodes[10].inputs[1] = f.add_constant(dsw::dense_tensor("q", {1}, {2}));
  f.nodes[11].op = 9;  // activation instead of global_avgpool, which needs rank >= 3
  f.nodes[11].attrs = {dsw::attr_int("kind", 4)};
  const dsw::Bytes bytes = dsw::serialize(f);
  ds_model* m = nullptr;
  ds_session* s = nullptr;
  REQUIRE_MSG(ds_model_load_memory(bytes.data(), bytes.size(), &m) == DS_OK, ds_last_error());
  REQUIRE(ds_session_create(m, nullptr, &s) == DS_OK);
  const std::vector<float> xv(2 * 64, 0.5f);
  const int64_t dims[] = {2, 4, 4, 4};
  REQUIRE(ds_session_set_input(s, 0, xv.data(), dims, 4) == DS_OK);
  REQUIRE_MSG(ds_session_run(s) == DS_OK, ds_last_error());
  const long before = alloc_counter::count();
  CHECK(ds_session_run(s) == DS_OK);
  CHECK(alloc_counter::count() == before);
  size_t rank;
  const int64_t* od;
  REQUIRE(ds_session_output_shape(s, 0, &rank, &od) == DS_OK);
  CHECK((Dims(od, od + rank) == Dims{2, 5 * 9 * 2 * 2}));
  ds_session_free(s);
  ds_model_free(m);
}

TEST(empty_and_short_files_are_format_errors) {
  ds_model* m = nullptr;
  CHECK(ds_model_load_memory(nullptr, 0, &m) == DS_ERR_FORMAT);
  CHECK(std::string(ds_last_error()) == "file is 0 bytes, shorter than the 64-byte .dsm header");
  const uint8_t some[10] = {'D', 'E', 'E', 'P'};
  CHECK(ds_model_load_memory(some, 0, &m) == DS_ERR_FORMAT);
  CHECK(ds_model_load_memory(some, 10, &m) == DS_ERR_FORMAT);
  CHECK(std::string(ds_last_error()).find("file is 10 bytes") != std::string::npos);
  CHECK(ds_model_load_memory(nullptr, 100, &m) == DS_ERR_INVALID_ARG);  // a missing buffer
  const char* path = "empty_model.dsm";
  std::FILE* fp = std::fopen(path, "wb");
  REQUIRE(fp != nullptr);
  std::fclose(fp);
  CHECK(ds_model_load_file(path, &m) == DS_ERR_FORMAT);
  CHECK(std::string(ds_last_error()).find("file is 0 bytes, shorter than the 64-byte .dsm header") !=
        std::string::npos);
  CHECK(m == nullptr);
  std::remove(path);
}

// RunContext::thread_part: the threads' parts never overlap, stay inside the workspace (also when
// they fill it exactly or follow a large head) and keep 64-byte alignment; with the session's size
// known, thread t >= 1 starts at t / threads of the workspace whenever its packed part would start
// before that, whatever the head and the per-thread size (nodes of different sizes reuse a
// thread's own lines); without it, or on one thread, the parts are packed back to back.
template <typename T>
void check_thread_parts(int64_t floats, int threads, int64_t head_bytes, int64_t per) {
  alignas(64) static float storage[4096];
  const ds::RunContext ctx{nullptr, nullptr, storage, floats};
  char* ws = reinterpret_cast<char*>(storage);
  T* base = reinterpret_cast<T*>(ws + head_bytes);
  const int64_t per_bytes = per * int64_t(sizeof(T)), share = floats * 4 / threads / 64 * 64;
  for (int t = 0; t < threads; ++t) {
    const int64_t at = reinterpret_cast<char*>(ctx.thread_part(base, per, t, threads)) - ws;
    const int64_t packed = head_bytes + t * per_bytes;
    CHECK(at >= packed);
    CHECK(at + per_bytes <= (floats > 0 ? floats : 4096) * 4);
    if (per_bytes % 64 == 0) CHECK(at % 64 == 0);
    if (floats == 0 || threads == 1) CHECK(at == packed);
    else if (t > 0 && packed <= t * share) CHECK(at == t * share);
    if (t + 1 < threads)
      CHECK(reinterpret_cast<char*>(ctx.thread_part(base, per, t + 1, threads)) - ws >= at + per_bytes);
  }
}

TEST(thread_parts_of_the_workspace) {
  for (int64_t floats : {int64_t(0), int64_t(4096), int64_t(3000)})
    for (int threads : {1, 2, 3, 4})
      for (int64_t head : {int64_t(0), int64_t(64), int64_t(192), int64_t(8192)})
        for (int64_t per : {int64_t(1), int64_t(16), int64_t(100), int64_t(256), int64_t(1000), int64_t(1024)}) {
          const int64_t limit = (floats > 0 ? floats : 4096) * 4;
          if (head + threads * per * 4 <= limit) check_thread_parts<float>(floats, threads, head, per);
          if (head + threads * per <= limit) check_thread_parts<uint8_t>(floats, threads, head, per);
        }
  // Tight: the parts fill the workspace after the head exactly.
  check_thread_parts<float>(3000, 2, 2000 * 4, 500);
  check_thread_parts<float>(3000, 3, 0, 1000);
  check_thread_parts<float>(4096, 2, 2048 * 4, 1024);
}
