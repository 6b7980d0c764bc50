"""The runtime-speed table of BENCHMARKS.md: every zoo model at 1 and 2 threads against the peers.

    .venv/bin/python tools/bench_table.py [--models lenet300,resnet18] [--threads 1,2] [--seconds 2]

Runs `deepslim bench` (engines interleaved, outputs checked against ours) per model and thread count,
writes results/bench/table.json, and prints a markdown table of medians with the fastest peer and
its ratio to ours (> 1: deepslim is faster).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from deepslim.bench.run import as_json, bench, cpu_model

MODELS = {
    "mobilenet_v2": "MobileNet V2",
    "resnet18": "ResNet-18",
    "squeezenet1_1": "SqueezeNet 1.1",
    "shufflenet_v2": "ShuffleNet V2",
    "facenet1m": "FaceNet-1M",
    "lenet5": "LeNet-5",
    "lenet300": "LeNet-300-100",
}
PEER_NAMES = {"onnxruntime": "ORT", "openvino": "OpenVINO", "ncnn": "ncnn", "pytorch": "PyTorch"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--vs", default="onnxruntime,openvino,ncnn")
    ap.add_argument("--out", default="results/bench/table.json")
    ap.add_argument("--tune", action="store_true", help="tune our kernel choices per model and thread count first")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    threads = [int(t) for t in args.threads.split(",")]
    vs = [v for v in args.vs.split(",") if v]
    rows: dict[tuple[str, int], dict[str, float]] = {}
    raw = []
    for model in models:
        for t in threads:
            results = bench(model, threads=t, vs=vs, seconds=args.seconds, log=lambda _m: None, tune=args.tune)
            raw += [dict(r, model=model) for r in as_json(results)]
            rows[model, t] = {r.engine: r.median_ms for r in results if r.median_ms is not None}
            print(f"{model} {t}T: " + ", ".join(f"{e} {ms:.3f}" for e, ms in rows[model, t].items()), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(raw, indent=2) + "\n")
    print(f"\nCPU {cpu_model()}; medians in ms; best peer / ours > 1 means deepslim is faster\n")
    head = "| model |" + "".join(f" deepslim {t}T | best peer {t}T | best peer / ours {t}T |" for t in threads)
    print(head)
    print("|---|" + "---:|---:|---:|" * len(threads))
    for model in models:
        cells = []
        for t in threads:
            r = rows[model, t]
            ours = r.get("deepslim")
            peers = {e: ms for e, ms in r.items() if e != "deepslim"}
            if ours is None or not peers:
                cells.append(f" {ours or ''} | | |")
                continue
            best = min(peers, key=peers.get)
            cells.append(f" {ours:.3f} | {peers[best]:.3f} ({PEER_NAMES.get(best, best)}) | {peers[best] / ours:.2f} |")
        print(f"| {MODELS.get(model, model)} |" + "".join(cells))


if __name__ == "__main__":
    main()
