// A session: shapes and the activation arena for one model, bound inputs, and the node loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/huge_page_buffer.h"
#include "core/model.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace ds {

// Where one node output lives in the arena, and the nodes during which it must stay intact:
// from the node that writes it (first) to the last node that reads it (last; the node count for
// a graph output, which must survive the run).
struct BufferPlan {
  uint32_t value;
  size_t offset, bytes;  // offset is a multiple of 64; bytes = elements * dtype size
  size_t first, last;
};

// Greedy placement by size (largest first), each at the lowest 64-byte aligned offset that does not
// overlap a placed buffer whose lifetime intersects its own. Fills `offset`; returns the arena size.
size_t assign_offsets(std::vector<BufferPlan>& buffers);

// Wall time of one node over the profiled runs.
struct NodeProfile {
  const char* name;
  const char* op;
  uint64_t runs, total_ns;
};

// Per-node kernel choices: (node name, kernel name) pairs.
using KernelChoices = std::vector<std::pair<std::string, std::string>>;

// "node=kernel" entries separated by newlines or ';' (blank entries skipped) -> pairs; throws
// DS_ERR_INVALID_ARG for an entry without '=' or with an empty side.
KernelChoices parse_kernel_choices(const char* text);

class Session {
 public:
  // threads >= 1. `kernels` names per node the kernel its op prepares (OpDef::kernels); an unknown
  // node, an op without choices or a kernel the op does not have is refused (DS_ERR_INVALID_ARG).
  Session(const Model& model, int threads, const KernelChoices& kernels = {});

  // Checks the shape against the graph, re-plans shapes and the arena when the shapes change.
  void set_input(size_t index, const float* data, const Shape& shape);
  // The per-call path: when input `index` is bound already with these dims, points it at `data`
  // and returns true (no checks to redo, nothing allocated); else false (call set_input).
  bool rebind_input(size_t index, const float* data, const int64_t* dims, size_t rank);
  // Throws DS_ERR_INVALID_ARG when an input is unbound. Allocates nothing.
  void run();
  const Shape& output_shape(size_t index) const;
  void get_output(size_t index, float* dst, size_t capacity) const;

  // The plan for the bound input shapes; throws DS_ERR_INVALID_ARG when an input is unbound.
  size_t arena_bytes() const;
  size_t activation_bytes() const;  // sum of every node output's size
  const std::vector<BufferPlan>& buffer_plan() const { return plan_; }
  // The nodes the image pass runs image by image for the bound shapes (0: none).
  size_t image_pass_nodes() const { return image_nodes_; }

  // With profiling on, run() times every node (two clock reads per node).
  void set_profiling(bool on) { profile_ns_.assign(on ? model_.nodes.size() : 0, 0); profiled_runs_ = 0; }
  size_t node_count() const { return model_.nodes.size(); }
  NodeProfile node_profile(size_t index) const;
  // The kernel node `index` runs ("" when its op has no choice) and the choices its op offers,
  // comma-separated ("" when none).
  const char* node_kernel(size_t index) const;
  const char* node_kernel_choices(size_t index) const;

