// Malformed files: each must be refused with a status and a message, never crash (run these
// under -DDEEPSLIM_SANITIZE=ON to check memory safety too).
#include <cstring>
#include <string>

#include "core/model.h"
#include "deepslim/deepslim.h"
#include "dsm_writer.h"
#include "harness.h"
#include "tiny_net.h"

namespace {

struct Outcome {
  ds_status status;
  std::string error;
};

Outcome load(const dsw::Bytes& b, size_t size) {
  ds_model* m = nullptr;
  const ds_status st = ds_model_load_memory(b.data(), size, &m);
  Outcome o{st, ds_last_error()};
  ds_model_free(m);
  return o;
}
Outcome load(const dsw::Bytes& b) { return load(b, b.size()); }
Outcome load(const dsw::File& f) { return load(dsw::serialize(f)); }

// Refused with this status and a message holding `needle`.
void expect(const Outcome& o, ds_status status, const std::string& needle, int line) {
  if (o.status != status || o.error.find(needle) == std::string::npos)
    harness::record_failure(__FILE__, line, std::string("got ") + ds_status_name(o.status) + " '" + o.error +
                                                "', expected " + ds_status_name(status) + " with '" + needle + "'");
}
#define EXPECT_REFUSED(outcome, status, needle) expect(outcome, status, needle, __LINE__)

template <typename T>
void patch(dsw::Bytes& b, size_t offset, T v) {
  std::memcpy(b.data() + offset, &v, sizeof(T));
}

// Loads, and when that works, runs the model at batch 1 if its shapes stay small; must not crash.
bool load_and_maybe_run(const dsw::Bytes& b) {
  ds_model* m = nullptr;
  if (ds_model_load_memory(b.data(), b.size(), &m) != DS_OK) {
    if (std::strlen(ds_last_error()) == 0) harness::record_failure(__FILE__, __LINE__, "empty error message");
    return false;
  }
  size_t rank;
  const int64_t* dims;
  if (ds_model_input_info(m, 0, nullptr, &rank, &dims) == DS_OK) {
    std::vector<int64_t> d(dims, dims + rank);
    int64_t n = 1;
    for (int64_t& v : d) n *= (v = v == -1 ? 1 : v);
    ds_session* s = nullptr;
    if (n <= 4096 && ds_session_create(m, nullptr, &s) == DS_OK) {
      std::vector<float> x(size_t(n), 0.5f);
      if (ds_session_set_input(s, 0, x.data(), d.data(), d.size()) == DS_OK) ds_session_run(s);
    }
    ds_session_free(s);
  }
  ds_model_free(m);
  return true;
}

}  // namespace

TEST(valid_base_file_loads) {
  CHECK(load(tiny::build().file).status == DS_OK);
}

TEST(truncation_at_every_byte) {
  const dsw::Bytes b = dsw::serialize(tiny::build().file);
  for (size_t n = 0; n < b.size(); ++n) {
    const Outcome o = load(b, n);
    CHECK_MSG(o.status != DS_OK && !o.error.empty(), "length " + std::to_string(n));
  }
}

// Truncated files whose header file_size is patched to match, so the later checks get their turn.
TEST(truncation_with_consistent_file_size) {
  dsw::Layout lay;
  const dsw::Bytes b = dsw::serialize(tiny::build().file, &lay);
  std::vector<size_t> cuts = {64, size_t(lay.graph_offset + lay.graph_length / 2), size_t(lay.tensors_offset),
                              size_t(lay.tensors_offset + lay.tensors_length - 1), size_t(lay.tensors_offset + lay.tensors_length)};
  for (const auto& s : lay.streams) cuts.push_back(size_t(s.first + s.second / 2)), cuts.push_back(size_t(s.first));
  tiny::Rng rng(4);
  // Only the end padding can go without harm, so cut before the last stream's end.
  const uint64_t end = lay.streams.back().first + lay.streams.back().second;
  for (int i = 0; i < 300; ++i) cuts.push_back(64 + rng.below(uint32_t(end - 64)));
  for (size_t n : cuts) {
    dsw::Bytes t(b.begin(), b.begin() + long(n));
    patch<uint64_t>(t, 16, n);
    const Outcome o = load(t);
    CHECK_MSG(o.status != DS_OK && !o.error.empty(), "length " + std::to_string(n));
  }
}

