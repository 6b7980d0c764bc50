// End to end through the C API: the tiny network with dense, sparse_rel, codebook and Huffman
// tensors, against the plain-loop forward pass; dynamic batch; model info; session errors.
#include <cstddef>
#include <cstdio>
#include <string>

#include "deepslim/deepslim.h"
#include "dsm_writer.h"
#include "harness.h"
#include "tiny_net.h"

namespace {

constexpr double kTol = 1e-5;

ds_model* load(const dsw::Bytes& bytes) {
  ds_model* m = nullptr;
  if (ds_model_load_memory(bytes.data(), bytes.size(), &m) != DS_OK) {
    std::fprintf(stderr, "load failed: %s\n", ds_last_error());
    return nullptr;
  }
  return m;
}

std::vector<float> random_input(uint64_t seed, size_t n) {
  tiny::Rng rng(seed);
  std::vector<float> x(n);
  for (float& v : x) v = rng.uniform(-2, 2);
  return x;
}

}  // namespace

TEST(tiny_net_matches_reference_for_several_batches) {
  const tiny::Net net = tiny::build();
  ds_model* m = load(dsw::serialize(net.file));
  REQUIRE(m);
  ds_session* s = nullptr;
  ds_session_options o = DS_SESSION_OPTIONS_INIT;
  REQUIRE(ds_session_create(m, &o, &s) == DS_OK);
  for (int64_t batch : {1, 3, 2}) {  // the session re-plans when the batch changes
    const std::vector<float> x = random_input(uint64_t(batch), size_t(batch * 64));
    const int64_t dims[4] = {batch, 1, 8, 8};
    REQUIRE(ds_session_set_input(s, 0, x.data(), dims, 4) == DS_OK);
    REQUIRE_MSG(ds_session_run(s) == DS_OK, ds_last_error());
    std::vector<float> want_logits;
    const std::vector<float> want = tiny::forward(net, x, batch, &want_logits);
    for (size_t out = 0; out < 2; ++out) {
      size_t rank;
      const int64_t* shape;
      REQUIRE(ds_session_output_shape(s, out, &rank, &shape) == DS_OK);
      CHECK(rank == 2 && shape[0] == batch && shape[1] == 10);
      std::vector<float> y(size_t(batch * 10));
      REQUIRE(ds_session_get_output(s, out, y.data(), y.size()) == DS_OK);
      const std::vector<float>& w = out == 0 ? want : want_logits;
      for (size_t i = 0; i < y.size(); ++i) CHECK_NEAR(y[i], w[i], kTol);
    }
    // The logits are not all equal: the comparison above says something.
    CHECK(std::fabs(want_logits[0] - want_logits[1]) > 1e-3);
  }
  ds_session_free(s);
  ds_model_free(m);
}

// ds_session_infer = set_input(0) + run + get_output(0), on the same and on changing shapes, with
// the rebinding fast path (same dims) and a refused shape that leaves the session usable.
TEST(infer_is_set_input_run_get_output) {
  const tiny::Net net = tiny::build();
  ds_model* m = load(dsw::serialize(net.file));
  REQUIRE(m);
  ds_session* s = nullptr;
  REQUIRE(ds_session_create(m, nullptr, &s) == DS_OK);
  for (int64_t batch : {2, 2, 1, 3, 3}) {
    const std::vector<float> x = random_input(uint64_t(batch) * 7 + 1, size_t(batch * 64));
    const int64_t dims[4] = {batch, 1, 8, 8};
    std::vector<float> y(size_t(batch * 10), -1.0f);
    REQUIRE_MSG(ds_session_infer(s, x.data(), dims, 4, y.data(), y.size()) == DS_OK, ds_last_error());
    const std::vector<float> want = tiny::forward(net, x, batch, nullptr);
    for (size_t i = 0; i < y.size(); ++i) CHECK_NEAR(y[i], want[i], kTol);
  }
  const std::vector<float> x(64 * 2, 0.5f);
  const int64_t bad[4] = {1, 2, 8, 8};
  std::vector<float> y(10);
  CHECK(ds_session_infer(s, x.data(), bad, 4, y.data(), y.size()) == DS_ERR_SHAPE);
  const int64_t good[4] = {1, 1, 8, 8};
  CHECK(ds_session_infer(s, x.data(), good, 4, y.data(), 5) == DS_ERR_INVALID_ARG);  // capacity too small
  CHECK(ds_session_infer(s, x.data(), good, 4, y.data(), y.size()) == DS_OK);
  CHECK(ds_session_infer(nullptr, x.data(), good, 4, y.data(), y.size()) == DS_ERR_INVALID_ARG);
  ds_session_free(s);
  ds_model_free(m);
}

