"""The benchmark protocol: prepare the model for every engine, check agreement, time interleaved."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from deepslim.bench.engines import (
    PEERS, Deepslim, EngineUnavailable, Ncnn, OnnxRuntime, OpenVino, Torch,
)
from deepslim.runtime.tune import cpu_model  # noqa: F401 - also this module's, for the tools

# Outputs of two engines agree when max |a - b| <= AGREE_TOLERANCE * max(1, max |ours|).
AGREE_TOLERANCE = 1e-3


@dataclass
class BenchResult:
    engine: str
    batch: int
    threads: int
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    ms_per_image: float | None = None
    ratio_to_ours: float | None = None  # engine median / our median: > 1 means we are faster
    max_abs_diff: float | None = None
    note: str = ""


@dataclass
class PreparedModel:
    name: str
    input_shape: tuple[int, ...]  # without the batch
    dsm: Path
    onnx: Path | None
    torch_model: object | None = None
    notes: list[str] = field(default_factory=list)


def prepare(model: str, workdir: Path) -> PreparedModel:
    """A zoo name (random weights, seed 0), an .onnx file or a .dsm file -> files for every engine."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = Path(model)
    if path.suffix == ".dsm":
        from deepslim.runtime import Session

        with Session(path) as s:
            shape = s.input_shapes[0][1:]
        return PreparedModel(path.stem, shape, path, None, None, ["a .dsm file runs in deepslim only"])
    if path.suffix == ".onnx":
        from deepslim.format import write_dsm
        from deepslim.frontends.onnx import from_onnx
        from deepslim.ir.passes import optimize

        graph = optimize(from_onnx(path))
        dsm = workdir / f"{path.stem}.dsm"
        write_dsm(graph, dsm)
        shape = graph.values[graph.inputs[0]].shape[1:]
        return PreparedModel(path.stem, tuple(shape), dsm, path, None, ["PyTorch needs a zoo model"])
    import torch

    from deepslim import zoo
    from deepslim.workflow import export

    torch.manual_seed(0)
    net = zoo.get(model).eval()
    shape = tuple(net.input_shape)
    dsm = workdir / f"{model}.dsm"
    export(net, dsm)
    onnx_path = workdir / f"{model}.onnx"
    if not onnx_path.exists():
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, torch.zeros(1, *shape), str(onnx_path), dynamo=False, opset_version=17,
                              input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    return PreparedModel(model, shape, dsm, onnx_path, net)


def _load(name: str, prepared: PreparedModel, threads: int):
    if name == "deepslim":
        return Deepslim(prepared.dsm, threads)
    if name == "pytorch":
        return Torch(prepared.torch_model, threads)
    if prepared.onnx is None:
        raise EngineUnavailable("needs an ONNX model")
    if name == "onnxruntime":
        return OnnxRuntime(prepared.onnx, threads)
    if name == "openvino":
        return OpenVino(prepared.onnx, threads)
    if name == "ncnn":
        return Ncnn(prepared.onnx, threads, prepared.input_shape)
    raise ValueError(f"unknown engine {name!r}; engines: deepslim, {', '.join(PEERS)}")


def _time_interleaved(engines: dict, x: np.ndarray, seconds: float, pause: float = 0.0,
                      settle: int = 0) -> dict[str, list[float]]:
    """Round-robin timing: each round runs every engine `inner` times, for about `seconds` of timed
    runs in all. With `pause` > 0 the machine idles that many seconds before each engine's turn, so
    the worker threads of the engine before it have gone to sleep and do not hold the cores it
    needs (ONNX Runtime's keep spinning for about 30 ms after a run on this kind of machine); the
    first `settle` runs of each turn are then left untimed (the first run after an idle is slow
    for every engine)."""
    for e in engines.values():  # warm-up: first-run allocations, lazy compilation, caches
        for _ in range(3):
            e.run(x)
    est = {}
    for name, e in engines.items():
        t0 = time.perf_counter()
        e.run(x)
        est[name] = max(time.perf_counter() - t0, 1e-6)
    per_round = seconds / 15
    inner = {n: int(np.clip(per_round / len(engines) / t, 1, 500)) for n, t in est.items()}
    samples: dict[str, list[float]] = {n: [] for n in engines}
    timed = 0.0  # seconds spent in timed runs: pauses and settling runs do not eat the budget
    rounds = 0
    max_rounds = 200 if pause == 0 else 25  # with pauses, tiny models would otherwise mostly sleep
    while rounds < 5 or (timed < seconds and rounds < max_rounds):
        for name, e in engines.items():
            if pause > 0:
                time.sleep(pause)
            for _ in range(settle):
                e.run(x)
            for _ in range(inner[name]):
                t0 = time.perf_counter()
                e.run(x)
                dt = time.perf_counter() - t0
                timed += dt
                samples[name].append(dt * 1e3)
        rounds += 1
    return samples