TEST(header_errors) {
  const dsw::Bytes b = dsw::serialize(tiny::build().file);
  dsw::Bytes m = b;
  m[0] = 'X';
  EXPECT_REFUSED(load(m), DS_ERR_FORMAT, "magic");
  dsw::File f = tiny::build().file;
  f.version = 2;
  EXPECT_REFUSED(load(f), DS_ERR_VERSION, "version 2; this runtime reads version 1");
  f.version = 1;
  f.flags = 4;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "flags");
  dsw::Bytes big = b;
  big.resize(b.size() + 64, 0);
  EXPECT_REFUSED(load(big), DS_ERR_FORMAT, "file_size");
  dsw::Bytes off = b;
  patch<uint64_t>(off, 24, uint64_t(1) << 62);
  EXPECT_REFUSED(load(off), DS_ERR_FORMAT, "graph section offset");
  off = b;
  patch<uint64_t>(off, 48, ~uint64_t(0));
  EXPECT_REFUSED(load(off), DS_ERR_FORMAT, "tensor table offset");
}

TEST(checksum_errors_for_each_section_and_stream) {
  dsw::File f = tiny::build().file;
  f.bad_graph_crc = true;
  EXPECT_REFUSED(load(f), DS_ERR_CHECKSUM, "graph section CRC-32");
  f.bad_graph_crc = false;
  f.bad_tensors_crc = true;
  EXPECT_REFUSED(load(f), DS_ERR_CHECKSUM, "tensor table CRC-32");
  f.bad_tensors_crc = false;
  int checked = 0;
  for (size_t t = 0; t < f.tensors.size(); ++t)
    for (size_t k = 0; k < f.tensors[t].streams.size(); ++k) {
      dsw::File g = f;
      g.tensors[t].streams[k].bad_crc = true;
      EXPECT_REFUSED(load(g), DS_ERR_CHECKSUM, "tensor '" + f.tensors[t].name + "': stream " + std::to_string(k));
      ++checked;
    }
  CHECK(checked == 9);
}

TEST(absurd_counts_offsets_and_shapes) {
  dsw::Layout lay;
  const dsw::Bytes b = dsw::serialize(tiny::build().file, &lay);
  dsw::Bytes c = b;
  patch<uint32_t>(c, lay.graph_offset, 0xFFFFFFF0u);  // value_count
  dsw::fix_crcs(c, lay);
  EXPECT_REFUSED(load(c), DS_ERR_FORMAT, "value_count");
  c = b;
  patch<uint32_t>(c, lay.graph_offset, 900000u);  // under the limit, but cannot fit
  dsw::fix_crcs(c, lay);
  EXPECT_REFUSED(load(c), DS_ERR_FORMAT, "value_count");
  c = b;
  patch<uint32_t>(c, lay.tensors_offset, 2000000u);  // tensor_count over the limit
  dsw::fix_crcs(c, lay);
  EXPECT_REFUSED(load(c), DS_ERR_FORMAT, "tensor_count");

  dsw::File f = tiny::build().file;
  f.tensors[0].dims = {1u << 20, 1u << 20, 1, 1};
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "tensor 0 ('conv1.weight')");
  f = tiny::build().file;
  f.tensors[1].dims = {4, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "rank");
  f = tiny::build().file;
  f.values[0].dims = {-1, 1, 8, 0};
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "value 0 ('x')");
  f = tiny::build().file;
  f.values[0].dims = {-1, int64_t(1) << 20, int64_t(1) << 20, 8};
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "more than 2^31");
  f = tiny::build().file;
  f.tensors[1].streams[0].offset_override = 64 * 1000000;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "runs past the end of the file");
  f = tiny::build().file;
  f.tensors[1].streams[0].offset_override = int64_t(dsw::serialize(f).size()) - 60;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "multiple of 64");
  f = tiny::build().file;
  f.tensors[1].streams[0].length_override = int64_t(1) << 62;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "conv1.bias");
  f = tiny::build().file;
  f.tensors[1].streams[0].offset_override = 0;  // over the header
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "before the end of the tensor table");
  f = tiny::build().file;
  f.tensors[1].streams[0].count = 5;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "conv1.bias");
  f = tiny::build().file;
  f.tensors[1].streams.push_back(f.tensors[1].streams[0]);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "appears twice");
  f = tiny::build().file;
  f.tensors[0].streams.pop_back();  // the codebook
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "codebook stream is missing");
  f = tiny::build().file;
  f.tensors[2].index_bits = 0;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "index_bits");
  f = tiny::build().file;
  f.tensors[2].entry_count = 1000;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "entry_count");
}

