"""Post-training and quantization-aware int8 accuracy of a zoo model on Fashion-MNIST.

    .venv/bin/python tools/quant_accuracy.py --width 1.0 --threads 1 --engine runtime
    .venv/bin/python tools/quant_accuracy.py --width 0.5 --methods minmax,percentile,mse --skip qat

The protocol of docs/quantization.md ("Results: PTQ and QAT"):

  fp32       the model trained by `deepslim.train.train_or_load` (Adam, lr --lr, cosine, --epochs
             epochs, batch 128, seed 0, on the first 55,000 training images; the last 5,000 are the
             validation split) and cached under the name MODEL (width 1.0) or MODEL-wWIDTH, so a
             second run, or a run after an interruption of the stages that follow, reuses it.
  PTQ sim    `prepare_qat` + `calibrate` on the first --calib training images (minmax), evaluated in
             PyTorch (fake quantization).
  PTQ int8   `quantize_graph(graph, calib=..., method=M)` + `run_quantized` (the bit-exact integer
             reference) for every M of --methods.
  QAT        `quantization_aware_training`: --qat-epochs epochs, Adam lr --qat-lr, observers and
             BatchNorm frozen after half an epoch; "QAT sim" is the fake-quantized model with the
             trained ranges, "QAT int8" is `quantize_graph(graph, ranges=complete_ranges(...))` +
             `run_quantized`. The fine-tuned weights and ranges are saved first, next to the JSON
             (.qat.pt), and --qat-checkpoint evaluates them again without training.

With --engine runtime the int8 graphs run in the native runtime instead of `run_quantized` (much
faster; the runtime is bit-exact with it, and the tool checks equal outputs on the first --check
test images of every graph). --skip leaves stages out, to run them as separate processes.

Accuracies are top-1 on the first --test images of the 10,000-image test set. Prints a markdown
table row (the columns of the table in docs/quantization.md) and writes every number, with the
times of each stage, to results/quant_accuracy-NAME-TIME.json; the JSON is rewritten after each
stage, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("fp32", "ptq-sim", "ptq", "qat")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__,
        epilog="The fp32 checkpoint is cached in $DEEPSLIM_CACHE/checkpoints (default ~/.cache/deepslim). "
               "Results: docs/quantization.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mobilenet_v2_fmnist", help="zoo model (default %(default)s)")
    p.add_argument("--width", type=float, default=None,
                   help="width multiplier passed as width_mult (default: the model's own; MobileNet V2: 1.0)")
    p.add_argument("--epochs", type=int, default=2, help="fp32 training epochs (default %(default)s)")
    p.add_argument("--lr", type=float, default=0.002, help="fp32 training learning rate (default %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch and BLAS threads (default %(default)s)")
    p.add_argument("--calib", type=int, default=1000, help="calibration images: the first N training images")
    p.add_argument("--test", type=int, default=10000, help="evaluate on the first N test images")
    p.add_argument("--val", type=int, default=None,
                   help="validation images reported during training and QAT: the first N of the 5,000 "
                        "(default all; they do not steer training)")
    p.add_argument("--methods", default="minmax,percentile,mse",
                   help="PTQ calibration methods for the int8 graph, comma-separated, from minmax, "
                        "percentile, kl, mse; empty for none (default %(default)s)")
    p.add_argument("--activation-bits", default="8",
                   help="PTQ activation widths, comma-separated: 8 (u8) and/or 16 (every conv/fc layer 16x8, "
                        "recorded as ptq_int16_METHOD) (default %(default)s)")
    p.add_argument("--skip", default="",
                   help="stages to leave out, comma-separated: fp32 (its test accuracy; the model is still "
                        "loaded or trained), ptq-sim, ptq (the int8 graphs of --methods), qat")
    p.add_argument("--qat-epochs", type=int, default=1, help="QAT epochs (default %(default)s)")
    p.add_argument("--qat-lr", type=float, default=1e-4, help="QAT learning rate (default %(default)s)")
    p.add_argument("--qat-train-samples", type=int, default=None,
                   help="QAT on this many (randomly chosen) training images per epoch (default: all)")
    p.add_argument("--train-samples", type=int, default=None,
                   help="train fp32 on the first N training images only (for quick checks; the checkpoint "
                        "is cached under its own key)")
    p.add_argument("--data", default=None, help="Fashion-MNIST folder (default: the usual search path)")
    p.add_argument("--engine", choices=("reference", "runtime"), default="reference",
                   help="int8 evaluation: the integer reference run_quantized (default), or the native "
                        "runtime (bit-exact with it, much faster), checked against run_quantized on the "
                        "first --check test images")
    p.add_argument("--check", type=int, default=200,
                   help="with --engine runtime: test images whose outputs must equal run_quantized's")
    p.add_argument("--qat-checkpoint", default=None,
                   help="the .qat.pt an earlier run saved: its fine-tuned weights and ranges instead of training")
    p.add_argument("--batch", type=int, default=500, help="images per run_quantized call (default %(default)s)")
    p.add_argument("--out", default=str(ROOT / "results"), help="folder of the JSON file (default %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    known = ("minmax", "percentile", "kl", "mse")
    bad = [m for m in methods if m not in known]
    if bad:
        p.error(f"unknown method(s) {bad}; known: {', '.join(known)}")
    args.methods = methods
    try:
        args.activation_bits = [int(b) for b in args.activation_bits.split(",") if b]
    except ValueError:
        p.error(f"--activation-bits takes 8 and/or 16, got {args.activation_bits!r}")
    if not args.activation_bits or set(args.activation_bits) - {8, 16}:
        p.error(f"--activation-bits takes 8 and/or 16, got {args.activation_bits}")
    args.skip = {x for x in args.skip.split(",") if x}
    bad = args.skip - set(STAGES)
    if bad:
        p.error(f"unknown stage(s) {sorted(bad)} in --skip; stages: {', '.join(STAGES)}")
    return args


def cache_name(model: str, width: float | None) -> str:
    """The train_or_load name: MODEL at the default width, MODEL-wWIDTH otherwise."""
    return model if width is None or width == 1.0 else f"{model}-w{width:g}"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def set_ranges(qm, ranges: dict[str, tuple[float, float]]) -> None:
    """Load activation ranges (as `convert` returns them) into the observers of a prepared model and
    freeze them and the BatchNorm statistics: the fake-quantized model QAT ended with."""
    from deepslim.compress.qat import act_quantizers, freeze_bn, freeze_observers

    for fq in act_quantizers(qm):
        if fq.value_name in ranges:
            lo, hi = ranges[fq.value_name]
            fq.observer.lo.fill_(lo)
            fq.observer.hi.fill_(hi)
            fq.observer.count.fill_(1)
        elif fq.enabled:
            raise KeyError(f"no range for the quantized activation {fq.value_name!r}")
    freeze_observers(qm)
    freeze_bn(qm)
    qm.eval()


def run_native(qgraph, x, threads: int, batch: int):
    """Outputs of the quantized graph in the native runtime (written to a temporary .dsm)."""
    import tempfile

    import numpy as np

    from deepslim.format import write_dsm
    from deepslim.runtime import Session

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "int8.dsm"
        write_dsm(qgraph, path)
        with Session(path, threads=threads) as session:
            return np.concatenate([session.run(x[i : i + batch]) for i in range(0, len(x), batch)])


def measure(args: argparse.Namespace) -> dict:
    import copy

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from deepslim import zoo
    from deepslim.compress.qat import (QATConfig, calibrate, complete_ranges, prepare_qat,
                                       quantization_aware_training)
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.runtime.tune import cpu_model
    from deepslim.quant import quantize_graph, run_quantized
    from deepslim.train import (TrainConfig, evaluate, load_checkpoint, save_checkpoint, seed_everything,
                                train_or_load)
    from deepslim.workflow import DATA_TAG, load_data

    progress = not args.quiet
    name = cache_name(args.model, args.width)
    splits = load_data(args.data)
    data_tag = DATA_TAG
    if args.train_samples is not None:
        splits["train"] = tuple(a[: args.train_samples] for a in splits["train"])
        data_tag = f"{DATA_TAG}/first{args.train_samples}"
    train, val = splits["train"], tuple(a[: args.val] for a in splits["val"])
    tx, ty = (a[: args.test] for a in splits["test"])
    test = (tx, ty)
    calib = np.ascontiguousarray(train[0][: args.calib], dtype=np.float32)

    stamp = datetime.now(timezone.utc)
    out_path = Path(args.out) / f"quant_accuracy-{name}-{stamp:%Y%m%dT%H%M%S}.json"
    result: dict = {
        "model": args.model, "width": args.width, "name": name, "date": stamp.isoformat(timespec="seconds"),
        "commit": git_commit(), "cpu": cpu_model(), "threads": args.threads, "command": " ".join(sys.argv),
        "calib_images": len(calib), "test_images": len(tx), "int8_engine": args.engine,
        "times_s": {}, "accuracy": {},
    }

    def save() -> None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(result, indent=1) + "\n")

    def record(key: str, acc: float, seconds: float) -> None:
        result["accuracy"][key] = acc
        result["times_s"][key] = round(seconds, 1)
        save()
        print(f"{name}: {key} {acc:.2f}% ({seconds:.0f} s)", flush=True)

    def quantized_accuracy(qgraph) -> float:
        if args.engine == "reference":
            y = run_quantized(qgraph, tx, batch=args.batch)
        else:
            y = run_native(qgraph, tx, args.threads, args.batch)
            want = run_quantized(qgraph, tx[: args.check])
            if not np.array_equal(y[: args.check], want):
                raise RuntimeError("the native runtime's int8 outputs differ from run_quantized's")
        return float((y.argmax(axis=1) == ty).mean() * 100.0)

    # fp32: trained once, then loaded from the cache.
    t = time.time()
    seed_everything(0)
    kwargs = {} if args.width is None else {"width_mult": args.width}
    model = zoo.get(args.model, **kwargs)
    config = TrainConfig(epochs=args.epochs, lr=args.lr)
    meta, path = train_or_load(name, model, train, val, config, data_tag=data_tag, progress=progress)
    model.eval()
    result["checkpoint"] = str(path)
    result["train_history"] = meta.get("history")
    result["times_s"]["train_or_load"] = round(time.time() - t, 1)
    if "fp32" not in args.skip:
        t = time.time()
        record("fp32", evaluate(model, test), time.time() - t)

    example = torch.zeros(1, *model.input_shape)
    graph = optimize(from_torch(model.eval(), example))

    # PTQ: the simulation (minmax), then the integer graph per calibration method.
    if "ptq-sim" not in args.skip:
        t = time.time()
        qm = prepare_qat(model)
        calibrate(qm, calib)
        record("ptq_sim_minmax", evaluate(qm, test), time.time() - t)
        del qm
    for method in [] if "ptq" in args.skip else args.methods:
        for bits in args.activation_bits:
            t = time.time()
            qgraph = quantize_graph(graph, calib=calib, method=method, activation_bits=bits)
            record(f"ptq_int{bits}_{method}", quantized_accuracy(qgraph), time.time() - t)

    # QAT on a copy; `model` stays the fp32 checkpoint.
    if "qat" not in args.skip:
        t = time.time()
        qat_model = copy.deepcopy(model)
        if args.qat_checkpoint:
            saved = load_checkpoint(qat_model, args.qat_checkpoint)
            ranges, history = {k: tuple(v) for k, v in saved["ranges"].items()}, saved["history"]
            result["qat_checkpoint"] = args.qat_checkpoint
        else:
            qat_config = QATConfig(epochs=args.qat_epochs, train={"lr": args.qat_lr}, calib_samples=args.calib,
                                   train_samples=args.qat_train_samples)
            ranges, history = quantization_aware_training(qat_model, qat_config, train, val, progress=progress)
            result["times_s"]["qat_training"] = round(time.time() - t, 1)
            # The fine-tuned weights and ranges, so an interrupted evaluation need not train again.
            result["qat_checkpoint"] = str(save_checkpoint(qat_model, out_path.with_suffix(".qat.pt"),
                                                           {"ranges": ranges, "history": history}))
        result["qat_history"] = history
        result["qat_ranges"] = ranges
        save()
        t = time.time()
        qat_graph = optimize(from_torch(qat_model.eval(), example))
        record("qat_int8", quantized_accuracy(quantize_graph(qat_graph, ranges=complete_ranges(qat_graph, ranges))),
               time.time() - t)
        t = time.time()
        qm = prepare_qat(qat_model)
        set_ranges(qm, ranges)
        record("qat_sim", evaluate(qm, test), time.time() - t)
        del qm
    result["json"] = str(out_path)
    save()
    return result


def table_row(result: dict) -> str:
    """One row of the table in docs/quantization.md."""
    acc, times = result["accuracy"], result["times_s"]

    def cell(key: str) -> str:
        return f"{acc[key]:.2f}" if key in acc else "–"

    methods = " / ".join(cell(f"ptq_int8_{m}") for m in ("minmax", "percentile", "mse"))
    if "ptq_int8_kl" in acc:
        methods += f" (kl {cell('ptq_int8_kl')})"
    qat_time = f"{times['qat_training']:.0f} s" if "qat_training" in times else "–"
    width = "" if result["width"] is None else f" w{result['width']:g}"
    return (f"| {result['model']}{width} | {cell('fp32')} | {cell('ptq_sim_minmax')} | {methods} | "
            f"{cell('qat_sim')} | {cell('qat_int8')} | {qat_time} |")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # before numpy and torch load their BLAS
    result = measure(args)
    print("| model | fp32 | PTQ sim (minmax) | PTQ int8 minmax / percentile / mse | QAT sim | QAT int8 | QAT time |")
    print(table_row(result))
    print(f"wrote {result['json']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
