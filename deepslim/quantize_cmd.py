"""`deepslim quantize MODEL.onnx|MODEL.dsm --calib SAMPLES.npy -o OUT.dsm`: post-training int8
(`--int16 NODE` / `--activation-bits 16`: i16 activations for some or all conv/dense layers).

Needs numpy (and onnx for an ONNX model) only. `build_quantize_parser(subparsers)` adds the
subcommand; `quantize_command(args)` runs it and returns the exit code. Errors are raised as
ValueError / FileNotFoundError / ImportError with a one-line message (the CLI prints them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_fallback_arguments", "build_quantize_parser", "load_float_graph", "print_fallback", "quantize_command",
           "resolve_fallback"]


def build_quantize_parser(subparsers) -> argparse.ArgumentParser:
    """Add the `quantize` subcommand to an argparse subparsers object; returns its parser."""
    s = subparsers.add_parser(
        "quantize", help="post-training int8 quantization of an ONNX or fp32 .dsm model",
        description="Quantize a model to int8: u8 activations (per tensor, asymmetric) calibrated on "
        "SAMPLES.npy, i8 weights (per output channel, symmetric), i32 biases, exact fixed-point "
        "requantization; --int16 / --activation-bits 16 give conv/dense layers i16 output activations. "
        "A .dsm model keeps its pruning (sparse layout) and is stored in the smallest "
        "encoding. Needs numpy (and onnx for an .onnx model), not torch.",
    )
    s.add_argument("model", help="the .onnx or fp32 .dsm file")
    s.add_argument("--calib", required=True, metavar="SAMPLES.npy",
                   help="calibration inputs, float32 (N, ...) in the model's input layout (a few hundred)")
    s.add_argument("-o", "--output", required=True, metavar="OUT.dsm", help="the quantized .dsm to write")
    s.add_argument("--method", default="minmax", choices=("minmax", "percentile", "kl", "mse"),
                   help="how activation ranges are chosen from the calibration statistics (default minmax)")
    s.add_argument("--percentile", type=float, default=99.99, help="percentile of --method percentile (default 99.99)")
    s.add_argument("--weight-bits", type=int, default=8, choices=(8, 4), help="8, or 4 for int4 weights")
    s.add_argument("--keep-fp32", action="append", default=[], metavar="NODE",
                   help="keep this node in float (repeat for several)")
    s.add_argument("--int16", action="append", default=[], metavar="NODE",
                   help="run this conv/dense node 16x8: i8 weights, i16 output activation (256x finer steps "
                   "than u8); a sensitive layer kept this way stays 4x smaller than in fp32 (repeat for several)")
    s.add_argument("--activation-bits", type=int, default=8, choices=(8, 16),
                   help="8 (default): u8 activations; 16: every conv/dense node runs 16x8 as with --int16 "
                   "(adds, tables and average pools stay u8)")
    s.add_argument("--samples", type=int, default=None, metavar="N", help="use only the first N calibration inputs")
    s.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="for an ONNX model: fix dynamic dimensions of input NAME, as in `deepslim convert`")
    add_fallback_arguments(s)
    s.set_defaults(func=quantize_command)
    return s


def add_fallback_arguments(s: argparse.ArgumentParser) -> None:
    """--fallback and --threads, shared with `deepslim compress`."""
    s.add_argument("--fallback", choices=("measure", "none"), default=None,
                   help="measure: time the fp32 and int8 models in the native runtime (batch 1, on the first "
                   "calibration input) and keep in fp32 every conv/dense layer whose int8 time is more than "
                   "10%% and 2 us slower than its fp32 time, then return to int8 each fp32 island whose "
                   "quantize/dequantize border makes it no faster (at most two re-quantizations); the "
                   "decision is stored in the .dsm and shown by `deepslim inspect`. none: quantize every layer that can be. "
                   "Default: measure when the runtime library loads, else none (with a note)")
    s.add_argument("--threads", type=int, default=1, help="runtime threads for --fallback measure (default 1)")


def resolve_fallback(choice: str | None, threads: int) -> str:
    """'measure' or 'none': the default is 'measure' when the runtime loads (a note otherwise)."""
    from deepslim.quant.fallback import runtime_available

    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"--threads must be >= 1, got {threads}")
    if choice == "none":
        return "none"
    problem = runtime_available()
    if problem is None:
        return "measure"
    if choice == "measure":
        raise ImportError(f"--fallback measure needs the native runtime: {problem}")
    print(f"note: the native runtime did not load, so no per-layer fp32 fallback was measured "
          f"(--fallback none): {problem}")
    return "none"


def print_fallback(report) -> None:
    kept = report.keep_fp32
    print(f"  fallback: timed {len(report.nodes)} conv/dense layers at {report.threads} thread(s), "
          f"{report.rounds} re-quantization(s); "
          f"{len(kept)} kept in fp32 (quantized form slower)" + (":" if kept else ""))
    for name in kept:
        print(f"    {name}: {report.nodes[name].describe()}")
    print(f"  whole model (sum of node times): fp32 {report.fp32_total_ms:.3f} ms, int8 before the fallback "
          f"{report.int8_total_ms:.3f} ms")


def load_float_graph(path: str | Path, input_shapes: dict[str, list[int]] | None = None):
    """The optimized fp32 IR graph of an .onnx or .dsm file."""
    from deepslim.ir.passes import optimize

    src = Path(path)
    if not src.is_file():
        raise FileNotFoundError(f"model {str(src)!r} does not exist")
    if src.suffix.lower() == ".dsm":
        from deepslim.format import read_dsm

        graph = read_dsm(src)
        if any(v.dtype != "f32" for v in graph.values.values()):
            raise ValueError(f"{str(src)!r} is already quantized (it holds non-f32 values)")
        return optimize(graph)
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise ImportError("deepslim quantize needs the onnx package for an .onnx model: pip install onnx") from None
    from deepslim.frontends.onnx import from_onnx

    return optimize(from_onnx(src, input_shapes=input_shapes or {}))


def quantize_command(args: argparse.Namespace) -> int:
    import numpy as np

    from deepslim.convert import parse_input_shape
    from deepslim.format import encode_dsm, write_dsm
    from deepslim.quant import quantize_graph
    from deepslim.quant.calibrate import calibrate_graph
    from deepslim.quant.quantize import prepare_graph

    shapes = dict(parse_input_shape(t) for t in args.input_shape or [])
    graph = load_float_graph(args.model, shapes)
    calib_path = Path(args.calib)
    if not calib_path.is_file():
        raise FileNotFoundError(f"calibration file {args.calib!r} does not exist (expected a .npy array)")
    try:
        calib = np.load(calib_path, allow_pickle=False).astype(np.float32, copy=False)
    except ValueError as e:
        raise ValueError(f"{args.calib!r} is not a readable .npy array: {e}") from None
    if args.samples is not None:
        if args.samples < 1:
            raise ValueError(f"--samples must be >= 1, got {args.samples}")
        calib = calib[: args.samples]
    want = graph.values[graph.inputs[0]].shape
    if calib.ndim == len(want) - 1:
        calib = calib[None]
    if calib.ndim != len(want) or any(w not in (-1, d) for w, d in zip(want[1:], calib.shape[1:])):
        raise ValueError(f"calibration inputs have shape {list(calib.shape)}; the model's input is {list(want)}")
    fallback = resolve_fallback(args.fallback, args.threads)
    # calibrate once: the fallback may quantize up to three times with the same ranges
    ranges = calibrate_graph(prepare_graph(graph), calib, args.method, args.percentile)

    def quantize(keep: list[str]):
        return quantize_graph(graph, ranges=ranges, keep_fp32=keep, weight_bits=args.weight_bits,
                              int16=[n for n in args.int16 if n not in keep], activation_bits=args.activation_bits)

    fallback_report = None
    if fallback == "measure":
        from deepslim.quant.fallback import quantize_with_fallback

        q, fallback_report = quantize_with_fallback(graph, quantize, calib[:1], threads=args.threads,
                                                    keep_fp32=args.keep_fp32)
    else:
        q = quantize(list(args.keep_fp32))
    fp32_bytes = len(encode_dsm(graph)[0])
    report = write_dsm(q, args.output)
    ops: dict[str, int] = {}
    for n in q.nodes:
        ops[n.op] = ops.get(n.op, 0) + 1
    print(f"wrote {args.output}: {len(q.nodes)} nodes, {report.file_size:,} bytes "
          f"({report.file_size / fp32_bytes:.3f}x the fp32 .dsm of {fp32_bytes:,} bytes)")
    wide = sum(q.values[n.outputs[0]].dtype == "i16" for n in q.nodes if n.op in ("qconv2d", "qdense"))
    print(f"  calibration: {len(calib)} inputs, method {args.method}; weights int{args.weight_bits}"
          + (f"; {wide} conv/dense layer(s) with i16 activations" if wide else ""))
    print("  ops: " + ", ".join(f"{op} {k}" for op, k in sorted(ops.items(), key=lambda kv: -kv[1])))
    if fallback_report is not None:
        print_fallback(fallback_report)
    return 0