TEST(padding_must_be_zero) {
  dsw::Layout lay;
  dsw::Bytes b = dsw::serialize(tiny::build().file, &lay);
  const uint64_t gap = lay.tensors_offset + lay.tensors_length;
  REQUIRE(gap % 64 != 0);  // the base file has padding after the table
  b[gap] = 1;
  EXPECT_REFUSED(load(b), DS_ERR_FORMAT, "zero padding");
}

TEST(graph_structure_errors) {
  const tiny::Net net = tiny::build();
  dsw::File f = net.file;
  f.nodes[2].inputs[0] = 999;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "node 'conv2' (conv2d): input 0 is value id 999");
  f = net.file;
  f.inputs = {77};
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "graph inputs");
  f = net.file;
  f.outputs.push_back(123456);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "graph outputs");
  f = net.file;
  f.nodes[2].outputs[0] = 9999;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "output is value id 9999");
  f = net.file;
  std::swap(f.nodes[1], f.nodes[2]);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "topological order");
  f = net.file;
  f.nodes[3].outputs = f.nodes[2].outputs;  // produced twice
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "already produced");
  f = net.file;
  f.nodes[4].outputs = {0};  // writes the graph input
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "already produced");
  f = net.file;
  f.nodes[0].inputs[1] = 0xFFFFFFFFu;  // a required input absent
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "required input 1 is absent");
  f = net.file;
  f.values[2].tensor_index = f.values[1].tensor_index;  // one record used twice
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "used by an earlier value");
  f = net.file;
  f.values[1].tensor_index = 99;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "tensor_index");
  f = net.file;
  f.values[6].dims[0] = -1;  // only a graph input's batch may be -1
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "only the batch");
  f = net.file;
  f.values[3].name = "x";
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "used by an earlier value");
  f = net.file;
  f.outputs = {uint32_t(f.values.size() - 1), 0};
  f.nodes.pop_back();  // the softmax output is never produced
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "never produced");
  f = net.file;
  f.nodes[0].attrs.push_back(f.nodes[0].attrs[0]);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "appears twice");
  f = net.file;
  f.nodes[0].attrs[0].type = 9;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "attribute type");
  f = net.file;
  f.nodes[4].inputs.push_back(f.nodes[4].inputs[0]);  // relu takes one input
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "node 'relu' (relu): has 2 inputs");
  f = net.file;
  f.graph_trailer = {0};
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "1 trailing bytes after the last node");
}

TEST(unknown_op_and_attribute) {
  dsw::File f = tiny::build().file;
  f.nodes[4].op = 42;
  EXPECT_REFUSED(load(f), DS_ERR_UNSUPPORTED_OP, "node 'relu' has op id 42");
  f = tiny::build().file;
  f.nodes[0].attrs.push_back(dsw::attr_int("padding_mode", 1));
  EXPECT_REFUSED(load(f), DS_ERR_UNSUPPORTED_OP, "unknown attribute 'padding_mode'");
}

TEST(shape_mismatch_in_weights) {
  dsw::File f = tiny::build().file;
  // fc.weight declared (and stored) as [10, 35] does not fit the 36 features.
  std::vector<float> w(350, 0.5f);
  f.tensors[3] = dsw::dense_tensor("fc.weight", {10, 35}, w);
  f.values[4].dims = {10, 35};
  EXPECT_REFUSED(load(f), DS_ERR_SHAPE, "node 'fc' (dense)");
  f = tiny::build().file;
  f.values[4].dims = {10, 37};  // value dims differ from its tensor record
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "differ from tensor 'fc.weight'");
}

TEST(decoding_errors) {
  dsw::File f = tiny::build().file;
  // conv1.weight: a codebook of 4 centroids; shrink it to 3 while index 3 is in use.
  dsw::Stream& cb = f.tensors[0].streams[1];
  cb.count = 3;
  cb.bytes.resize(12);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "tensor 'conv1.weight': stream 0 (values): cluster index 3");
  // conv2.weight: relative indices that run past the 72 elements.
  f = tiny::build().file;
  dsw::Tensor& t = f.tensors[2];
  std::vector<uint32_t> rel(t.entry_count, 3);
  t.streams[0].bytes = dsw::bitpack_encode(rel, 2);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "past the element count 72");
  // fc.weight index stream: an over-subscribed Huffman table.
  f = tiny::build().file;
  dsw::Bytes& h = f.tensors[3].streams[0].bytes;
  for (size_t i = 4; i < 4u + h[0]; ++i) h[i] = h[i] ? 1 : 0;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "tensor 'fc.weight': stream 0 (indices)");
  // A raw stream with a non-zero bits field, and a bad codec.
  f = tiny::build().file;
  f.tensors[1].streams[0].bits = 3;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "raw stream");
  f = tiny::build().file;
  f.tensors[0].streams[0].codec = 7;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "codec 7");
}