 private:
  void require_bound() const;
  void plan();  // shapes + arena for the bound input shapes
  // conv2d -> add (and qconv2d -> qadd) pairs run as one conv with the add's other operand as its
  // residual; then nodes that run their producer too (OpDef::fuse_producer: depthwise -> 1x1).
  // A quantize of a graph input whose u8 output only a node with OpDef::takes_f32_input reads
  // (as its input 0) runs in that node.
  void plan_fusion(const std::vector<Shape>& shapes);
  void plan_producer_fusion(const std::vector<Shape>& shapes, const std::vector<size_t>& producer,
                            const std::vector<size_t>& readers);
  // Whether node i runs with fused_params_[i] (it fuses an add, its producer or an input quantize)
  // or its own.
  bool fused(size_t i) const {
    return fused_residual_[i] != kAbsentInput || fused_producer_[i] != SIZE_MAX || fused_input_[i] != kAbsentInput;
  }
  // Concats whose inputs can be written straight into their slices of the output: per value, the
  // concat output it is a slice of (else kAbsentInput) and where; such a concat is skipped.
  struct ConcatSlice {
    uint32_t concat = kAbsentInput;
    size_t offset = 0;  // bytes into the concat's output
  };
  std::vector<ConcatSlice> plan_concat_in_place(const std::vector<Shape>& shapes);
  // The value node i writes: the fused add's output, or its own.
  uint32_t written_value(size_t i) const {
    return fused_residual_[i] != kAbsentInput ? fused_out_[i] : model_.nodes[i].outputs[0];
  }
  // Where a run of nodes finds its values and scratch: the batch (the session's own) or one
  // image of the image pass on one thread.
  struct Frame {
    const std::vector<Shape>* shapes;
    const std::vector<float*>* buffers;   // per value: node outputs
    const std::vector<const float*>* inputs;  // per graph input
    ThreadPool* pool;
    float* workspace;
    size_t workspace_floats;  // its size (RunContext::thread_part), 0 on the image pass (one thread each)
    std::vector<OpInput>* scratch;
    uint64_t* profile_ns;  // per node, or null
  };
  void run_nodes(size_t begin, size_t end, const Frame& f);
  const float* value_data(uint32_t id, const Frame& f) const;
  // The image pass (plan_image_pass): with a batch of at least `threads_` images whose first nodes
  // each read only their own image, nodes [0, image_nodes_) run image by image, each thread whole
  // images through all of them with batch-1 shapes, its own arena and workspace, so that every
  // intermediate tensor is one image's (in L2) instead of the batch's; the values they pass on
  // (image_out_) are written straight into their batch buffers, at the image's place. Returns the
  // bytes of the per-thread image arenas (0 when the pass is off).
  size_t plan_image_pass(const std::vector<Shape>& shapes, const std::vector<ConcatSlice>& slices);
  // Arena slots for the values the nodes write for which place(i) holds, lifetimes from the
  // reads of the nodes for which reads(i) holds. Returns the arena size.
  template <typename Place, typename Reads>
  size_t plan_arena(const std::vector<Shape>& shapes, const std::vector<ConcatSlice>& slices, const Place& place,
                    const Reads& reads, std::vector<BufferPlan>& plan, size_t& max_inputs) const;
  size_t workspace_for(const std::vector<Shape>& shapes, size_t begin, size_t end, int threads) const;
  // fn(value) for every value node i reads: its inputs, a fused residual, its producers' inputs
  // and a fused quantize's f32 input.
  template <typename Fn>
  void for_each_read(size_t i, const Fn& fn) const {
    for (uint32_t id : model_.nodes[i].inputs)
      if (id != kAbsentInput) fn(id);
    if (fused_residual_[i] != kAbsentInput) fn(fused_residual_[i]);
    for (size_t d = fused_producer_[i]; d != SIZE_MAX; d = fused_producer_[d])
      for (uint32_t id : model_.nodes[d].inputs)
        if (id != kAbsentInput) fn(id);
    if (fused_input_[i] != kAbsentInput) fn(fused_input_[i]);
  }

  const Model& model_;
  const KernelTable& kernels_;
  int threads_;
  std::vector<const float*> input_data_;
  std::vector<Shape> input_shapes_;
  std::vector<bool> input_bound_;
  bool planned_ = false;
  bool ran_ = false;
  std::vector<Shape> shapes_;        // per value
  std::vector<BufferPlan> plan_;     // one per node output
  std::vector<float*> buffers_;      // per value: its place in the arena, null if not a node output
  HugePageBuffer arena_storage_;     // the arena
  size_t arena_bytes_ = 0, activation_bytes_ = 0;
  std::vector<OpInput> scratch_;     // node inputs during run(), reserved by plan()
  std::vector<std::shared_ptr<const void>> states_;  // per node: what its op's prepare built
  std::vector<std::string> kernel_choices_;  // per node: its op's OpDef::kernels, comma-separated
  // Per node, from plan_fusion: a conv2d that runs an add too reads fused_residual_ (else
  // kAbsentInput), writes fused_out_ with fused_params_ (the add's activation, or for qconv2d the
  // qadd's parameters); the add is skipped.
  std::vector<uint32_t> fused_residual_, fused_out_;
  // Per node: the node whose work it runs too (OpDef::fuse_producer; that node is skipped), or SIZE_MAX.
  std::vector<size_t> fused_producer_;
  // Per node, from plan_fusion: the f32 value a node that runs a quantize too reads as its input 0
  // (else kAbsentInput); the quantize is skipped.
  std::vector<uint32_t> fused_input_;
  std::vector<OpParams> fused_params_;
  std::vector<bool> skipped_;
  std::unique_ptr<ThreadPool> pool_;  // threads_ > 1 only
  HugePageBuffer workspace_storage_;  // scratch of prepared ops (OpDef::workspace_floats)
  float* workspace_ = nullptr;        // in workspace_storage_
  size_t workspace_floats_ = 0;
  std::vector<uint64_t> profile_ns_;  // per node when profiling, else empty
  // The image pass: its node count (0: off), per-image shapes, per value written by it and read
  // after it its bytes per image (else 0), and per thread its buffers, inputs, scratch, profile.
  size_t image_nodes_ = 0;
  std::vector<Shape> image_shapes_;
  std::vector<int64_t> image_out_;  // bytes per image
  std::vector<uint32_t> image_outs_;  // the values with image_out_ > 0
  struct ImageThread {
    std::vector<float*> buffers;
    std::vector<const float*> inputs;
    std::vector<OpInput> scratch;
    std::vector<uint64_t> profile_ns;
    float* workspace = nullptr;
  };
  std::vector<ImageThread> image_threads_;
  HugePageBuffer image_storage_;
  uint64_t profiled_runs_ = 0;
};

}  // namespace ds
