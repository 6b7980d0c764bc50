// .dsm v1 loader (docs/format.md): validates every field against the file size and the format's
// limits, then decodes every tensor to dense float32.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "codec/crc32.h"
#include "common/error.h"
#include "core/byte_reader.h"
#include "core/model.h"
#include "core/tensor_record.h"

namespace ds {
namespace {

constexpr uint64_t kHeaderSize = 64;
constexpr uint32_t kMaxCount = 1000000;  // values, nodes, tensors
constexpr uint32_t kMaxAttrValues = 65536;

struct Header {
  uint32_t version, flags;
  uint64_t file_size, graph_offset, graph_length, tensors_offset, tensors_length;
  uint32_t graph_crc32, tensors_crc32;
};

template <typename T>
T read_at(const uint8_t* p, size_t offset) {
  T v;
  std::memcpy(&v, p + offset, sizeof(T));
  return v;
}

// True when [offset, offset + length) lies inside [0, size), without overflow.
bool in_range(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

Header read_header(const uint8_t* data, size_t size) {
  if (size < kHeaderSize)
    fail(DS_ERR_FORMAT, "file is ", size, " bytes, shorter than the 64-byte .dsm header");
  if (std::memcmp(data, "DEEPSLIM", 8) != 0)
    fail(DS_ERR_FORMAT, "bad magic: the file does not start with \"DEEPSLIM\"; it is not a .dsm file");
  Header h;
  h.version = read_at<uint32_t>(data, 8);
  h.flags = read_at<uint32_t>(data, 12);
  h.file_size = read_at<uint64_t>(data, 16);
  h.graph_offset = read_at<uint64_t>(data, 24);
  h.graph_length = read_at<uint64_t>(data, 32);
  h.tensors_offset = read_at<uint64_t>(data, 40);
  h.tensors_length = read_at<uint64_t>(data, 48);
  h.graph_crc32 = read_at<uint32_t>(data, 56);
  h.tensors_crc32 = read_at<uint32_t>(data, 60);
  if (h.version != kFormatVersion)
    fail(DS_ERR_VERSION, "the file has .dsm format version ", h.version, "; this runtime reads version ",
         kFormatVersion, " only", h.version > kFormatVersion ? " (update the runtime)" : "");
  if (h.flags != 0) fail(DS_ERR_FORMAT, "header flags are 0x", std::hex, h.flags, ", expected 0 (reserved)");
  if (h.file_size != size)
    fail(DS_ERR_FORMAT, "header file_size ", h.file_size, " does not match the actual size ", size,
         " (the file is truncated or has extra bytes)");
  if (h.graph_offset < kHeaderSize || !in_range(h.graph_offset, h.graph_length, size))
    fail(DS_ERR_FORMAT, "graph section offset ", h.graph_offset, " + length ", h.graph_length,
         " is outside the file (size ", size, ", header 64 bytes)");
  if (h.tensors_offset < h.graph_offset + h.graph_length || !in_range(h.tensors_offset, h.tensors_length, size))
    fail(DS_ERR_FORMAT, "tensor table offset ", h.tensors_offset, " + length ", h.tensors_length,
         " is outside the file (size ", size, ") or overlaps the graph section");
  const uint32_t gcrc = crc32(data + h.graph_offset, h.graph_length);
  if (gcrc != h.graph_crc32)
    fail(DS_ERR_CHECKSUM, "graph section CRC-32 0x", std::hex, gcrc, " does not match the header's 0x",
         h.graph_crc32);
  const uint32_t tcrc = crc32(data + h.tensors_offset, h.tensors_length);
  if (tcrc != h.tensors_crc32)
    fail(DS_ERR_CHECKSUM, "tensor table CRC-32 0x", std::hex, tcrc, " does not match the header's 0x",
         h.tensors_crc32);
  return h;
}

void check_stream(ByteReader& r, const TensorRecord& t, const StreamRecord& s, size_t k, uint64_t data_start,
                  uint64_t file_size) {
  const std::string where = cat("stream ", k, " (", role_name(s.role), ")");
  auto bad = [&](const std::string& what) { r.error(where.c_str(), what); };
  if (s.offset % 64 != 0) bad(cat("offset ", s.offset, " is not a multiple of 64"));
  if (!in_range(s.offset, s.length, file_size))
    bad(cat("offset ", s.offset, " + length ", s.length, " runs past the end of the file (size ", file_size, ")"));
  if (s.offset < data_start)
    bad(cat("offset ", s.offset, " lies before the end of the tensor table (", data_start, ")"));
  if (s.codec > kCodecHuffman) bad(cat("codec ", unsigned(s.codec), " is not 0 (raw), 1 (bitpack) or 2 (huffman)"));
  const bool symbolic = s.codec != kCodecRaw;
  if (!symbolic && s.bits != 0) bad(cat("bits is ", unsigned(s.bits), " for a raw stream, expected 0"));
  if (symbolic && (s.bits < 1 || s.bits > 16)) bad(cat("bits ", unsigned(s.bits), " is outside 1..16"));
  // A raw stream holds elements of the tensor's dtype, except a codebook (always f32 centroids).
  const uint8_t elem_dtype = s.role == kRoleValues && t.values == 0 ? t.dtype : uint8_t(kDtypeF32);
  const uint64_t esize = dtype_size(elem_dtype);
  if (!symbolic && (s.count > s.length / esize || s.count * esize != s.length))
    bad(cat("raw stream of ", s.count, " ", dtype_name(elem_dtype), " needs ", s.count, " x ", esize,
            " bytes, but its length is ", s.length));
  if (s.codec == kCodecBitpack && s.count <= uint64_t(kMaxElements) && (s.count * s.bits + 7) / 8 != s.length)
    bad(cat("bitpack stream of ", s.count, " x ", unsigned(s.bits), " bits needs ", (s.count * s.bits + 7) / 8,
            " bytes, but its length is ", s.length));

  switch (s.role) {
    case kRoleValues:
      if (s.count != t.entry_count) bad(cat("count ", s.count, " is not the entry count ", t.entry_count));
      if (t.values == 0 && symbolic) {
        if (t.dtype != kDtypeI8 && t.dtype != kDtypeU8)
          bad(cat("raw ", dtype_name(t.dtype), " values must use codec 0 (raw)"));
        if (s.codec == kCodecBitpack && s.bits > 8)
          bad(cat("bit-packed ", dtype_name(t.dtype), " values have bits ", unsigned(s.bits), ", more than 8"));
        if (s.codec == kCodecHuffman && s.bits != 8)
          bad(cat("huffman-coded ", dtype_name(t.dtype), " values must have bits = 8, not ", unsigned(s.bits)));
      }
      if (t.values == 1 && (!symbolic || s.bits != t.cluster_bits))
        bad(cat("cluster indices must be bitpack or huffman with bits = cluster_bits (", unsigned(t.cluster_bits), ")"));
      break;
    case kRoleIndices:
      if (t.layout != 1) bad("only a sparse_rel tensor has an indices stream");
      if (s.count != t.entry_count) bad(cat("count ", s.count, " is not the entry count ", t.entry_count));
      if (!symbolic || s.bits != t.index_bits)
        bad(cat("indices must be bitpack or huffman with bits = index_bits (", unsigned(t.index_bits), ")"));
      break;
    case kRoleCodebook:
      if (t.values != 1) bad("only a codebook tensor has a codebook stream");
      if (symbolic) bad("a codebook must use codec 0 (raw)");
      if (s.count < 1 || s.count > (uint64_t(1) << t.cluster_bits))
        bad(cat("codebook count ", s.count, " is outside 1..2^cluster_bits (", (1u << t.cluster_bits), ")"));
      break;
    default:
      bad(cat("role ", unsigned(s.role), " is not 1 (values), 2 (indices) or 3 (codebook)"));
  }
}

TensorRecord read_tensor_record(ByteReader& r, uint64_t data_start, uint64_t file_size) {
  TensorRecord t;
  t.name = r.str("name");
  r.set_context(cat(r.context(), " ('", t.name, "')"));
  t.dtype = r.u8("dtype");
  if (!dtype_known(t.dtype)) r.error("dtype", cat(unsigned(t.dtype), " is not 1 (f32), 2 (i8), 3 (u8), 4 (i32) or 5 (i16)"));
  const uint8_t rank = r.u8("rank");
  if (rank > kMaxRank) r.error("rank", cat(unsigned(rank), " is over the limit of 8"));
  for (uint8_t i = 0; i < rank; ++i) {
    const uint64_t d = r.u64("dims");
    if (d < 1 || d > uint64_t(kMaxElements)) r.error("dims", cat("dimension ", unsigned(i), " is ", d));
    t.dims.push_back(int64_t(d));
  }
  try {
    t.elements = element_count(t.dims, "element count");
  } catch (const Error& e) {
    r.error("dims", e.message());
  }
  t.layout = r.u8("layout");
  t.values = r.u8("values");
  t.index_bits = r.u8("index_bits");
  t.cluster_bits = r.u8("cluster_bits");
  t.entry_count = r.u64("entry_count");
  if (t.layout > 1) r.error("layout", cat(unsigned(t.layout), " is not 0 (dense) or 1 (sparse_rel)"));
  if (t.values > 1) r.error("values", cat(unsigned(t.values), " is not 0 (raw) or 1 (codebook)"));
  if (t.layout == 0 ? t.index_bits != 0 : (t.index_bits < 1 || t.index_bits > 16))
    r.error("index_bits", cat(unsigned(t.index_bits), t.layout == 0 ? " must be 0 for a dense tensor" : " is outside 1..16"));
  if (t.values == 0 ? t.cluster_bits != 0 : (t.cluster_bits < 1 || t.cluster_bits > 16))
    r.error("cluster_bits", cat(unsigned(t.cluster_bits), t.values == 0 ? " must be 0 for raw values" : " is outside 1..16"));
  if (t.layout == 0 && t.entry_count != uint64_t(t.elements))
    r.error("entry_count", cat(t.entry_count, " is not the element count ", t.elements, " of a dense tensor"));
  if (t.layout == 1 && t.entry_count > uint64_t(t.elements))
    r.error("entry_count", cat(t.entry_count, " is over the element count ", t.elements));
  if (t.dtype != kDtypeF32 && t.values != 0)
    r.error("values", cat("a ", dtype_name(t.dtype), " tensor stores raw values (0), not a codebook of f32"));

  const uint8_t stream_count = r.u8("stream_count");
  if (stream_count > 4) r.error("stream_count", cat(unsigned(stream_count), " is over the limit of 4"));
  for (uint8_t k = 0; k < stream_count; ++k) {
    StreamRecord s;
    s.role = r.u8("stream role");
    s.codec = r.u8("stream codec");
    s.bits = r.u8("stream bits");
    if (const uint8_t reserved = r.u8("stream reserved"); reserved != 0)
      r.error("stream reserved", cat(unsigned(reserved), ", expected 0"));
    s.count = r.u64("stream count");
    s.offset = r.u64("stream offset");
    s.length = r.u64("stream length");
    s.crc32 = r.u32("stream crc32");
    if (t.stream(s.role)) r.error("stream role", cat(role_name(s.role), " appears twice"));
    t.streams.push_back(s);
    check_stream(r, t, t.streams.back(), k, data_start, file_size);
  }
  // The streams each layout/values combination needs (docs/format.md, "Streams a tensor must have").
  const bool need[4] = {false, true, t.layout == 1, t.values == 1};
  for (uint8_t role = kRoleValues; role <= kRoleCodebook; ++role)
    if (need[role] && !t.stream(role)) r.error("streams", cat("the ", role_name(role), " stream is missing"));
  return t;
}

std::vector<TensorRecord> read_tensor_table(const uint8_t* data, const Header& h) {
  ByteReader r(data + h.tensors_offset, h.tensors_length, "tensor table", h.tensors_offset);
  const uint32_t count = r.u32("tensor_count");
  if (count > kMaxCount) r.error("tensor_count", cat(count, " is over the limit of 1000000"));
  r.check_fits(count, 2 + 1 + 1 + 4 + 8 + 1, "tensor_count");
  std::vector<TensorRecord> tensors;
  tensors.reserve(count);
  const uint64_t data_start = h.tensors_offset + h.tensors_length;
  for (uint32_t i = 0; i < count; ++i) {
    r.set_context(cat("tensor ", i));
    tensors.push_back(read_tensor_record(r, data_start, h.file_size));
  }
  r.set_context("");
  if (r.remaining() != 0) r.error("end", cat(r.remaining(), " trailing bytes after the last tensor"));
  return tensors;
}

Attr read_attr(ByteReader& r) {
  Attr a;
  a.key = r.str("attribute key");
  a.type = r.u8("attribute type");
  uint32_t n = 0;
  switch (a.type) {
    case kAttrInt: a.i = r.i64("int attribute"); break;
    case kAttrFloat: a.f = r.f32("float attribute"); break;
    case kAttrInts:
      n = r.u32("ints count");
      if (n > kMaxAttrValues) r.error("ints count", cat(n, " is over the limit of 65536"));
      r.check_fits(n, 8, "ints count");
      for (uint32_t i = 0; i < n; ++i) a.ints.push_back(r.i64("ints"));
      break;
    case kAttrFloats:
      n = r.u32("floats count");
      if (n > kMaxAttrValues) r.error("floats count", cat(n, " is over the limit of 65536"));
      r.check_fits(n, 4, "floats count");
      for (uint32_t i = 0; i < n; ++i) a.floats.push_back(r.f32("floats"));
      break;
    case kAttrString: a.s = r.str("string attribute"); break;
    default:
      r.error("attribute type", cat("attribute '", a.key, "' has type ", unsigned(a.type), ", not 1..5"));
  }
  return a;
}

// Graph section. `available[v]` tracks which values exist so far, which enforces topological
// order and single production of every activation.
void read_graph(const uint8_t* data, const Header& h, const std::vector<TensorRecord>& tensors, Model& m) {
  ByteReader r(data + h.graph_offset, h.graph_length, "graph section", h.graph_offset);
  const uint32_t value_count = r.u32("value_count");
  if (value_count > kMaxCount) r.error("value_count", cat(value_count, " is over the limit of 1000000"));
  r.check_fits(value_count, 2 + 1 + 1 + 4, "value_count");
  std::unordered_set<std::string> names;
  std::vector<bool> tensor_used(tensors.size(), false);
  m.values.resize(value_count);
  for (uint32_t v = 0; v < value_count; ++v) {
    Value& val = m.values[v];
    r.set_context(cat("value ", v));
    val.name = r.str("name");
    r.set_context(cat("value ", v, " ('", val.name, "')"));
    if (!names.insert(val.name).second) r.error("name", "the name is used by an earlier value");
    val.dtype = r.u8("dtype");
    if (!dtype_known(val.dtype))
      r.error("dtype", cat(unsigned(val.dtype), " is not 1 (f32), 2 (i8), 3 (u8), 4 (i32) or 5 (i16)"));
    const uint8_t rank = r.u8("rank");
    if (rank > kMaxRank) r.error("rank", cat(unsigned(rank), " is over the limit of 8"));
    Shape known;  // dims with the run-time dimension counted as 1, for the element-count limit
    for (uint8_t i = 0; i < rank; ++i) {
      const int64_t d = r.i64("dims");
      if (d < -1 || d == 0 || d > kMaxElements) r.error("dims", cat("dimension ", unsigned(i), " is ", d));
      val.dims.push_back(d);
      known.push_back(d == -1 ? 1 : d);
    }
    try {
      element_count(known, "element count");
    } catch (const Error& e) {
      r.error("dims", e.message());
    }
    val.tensor_index = r.i32("tensor_index");
    if (val.tensor_index < -1 || val.tensor_index >= int64_t(tensors.size()))
      r.error("tensor_index", cat(val.tensor_index, " is not -1 or a record of the tensor table (", tensors.size(), " records)"));
    if (val.tensor_index >= 0) {
      const TensorRecord& t = tensors[size_t(val.tensor_index)];
      if (tensor_used[size_t(val.tensor_index)])
        r.error("tensor_index", cat("tensor record ", val.tensor_index, " ('", t.name, "') is used by an earlier value"));
      tensor_used[size_t(val.tensor_index)] = true;
      if (t.dims != val.dims)
        r.error("dims", cat(shape_str(val.dims), " differ from tensor '", t.name, "' ", shape_str(t.dims)));
      if (t.dtype != val.dtype)
        r.error("dtype", cat(dtype_name(val.dtype), " differs from tensor '", t.name, "' (", dtype_name(t.dtype), ")"));
    } else if (val.dtype != kDtypeF32 && !dtype_quantized_activation(val.dtype)) {
      r.error("dtype", cat(dtype_name(val.dtype), " is not an activation dtype (f32, u8 or i16)"));
    }
  }

  std::vector<bool> available(value_count, false);
  for (uint32_t v = 0; v < value_count; ++v) available[v] = m.values[v].tensor_index >= 0;
  auto read_ids = [&](const char* what, std::vector<uint32_t>& ids) {
    r.set_context(what);
    const uint32_t n = r.u32("count");
    r.check_fits(n, 4, "count");
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t id = r.u32("value id");
      if (id >= value_count) r.error("value id", cat(i, " is ", id, ", outside the ", value_count, " values"));
      ids.push_back(id);
    }
  };
  read_ids("graph inputs", m.inputs);
  for (uint32_t id : m.inputs) {
    if (m.values[id].tensor_index >= 0) r.error("value id", cat("input '", m.values[id].name, "' is a constant"));
    if (available[id]) r.error("value id", cat("input '", m.values[id].name, "' is listed twice"));
    if (m.values[id].dtype != kDtypeF32)
      r.error("value id", cat("input '", m.values[id].name, "' is ", dtype_name(m.values[id].dtype),
                              "; this runtime takes f32 graph inputs (quantize inside the graph)"));
    available[id] = true;
  }
  read_ids("graph outputs", m.outputs);
  for (uint32_t id : m.outputs)
    if (m.values[id].dtype != kDtypeF32)
      r.error("value id", cat("output '", m.values[id].name, "' is ", dtype_name(m.values[id].dtype),
                              "; this runtime returns f32 graph outputs (dequantize inside the graph)"));
  // Only a graph input's first dimension (the batch) may be fixed at run time.
  for (uint32_t v = 0; v < value_count; ++v) {
    const Value& val = m.values[v];
    for (size_t i = 0; i < val.dims.size(); ++i) {
      if (val.dims[i] != -1) continue;
      const bool is_input = val.tensor_index < 0 && available[v];
      if (i != 0 || !is_input)
        fail(DS_ERR_FORMAT, "graph section: value ", v, " ('", val.name, "'): dimension ", i,
             " is -1, which only the batch (dimension 0) of a graph input may be");
    }
  }

  r.set_context("");
  const uint32_t node_count = r.u32("node_count");
  if (node_count > kMaxCount) r.error("node_count", cat(node_count, " is over the limit of 1000000"));
  r.check_fits(node_count, 2 + 2 + 1 + 1 + 2, "node_count");
  m.nodes.resize(node_count);
  for (uint32_t n = 0; n < node_count; ++n) {
    Node& node = m.nodes[n];
    r.set_context(cat("node ", n));
    const uint16_t op = r.u16("op");
    node.name = r.str("name");
    r.set_context(cat("node ", n, " ('", node.name, "')"));
    const uint8_t in_count = r.u8("input_count");
    for (uint8_t i = 0; i < in_count; ++i) node.inputs.push_back(r.u32("inputs"));
    const uint8_t out_count = r.u8("output_count");
    for (uint8_t i = 0; i < out_count; ++i) node.outputs.push_back(r.u32("outputs"));
    const uint16_t attr_count = r.u16("attr_count");
    std::vector<Attr> attrs;
    std::unordered_set<std::string> keys;
    for (uint16_t i = 0; i < attr_count; ++i) {
      attrs.push_back(read_attr(r));
      if (!keys.insert(attrs.back().key).second)
        r.error("attribute key", cat("'", attrs.back().key, "' appears twice"));
    }

    node.op = find_op(op);
    if (!node.op)
      fail(DS_ERR_UNSUPPORTED_OP, "node '", node.name, "' has op id ", op,
           ", which this runtime does not implement (it knows ids 1..", kMaxOpId, ")");
    const std::string who = cat("node '", node.name, "' (", node.op->name, ")");
    if (in_count < node.op->min_inputs || in_count > node.op->max_inputs)
      fail(DS_ERR_FORMAT, who, ": has ", unsigned(in_count), " inputs, expected ", node.op->min_inputs,
           node.op->min_inputs == node.op->max_inputs ? "" : cat("..", node.op->max_inputs));
    for (uint8_t i = 0; i < in_count; ++i) {
      const uint32_t id = node.inputs[i];
      if (id == kAbsentInput) {
        if (i < node.op->min_inputs || node.op->variadic) fail(DS_ERR_FORMAT, who, ": required input ", unsigned(i), " is absent");
        continue;
      }
      if (id >= value_count)
        fail(DS_ERR_FORMAT, who, ": input ", unsigned(i), " is value id ", id, ", outside the ", value_count, " values");
      if (!available[id])
        fail(DS_ERR_FORMAT, who, ": input ", unsigned(i), " reads '", m.values[id].name,
             "' before any node produces it (nodes must be in topological order)");
    }
    if (out_count != 1) fail(DS_ERR_FORMAT, who, ": has ", unsigned(out_count), " outputs, expected 1");
    for (uint32_t id : node.outputs) {
      if (id >= value_count) fail(DS_ERR_FORMAT, who, ": output is value id ", id, ", outside the ", value_count, " values");
      if (m.values[id].tensor_index >= 0) fail(DS_ERR_FORMAT, who, ": output '", m.values[id].name, "' is a constant");
      if (available[id])
        fail(DS_ERR_FORMAT, who, ": output '", m.values[id].name, "' is already produced (by a graph input or an earlier node)");
      available[id] = true;
    }
    node.params = node.op->parse(attrs, node.name);
  }
  r.set_context("");
  if (r.remaining() != 0) r.error("end", cat(r.remaining(), " trailing bytes after the last node"));
  for (uint32_t id : m.outputs)
    if (!available[id]) fail(DS_ERR_FORMAT, "graph output '", m.values[id].name, "' is never produced");
}

// Each node's input dtypes (and, for the quantized ops, the contents of their constants) against
// what its op takes, and its output value's declared dtype against the op's result. An op whose
// output dtype is not implied by its inputs (quantize, qconv2d: u8 or i16) reads the declared one
// from OpParams::y_dtype.
void check_dtypes(Model& m) {
  std::vector<ValueInfo> in;
  for (Node& node : m.nodes) {
    node.params.y_dtype = m.values[node.outputs[0]].dtype;
    in.clear();
    for (uint32_t id : node.inputs) {
      if (id == kAbsentInput) {
        in.push_back({0, nullptr, nullptr});
        continue;
      }
      const Value& v = m.values[id];
      const Tensor* t = v.tensor_index >= 0 ? &m.tensors[size_t(v.tensor_index)] : nullptr;
      in.push_back({v.dtype, &v.dims, t ? t->ptr() : nullptr});
    }
    const std::string who = node_where(node.name, node.op->name);
    uint8_t out;
    if (node.op->check_dtypes) {
      out = node.op->check_dtypes(node.params, in, who);
    } else {
      for (size_t i = 0; i < in.size(); ++i)
        if (in[i].dims && in[i].dtype != kDtypeF32)
          fail(DS_ERR_FORMAT, who, ": input ", i, " ('", m.values[node.inputs[i]].name, "') is ",
               dtype_name(in[i].dtype), "; the op takes f32");
      out = kDtypeF32;
    }
    const Value& ov = m.values[node.outputs[0]];
    if (ov.dtype != out)
      fail(DS_ERR_FORMAT, who, ": output '", ov.name, "' is declared ", dtype_name(ov.dtype), " but the op gives ",
           dtype_name(out));
  }
}

// Output dims as the C API reports them: a dimension that changes with the batch is -1.
void derive_io_dims(Model& m) {
  std::vector<Shape> one, two;
  for (uint32_t id : m.inputs) {
    Shape a = m.values[id].dims, b = a;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] == -1) a[i] = 1, b[i] = 2;
    one.push_back(a);
    two.push_back(b);
    m.input_dims.push_back(m.values[id].dims);
  }
  const std::vector<Shape> s1 = infer_shapes(m, one);
  std::vector<Shape> s2 = s1;
  try {
    s2 = infer_shapes(m, two);
  } catch (const Error&) {
    // A graph that only takes batch 1 (e.g. one that flattens the batch away) keeps fixed dims.
  }
  for (uint32_t id : m.outputs) {
    Shape d = s1[id];
    for (size_t i = 0; i < d.size() && i < s2[id].size(); ++i)
      if (d[i] != s2[id][i]) d[i] = -1;
    m.output_dims.push_back(d);
  }
}