TEST(random_byte_flips_are_refused) {
  const dsw::Bytes b = dsw::serialize(tiny::build().file);
  tiny::Rng rng(12345);
  for (int i = 0; i < 3000; ++i) {
    dsw::Bytes c = b;
    const size_t at = rng.below(uint32_t(c.size()));
    c[at] ^= uint8_t(1u << rng.below(8));
    const Outcome o = load(c);
    CHECK_MSG(o.status != DS_OK && !o.error.empty(), "flip at byte " + std::to_string(at));
  }
}

// Flips inside the graph section and tensor table with their CRCs fixed: the parser itself sees
// the damage. Some results are still valid files (e.g. a changed name); nothing may crash.
TEST(random_flips_behind_fixed_checksums) {
  dsw::Layout lay;
  const dsw::Bytes b = dsw::serialize(tiny::build().file, &lay);
  tiny::Rng rng(777);
  int refused = 0;
  const int rounds = 3000;
  for (int i = 0; i < rounds; ++i) {
    dsw::Bytes c = b;
    const bool graph = rng.below(2) == 0;
    const uint64_t base = graph ? lay.graph_offset : lay.tensors_offset;
    const uint64_t len = graph ? lay.graph_length : lay.tensors_length;
    const int flips = 1 + int(rng.below(3));
    for (int k = 0; k < flips; ++k) c[base + rng.below(uint32_t(len))] ^= uint8_t(1u << rng.below(8));
    dsw::fix_crcs(c, lay);
    refused += load_and_maybe_run(c) ? 0 : 1;
  }
  std::printf("  %d of %d damaged files refused\n", refused, rounds);
  CHECK(refused > rounds / 2);
}

// Flips inside stream data, written with matching CRCs, so the decoders see the damage: Huffman
// tables and codes, bit-packed indices, codebooks. Nothing may crash.
TEST(random_stream_flips_behind_valid_checksums) {
  const dsw::File base = tiny::build().file;
  tiny::Rng rng(99);
  int refused = 0;
  const int rounds = 2000;
  for (int i = 0; i < rounds; ++i) {
    dsw::File f = base;
    dsw::Tensor& t = f.tensors[rng.below(uint32_t(f.tensors.size()))];
    dsw::Stream& s = t.streams[rng.below(uint32_t(t.streams.size()))];
    if (s.bytes.empty()) continue;
    s.bytes[rng.below(uint32_t(s.bytes.size()))] ^= uint8_t(1u << rng.below(8));
    refused += load_and_maybe_run(dsw::serialize(f)) ? 0 : 1;
  }
  std::printf("  %d of %d files with damaged streams refused\n", refused, rounds);
  CHECK(refused > 0);
}