TEST(model_info_reports_dynamic_batch) {
  ds_model* m = load(dsw::serialize(tiny::build().file));
  REQUIRE(m);
  size_t n_in = 0, n_out = 0;
  CHECK(ds_model_input_count(m, &n_in) == DS_OK && n_in == 1);
  CHECK(ds_model_output_count(m, &n_out) == DS_OK && n_out == 2);
  const char* name;
  size_t rank;
  const int64_t* dims;
  REQUIRE(ds_model_input_info(m, 0, &name, &rank, &dims) == DS_OK);
  CHECK(std::string(name) == "x" && rank == 4 && dims[0] == -1 && dims[1] == 1 && dims[2] == 8 && dims[3] == 8);
  REQUIRE(ds_model_output_info(m, 1, &name, &rank, &dims) == DS_OK);
  CHECK(std::string(name) == "fc.out" && rank == 2 && dims[0] == -1 && dims[1] == 10);
  CHECK(ds_model_output_info(m, 2, &name, &rank, &dims) == DS_ERR_INVALID_ARG);
  CHECK(std::string(ds_last_error()).find("out of range") != std::string::npos);
  ds_model_free(m);
}

TEST(set_input_refuses_wrong_shapes) {
  ds_model* m = load(dsw::serialize(tiny::build().file));
  REQUIRE(m);
  ds_session* s = nullptr;
  REQUIRE(ds_session_create(m, nullptr, &s) == DS_OK);
  std::vector<float> x(4 * 64);
  CHECK(ds_session_run(s) == DS_ERR_INVALID_ARG);  // input not set
  CHECK(std::string(ds_last_error()).find("'x'") != std::string::npos);
  const int64_t rank3[3] = {1, 8, 8}, channels[4] = {1, 3, 8, 8}, size[4] = {1, 1, 9, 8}, batch0[4] = {0, 1, 8, 8};
  CHECK(ds_session_set_input(s, 0, x.data(), rank3, 3) == DS_ERR_SHAPE);
  const std::string msg = ds_last_error();
  CHECK_MSG(msg.find("'x'") != std::string::npos && msg.find("[-1, 1, 8, 8]") != std::string::npos &&
                msg.find("[1, 8, 8]") != std::string::npos,
            msg);
  CHECK(ds_session_set_input(s, 0, x.data(), channels, 4) == DS_ERR_SHAPE);
  CHECK(ds_session_set_input(s, 0, x.data(), size, 4) == DS_ERR_SHAPE);
  CHECK(ds_session_set_input(s, 0, x.data(), batch0, 4) == DS_ERR_SHAPE);
  const int64_t good[4] = {4, 1, 8, 8};
  CHECK(ds_session_set_input(s, 1, x.data(), good, 4) == DS_ERR_INVALID_ARG);
  CHECK(ds_session_set_input(s, 0, nullptr, good, 4) == DS_ERR_INVALID_ARG);
  CHECK(ds_session_set_input(s, 0, x.data(), good, 4) == DS_OK);
  CHECK(std::string(ds_last_error()).empty());
  size_t rank;
  const int64_t* dims;
  CHECK(ds_session_output_shape(s, 0, &rank, &dims) == DS_ERR_INVALID_ARG);  // not run yet
  REQUIRE(ds_session_run(s) == DS_OK);
  std::vector<float> y(39);
  CHECK(ds_session_get_output(s, 0, y.data(), y.size()) == DS_ERR_INVALID_ARG);  // needs 40
  ds_session_free(s);
  ds_model_free(m);
}

