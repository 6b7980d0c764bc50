"""`deepslim demo`: the whole pipeline on the built-in default — LeNet-300-100 and LeNet-5 on
Fashion-MNIST, trained (or loaded from the checkpoint cache), compressed the Deep Compression way,
written to .dsm and evaluated in the native runtime on all 10,000 test images."""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm.auto import tqdm

from deepslim import workflow


@dataclass
class DemoRow:
    model: str
    fp32_acc: float  # test accuracy (%) of the fp32 model in PyTorch
    compressed_acc: float  # after pruning + weight sharing, in PyTorch
    dsm_acc: float  # the compressed .dsm in the native runtime
    fp32_bytes: int  # size of the uncompressed fp32 .dsm file
    dsm_bytes: int  # size of the compressed .dsm file
    ratio: float  # fp32_bytes / dsm_bytes (whole files)
    weight_ratio: float  # params x 4 / dsm_bytes (the Deep Compression papers' measure, without file overhead)
    ms_per_image: float  # median batch-1 latency of Session.run, 1 thread
    params: int
    weight_bytes_fp32: int  # params x 4
    max_abs_diff: float  # runtime vs compressed PyTorch logits on the first 1,000 test images
    seconds: float


def run_one(name: str, splits, out_dir: Path, retrain: bool) -> DemoRow:
    import numpy as np
    import torch

    from deepslim.compress import load_recipe
    from deepslim.runtime import Session
    from deepslim.train import evaluate, predict

    t0 = time.perf_counter()
    recipe = load_recipe(workflow.recipe_for(name))
    model, _, _ = workflow.train_model(name, splits, recipe, retrain=retrain)
    fp32_acc = evaluate(model, splits["test"])
    fp32_path = out_dir / f"{name}_fp32.dsm"
    fp32_report = workflow.export(model, fp32_path)
    tqdm.write(f"{name}: fp32 test accuracy {fp32_acc:.2f}%; wrote {fp32_path} ({fp32_report.file_size:,} bytes)")

    torch.manual_seed(0)
    result = workflow.compress_model(model, recipe, splits)
    compressed_acc = evaluate(result.model, splits["test"])
    dsm_path = out_dir / f"{name}.dsm"
    report = workflow.export(result.model, dsm_path, result.encodings)
    tqdm.write(f"{name}: compressed test accuracy {compressed_acc:.2f}%; wrote {dsm_path} ({report.file_size:,} bytes)")

    dsm_acc = workflow.dsm_accuracy(dsm_path, splits["test"])
    x = splits["test"][0][:1000]
    reference = predict(result.model, x)
    with Session(dsm_path) as session:
        diff = float(np.abs(session.run(x) - reference).max())
    lat = workflow.latency(dsm_path, splits["test"][0])
    params = sum(int(p.numel()) for p in model.parameters())
    return DemoRow(
        model=name,
        fp32_acc=round(fp32_acc, 2),
        compressed_acc=round(compressed_acc, 2),
        dsm_acc=round(dsm_acc, 2),
        fp32_bytes=fp32_report.file_size,
        dsm_bytes=report.file_size,
        ratio=round(fp32_report.file_size / report.file_size, 1),
        weight_ratio=round(params * 4 / report.file_size, 1),
        ms_per_image=round(lat.median_ms, 4),
        params=params,
        weight_bytes_fp32=params * 4,
        max_abs_diff=diff,
        seconds=round(time.perf_counter() - t0, 1),
    )


def format_table(rows: list[DemoRow]) -> str:
    head = ["model", "fp32 acc", "compressed acc", ".dsm acc (runtime)", "fp32 size", ".dsm size", "ratio", "ms/image"]
    body = [
        [r.model, f"{r.fp32_acc:.2f}%", f"{r.compressed_acc:.2f}%", f"{r.dsm_acc:.2f}%", f"{r.fp32_bytes:,} B",
         f"{r.dsm_bytes:,} B", f"{r.ratio:.1f}x", f"{r.ms_per_image:.3f}"]
        for r in rows
    ]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *body)]
    line = lambda cells: " | ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(head), sep, *(line(b) for b in body)])


def run_demo(args: argparse.Namespace) -> list[DemoRow]:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    for name in names:
        workflow.recipe_for(name)  # fail early on a model without a recipe
    splits = workflow.load_data(args.data)
    rows = []
    for name in names:
        rows.append(run_one(name, splits, out_dir, args.retrain))
    print()
    print(format_table(rows))
    print(f"(fp32 size and .dsm size are whole files; ms/image: median batch-1 Session.run, 1 thread, "
          f"{platform.processor() or platform.machine()})")
    json_path = out_dir / "demo.json"
    json_path.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    print(f"wrote {json_path}")
    return rows