// A graph with every op of ids 8-24, for damage to their attributes and wiring.
static dsw::File new_ops_file() {
  auto str = [](const std::string& k, const std::string& v) {
    dsw::Attr a;
    a.key = k, a.type = 5, a.s = v;
    return a;
  };
  auto flt = [](const std::string& k, float v) {
    dsw::Attr a;
    a.key = k, a.type = 2, a.f = v;
    return a;
  };
  using dsw::attr_int;
  using dsw::attr_ints;
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, 4, 4, 4});
  f.inputs = {x};
  std::vector<uint32_t> v;
  for (int i = 0; i < 16; ++i) v.push_back(f.add_value("v" + std::to_string(i), {1}));
  const uint32_t wt = f.add_constant(dsw::dense_tensor("wt", {4, 2, 2, 2}, std::vector<float>(32, 0.1f)));
  const uint32_t p = f.add_constant(dsw::dense_tensor("p", {4}, {1, 2, 3, 4}));
  const uint32_t k = f.add_constant(dsw::dense_tensor("k", {1}, {2}));
  f.outputs = {v[15], v[4]};
  f.add_node(8, "bn", {x, p, p, p, p}, v[0], {flt("epsilon", 1e-3f)});
  f.add_node(16, "lrn", {v[0]}, v[1], {attr_int("size", 3), flt("alpha", 1e-3f)});
  f.add_node(15, "up", {v[1], wt, 0xFFFFFFFFu}, v[2],
             {attr_ints("strides", {2, 2}), attr_ints("output_padding", {1, 0}), attr_int("activation", 6)});
  f.add_node(21, "rs", {v[2]}, v[3], {attr_ints("sizes", {5, 7}), str("mode", "linear"),
                                       str("coordinate_transformation_mode", "align_corners")});
  f.add_node(20, "pad", {v[3]}, v[4], {attr_ints("pads", {0, 0, 1, 1, 0, 0, 1, 1}), str("mode", "reflect")});
  f.add_node(17, "cs", {v[4]}, v[5], {attr_int("group", 2)});
  f.add_node(24, "sl", {v[5]}, v[6], {attr_ints("axes", {2}), attr_ints("starts", {1}), attr_ints("ends", {-1})});
  f.add_node(19, "tr", {v[6]}, v[7], {attr_ints("perm", {0, 2, 3, 1})});
  f.add_node(18, "rh", {v[7]}, v[8], {attr_ints("shape", {0, -1})});
  f.add_node(14, "cat", {v[8], v[8], v[8]}, v[9], {attr_int("axis", 1)});
  f.add_node(13, "div", {v[9], k}, v[10]);
  f.add_node(12, "mul", {v[10], k}, v[11]);
  f.add_node(11, "sub", {v[11], k}, v[12]);
  f.add_node(10, "add", {v[12], v[10]}, v[13], {attr_int("activation", 3), flt("act_alpha", 0.1f)});
  f.add_node(9, "act", {v[13]}, v[14], {attr_int("kind", 5), flt("alpha", 0.2f), flt("beta", 0.5f)});
  f.add_node(23, "gmp", {v[4]}, v[15]);
  return f;
}

// Loads, and runs at batch 1 when every activation stays small; must not crash.
static bool load_and_run_if_small(const dsw::Bytes& b) {
  ds_model* m = nullptr;
  if (ds_model_load_memory(b.data(), b.size(), &m) != DS_OK) {
    if (std::strlen(ds_last_error()) == 0) harness::record_failure(__FILE__, __LINE__, "empty error message");
    return false;
  }
  const std::unique_ptr<ds::Model> model = ds::load_model(b.data(), b.size());  // the same, for its shapes
  std::vector<ds::Shape> in;
  for (const ds::Shape& d : model->input_dims) {
    ds::Shape s = d;
    for (int64_t& v : s) v = v == -1 ? 1 : v;
    in.push_back(s);
  }
  int64_t total = 0;
  for (const ds::Shape& s : ds::infer_shapes(*model, in)) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    total += n;
  }
  if (total <= (1 << 20) && in.size() == 1) {
    ds_session* s = nullptr;
    if (ds_session_create(m, nullptr, &s) == DS_OK) {
      int64_t n = 1;
      for (int64_t d : in[0]) n *= d;
      std::vector<float> x(size_t(n), 0.5f);
      if (ds_session_set_input(s, 0, x.data(), in[0].data(), in[0].size()) == DS_OK) ds_session_run(s);
    }
    ds_session_free(s);
  }
  ds_model_free(m);
  return true;
}

TEST(new_ops_graph_loads_and_runs) {
  const dsw::Bytes b = dsw::serialize(new_ops_file());
  const Outcome o = load(b);
  REQUIRE_MSG(o.status == DS_OK, o.error);
  CHECK(load_and_run_if_small(b));
}

// 3000 copies of f with one or two bits of the graph section flipped and its CRC fixed, each loaded
// and run when small; nothing may crash, and more than a quarter must be refused.
static void check_graph_flips(const dsw::File& f, uint32_t seed, const char* what) {
  dsw::Layout lay;
  const dsw::Bytes b = dsw::serialize(f, &lay);
  tiny::Rng rng(seed);
  int refused = 0;
  const int rounds = 3000;
  for (int i = 0; i < rounds; ++i) {
    dsw::Bytes c = b;
    const int flips = 1 + int(rng.below(2));
    for (int k = 0; k < flips; ++k)
      c[lay.graph_offset + rng.below(uint32_t(lay.graph_length))] ^= uint8_t(1u << rng.below(8));
    dsw::fix_crcs(c, lay);
    refused += load_and_run_if_small(c) ? 0 : 1;
  }
  std::printf("  %d of %d damaged %s graphs refused\n", refused, rounds, what);
  CHECK(refused > rounds / 4);
}

