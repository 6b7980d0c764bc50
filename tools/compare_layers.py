"""Per layer, our runtime against OpenVINO's own per-layer profile, on a zoo model (random weights).

    .venv/bin/python tools/compare_layers.py mobilenet_v2 [--threads 1] [--top 30] [--runs 50]

Our side: `deepslim bench MODEL --profile` (mean ms per node in the whole model). OpenVINO's side:
the same ONNX model compiled with PERF_COUNT (f32 hint), the EXECUTED layers' real time per run,
matched to our nodes by the PyTorch module path both carry in their names (reorders and other
layers of OpenVINO's own are listed by name only in its total). Rows are sorted by what we lose
(ours - OpenVINO), with the node's input and weight shapes and its conv attributes. Profiling adds
overhead to both sides; the totals are for orientation, the per-layer differences are the point.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np

from deepslim.bench.run import prepare, profile_nodes
from deepslim.format import read_dsm


def openvino_layers(onnx_path: Path, threads: int, runs: int) -> dict[str, float]:
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(onnx_path))
    shape = [1] + [d.get_length() for d in list(model.inputs[0].partial_shape)[1:]]
    model.reshape({model.inputs[0].any_name: shape})
    compiled = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                                                 "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "PERF_COUNT": True})
    request = compiled.create_infer_request()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for _ in range(10):
        request.infer({0: x})
    ms: dict[str, float] = collections.defaultdict(float)
    for _ in range(runs):
        request.infer({0: x})
        for p in request.get_profiling_info():
            if p.status.name == "EXECUTED":
                ms[p.node_name] += p.real_time.total_seconds() * 1e3 / runs
    return dict(ms)


def node_key(openvino_name: str) -> str:
    """The dotted module path in an exported layer's name: '/features/features.2/conv/conv.0/conv.0.0/
    Conv/WithoutBiases' -> 'features.2.conv.0.0', '/stages/stages.3/stages.3.1/conv1/Conv' ->
    'stages.3.1.conv1' (a scope that extends the one before it replaces it)."""
    scopes = [p for p in openvino_name.replace("/WithoutBiases", "").split("/") if p][:-1]
    path: list[str] = []
    for scope in scopes:
        if path and scope.startswith(path[-1] + "."):
            path[-1] = scope
        else:
            path.append(scope)
    return ".".join(path) if path else openvino_name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="zoo model name, e.g. mobilenet_v2, resnet18, facenet1m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=30, help="rows to print (default: 30)")
    ap.add_argument("--runs", type=int, default=50, help="profiled runs per engine (default: 50)")
    args = ap.parse_args()
    prepared = prepare(args.model, Path("results") / "bench")
    if prepared.onnx is None:
        raise SystemExit("needs a zoo model (an ONNX file to give OpenVINO)")
    theirs = openvino_layers(prepared.onnx, args.threads, args.runs)
    by_node: dict[str, float] = collections.defaultdict(float)
    for name, ms in theirs.items():
        by_node[node_key(name)] += ms
    ours = profile_nodes(args.model, threads=args.threads, runs=args.runs)
    graph = read_dsm(prepared.dsm)
    nodes = {n.name: n for n in graph.nodes}
    print(f"model {args.model}, {args.threads} thread(s): ours {sum(r['ms'] for r in ours):.3f} ms over "
          f"{len(ours)} nodes, OpenVINO {sum(theirs.values()):.3f} ms over {len(theirs)} layers (profiled)")
    rows = []
    for r in ours:
        node = nodes.get(r["name"])
        shapes = [tuple(graph.values[i].shape) for i in (node.inputs[:2] if node else []) if i in graph.values]
        attrs = {k: v for k, v in (node.attrs.items() if node else []) if k in ("strides", "pads", "group")}
        other = by_node.get(r["name"])
        rows.append((r["ms"] - (other or 0.0), r, other, shapes, attrs))
    print("| node | op | ours ms | OpenVINO ms | ours - OpenVINO | shapes | attributes |")
    print("|---|---|---:|---:|---:|---|---|")
    for diff, r, other, shapes, attrs in sorted(rows, key=lambda t: -t[0])[: args.top]:
        theirs_ms = f"{other:.3f}" if other is not None else "-"
        print(f"| {r['name']} | {r['op']} | {r['ms']:.3f} | {theirs_ms} | {diff:+.3f} | {shapes} | {attrs} |")


if __name__ == "__main__":
    main()
