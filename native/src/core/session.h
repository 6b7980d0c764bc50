// A session: shapes and buffers for one model, bound inputs, and the node loop.
#pragma once

#include <vector>

#include "core/model.h"
#include "kernels/kernels.h"

namespace ds {

class Session {
 public:
  // threads >= 1; v1 runs every kernel on the calling thread.
  Session(const Model& model, int threads);

  // Checks the shape against the graph, re-plans buffers when the shapes change.
  void set_input(size_t index, const float* data, const Shape& shape);
  // Throws DS_ERR_INVALID_ARG when an input is unbound.
  void run();
  const Shape& output_shape(size_t index) const;
  void get_output(size_t index, float* dst, size_t capacity) const;

 private:
  void plan();  // shapes + buffers for the bound input shapes
  const float* value_data(uint32_t id) const;

  const Model& model_;
  const KernelTable& kernels_;
  int threads_;
  std::vector<const float*> input_data_;
  std::vector<Shape> input_shapes_;
  std::vector<bool> input_bound_;
  bool planned_ = false;
  bool ran_ = false;
  std::vector<Shape> shapes_;                 // per value
  std::vector<std::vector<float>> buffers_;   // per value; empty except for node outputs
};

}  // namespace ds
