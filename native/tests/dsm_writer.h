// A small .dsm v1 writer for the tests only: builds valid files field by field (docs/format.md),
// with hooks to break any of them. Independent of the runtime except for CRC-32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "codec/crc32.h"

namespace dsw {

using Bytes = std::vector<uint8_t>;

struct Buf {
  Bytes b;
  template <typename T>
  void put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  void u8(uint8_t v) { put(v); }
  void u16(uint16_t v) { put(v); }
  void u32(uint32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void i32(int32_t v) { put(v); }
  void i64(int64_t v) { put(v); }
  void f32(float v) { put(v); }
  void str(const std::string& s) {
    u16(uint16_t(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
};

// ---- codecs (encoders) ----

// MSB-first bit writer.
struct BitWriter {
  Bytes bytes;
  uint64_t nbits = 0;
  void put(uint32_t value, unsigned bits) {
    for (unsigned i = bits; i-- > 0;) {
      if (nbits % 8 == 0) bytes.push_back(0);
      if ((value >> i) & 1u) bytes.back() |= uint8_t(0x80u >> (nbits % 8));
      ++nbits;
    }
  }
};

inline Bytes bitpack_encode(const std::vector<uint32_t>& symbols, unsigned bits) {
  BitWriter w;
  for (uint32_t s : symbols) w.put(s, bits);
  return w.bytes;
}

// Optimal Huffman code lengths for the symbols' frequencies (one symbol: length 1).
inline std::vector<uint8_t> huffman_lengths(const std::vector<uint32_t>& symbols, uint32_t alphabet) {
  std::vector<uint64_t> freq(alphabet, 0);
  for (uint32_t s : symbols) freq[s]++;
  std::vector<uint8_t> lengths(alphabet, 0);
  // Each heap item: (weight, node id); nodes >= alphabet are internal with two children.
  std::vector<int> parent(2 * alphabet, -1);
  using Item = std::pair<uint64_t, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  for (uint32_t s = 0; s < alphabet; ++s)
    if (freq[s]) heap.push({freq[s], int(s)});
  if (heap.size() == 1) {
    lengths[heap.top().second] = 1;
    return lengths;
  }
  int next = int(alphabet);
  while (heap.size() > 1) {
    Item a = heap.top(); heap.pop();
    Item b = heap.top(); heap.pop();
    parent[a.second] = parent[b.second] = next;
    heap.push({a.first + b.first, next++});
  }
  for (uint32_t s = 0; s < alphabet; ++s) {
    if (!freq[s]) continue;
    int depth = 0;
    for (int n = int(s); parent[n] != -1; n = parent[n]) ++depth;
    lengths[s] = uint8_t(depth);
  }
  return lengths;
}

// Canonical codes from lengths (DEFLATE's assignment): code[s], valid where lengths[s] > 0.
inline std::vector<uint32_t> canonical_codes(const std::vector<uint8_t>& lengths) {
  std::vector<uint32_t> codes(lengths.size(), 0);
  uint32_t code = 0;
  for (unsigned len = 1; len <= 16; ++len) {
    for (size_t s = 0; s < lengths.size(); ++s)
      if (lengths[s] == len) codes[s] = code++;
    code <<= 1;
  }
  return codes;
}

// A whole huffman stream: u32 n, u8 lengths[n], code bits.
inline Bytes huffman_encode(const std::vector<uint32_t>& symbols, const std::vector<uint8_t>& lengths) {
  Buf head;
  head.u32(uint32_t(lengths.size()));
  head.b.insert(head.b.end(), lengths.begin(), lengths.end());
  const std::vector<uint32_t> codes = canonical_codes(lengths);
  BitWriter w;
  for (uint32_t s : symbols) w.put(codes[s], lengths[s]);
  head.b.insert(head.b.end(), w.bytes.begin(), w.bytes.end());
  return head.b;
}

inline Bytes huffman_encode(const std::vector<uint32_t>& symbols, unsigned bits) {
  if (symbols.empty()) return Bytes(4, 0);
  return huffman_encode(symbols, huffman_lengths(symbols, 1u << bits));
}

// ---- file structure ----

struct Stream {
  uint8_t role = 1, codec = 0, bits = 0, reserved = 0;
  uint64_t count = 0;
  Bytes bytes;
  // Set to break the record; otherwise the writer computes them.
  int64_t offset_override = -1, length_override = -1;
  bool bad_crc = false;
};

struct Tensor {
  std::string name;
  uint8_t dtype = 1;
  std::vector<uint64_t> dims;
  uint8_t layout = 0, values = 0, index_bits = 0, cluster_bits = 0;
  uint64_t entry_count = 0;
  std::vector<Stream> streams;
};

struct Value {
  std::string name;
  uint8_t dtype = 1;
  std::vector<int64_t> dims;
  int32_t tensor_index = -1;
};

struct Attr {
  std::string key;
  uint8_t type = 1;
  int64_t i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::string s;
};

inline Attr attr_int(const std::string& k, int64_t v) { Attr a; a.key = k; a.type = 1; a.i = v; return a; }
inline Attr attr_ints(const std::string& k, std::vector<int64_t> v) {
  Attr a; a.key = k; a.type = 3; a.ints = std::move(v); return a;
}

struct Node {
  uint16_t op = 0;
  std::string name;
  std::vector<uint32_t> inputs, outputs;
  std::vector<Attr> attrs;
};

struct File {
  std::vector<Value> values;
  std::vector<uint32_t> inputs, outputs;
  std::vector<Node> nodes;
  std::vector<Tensor> tensors;
  uint32_t version = 1, flags = 0;
  bool bad_graph_crc = false, bad_tensors_crc = false;
  Bytes graph_trailer;  // bytes appended to the graph section (none in a valid file)

  uint32_t add_value(const std::string& name, std::vector<int64_t> dims, int32_t tensor = -1) {
    values.push_back({name, 1, std::move(dims), tensor});
    return uint32_t(values.size() - 1);
  }
  // Adds the tensor record and the constant value that refers to it.
  uint32_t add_constant(Tensor t) {
    std::vector<int64_t> dims(t.dims.begin(), t.dims.end());
    tensors.push_back(std::move(t));
    return add_value(tensors.back().name, dims, int32_t(tensors.size() - 1));
  }
  // A constant whose value has the tensor's dtype (add_constant declares f32).
  uint32_t add_typed_constant(Tensor t) {
    const uint8_t dtype = t.dtype;
    const uint32_t id = add_constant(std::move(t));
    values[id].dtype = dtype;
    return id;
  }
  uint32_t add_activation(const std::string& name, std::vector<int64_t> dims, uint8_t dtype) {
    const uint32_t id = add_value(name, std::move(dims));
    values[id].dtype = dtype;
    return id;
  }
  void add_node(uint16_t op, const std::string& name, std::vector<uint32_t> in, uint32_t out,
                std::vector<Attr> attrs = {}) {
    nodes.push_back({op, name, std::move(in), {out}, std::move(attrs)});
  }
};

// Where things ended up, for tests that patch bytes.
struct Layout {
  uint64_t graph_offset = 0, graph_length = 0, tensors_offset = 0, tensors_length = 0;
  std::vector<std::pair<uint64_t, uint64_t>> streams;  // offset, length
};

inline Bytes write_graph(const File& f) {
  Buf g;
  g.u32(uint32_t(f.values.size()));
  for (const Value& v : f.values) {
    g.str(v.name);
    g.u8(v.dtype);
    g.u8(uint8_t(v.dims.size()));
    for (int64_t d : v.dims) g.i64(d);
    g.i32(v.tensor_index);
  }
  g.u32(uint32_t(f.inputs.size()));
  for (uint32_t id : f.inputs) g.u32(id);
  g.u32(uint32_t(f.outputs.size()));
  for (uint32_t id : f.outputs) g.u32(id);
  g.u32(uint32_t(f.nodes.size()));
  for (const Node& n : f.nodes) {
    g.u16(n.op);
    g.str(n.name);
    g.u8(uint8_t(n.inputs.size()));
    for (uint32_t id : n.inputs) g.u32(id);
    g.u8(uint8_t(n.outputs.size()));
    for (uint32_t id : n.outputs) g.u32(id);
    g.u16(uint16_t(n.attrs.size()));
    for (const Attr& a : n.attrs) {
      g.str(a.key);
      g.u8(a.type);
      switch (a.type) {
        case 1: g.i64(a.i); break;
        case 2: g.f32(a.f); break;
        case 3: g.u32(uint32_t(a.ints.size())); for (int64_t v : a.ints) g.i64(v); break;
        case 4: g.u32(uint32_t(a.floats.size())); for (float v : a.floats) g.f32(v); break;
        default: g.str(a.s); break;
      }
    }
  }
  g.b.insert(g.b.end(), f.graph_trailer.begin(), f.graph_trailer.end());
  return g.b;
}

inline Bytes write_table(const File& f, const std::vector<std::vector<uint64_t>>& offsets) {
  Buf t;
  t.u32(uint32_t(f.tensors.size()));
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const Tensor& x = f.tensors[i];
    t.str(x.name);
    t.u8(x.dtype);
    t.u8(uint8_t(x.dims.size()));
    for (uint64_t d : x.dims) t.u64(d);
    t.u8(x.layout);
    t.u8(x.values);
    t.u8(x.index_bits);
    t.u8(x.cluster_bits);
    t.u64(x.entry_count);
    t.u8(uint8_t(x.streams.size()));
    for (size_t k = 0; k < x.streams.size(); ++k) {
      const Stream& s = x.streams[k];
      t.u8(s.role);
      t.u8(s.codec);
      t.u8(s.bits);
      t.u8(s.reserved);
      t.u64(s.count);
      t.u64(s.offset_override >= 0 ? uint64_t(s.offset_override) : offsets[i][k]);
      t.u64(s.length_override >= 0 ? uint64_t(s.length_override) : s.bytes.size());
      const uint32_t crc = ds::crc32(s.bytes.data(), s.bytes.size());
      t.u32(s.bad_crc ? crc ^ 1u : crc);
    }
  }
  return t.b;
}

inline uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

inline Bytes serialize(const File& f, Layout* layout = nullptr) {
  const Bytes graph = write_graph(f);
  std::vector<std::vector<uint64_t>> offsets(f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) offsets[i].assign(f.tensors[i].streams.size(), 0);
  const uint64_t table_len = write_table(f, offsets).size();  // offsets do not change its size
  const uint64_t tensors_offset = 64 + graph.size();
  uint64_t pos = align64(tensors_offset + table_len);
  Layout lay;
  for (size_t i = 0; i < f.tensors.size(); ++i)
    for (size_t k = 0; k < f.tensors[i].streams.size(); ++k) {
      offsets[i][k] = pos;
      lay.streams.push_back({pos, f.tensors[i].streams[k].bytes.size()});
      pos = align64(pos + f.tensors[i].streams[k].bytes.size());
    }
  if (!lay.streams.empty()) pos = lay.streams.back().first + lay.streams.back().second;  // no end padding
  const Bytes table = write_table(f, offsets);
  Bytes out(std::max<uint64_t>(pos, tensors_offset + table.size()), 0);
  std::copy(graph.begin(), graph.end(), out.begin() + 64);
  std::copy(table.begin(), table.end(), out.begin() + long(tensors_offset));
  for (size_t i = 0; i < f.tensors.size(); ++i)
    for (size_t k = 0; k < f.tensors[i].streams.size(); ++k)
      std::copy(f.tensors[i].streams[k].bytes.begin(), f.tensors[i].streams[k].bytes.end(),
                out.begin() + long(offsets[i][k]));
  Buf h;
  h.b.insert(h.b.end(), {'D', 'E', 'E', 'P', 'S', 'L', 'I', 'M'});
  h.u32(f.version);
  h.u32(f.flags);
  h.u64(out.size());
  h.u64(64);
  h.u64(graph.size());
  h.u64(tensors_offset);
  h.u64(table.size());
  const uint32_t gcrc = ds::crc32(graph.data(), graph.size());
  const uint32_t tcrc = ds::crc32(table.data(), table.size());
  h.u32(f.bad_graph_crc ? gcrc ^ 1u : gcrc);
  h.u32(f.bad_tensors_crc ? tcrc ^ 1u : tcrc);
  std::copy(h.b.begin(), h.b.end(), out.begin());
  if (layout) {
    lay.graph_offset = 64, lay.graph_length = graph.size();
    lay.tensors_offset = tensors_offset, lay.tensors_length = table.size();
    *layout = lay;
  }
  return out;
}

// Recomputes the header's CRCs after a test patched a section's bytes.
inline void fix_crcs(Bytes& file, const Layout& lay) {
  const uint32_t g = ds::crc32(file.data() + lay.graph_offset, lay.graph_length);
  const uint32_t t = ds::crc32(file.data() + lay.tensors_offset, lay.tensors_length);
  std::memcpy(file.data() + 56, &g, 4);
  std::memcpy(file.data() + 60, &t, 4);
}

// ---- tensor encoders ----

inline Bytes float_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline uint64_t product(const std::vector<uint64_t>& dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

inline Stream raw_stream(uint8_t role, const std::vector<float>& v) {
  Stream s;
  s.role = role, s.codec = 0, s.bits = 0, s.count = v.size(), s.bytes = float_bytes(v);
  return s;
}

inline Stream symbol_stream(uint8_t role, const std::vector<uint32_t>& sym, unsigned bits, bool huffman) {
  Stream s;
  s.role = role, s.codec = huffman ? 2 : 1, s.bits = uint8_t(bits), s.count = sym.size();
  s.bytes = huffman ? huffman_encode(sym, bits) : bitpack_encode(sym, bits);
  return s;
}

inline Tensor dense_tensor(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& data) {
  Tensor t;
  t.name = name, t.dims = std::move(dims), t.entry_count = data.size();
  t.streams.push_back(raw_stream(1, data));
  return t;
}

// A dense raw tensor of any dtype: the bytes of v (i8, u8, i16, i32 elements as T).
template <typename T>
inline Tensor typed_tensor(const std::string& name, uint8_t dtype, std::vector<uint64_t> dims, const std::vector<T>& v) {
  Tensor t;
  t.name = name, t.dtype = dtype, t.dims = std::move(dims), t.entry_count = v.size();
  Stream st;
  st.count = v.size();
  st.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(st.bytes.data(), v.data(), st.bytes.size());
  t.streams.push_back(st);
  return t;
}

// Index of each value in the codebook (values must be exactly centroids).
inline std::vector<uint32_t> cluster_indices(const std::vector<float>& v, const std::vector<float>& codebook) {
  std::vector<uint32_t> idx;
  for (float x : v) idx.push_back(uint32_t(std::find(codebook.begin(), codebook.end(), x) - codebook.begin()));
  return idx;
}

inline Tensor codebook_tensor(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& data,
                              const std::vector<float>& codebook, unsigned cluster_bits, bool huffman) {
  Tensor t;
  t.name = name, t.dims = std::move(dims), t.values = 1, t.cluster_bits = uint8_t(cluster_bits);
  t.entry_count = data.size();
  t.streams.push_back(symbol_stream(1, cluster_indices(data, codebook), cluster_bits, huffman));
  t.streams.push_back(raw_stream(3, codebook));
  return t;
}

// sparse_rel with filler entries; with a codebook (which must hold 0.0) values become indices.
inline Tensor sparse_tensor(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& data,
                            unsigned index_bits, const std::vector<float>* codebook = nullptr,
                            unsigned cluster_bits = 0, bool huffman = false) {
  const uint32_t max_gap = (1u << index_bits) - 1;
  std::vector<uint32_t> rel;
  std::vector<float> vals;
  uint32_t gap = 0;
  for (float x : data) {
    if (x == 0.0f) {
      if (++gap > max_gap) {  // a filler entry takes this zero
        rel.push_back(max_gap);
        vals.push_back(0.0f);
        gap = 0;
      }
      continue;
    }
    rel.push_back(gap);
    vals.push_back(x);
    gap = 0;
  }
  Tensor t;
  t.name = name, t.dims = std::move(dims), t.layout = 1, t.index_bits = uint8_t(index_bits);
  t.entry_count = rel.size();
  t.streams.push_back(symbol_stream(2, rel, index_bits, huffman));
  if (codebook) {
    t.values = 1, t.cluster_bits = uint8_t(cluster_bits);
    t.streams.push_back(symbol_stream(1, cluster_indices(vals, *codebook), cluster_bits, huffman));
    t.streams.push_back(raw_stream(3, *codebook));
  } else {
    t.streams.push_back(raw_stream(1, vals));
  }
  return t;
}

}  // namespace dsw
