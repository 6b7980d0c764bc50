// Malformed attributes and shapes of ops 8-24: each refused at load with a status and a message
// naming the node, the op and the attribute or shapes.
#include <limits>

#include "harness.h"
#include "op_runner.h"

using opt::Dims;
using opt::Result;

namespace {

void expect(const Result& r, ds_status status, const std::string& needle, int line) {
  if (r.status != status || r.error.find(needle) == std::string::npos)
    harness::record_failure(__FILE__, line, std::string("got ") + ds_status_name(r.status) + " '" + r.error +
                                                "', expected " + ds_status_name(status) + " with '" + needle + "'");
}
#define EXPECT_REFUSED(result, status, needle) expect(result, status, needle, __LINE__)

Result load1(uint16_t op, const Dims& x, std::vector<dsw::Attr> attrs, std::vector<dsw::Tensor> consts = {}) {
  return opt::load(opt::one_node(op, {x}, std::move(consts), std::move(attrs)));
}

}  // namespace

TEST(transpose_bad_perm) {
  EXPECT_REFUSED(load1(19, {2, 3, 4}, {dsw::attr_ints("perm", {0, 0, 1})}), DS_ERR_FORMAT,
                 "node 'op' (transpose): perm [0, 0, 1] is not a permutation of 0..2");
  EXPECT_REFUSED(load1(19, {2, 3, 4}, {dsw::attr_ints("perm", {0, 3, 1})}), DS_ERR_FORMAT, "is not a permutation");
  EXPECT_REFUSED(load1(19, {2, 3, 4}, {dsw::attr_ints("perm", {-1, 0, 1})}), DS_ERR_FORMAT, "is not a permutation");
  EXPECT_REFUSED(load1(19, {2, 3, 4}, {dsw::attr_ints("perm", {1, 0})}), DS_ERR_SHAPE,
                 "node 'op' (transpose): perm [1, 0] has 2 axes, input [2, 3, 4] has 3");
  EXPECT_REFUSED(load1(19, {2, 3}, {dsw::attr_ints("perm", std::vector<int64_t>(9, 0))}), DS_ERR_FORMAT,
                 "attribute 'perm' has 9 values, more than 8");
}

TEST(reshape_bad_shapes) {
  EXPECT_REFUSED(load1(18, {2, 12}, {dsw::attr_ints("shape", {-1, -1})}), DS_ERR_FORMAT,
                 "node 'op' (reshape): shape [-1, -1] has more than one -1");
  EXPECT_REFUSED(load1(18, {2, 12}, {dsw::attr_ints("shape", {-2, 12})}), DS_ERR_FORMAT, "has a size -2");
  EXPECT_REFUSED(load1(18, {2, 12}, {}), DS_ERR_FORMAT, "attribute 'shape' is missing");
  EXPECT_REFUSED(load1(18, {2, 12}, {dsw::attr_ints("shape", {5, -1})}), DS_ERR_SHAPE,
                 "input [2, 12] (24 elements) cannot take shape [5, -1]");
  EXPECT_REFUSED(load1(18, {2, 12}, {dsw::attr_ints("shape", {1 << 30, 1 << 30, 1 << 30})}), DS_ERR_SHAPE,
                 "cannot take shape");
}

TEST(concat_bad_axis_and_inputs) {
  EXPECT_REFUSED(load1(14, {2, 3}, {dsw::attr_int("axis", 2)}), DS_ERR_SHAPE,
                 "node 'op' (concat): axis 2 is out of range for input 0 [2, 3]");
  EXPECT_REFUSED(load1(14, {2, 3}, {dsw::attr_int("axis", -3)}), DS_ERR_SHAPE, "axis -3 is out of range");
  EXPECT_REFUSED(load1(14, {2, 3}, {dsw::attr_int("axis", 9)}), DS_ERR_FORMAT, "axis 9 is outside -8..7");
  EXPECT_REFUSED(load1(14, {2, 3}, {}), DS_ERR_FORMAT, "node 'op' (concat): attribute 'axis' is missing");
  EXPECT_REFUSED(opt::load(opt::one_node(14, {{2, 3}, {3, 3}}, {}, {dsw::attr_int("axis", 1)})), DS_ERR_SHAPE,
                 "input 1 [3, 3] does not match input 0 [2, 3] outside axis 1");
  EXPECT_REFUSED(opt::load(opt::one_node(14, {{2, 3}, {2, 3, 1}}, {}, {dsw::attr_int("axis", 0)})), DS_ERR_SHAPE,
                 "does not match");
  // Every concat input is required: an absent one is a format error.
  dsw::File f = opt::one_node(14, {{2, 3}}, {}, {dsw::attr_int("axis", 0)});
  f.nodes[0].inputs.push_back(0xFFFFFFFFu);
  EXPECT_REFUSED(opt::load(f), DS_ERR_FORMAT, "node 'op' (concat): required input 1 is absent");
}