TEST(session_options_and_null_arguments) {
  ds_model* m = load(dsw::serialize(tiny::build().file));
  REQUIRE(m);
  ds_session* s = nullptr;
  ds_session_options o = DS_SESSION_OPTIONS_INIT;
  o.threads = 0;
  CHECK(ds_session_create(m, &o, &s) == DS_ERR_INVALID_ARG && s == nullptr);
  CHECK(std::string(ds_last_error()).find("threads") != std::string::npos);
  o.threads = 2;
  CHECK(ds_session_create(m, &o, &s) == DS_OK);
  ds_session_free(s);
  CHECK(ds_session_create(nullptr, &o, &s) == DS_ERR_INVALID_ARG);
  // Kernel choices: malformed entries and unknown nodes are refused by name; an options struct
  // of the size before `kernels` existed never reads that field.
  o.kernels = "no equals sign";
  CHECK(ds_session_create(m, &o, &s) == DS_ERR_INVALID_ARG && s == nullptr);
  CHECK(std::string(ds_last_error()).find("node=kernel") != std::string::npos);
  o.kernels = " ; \n";  // blank entries only: no choice
  CHECK(ds_session_create(m, &o, &s) == DS_OK);
  ds_session_free(s);
  o.kernels = "ghost=gemm";
  CHECK(ds_session_create(m, &o, &s) == DS_ERR_INVALID_ARG);
  CHECK(std::string(ds_last_error()).find("'ghost'") != std::string::npos);
  o.struct_size = offsetof(ds_session_options, kernels);
  CHECK(ds_session_create(m, &o, &s) == DS_OK);
  const char* kernel = nullptr;
  const char* choices = nullptr;
  CHECK(ds_session_node_kernel(s, 0, &kernel, &choices) == DS_OK && kernel && choices);
  CHECK(ds_session_node_kernel(s, 1000, &kernel, &choices) == DS_ERR_INVALID_ARG);
  ds_session_free(s);
  o = DS_SESSION_OPTIONS_INIT;
  ds_model* other = m;
  CHECK(ds_model_load_memory(nullptr, 10, &other) == DS_ERR_INVALID_ARG && other == nullptr);
  CHECK(ds_model_load_file("/nonexistent/model.dsm", &other) == DS_ERR_IO && other == nullptr);
  CHECK(std::string(ds_last_error()).find("/nonexistent/model.dsm") != std::string::npos);
  CHECK(std::string(ds_status_name(DS_ERR_CHECKSUM)) == "DS_ERR_CHECKSUM");
  CHECK(ds_format_version() == 1);
  ds_model_free(m);
  ds_model_free(nullptr);
  ds_session_free(nullptr);
}

// Writes the model and a batch-1 input for the classify example's test (see CMakeLists.txt).
TEST(load_file_and_write_example_inputs) {
  const tiny::Net net = tiny::build();
  const dsw::Bytes bytes = dsw::serialize(net.file);
  FILE* f = std::fopen("tiny.dsm", "wb");
  REQUIRE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  const std::vector<float> x = random_input(42, 64);
  f = std::fopen("tiny.input.bin", "wb");
  REQUIRE(f);
  std::fwrite(x.data(), 4, x.size(), f);
  std::fclose(f);
  ds_model* m = nullptr;
  REQUIRE_MSG(ds_model_load_file("tiny.dsm", &m) == DS_OK, ds_last_error());
  ds_model_free(m);
}
