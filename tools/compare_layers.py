"""Per layer, our runtime against OpenVINO's own per-layer profile, on a zoo model (random weights).

    .venv/bin/python tools/compare_layers.py mobilenet_v2 [--threads 1] [--top 30] [--runs 50] [--int8]

Our side: `deepslim bench MODEL --profile` (mean ms per node in the whole model). OpenVINO's side:
the same ONNX model compiled with PERF_COUNT (f32 hint), the EXECUTED layers' real time per run,
matched to our nodes by the PyTorch module path both carry in their names (reorders and other
layers of OpenVINO's own are listed by name only in its total). Rows are sorted by what we lose
(ours - OpenVINO), with the node's input and weight shapes and its conv attributes. Profiling adds
overhead to both sides; the totals are for orientation, the per-layer differences are the point.

With --int8: our int8 .dsm and the static QDQ model (per-channel) as tools/bench_int8.py builds them
(results/bench/int8), OpenVINO compiled without the f32 hint so that its int8 kernels run; our q-ops
are matched to OpenVINO's layers by the same module path.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

from deepslim.bench.run import prepare, profile_nodes
from deepslim.format import read_dsm


def openvino_layers(onnx_path: Path, threads: int, runs: int, int8: bool = False) -> dict[str, float]:
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(onnx_path))
    shape = [1] + [d.get_length() for d in list(model.inputs[0].partial_shape)[1:]]
    model.reshape({model.inputs[0].any_name: shape})
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "PERF_COUNT": True}
    if not int8:  # a QDQ model keeps OpenVINO's own low-precision path
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = core.compile_model(model, "CPU", config)
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
    ap.add_argument("--int8", action="store_true", help="our int8 .dsm against OpenVINO's int8 (QDQ) model")
    ap.add_argument("--fallback", default="measure", choices=["measure", "none"],
                    help="with --int8: `deepslim quantize --fallback` (default: measure, as bench_int8.py)")
    args = ap.parse_args()
    if args.int8:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_int8 import build_int8

        from deepslim.runtime import Session

        prepared, dsm, onnx_path, calib = build_int8(args.model, args.threads, args.fallback)
        with Session(dsm, threads=args.threads, profile=True) as session:
            ours = session.time_nodes(calib[:1], runs=args.runs)
    else:
        prepared = prepare(args.model, Path("results") / "bench")
        dsm, onnx_path = prepared.dsm, prepared.onnx
    if onnx_path is None:
        raise SystemExit("needs a zoo model (an ONNX file to give OpenVINO)")
    theirs = openvino_layers(onnx_path, args.threads, args.runs, int8=args.int8)
    by_node: dict[str, float] = collections.defaultdict(float)
    for name, ms in theirs.items():
        by_node[node_key(name)] += ms
    if not args.int8:
        ours = profile_nodes(args.model, threads=args.threads, runs=args.runs)
    graph = read_dsm(dsm)
    nodes = {n.name: n for n in graph.nodes}
    print(f"model {args.model}{' int8' if args.int8 else ''}, {args.threads} thread(s): ours "
          f"{sum(r['ms'] for r in ours):.3f} ms over "
          f"{len(ours)} nodes, OpenVINO {sum(theirs.values()):.3f} ms over {len(theirs)} layers (profiled)")
    rows = []
    for r in ours:
        node = nodes.get(r["name"])
        shapes = [tuple(graph.values[i].shape) for i in (node.inputs[:2] if node else []) if i in graph.values]
        attrs = {k: v for k, v in (node.attrs.items() if node else []) if k in ("strides", "pads", "group")}
        # int8 nodes carry the ONNX node names ('/features/features.2/conv/conv.0/conv.0.0/Conv')
        other = by_node.get(node_key(r["name"]) if "/" in r["name"] else r["name"])
        rows.append((r["ms"] - (other or 0.0), r, other, shapes, attrs))
    print("| node | op | ours ms | OpenVINO ms | ours - OpenVINO | shapes | attributes |")
    print("|---|---|---:|---:|---:|---|---|")
    for diff, r, other, shapes, attrs in sorted(rows, key=lambda t: -t[0])[: args.top]:
        theirs_ms = f"{other:.3f}" if other is not None else "-"
        print(f"| {r['name']} | {r['op']} | {r['ms']:.3f} | {theirs_ms} | {diff:+.3f} | {shapes} | {attrs} |")


if __name__ == "__main__":
    main()
