// A loaded, fully decoded model: the graph with validated, parsed nodes and dense constants (f32,
// or the bytes of i8/u8/i32).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/shape.h"
#include "ops/op.h"

namespace ds {

constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kAbsentInput = 0xFFFFFFFFu;

struct Value {
  std::string name;
  Shape dims;                // as stored; -1 only for a graph input's batch
  int32_t tensor_index = -1; // -1 for an activation
  uint8_t dtype = kDtypeF32;  // Dtype; an activation is f32 or u8
};

struct Node {
  const OpDef* op = nullptr;
  std::string name;
  std::vector<uint32_t> inputs;  // kAbsentInput for an absent optional input
  std::vector<uint32_t> outputs;
  OpParams params;
};

struct Tensor {
  std::string name;
  Shape dims;
  uint8_t dtype = kDtypeF32;
  std::vector<float> data;     // f32: decoded, dense, C order
  std::vector<uint8_t> bytes;  // i8, u8, i32: the elements' bytes, dense, C order
  const void* ptr() const {
    return dtype == kDtypeF32 ? static_cast<const void*>(data.data()) : static_cast<const void*>(bytes.data());
  }
};

struct Model {
  std::vector<Value> values;
  std::vector<uint32_t> inputs, outputs;  // value ids
  std::vector<Node> nodes;                // topological order
  std::vector<Tensor> tensors;
  // Graph input/output shapes reported by the C API: -1 where they follow the batch.
  std::vector<Shape> input_dims, output_dims;
};

// Parses, validates and decodes a whole .dsm image. Throws ds::Error naming the bad field.
std::unique_ptr<Model> load_model(const uint8_t* data, size_t size);

// Shapes of every value for the given graph input shapes (constants take their tensor's shape,
// values no node reads or writes stay empty). Throws DS_ERR_SHAPE naming the input or node.
std::vector<Shape> infer_shapes(const Model& model, const std::vector<Shape>& input_shapes);

// Checks one input shape against the graph's declared one (rank, fixed dims, batch >= 1).
void check_input_shape(const Model& model, size_t index, const Shape& given);

}  // namespace ds