// Bytes that no section or stream covers are padding and must be zero, so that no byte of a file
// can change without the loader noticing (a CRC covers everything else).
void check_padding(const uint8_t* data, size_t size, const Header& h, const std::vector<TensorRecord>& records) {
  std::vector<std::pair<uint64_t, uint64_t>> spans = {
      {0, kHeaderSize}, {h.graph_offset, h.graph_length}, {h.tensors_offset, h.tensors_length}};
  for (const TensorRecord& t : records)
    for (const StreamRecord& s : t.streams) spans.push_back({s.offset, s.length});
  std::sort(spans.begin(), spans.end());
  uint64_t covered = 0;
  auto check_gap = [&](uint64_t end) {
    for (uint64_t i = covered; i < end; ++i)
      if (data[i] != 0)
        fail(DS_ERR_FORMAT, "byte ", i, " lies outside every section and stream but is not zero padding");
  };
  for (const auto& [offset, length] : spans) {
    if (offset > covered) check_gap(offset);
    covered = std::max(covered, offset + length);
  }
  check_gap(size);
}

}  // namespace

std::unique_ptr<Model> load_model(const uint8_t* data, size_t size) {
  // A short file is a format error whatever the pointer (an empty buffer may have none).
  if (size < kHeaderSize)
    fail(DS_ERR_FORMAT, "file is ", size, " bytes, shorter than the 64-byte .dsm header");
  if (!data) fail(DS_ERR_INVALID_ARG, "model data is NULL");
  const Header h = read_header(data, size);
  std::vector<TensorRecord> records = read_tensor_table(data, h);
  check_padding(data, size, h, records);
  auto m = std::make_unique<Model>();
  read_graph(data, h, records, *m);
  for (TensorRecord& t : records) {
    Tensor tensor;
    tensor.dtype = t.dtype;
    if (t.dtype == kDtypeF32) tensor.data = decode_tensor(t, data);
    else tensor.bytes = decode_tensor_bytes(t, data);
    tensor.name = std::move(t.name);
    tensor.dims = std::move(t.dims);
    m->tensors.push_back(std::move(tensor));
  }
  check_dtypes(*m);  // every node's input dtypes and quantization constants
  derive_io_dims(*m);  // also checks that every node's shapes fit, at batch 1 and 2
  return m;
}

}  // namespace ds
