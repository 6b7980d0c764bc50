"""docs/ops.md is generated from the IR's op specs; this test fails when it is stale.

Regenerate with `python tests/test_ops_doc.py`.
"""

import ast
import sys
from pathlib import Path

from deepslim.ir.graph import OPS
from deepslim.ir.ops import OP_SPECS, REQUIRED
from deepslim.quant.quantize import I16_MOVEMENT_OPS, MOVEMENT_OPS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ops.md"

# Front ends: an op counts as produced by one when its name is a string literal in its code.
SOURCES = {
    "PyTorch": ["deepslim/frontends/torch.py"],
    "ONNX": ["deepslim/frontends/onnx.py", "deepslim/frontends/onnx_ops.py"],
}

# Element types of the quantized ops (docs/format.md, "Quantized inference"): inputs -> output.
QUANT_DTYPES = {
    "quantize": "f32 -> u8 or i16",
    "dequantize": "u8 or i16 -> f32",
    "qconv2d": "u8 or i16, i8 weight, i32 bias/multiplier/shift -> u8 or i16",
    "qdense": "u8 or i16, i8 weight, i32 bias/multiplier/shift -> u8 or i16",
    "qadd": "u8, u8 -> u8",
    "qconcat": "u8 ... -> u8",
    "qlut": "u8, u8 table -> u8",
    "qglobal_avgpool": "u8 -> u8",
    "requantize": "u8 or i16 -> u8 or i16",
}


def _dtypes(op: str) -> str:
    if op in QUANT_DTYPES:
        return QUANT_DTYPES[op]
    if op in I16_MOVEMENT_OPS:
        return "f32, or u8 or i16 (same scale and zero point)"
    if op in MOVEMENT_OPS or op == "concat":
        return "f32, or u8 (same scale and zero point)"
    return "f32"


def _literals(paths: list[str]) -> set[str]:
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def _attr(key, spec) -> str:
    if spec.default is REQUIRED:
        default = "required"
    elif spec.default is None:
        default = "= kernel"
    else:
        default = f"= {spec.default}"
    length = f"[{spec.length}]" if spec.length else ""
    return f"`{key}` {spec.kind}{length} {default}"


def render() -> str:
    sources = {name: _literals(paths) for name, paths in SOURCES.items()}
    lines = [
        "# Ops of the IR and the .dsm format",
        "",
        "Generated from `deepslim/ir/ops.py` (OP_SPECS) and `deepslim/ir/graph.py` (OPS) by",
        "`python tests/test_ops_doc.py`; `tests/test_ops_doc.py` fails when this file is stale. Semantics",
        "are in docs/format.md (\"ops\", \"Quantized inference\"). \"produced by\": the front ends whose",
        "code names the op (graph passes may also make one, e.g. ONNX's reshape-transpose-reshape becomes",
        "`channel_shuffle` in `optimize()`), and `quantize_graph` for the int8 ops. Optional inputs are in",
        "brackets; `x1 ... x254` are the further inputs of a variadic op.",
        "",
        "| id | op | inputs | attributes | dtypes | produced by |",
        "|---:|---|---|---|---|---|",
    ]
    for op, op_id in sorted(OPS.items(), key=lambda kv: kv[1]):
        spec = OP_SPECS[op]
        optional = list(spec.optional)
        if len(optional) > 3:
            optional = [optional[0], "...", optional[-1]]
        inputs = ", ".join(spec.inputs) + (", [" + ", ".join(optional) + "]" if optional else "")
        attrs = "; ".join(_attr(k, a) for k, a in spec.attrs.items()) or "none"
        producers = [name for name, found in sources.items() if op in found]
        if op in QUANT_DTYPES:
            producers.append("`deepslim quantize` (quantize_graph)")
        producers = ", ".join(producers) or "-"
        lines.append(f"| {op_id} | `{op}` | {inputs} | {attrs} | {_dtypes(op)} | {producers} |")
    return "\n".join(lines) + "\n"


def test_ops_doc_is_current():
    assert set(OPS) == set(OP_SPECS), "every op id needs a spec"
    assert DOC.read_text() == render(), "docs/ops.md is stale: run `python tests/test_ops_doc.py`"


def test_every_op_is_produced_by_something_and_int8_ops_have_dtypes():
    text = render()
    for op in OPS:
        row = next(line for line in text.splitlines() if f"| `{op}` |" in line)
        assert not row.endswith("| - |"), f"no front end or quantize_graph produces {op}"
    assert all(op in OPS for op in QUANT_DTYPES)
    assert {op for op in OPS if op.startswith("q") or op.endswith("quantize")} == set(QUANT_DTYPES)


if __name__ == "__main__":
    DOC.write_text(render())
    print(f"wrote {DOC}", file=sys.stderr)