TEST(pad_bad_modes_and_pads) {
  EXPECT_REFUSED(load1(20, {2, 3}, {dsw::attr_ints("pads", {0, 1, 0, 1}), opt::attr_str("mode", "wrap")}),
                 DS_ERR_FORMAT, "node 'op' (pad): mode 'wrap' is not \"constant\", \"reflect\" or \"edge\"");
  EXPECT_REFUSED(load1(20, {2, 3}, {dsw::attr_ints("pads", {0, 1, 0})}), DS_ERR_FORMAT, "odd number of values");
  EXPECT_REFUSED(load1(20, {2, 3}, {dsw::attr_ints("pads", {0, -1, 0, 1})}), DS_ERR_FORMAT, "a pad -1 outside 0..2^20");
  EXPECT_REFUSED(load1(20, {2, 3}, {dsw::attr_ints("pads", {0, 1})}), DS_ERR_SHAPE,
                 "pads [0, 1] has 2 values, input [2, 3] needs 4");
  EXPECT_REFUSED(load1(20, {2, 3}, {dsw::attr_ints("pads", {0, 3, 0, 0}), opt::attr_str("mode", "reflect")}),
                 DS_ERR_SHAPE, "reflect pads 3 and 0 of axis 1 must be smaller than its size 3");
  EXPECT_REFUSED(load1(20, {2, 3}, {}), DS_ERR_FORMAT, "attribute 'pads' is missing");
  dsw::Attr mode_int = dsw::attr_int("mode", 1);
  EXPECT_REFUSED(load1(20, {2, 3}, {dsw::attr_ints("pads", {0, 1, 0, 1}), mode_int}), DS_ERR_FORMAT,
                 "attribute 'mode' has type 1 (int), expected 5 (string)");
}

TEST(resize_bad_modes_and_sizes) {
  const Dims x = {1, 1, 4, 4};
  EXPECT_REFUSED(load1(21, x, {dsw::attr_ints("sizes", {8, 8}), opt::attr_str("mode", "cubic")}), DS_ERR_FORMAT,
                 "node 'op' (resize): mode 'cubic' is not one of \"nearest\", \"linear\"");
  EXPECT_REFUSED(load1(21, x, {dsw::attr_ints("sizes", {8, 8}), opt::attr_str("coordinate_transformation_mode", "tf_crop_and_resize")}),
                 DS_ERR_FORMAT, "coordinate_transformation_mode 'tf_crop_and_resize' is not one of");
  EXPECT_REFUSED(load1(21, x, {dsw::attr_ints("sizes", {8, 8}), opt::attr_str("nearest_mode", "round")}), DS_ERR_FORMAT,
                 "nearest_mode 'round' is not one of");
  EXPECT_REFUSED(load1(21, x, {dsw::attr_ints("sizes", {8, 0})}), DS_ERR_FORMAT, "output size 0 is outside");
  EXPECT_REFUSED(load1(21, x, {dsw::attr_ints("sizes", {1, 1, 8, 8})}), DS_ERR_FORMAT,
                 "attribute 'sizes' has 4 values, expected 2");
  EXPECT_REFUSED(load1(21, x, {}), DS_ERR_FORMAT, "attribute 'sizes' is missing");
  EXPECT_REFUSED(load1(21, {1, 4, 4}, {dsw::attr_ints("sizes", {8, 8})}), DS_ERR_SHAPE, "is not rank 4");
}

