"""The steps the CLI and the demo share: data, train-or-load, compress, export, evaluate in the runtime."""

from __future__ import annotations

import argparse
import copy
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA_TAG = "fashion-mnist/val5000"
RECIPES_DIR = Path(__file__).with_name("recipes")


def recipe_for(model_name: str) -> Path:
    """The built-in recipe of a zoo model (deepslim/recipes/NAME.yaml)."""
    path = RECIPES_DIR / f"{model_name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")))
        raise FileNotFoundError(
            f"no built-in recipe for {model_name!r} (built-in: {known}); pass one with --recipe FILE.yaml"
        )
    return path


def load_data(data_dir: str | None):
    from deepslim.data.fashion_mnist import load_splits

    return load_splits(data_dir)


def train_model(name: str, splits, recipe=None, *, seed: int = 0, epochs: int | None = None,
                retrain: bool = False, checkpoint: str | None = None, progress: bool = True):
    """A trained zoo model: loaded from `checkpoint`, from the cache, or trained now (and cached)."""
    from deepslim import zoo
    from deepslim.train import TrainConfig, load_checkpoint, seed_everything, train_or_load

    seed_everything(seed)
    model = zoo.get(name)
    if checkpoint:
        if not Path(checkpoint).is_file():
            raise FileNotFoundError(f"checkpoint {checkpoint!r} does not exist; train one with `deepslim train {name}`")
        return model, load_checkpoint(model, checkpoint), Path(checkpoint)
    options = dict(recipe.train) if recipe is not None else {}
    options["seed"] = seed
    if epochs is not None:
        options["epochs"] = epochs
    config = TrainConfig.from_dict(options)
    directory = None
    if retrain:
        from deepslim.train import checkpoint_path
        from dataclasses import asdict

        stale = checkpoint_path(name, {**asdict(config), "data": DATA_TAG})
        stale.unlink(missing_ok=True)
    meta, path = train_or_load(name, model, splits["train"], splits["val"], config,
                               data_tag=DATA_TAG, directory=directory, progress=progress)
    model.eval()
    return model, meta, path


def export(model, path: str | Path, encodings=None):
    """Convert a PyTorch model to IR, optimise the graph and write the .dsm file."""
    import torch

    from deepslim.format import write_dsm
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize

    example = torch.zeros(1, *model.input_shape)
    graph = optimize(from_torch(model.eval(), example, encodings=encodings))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_dsm(graph, path)


