"""`deepslim convert MODEL.onnx -o MODEL.dsm`: ONNX to .dsm (fp32, optimized graph).

Needs numpy and onnx only. `build_convert_parser(subparsers)` adds the subcommand;
`convert_command(args)` runs it and returns the exit code. Errors are raised as ValueError /
FileNotFoundError / ImportError with a one-line message (the CLI prints them).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

__all__ = ["build_convert_parser", "convert_command", "parse_input_shape"]

_EXAMPLE = "images=1,3,640,640"


def build_convert_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `convert` subcommand to an argparse subparsers object; returns its parser."""
    s = subparsers.add_parser(
        "convert", help="convert an ONNX model to a .dsm file",
        description="Convert an ONNX model (opsets 7-21) to a dense fp32 .dsm: constant shape arithmetic "
        "is folded, the graph is optimized (dead nodes, identities, activation fusion) and written. "
        "A dynamic batch dimension stays dynamic; other dynamic dimensions need --input-shape. "
        "Needs the onnx package (not torch).",
    )
    s.add_argument("model", help="the .onnx file")
    s.add_argument("-o", "--output", required=True, metavar="MODEL.dsm", help="the .dsm file to write")
    s.add_argument(
        "--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
        help=f"full shape of graph input NAME, fixing its dynamic dimensions (e.g. {_EXAMPLE}); "
        "a dynamic batch (dim 0) stays dynamic whatever is given for it; repeat for several inputs",
    )
    s.add_argument("--no-optimize", action="store_true", help="write the graph as converted, without graph passes")
    s.add_argument("--tune", metavar="THREADS", nargs="?", const="1", default=None,
                   help="then time each node's kernels on this machine and cache the fastest beside the .dsm, "
                   "for these thread counts (e.g. 1,2; default 1); see deepslim tune")
    s.set_defaults(func=convert_command)
    return s


def parse_input_shape(text: str) -> tuple[str, list[int]]:
    """'NAME=1,3,640,640' -> ('NAME', [1, 3, 640, 640]); ValueError with a one-line reason otherwise."""
    name, sep, dims = text.rpartition("=")
    bad = f"--input-shape {text!r}: expected NAME=D0,D1,... with integer dims, e.g. {_EXAMPLE}"
    if not sep or not name.strip() or not dims.strip():
        raise ValueError(bad)
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        raise ValueError(bad) from None
    if any(d < 1 and not (i == 0 and d == -1) for i, d in enumerate(shape)):
        raise ValueError(f"--input-shape {text!r}: dims must be >= 1 (dim 0 may be -1)")
    return name.strip(), shape


def convert_command(args: argparse.Namespace) -> int:
    shapes: dict[str, list[int]] = {}
    for text in args.input_shape or []:
        name, shape = parse_input_shape(text)
        if name in shapes:
            raise ValueError(f"--input-shape given twice for {name!r}")
        shapes[name] = shape
    src = Path(args.model)
    if not src.is_file():
        raise FileNotFoundError(f"ONNX model {str(src)!r} does not exist")
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ImportError("deepslim convert needs the onnx package: pip install onnx") from None

    from deepslim.format import write_dsm
    from deepslim.frontends.onnx import from_onnx
    from deepslim.ir.passes import optimize

    graph = from_onnx(src, input_shapes=shapes)
    converted = len(graph.nodes)
    if not args.no_optimize:
        graph = optimize(graph)
    report = write_dsm(graph, args.output)
    params = sum(math.prod(v.shape) for v in graph.constants())
    ops: dict[str, int] = {}
    for n in graph.nodes:
        ops[n.op] = ops.get(n.op, 0) + 1
    io = ", ".join(f"{name} {list(graph.values[name].shape)}" for name in graph.inputs)
    out = ", ".join(f"{name} {list(graph.values[name].shape)}" for name in graph.outputs)
    nodes = f"{len(graph.nodes)} nodes" + ("" if args.no_optimize else f" ({converted} before optimize)")
    print(f"wrote {args.output}: {nodes}, {params:,} params, {report.file_size:,} bytes")
    print(f"  inputs: {io}; outputs: {out}")
    print("  ops: " + ", ".join(f"{op} {k}" for op, k in sorted(ops.items(), key=lambda kv: -kv[1])))
    if args.tune:
        from deepslim.cli import _int_list
        from deepslim.runtime.tune import format_result, tune

        for threads in _int_list(args.tune, "--tune"):
            print(format_result(tune(args.output, threads=threads, progress=True)))
    return 0
