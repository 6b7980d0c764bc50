"""The `deepslim` command. Each subcommand imports what it needs, so `run` and `inspect` work
without torch installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from deepslim.runtime import Session

    x = _load_npy(args.input)
    with Session(args.model, threads=args.threads) as session:
        if x.ndim == len(session.input_shapes[0]) - 1:
            x = x[None]  # a single example without its batch dimension
        y = session.run(x)
    if args.output:
        np.save(args.output, y)
        print(f"wrote {args.output} {list(y.shape)}")
        return 0
    if y.ndim == 2:
        for b, row in enumerate(y):
            top = np.argsort(-row)[:5]
            ranked = ", ".join(f"{int(c)}: {row[c]:.4f}" for c in top)
            print(f"[{b}] top-5 (class: score): {ranked}")
    else:
        print(f"output {list(y.shape)}:\n{y}")
    return 0


def _load_npy(path: str):
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"input file {path!r} does not exist (expected a .npy array, float32 NCHW)")
    try:
        return np.load(p, allow_pickle=False).astype(np.float32, copy=False)
    except ValueError as e:
        raise ValueError(f"{path!r} is not a readable .npy array: {e}") from None


def _cmd_inspect(args: argparse.Namespace) -> int:
    from deepslim.format.inspect import format_inspect

    print(format_inspect(args.model))
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from deepslim.analyze import analyze, format_analysis

    graph = _graph_for(args.model, batch=1)
    print(format_analysis(analyze(graph)))
    return 0


def _graph_for(model: str, batch: int = 1):
    """An IR graph for a .dsm file or a zoo model name."""
    if model.endswith(".dsm"):
        from deepslim.format.dsm import read_dsm

        return read_dsm(model)
    import torch

    from deepslim import zoo
    from deepslim.frontends.torch import from_torch

    net = zoo.get(model).eval()
    return from_torch(net, torch.zeros(batch, *net.input_shape))


def _cmd_train(args: argparse.Namespace) -> int:
    from deepslim.workflow import train_command

    return train_command(args)


def _cmd_compress(args: argparse.Namespace) -> int:
    from deepslim.workflow import compress_command

    return compress_command(args)


def _cmd_export(args: argparse.Namespace) -> int:
    from deepslim.workflow import export_command

    return export_command(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    import json

    from deepslim.bench.run import as_json, bench, format_profile, format_results, profile_nodes

    batches = _int_list(args.batch, "--batch")
    if args.profile:
        for batch in batches:
            print(f"model {args.model}, batch {batch}, threads {args.threads}: time per node (mean of 50 runs)")
            print(format_profile(profile_nodes(args.model, threads=args.threads, batch=batch)))
        return 0
    vs = [] if args.vs.strip() in ("", "none") else [v.strip() for v in args.vs.split(",") if v.strip()]
    results = bench(args.model, threads=args.threads, batches=batches, vs=vs, seconds=args.seconds, tune=args.tune)
    print(format_results(results, args.model))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(as_json(results), indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


def _int_list(text: str, what: str) -> list[int]:
    if text == "sweep":
        return [1, 2, 4, 8, 16, 32, 64, 128, 256]
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected whole numbers separated by commas, or 'sweep'") from None
    if not values or min(values) < 1:
        raise ValueError(f"{what} {text!r}: values must be >= 1")
    return values


def _cmd_tune(args: argparse.Namespace) -> int:
    from deepslim.runtime.tune import format_result, tune

    path = Path(args.model)
    if path.suffix != ".dsm":
        raise ValueError(f"{args.model!r} is not a .dsm file (make one with deepslim convert or deepslim export)")
    if not path.is_file():
        raise FileNotFoundError(f"model file {args.model!r} does not exist")
    for threads in _int_list(args.threads, "--threads"):
        result = tune(path, threads=threads, rounds=args.rounds, write_cache=not args.dry_run, progress=True)
        print(format_result(result))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from deepslim.demo import run_demo

    run_demo(args)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="deepslim",
        description="Make a trained CNN small (pruning, weight sharing, Huffman coding) and run it "
        "with the deepslim native runtime.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("demo", help="train, compress and run LeNet-300-100 and LeNet-5 on Fashion-MNIST",
                       description="The built-in end-to-end example: trains LeNet-300-100 and LeNet-5 on "
                       "Fashion-MNIST (or reuses cached checkpoints), compresses both with pruning, k-means "
                       "weight sharing and Huffman coding, writes .dsm files, evaluates them in the native "
                       "runtime on the 10,000 test images and prints a table (also results/demo.json).")
    s.add_argument("--data", metavar="DIR", help="folder with the four Fashion-MNIST .gz files "
                   "(default: $DEEPSLIM_DATA, ~/.cache/deepslim/fashion-mnist, /usr/share/datasets/fashion-mnist)")
    s.add_argument("--out", metavar="DIR", default="results", help="where .dsm files and demo.json go (default: results)")
    s.add_argument("--models", default="lenet300,lenet5", help="comma-separated zoo models (default: lenet300,lenet5)")
    s.add_argument("--retrain", action="store_true", help="ignore cached checkpoints and train again")
    s.set_defaults(func=_cmd_demo)

    s = sub.add_parser("train", help="train a zoo model on Fashion-MNIST and save a checkpoint",
                       description="Train a zoo model on Fashion-MNIST with a fixed seed; saves a checkpoint.")
    s.add_argument("model", help="zoo model name, e.g. lenet5, lenet300")
    s.add_argument("--data", metavar="DIR", help="Fashion-MNIST folder (see `deepslim demo --help`)")
    s.add_argument("--epochs", type=int, default=None, help="training epochs (default: the model's own)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    s.add_argument("-o", "--output", metavar="CKPT", help="checkpoint path (default: the checkpoint cache)")
    s.set_defaults(func=_cmd_train)

    s = sub.add_parser("compress", help="prune, share weights, quantize and Huffman-code a model into a .dsm",
                       description="Run a compression recipe (YAML: pruning, k-means weight sharing, int8 "
                       "quantization with optional QAT, Huffman coding) on a trained zoo model and write the "
                       "compressed .dsm. With a `quantize:` section the .dsm holds int8 ops (as from `deepslim "
                       "quantize`), its pruned weights still stored sparse where that is smaller.")
    s.add_argument("model", help="zoo model name")
    s.add_argument("--recipe", required=True, metavar="YAML", help="compression recipe, e.g. deepslim/recipes/lenet5.yaml")
    s.add_argument("--checkpoint", metavar="CKPT", help="trained checkpoint (default: train or reuse the cached one)")
    s.add_argument("--data", metavar="DIR", help="Fashion-MNIST folder")
    s.add_argument("-o", "--output", required=True, metavar="OUT.dsm", help="the compressed model file")
    from deepslim.quantize_cmd import add_fallback_arguments

    add_fallback_arguments(s)
    s.set_defaults(func=_cmd_compress)

    s = sub.add_parser("export", help="write a trained zoo model as an uncompressed fp32 .dsm",
                       description="Export a zoo model (trained checkpoint or random weights) to a dense fp32 .dsm.")
    s.add_argument("model", help="zoo model name")
    s.add_argument("--checkpoint", metavar="CKPT", help="trained checkpoint (default: random weights, seed 0)")
    s.add_argument("-o", "--output", required=True, metavar="OUT.dsm")
    s.set_defaults(func=_cmd_export)

    from deepslim.convert import build_convert_parser
    from deepslim.quantize_cmd import build_quantize_parser

    build_convert_parser(sub)
    build_quantize_parser(sub)

    s = sub.add_parser("bench", help="time our runtime beside PyTorch, ONNX Runtime, OpenVINO and ncnn",
                       description="Run our runtime and the peers on the same model, input and thread count. "
                       "Engines are interleaved round by round, warmed up, and each peer's output is checked "
                       "against ours before it is timed. Prints median and p10/p90 ms and each peer's ratio "
                       "to ours (> 1: we are faster). Peers that are not installed are skipped with a note.")
    s.add_argument("model", help="a zoo model name (random weights, seed 0), an .onnx file or a .dsm file")
    s.add_argument("--threads", type=int, default=1, help="threads for every engine (default: 1)")
    s.add_argument("--batch", default="1", help="batch sizes, e.g. 1,4,16, or 'sweep' for 1,2,4,...,256 (default: 1)")
    s.add_argument("--vs", default="onnxruntime,openvino,ncnn,pytorch",
                   help="peers to compare with, comma-separated, or 'none' (default: all four)")
    s.add_argument("--seconds", type=float, default=3.0, help="timing budget per batch size (default: 3)")
    s.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    s.add_argument("--profile", action="store_true",
                   help="instead of comparing engines, time each node of our runtime and print the slowest")
    s.add_argument("--tune", action="store_true",
                   help="first tune our kernel choices for this thread count (deepslim tune) unless the model's "
                   "tuning cache already has them")
    s.set_defaults(func=_cmd_bench)

    s = sub.add_parser("tune", help="time each node's kernel choices in-model and cache the fastest beside the model",
                       description="For every node whose op has several kernels (conv2d: gemm, pixels, "
                       "winograd (F(4x4,3x3)), winograd23 (F(2x2,3x3))), time each kernel inside the whole "
                       "model on this CPU (sessions interleaved round by round, outputs checked against the op "
                       "rules' output) and keep the fastest. "
                       "The choices go to MODEL.dsm.tune.json, per CPU model, SIMD level and thread count; "
                       "deepslim.runtime.Session (and everything built on it) uses them from then on.")
    s.add_argument("model", help="the .dsm file")
    s.add_argument("--threads", default="1", help="thread counts to tune for, e.g. 1,2 (default: 1)")
    s.add_argument("--rounds", type=int, default=7, help="timing rounds per kernel (default: 7; medians are kept)")
    s.add_argument("--dry-run", action="store_true", help="measure and print, but do not write the cache")
    s.set_defaults(func=_cmd_tune)

    s = sub.add_parser("run", help="run a .dsm model on an input .npy", description="Run a .dsm model in the "
                       "native runtime. Prints the top-5 classes per example unless --output is given.")
    s.add_argument("model", help="the .dsm file")
    s.add_argument("--input", required=True, metavar="IN.npy", help="float32 array, NCHW (batch optional)")
    s.add_argument("--output", metavar="OUT.npy", help="save the output array here instead of printing top-5")
    s.add_argument("--threads", type=int, default=1, help="worker threads (default: 1)")
    s.set_defaults(func=_cmd_run)

    s = sub.add_parser("inspect", help="show a .dsm file's graph, tensors, encodings and size breakdown",
                       description="Print a .dsm file's graph and a per-layer size table: dense fp32 bytes, "
                       "after pruning, after weight sharing, after Huffman coding, and the ratio.")
    s.add_argument("model", help="the .dsm file")
    s.set_defaults(func=_cmd_inspect)

    s = sub.add_parser("analyze", help="per-layer params, MACs, bytes, activation memory and energy",
                       description="Per-layer cost table for a .dsm file or a zoo model: params, MACs, weight "
                       "bytes, output activation bytes, and an energy estimate (45 nm constants in the legend).")
    s.add_argument("model", help="a .dsm file or a zoo model name (e.g. facenet1m)")
    s.set_defaults(func=_cmd_analyze)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("deepslim: interrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError, KeyError, RuntimeError, ImportError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"deepslim {args.command}: error: {msg}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