def export_quantized(model, plan, path: str | Path, encodings=None, *, fallback: str = "none", threads: int = 1,
                     progress: bool = True):
    """Write the int8 .dsm of a compressed model whose recipe quantizes (`CompressedModel.quantize`).

    The trained float model (QAT's fake quantization already removed, BatchNorm folded by the front
    end) is exported to IR with the compression encodings and quantized by `quantize_graph` with the
    plan's QAT ranges / calibration, as `deepslim quantize` does; pruned weights stay sparse where
    that is smaller. fallback "measure" keeps in fp32 the conv/dense layers the runtime runs slower
    in int8 (deepslim.quant.fallback). Returns (WriteReport, FallbackReport or None).
    """
    import dataclasses

    import torch

    from deepslim.compress.qat import quantize_for_export
    from deepslim.format import write_dsm
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize

    example = torch.zeros(1, *model.input_shape)
    graph = optimize(from_torch(model.eval(), example, encodings=encodings))

    def quantize(keep: list[str]):
        return quantize_for_export(graph, dataclasses.replace(plan, keep_fp32=list(keep)))

    fallback_report = None
    if fallback == "measure":
        from deepslim.quant.fallback import quantize_with_fallback

        q, fallback_report = quantize_with_fallback(graph, quantize, plan.calib[:1], threads=threads,
                                                    keep_fp32=plan.keep_fp32, progress=progress)
    elif fallback == "none":
        q = quantize(plan.keep_fp32)
    else:
        raise ValueError(f"fallback must be 'measure' or 'none', got {fallback!r}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_dsm(q, path), fallback_report


def compress_and_export(model, recipe, splits, output: str | Path, *, fallback: str = "none", threads: int = 1,
                        seed: int = 0, progress: bool = True):
    """Compress a copy of `model` with `recipe` and write `output`: int8 when the recipe has a
    `quantize:` section, else fp32. Returns (CompressedModel, WriteReport, FallbackReport or None)."""
    result = compress_model(model, recipe, splits, seed=seed, progress=progress)
    if result.quantize is not None:
        report, fallback_report = export_quantized(result.model, result.quantize, output, result.encodings,
                                                   fallback=fallback, threads=threads, progress=progress)
        return result, report, fallback_report
    return result, export(result.model, output, result.encodings), None


def compress_model(model, recipe, splits, *, seed: int = 0, progress: bool = True):
    from deepslim.compress import compress

    return compress(copy.deepcopy(model), recipe, splits["train"], splits["val"], seed=seed, progress=progress)


def dsm_accuracy(path: str | Path, data, *, batch_size: int = 500, threads: int = 1,
                 progress: bool = True) -> float:
    """Top-1 accuracy (%) of a .dsm model in the native runtime."""
    from tqdm.auto import tqdm

    from deepslim.runtime import Session

    x, y = data
    correct = 0
    with Session(path, threads=threads) as session:
        for start in tqdm(range(0, len(x), batch_size), desc=f"runtime {Path(path).name}",
                          disable=not progress, leave=False):
            out = session.run(x[start : start + batch_size])
            correct += int((out.argmax(axis=1) == y[start : start + batch_size]).sum())
    return 100.0 * correct / len(x)


@dataclass
class Latency:
    median_ms: float
    p10_ms: float
    p90_ms: float


def latency(path: str | Path, x: np.ndarray, *, runs: int = 300, threads: int = 1) -> Latency:
    """Batch-1 latency of Session.run from Python (call overhead included), after a warm-up."""
    from deepslim.runtime import Session

    with Session(path, threads=threads) as session:
        for i in range(20):
            session.run(x[i % len(x)][None])
        times = []
        for i in range(runs):
            sample = x[i % len(x)][None]
            t0 = time.perf_counter()
            session.run(sample)
            times.append((time.perf_counter() - t0) * 1e3)
    p10, p50, p90 = np.percentile(times, [10, 50, 90])
    return Latency(float(p50), float(p10), float(p90))


# ---- CLI commands ---------------------------------------------------------------------------

def train_command(args: argparse.Namespace) -> int:
    from deepslim.compress import load_recipe
    from deepslim.train import evaluate, save_checkpoint

    splits = load_data(args.data)
    recipe = load_recipe(recipe_for(args.model)) if (RECIPES_DIR / f"{args.model}.yaml").is_file() else None
    model, meta, path = train_model(args.model, splits, recipe, seed=args.seed, epochs=args.epochs)
    if args.output:
        path = save_checkpoint(model, args.output, meta)
    print(f"{args.model}: validation {evaluate(model, splits['val']):.2f}%, test {evaluate(model, splits['test']):.2f}%")
    print(f"checkpoint: {path}")
    return 0


def compress_command(args: argparse.Namespace) -> int:
    from deepslim.compress import load_recipe
    from deepslim.quantize_cmd import print_fallback, resolve_fallback
    from deepslim.train import evaluate

    recipe = load_recipe(args.recipe)
    fallback = resolve_fallback(args.fallback, args.threads) if recipe.quantize is not None else "none"
    splits = load_data(args.data)
    model, _, _ = train_model(args.model, splits, recipe, checkpoint=args.checkpoint)
    fp32_acc = evaluate(model, splits["test"])
    result, report, fallback_report = compress_and_export(model, recipe, splits, args.output, fallback=fallback,
                                                          threads=args.threads)
    acc = evaluate(result.model, splits["test"])
    fp32_bytes = sum(int(p.numel()) * 4 for p in model.parameters())
    print(f"{args.model}: test accuracy {fp32_acc:.2f}% -> {acc:.2f}% (PyTorch, compressed, float)")
    if result.quantize is not None:
        from deepslim.quant.fallback import runtime_available

        if runtime_available() is None:
            print(f"{args.output}: test accuracy {dsm_accuracy(args.output, splits['test']):.2f}% (runtime, int8)")
    print(f"parameters {fp32_bytes:,} bytes fp32 -> {args.output}: {report.file_size:,} bytes "
          f"({fp32_bytes / report.file_size:.1f}x)")
    if fallback_report is not None:
        print_fallback(fallback_report)
    return 0


def export_command(args: argparse.Namespace) -> int:
    import torch

    from deepslim import zoo
    from deepslim.train import load_checkpoint

    torch.manual_seed(0)
    model = zoo.get(args.model)
    if args.checkpoint:
        load_checkpoint(model, args.checkpoint)
    report = export(model.eval(), args.output)
    print(f"wrote {args.output}: {report.file_size:,} bytes")
    return 0