// Flips in the graph section of the new-op graph: attribute values, keys, types and wiring of ops
// 8-24 are damaged.
TEST(random_flips_in_new_op_attributes) { check_graph_flips(new_ops_file(), 4242, "new-op"); }

// int16 activations: x -> quantize i16 -> qconv2d 3x3 (i16 -> i16, fused ReLU) -> maxpool2d ->
// flatten -> requantize (i16 -> u8) -> dequantize.
static dsw::File int16_file() {
  using dsw::attr_int;
  using dsw::attr_ints;
  auto flt = [](const std::string& k, float v) {
    dsw::Attr a;
    a.key = k, a.type = 2, a.f = v;
    return a;
  };
  auto ints = [](const std::string& name, uint8_t dtype, std::vector<uint64_t> dims, size_t n, int32_t v) {
    return dsw::typed_tensor(name, dtype, std::move(dims), std::vector<int32_t>(n, v));
  };
  dsw::File f;
  const uint32_t x = f.add_value("x", {-1, 2, 5, 5});
  f.inputs = {x};
  const uint32_t q = f.add_activation("q", {1, 2, 5, 5}, 5);
  f.add_node(25, "quant", {x}, q, {flt("scale", 0.001f), attr_int("zero_point", 0)});
  const uint32_t w = f.add_typed_constant(dsw::typed_tensor("w", 2, {3, 2, 3, 3}, std::vector<int8_t>(54, -3)));
  const uint32_t b = f.add_typed_constant(ints("b", 4, {3}, 3, 100));
  const uint32_t m = f.add_typed_constant(ints("m", 4, {3}, 3, 20000 << 16));
  const uint32_t s = f.add_typed_constant(ints("s", 4, {3}, 3, 3));
  const uint32_t c = f.add_activation("c", {1, 3, 5, 5}, 5);
  f.add_node(27, "conv", {q, w, b, m, s}, c,
             {attr_ints("pads", {1, 1, 1, 1}), attr_int("x_zero_point", 0), attr_int("y_zero_point", 0),
              attr_int("act_min", 0)});
  const uint32_t p = f.add_activation("p", {1, 3, 2, 2}, 5);
  f.add_node(3, "pool", {c}, p, {attr_ints("kernel", {2, 2}), attr_ints("strides", {2, 2})});
  const uint32_t fl = f.add_activation("fl", {1, 12}, 5);
  f.add_node(6, "flat", {p}, fl, {attr_int("axis", 1)});
  const uint32_t r = f.add_activation("r", {1, 12}, 3);
  f.add_node(33, "requant", {fl}, r,
             {attr_int("x_zero_point", 0), attr_int("y_zero_point", 10), attr_int("multiplier", 1 << 30),
              attr_int("shift", 2)});
  const uint32_t y = f.add_value("y", {1, 12});
  f.add_node(26, "dequant", {r}, y, {flt("scale", 0.01f), attr_int("zero_point", 10)});
  f.outputs = {y};
  return f;
}

TEST(int16_graph_loads_and_runs) {
  const dsw::Bytes b = dsw::serialize(int16_file());
  const Outcome o = load(b);
  REQUIRE_MSG(o.status == DS_OK, o.error);
  CHECK(load_and_run_if_small(b));
  // An i16 tensor stores raw values only; an unknown dtype names the value.
  dsw::File f = int16_file();
  f.tensors.push_back(dsw::typed_tensor("t", 5, {4}, std::vector<int16_t>{1, -2, 3, -4}));
  f.add_value("t", {4}, int32_t(f.tensors.size() - 1));
  f.values.back().dtype = 5;
  CHECK(load(f).status == DS_OK);
  f.tensors.back().streams[0] = dsw::symbol_stream(1, {1, 2, 3, 0}, 4, false);
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "tensor 4 ('t'): stream 0 (values): raw i16 values must use codec 0 (raw)");
  f = int16_file();
  f.values[1].dtype = 6;
  EXPECT_REFUSED(load(f), DS_ERR_FORMAT, "value 1 ('q'): dtype: 6 is not 1 (f32), 2 (i8), 3 (u8), 4 (i32) or 5 (i16)");
}

// Flips in the graph section of the int16 graph (dtypes, zero points, multipliers, wiring).
TEST(random_flips_in_int16_graph) { check_graph_flips(int16_file(), 1616, "int16"); }