def bench(model: str, *, threads: int = 1, batches: list[int] | None = None, vs: list[str] | None = None,
          seconds: float = 3.0, workdir: Path | None = None, log=print, tune: bool = False) -> list[BenchResult]:
    batches = batches or [1]
    vs = list(PEERS) if vs is None else vs
    workdir = workdir or Path("results") / "bench"
    prepared = prepare(model, workdir)
    for note in prepared.notes:
        log(f"note: {note}")
    if tune:
        from deepslim.runtime.tune import cached_kernels, format_result
        from deepslim.runtime.tune import tune as tune_kernels

        if cached_kernels(prepared.dsm, threads):
            log(f"note: kernel choices from {prepared.dsm.name}.tune.json")
        else:
            log(format_result(tune_kernels(prepared.dsm, threads=threads, progress=True)))
    engines = {"deepslim": _load("deepslim", prepared, threads)}
    results: list[BenchResult] = []
    unavailable: dict[str, str] = {}
    for name in vs:
        try:
            engines[name] = _load(name, prepared, threads)
        except EngineUnavailable as e:
            unavailable[name] = str(e)
            log(f"note: {name} skipped: {e}")
    rng = np.random.default_rng(0)
    for batch in batches:
        x = rng.standard_normal((batch, *prepared.input_shape)).astype(np.float32)
        ours = engines["deepslim"].run(x)
        bound = AGREE_TOLERANCE * max(1.0, float(np.abs(ours).max()))
        timed = {"deepslim": engines["deepslim"]}
        diffs = {"deepslim": 0.0}
        batch_results = []
        for name, e in engines.items():
            if name == "deepslim":
                continue
            try:
                out = np.asarray(e.run(x)).reshape(ours.shape)
            except Exception as err:  # noqa: BLE001 - a peer failing is reported, not fatal
                batch_results.append(BenchResult(name, batch, threads, note=f"failed: {str(err)[:120]}"))
                continue
            diff = float(np.abs(out - ours).max())
            if diff > bound:
                batch_results.append(BenchResult(name, batch, threads, max_abs_diff=diff,
                                                 note=f"output disagrees with ours (max abs diff {diff:.3g} > {bound:.3g}); not timed"))
                continue
            timed[name], diffs[name] = e, diff
        # With several threads, a 100 ms idle before each engine's turn lets the others' spinning
        # workers sleep (else they hold the second core and the engine after them runs on one).
        several = threads > 1 and len(timed) > 1
        samples = _time_interleaved(timed, x, seconds, pause=0.1 if several else 0.0, settle=2 if several else 0)
        our_median = float(np.median(samples["deepslim"]))
        for name, s in samples.items():
            p10, p50, p90 = (float(v) for v in np.percentile(s, [10, 50, 90]))
            batch_results.append(BenchResult(name, batch, threads, p50, p10, p90, p50 / batch, p50 / our_median,
                                             diffs[name]))
        batch_results.extend(BenchResult(n, batch, threads, note=f"skipped: {why}") for n, why in unavailable.items())
        order = ["deepslim", *PEERS]
        results.extend(sorted(batch_results, key=lambda r: order.index(r.engine) if r.engine in order else 99))
    return results


def profile_nodes(model: str, *, threads: int = 1, batch: int = 1, runs: int = 50,
                  workdir: Path | None = None) -> list[dict]:
    """Mean milliseconds per node of our runtime over `runs` runs (after 3 warm-up runs)."""
    from deepslim.runtime import Session

    prepared = prepare(model, workdir or Path("results") / "bench")
    session = Session(prepared.dsm, threads=threads, profile=True)
    x = np.random.default_rng(0).standard_normal((batch, *prepared.input_shape)).astype(np.float32)
    return session.time_nodes(x, runs=runs)


def format_profile(rows: list[dict], top: int = 25) -> str:
    total = sum(r["ms"] for r in rows) or 1.0
    by_op: dict[str, float] = {}
    for r in rows:
        by_op[r["op"]] = by_op.get(r["op"], 0.0) + r["ms"]
    lines = [f"total {total:.3f} ms over {len(rows)} nodes", "| op | ms | share |", "|---|---:|---:|"]
    lines += [f"| {op} | {ms:.3f} | {ms / total:.1%} |" for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1])]
    lines += ["", f"slowest {min(top, len(rows))} nodes:", "| node | op | ms | share |", "|---|---|---:|---:|"]
    for r in sorted(rows, key=lambda r: -r["ms"])[:top]:
        lines.append(f"| {r['name']} | {r['op']} | {r['ms']:.3f} | {r['ms'] / total:.1%} |")
    return "\n".join(lines)


def format_results(results: list[BenchResult], model: str) -> str:
    lines = [f"model {model}, CPU {cpu_model()}, threads {results[0].threads if results else '?'}",
             "| batch | engine | median ms | p10 ms | p90 ms | ms/image | peer/ours | max abs diff | note |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    fmt = lambda v, spec=".3f": "" if v is None else format(v, spec)  # noqa: E731
    for r in results:
        lines.append(f"| {r.batch} | {r.engine} | {fmt(r.median_ms)} | {fmt(r.p10_ms)} | {fmt(r.p90_ms)} | "
                     f"{fmt(r.ms_per_image, '.4f')} | {fmt(r.ratio_to_ours, '.2f')} | {fmt(r.max_abs_diff, '.2g')} | {r.note} |")
    return "\n".join(lines)


def as_json(results: list[BenchResult]) -> list[dict]:
    return [asdict(r) for r in results]
