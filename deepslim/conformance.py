"""Run the onnx package's own node test cases through deepslim's ONNX backend (native runtime).

`cases()` lists the cases of the ops deepslim supports, each with its verdict: in scope, or out of
scope with the reason. `run_case()` runs one and raises AssertionError on a wrong answer. The test
suite runs every in-scope case; `python -m deepslim.conformance` prints the pass count per op.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

# ONNX ops the front end maps (docs/ops.md); a node test of any other op is not listed.
SUPPORTED_OPS = (
    "Conv ConvTranspose Gemm MatMul MaxPool AveragePool GlobalAveragePool GlobalMaxPool "
    "BatchNormalization Relu Clip LeakyRelu Sigmoid HardSigmoid HardSwish Tanh Add Sub Mul Div Sum "
    "Concat LRN Flatten Reshape Transpose Squeeze Unsqueeze Pad Resize Upsample Softmax Dropout "
    "Identity Slice Split"
).split()

# Cases outside the op contract (docs/format.md) that the front end refuses with a clear error:
# (name pattern, reason). A test checks that each of them is refused, never answered wrongly.
REFUSED: list[tuple[str, str]] = [
    (r"(pool|conv).*_(1d|3d)", "1-D and 3-D convolution and pooling: the runtime's spatial ops are 2-D (NCHW)"),
    (r"cubic", "cubic resize: the op set has nearest and linear"),
    (r"tf_crop_and_resize", "tf_crop_and_resize: not in the op set"),
    (r"half_pixel_symmetric", "half_pixel_symmetric coordinates (opset 19): not in the op set"),
    (r"not_larger|not_smaller", "keep_aspect_ratio_policy (opset 18): only stretch"),
    (r"antialias", "antialiased resize (opset 18): not in the op set"),
    (r"resize_downsample_scales_(linear|nearest)", "scales that give a fractional size: ONNX maps with "
     "the unrounded size, the IR with whole sizes"),
    (r"averagepool_2d_dilations", "dilated average pooling (opset 19): not in the op set"),
    (r"training_mode", "BatchNormalization in training mode: inference only"),
    (r"convtranspose_output_shape", "an output_shape that needs negative padding"),
    (r"gemm_all_attributes|gemm_transposeA", "Gemm with transA=1: the activation must not be transposed"),
    (r"gemm_default_matrix_bias", "Gemm with a 2-D bias: the dense op takes a per-output bias"),
    (r"matmul_(4d|3d|bcast|1d)", "MatMul with a weight of rank other than 2: dense takes a 2-D weight"),
    (r"reshape_allowzero_reordered|slice_start_out_of_bounds|split_zero_size", "empty tensors"),
    (r"slice_neg_steps", "Slice with steps other than 1"),
]


@dataclass
class Case:
    name: str
    op: str
    model: object
    data_sets: list
    rtol: float
    atol: float
    out_of_scope: str | None  # the reason, or None when the case must pass
    refused: bool = False  # out of the op contract: the front end must refuse it with an error


def _scope_rule(case) -> str | None:
    """Rules that put whole groups of cases out of scope; None when the case is in scope."""
    graph = case.model.graph
    if case.name.endswith("_expanded") or "_expanded_" in case.name:
        return "expanded function body: its ops are tested one by one in their own cases"
    if len(graph.node) != 1:
        return "multi-node case (ops outside the supported set)"
    float_types = {1}  # FLOAT
    for vi in list(graph.input) + list(graph.output):
        t = vi.type.tensor_type.elem_type
        if vi.type.HasField("sequence_type") or vi.type.HasField("optional_type"):
            return "sequence/optional values: the runtime computes on tensors only"
        if t not in float_types and vi in graph.output:
            return f"{_type_name(t)} output: the runtime computes in float32"
    data_inputs = [vi for vi in graph.input if vi.type.tensor_type.elem_type in float_types]
    others = [vi for vi in graph.input if vi.type.tensor_type.elem_type not in float_types]
    for vi in others:
        if vi.type.tensor_type.elem_type not in (6, 7):  # INT32, INT64: shapes/axes bound as constants
            return f"{_type_name(vi.type.tensor_type.elem_type)} input: the runtime computes in float32"
    if not data_inputs:
        return "no float32 input: nothing runs on the device"
    return None


def _type_name(t: int) -> str:
    import onnx

    return onnx.TensorProto.DataType.Name(t).lower()


def cases() -> list[Case]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = collect_testcases()
    out = []
    for c in raw:
        if c.model is None or not c.data_sets:
            continue
        ops = {n.op_type for n in c.model.graph.node}
        main = c.model.graph.node[-1].op_type
        if main not in SUPPORTED_OPS or not ops & set(SUPPORTED_OPS):
            continue
        refused = next((why for pattern, why in REFUSED if re.search(pattern, c.name)), None)
        reason = _scope_rule(c) or refused
        out.append(Case(c.name, main, c.model, c.data_sets, c.rtol, c.atol, reason, refused is not None))
    return sorted(out, key=lambda c: c.name)


def run_case(case: Case) -> None:
    from deepslim.backend import DeepslimBackend

    rep = DeepslimBackend.prepare(case.model)
    for inputs, expected in case.data_sets:
        outputs = rep.run(inputs)
        assert len(outputs) >= len(expected), f"{case.name}: {len(outputs)} outputs, expected {len(expected)}"
        for got, want in zip(outputs, expected):
            want = np.asarray(want)
            assert got.shape == want.shape, f"{case.name}: shape {got.shape}, expected {want.shape}"
            np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5),
                                       err_msg=case.name)


def report() -> str:
    passed: Counter = Counter()
    failed: dict[str, list[str]] = defaultdict(list)
    skipped: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for case in cases():
        if case.out_of_scope:
            skipped[case.op].append((case.name, case.out_of_scope))
            continue
        try:
            run_case(case)
            passed[case.op] += 1
        except Exception as e:  # noqa: BLE001 - the report lists every failure with its message
            failed[case.op].append(f"{case.name}: {str(e).splitlines()[0][:160]}")
    lines = ["| ONNX op | passed | failed | out of scope |", "|---|---:|---:|---:|"]
    for op in SUPPORTED_OPS:
        lines.append(f"| {op} | {passed[op]} | {len(failed[op])} | {len(skipped[op])} |")
    lines.append(f"| **total** | {sum(passed.values())} | {sum(map(len, failed.values()))} | "
                 f"{sum(map(len, skipped.values()))} |")
    lines.append("\nFailures:" if failed else "\nNo failures.")
    for op in failed:
        lines += [f"- {m}" for m in failed[op]]
    lines.append("\nOut of scope:")
    for op in skipped:
        lines += [f"- {n}: {r}" for n, r in skipped[op]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report() + "\n")