TEST(slice_bad_lengths_and_axes) {
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {1}), dsw::attr_ints("starts", {0, 1}), dsw::attr_ints("ends", {3})}),
                 DS_ERR_FORMAT, "node 'op' (slice): starts, ends and axes have 2, 1 and 1 values; they must have the same length");
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {1, 1}), dsw::attr_ints("starts", {0, 1}), dsw::attr_ints("ends", {3, 4})}),
                 DS_ERR_FORMAT, "axis 1 appears twice");
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {1, -1}), dsw::attr_ints("starts", {0, 1}), dsw::attr_ints("ends", {3, 4})}),
                 DS_ERR_SHAPE, "name axis 1 twice");
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {2}), dsw::attr_ints("starts", {0}), dsw::attr_ints("ends", {3})}),
                 DS_ERR_SHAPE, "axis 2 is out of range for input [2, 6]");
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {1}), dsw::attr_ints("starts", {4}), dsw::attr_ints("ends", {2})}),
                 DS_ERR_SHAPE, "axis 1 of input [2, 6] is sliced to 4..2, which is empty");
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {1}), dsw::attr_ints("ends", {2})}), DS_ERR_FORMAT,
                 "attribute 'starts' is missing");
  EXPECT_REFUSED(load1(24, {2, 6}, {dsw::attr_ints("axes", {1}), dsw::attr_ints("starts", {0}), dsw::attr_ints("ends", {2}),
                                    dsw::attr_ints("steps", {1})}),
                 DS_ERR_UNSUPPORTED_OP, "unknown attribute 'steps'");
}

TEST(activation_batchnorm_lrn_shuffle_errors) {
  EXPECT_REFUSED(load1(9, {2, 3}, {dsw::attr_int("kind", 8)}), DS_ERR_FORMAT,
                 "node 'op' (activation): attribute 'kind' is 8, not an activation code 0..7");
  EXPECT_REFUSED(load1(9, {2, 3}, {}), DS_ERR_FORMAT, "attribute 'kind' is missing");
  EXPECT_REFUSED(load1(9, {2, 3}, {dsw::attr_int("kind", 2), dsw::attr_int("alpha", 0)}), DS_ERR_FORMAT,
                 "attribute 'alpha' has type 1 (int), expected 2 (float)");
  EXPECT_REFUSED(load1(10, {2, 3}, {dsw::attr_int("activation", -1)}, {dsw::dense_tensor("k", {1}, {1})}), DS_ERR_FORMAT,
                 "node 'op' (add): attribute 'activation' is -1");
  EXPECT_REFUSED(load1(8, {2, 3}, {opt::attr_float("epsilon", -1)},
                       {dsw::dense_tensor("s", {3}, {1, 1, 1}), dsw::dense_tensor("b", {3}, {1, 1, 1}),
                        dsw::dense_tensor("m", {3}, {1, 1, 1}), dsw::dense_tensor("v", {3}, {1, 1, 1})}),
                 DS_ERR_FORMAT, "node 'op' (batchnorm): epsilon -1");
  EXPECT_REFUSED(load1(8, {2, 3}, {}, {dsw::dense_tensor("s", {3}, {1, 1, 1})}), DS_ERR_FORMAT,
                 "node 'op' (batchnorm): has 2 inputs, expected 5");
  EXPECT_REFUSED(load1(16, {1, 4, 2, 2}, {dsw::attr_int("size", 0)}), DS_ERR_FORMAT, "node 'op' (lrn): size 0");
  EXPECT_REFUSED(load1(16, {1, 4, 2, 2}, {}), DS_ERR_FORMAT, "attribute 'size' is missing");
  EXPECT_REFUSED(load1(17, {1, 6, 2, 2}, {dsw::attr_int("group", 4)}), DS_ERR_SHAPE,
                 "node 'op' (channel_shuffle): 6 channels of input [1, 6, 2, 2] do not split into 4 groups");
  EXPECT_REFUSED(load1(17, {1, 6, 2, 2}, {dsw::attr_int("group", 0)}), DS_ERR_FORMAT, "group 0 is < 1");
  EXPECT_REFUSED(load1(22, {1, 6, 2, 2}, {dsw::attr_int("keepdims", 1)}), DS_ERR_UNSUPPORTED_OP,
                 "node 'op' (global_avgpool): unknown attribute 'keepdims'");
}

TEST(new_ops_are_known_and_a_newer_id_is_not) {
  EXPECT_REFUSED(load1(34, {2, 3}, {}), DS_ERR_UNSUPPORTED_OP, "node 'op' has op id 34, which this runtime does not implement (it knows ids 1..33)");
}
