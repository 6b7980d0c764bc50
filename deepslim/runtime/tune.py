"""Kernel choice per node by measurement, cached beside the model.

Some ops can run a node with one of several kernels (conv2d: "gemm", "pixels", "winograd",
"winograd23"); the runtime's own rule picks one from the shapes. `tune` measures instead: it makes
one session per kernel name (that kernel asked for on every node whose op has it; the op keeps its
rule where the kernel does not apply) plus one with the rules, checks each session's output against
the rules' one, times every node in the whole model (so weights and activations come from where
they really live, not a hot cache), interleaving the sessions round by round, and keeps per node
the kernel that measured fastest. The result goes to MODEL.dsm.tune.json, keyed by CPU model, SIMD
level and thread count; `Session(path, threads)` reads it from there when it matches.

    from deepslim.runtime.tune import tune
    result = tune("resnet18.dsm", threads=1)      # writes resnet18.dsm.tune.json
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CACHE_FORMAT = 1


def cache_path(model: str | os.PathLike) -> Path:
    """Where the tuning of `model` is cached: beside it, MODEL.dsm.tune.json."""
    model = Path(model)
    return model.with_name(model.name + ".tune.json")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def _runtime_sha256() -> str:
    """The native library's SHA-256: a rebuilt runtime has other kernels, so its choices are re-timed."""
    from deepslim.runtime.session import library_path

    return _file_sha256(library_path())


def _machine_key(threads: int) -> dict:
    from deepslim.runtime.session import isa

    return {"cpu": cpu_model(), "isa": isa(), "threads": threads, "runtime": _runtime_sha256()}


def cached_kernels(model: str | os.PathLike, threads: int) -> dict[str, str]:
    """The kernel choices cached for `model` on this CPU, SIMD level and thread count, or {} when
    there are none (no cache, another machine, a changed model, or an unreadable cache file, which
    is reported once on stderr and otherwise ignored)."""
    path = cache_path(model)
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        if data.get("format") != CACHE_FORMAT or data.get("model_sha256") != _file_sha256(Path(model)):
            return {}
        key = _machine_key(threads)
        for entry in data.get("entries", []):
            if all(entry.get(k) == v for k, v in key.items()):
                kernels = entry.get("kernels", {})
                if isinstance(kernels, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in kernels.items()):
                    return dict(kernels)
        return {}
    except (OSError, ValueError, AttributeError) as e:
        print(f"deepslim: ignoring the tuning cache {path}: {e}", file=sys.stderr)
        return {}


@dataclass
class NodeTiming:
    name: str
    op: str
    rule: str                     # the kernel the op's rule picks
    chosen: str                   # the fastest measured
    ms: dict[str, float] = field(default_factory=dict)  # median ms per kernel measured


@dataclass
class TuneResult:
    model: Path
    threads: int
    kernels: dict[str, str]       # node -> chosen kernel (nodes with a choice)
    nodes: list[NodeTiming]
    rejected: dict[str, str]      # kernel -> why its outputs were not accepted
    cache: Path | None = None

    @property
    def rule_ms(self) -> float:
        return sum(n.ms.get(n.rule, 0.0) for n in self.nodes)

    @property
    def tuned_ms(self) -> float:
        return sum(n.ms.get(n.chosen, 0.0) for n in self.nodes)


def absorbed_nodes(ops: list[str], rule_ms: list[float]) -> list[list[int]]:
    """Per node, the nodes right before it, of its op, that take no time in the rules' session
    (`rule_ms`): the runtime runs them inside it (a depthwise conv2d and the 1x1 before it, fused
    into the 1x1 that reads them). Their time counts for that node in every session, so that a
    kernel which undoes the fusion is charged for the nodes it brings back."""
    absorbed: list[list[int]] = [[] for _ in ops]
    for i in range(1, len(ops)):
        j = i - 1
        while j >= 0 and rule_ms[j] == 0.0 and ops[j] == ops[i]:
            absorbed[i].append(j)
            j -= 1
    return absorbed


def tune(model: str | os.PathLike, threads: int = 1, rounds: int = 7, runs: int = 5, tolerance: float = 1e-3,
         write_cache: bool = True, progress: bool = False) -> TuneResult:
    """Measure every kernel choice of every node of `model` at `threads` threads (see the module
    docstring) and, with `write_cache`, store the winners in MODEL.dsm.tune.json (other machines'
    and thread counts' entries in that file are kept). A kernel whose session's output differs from
    the rules' by more than `tolerance` x max(1, max |output|) is not used anywhere."""
    from deepslim.runtime.session import Session

    model = Path(model)
    base = Session(model, threads=threads, profile=True, kernels={})
    rows = base.node_kernels()
    names = sorted({k for r in rows for k in r["choices"]})
    sessions = {"": base}
    for k in names:
        sessions[k] = Session(model, threads=threads, profile=True,
                              kernels={r["name"]: k for r in rows if k in r["choices"]})
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(tuple(d if d > 0 else 1 for d in shape)).astype(np.float32)
              for shape in base.input_shapes]

    def outputs(s):
        y = s.run(*inputs)
        return list(y.values()) if isinstance(y, dict) else [y]

    reference = outputs(base)
    rejected: dict[str, str] = {}
    for k in names:
        for want, got in zip(reference, outputs(sessions[k])):
            err = float(np.max(np.abs(got - want))) if want.size else 0.0
            bound = tolerance * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
            if not err <= bound:
                rejected[k] = f"output differs from the rules' by {err:.3g} (bound {bound:.3g})"
    live = {k: s for k, s in sessions.items() if k not in rejected}
    kernels_of = {k: s.node_kernels() for k, s in live.items()}
    samples: dict[str, list[list[float]]] = {k: [[] for _ in rows] for k in live}
    for r in range(rounds):
        for k, s in live.items():  # interleaved: drift on a shared machine hits every kernel alike
            for i, row in enumerate(s.time_nodes(*inputs, runs=runs, warmup=1)):
                samples[k][i].append(row["ms"])
        if progress:
            print(f"\rtuning {model.name}: round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    medians = {k: [float(np.median(t)) for t in samples[k]] for k in live}
    absorbed = absorbed_nodes([r["op"] for r in rows], medians[""])
    nodes, chosen = [], {}
    for i, row in enumerate(rows):
        if not row["choices"]:
            continue
        ms: dict[str, float] = {}
        for k in live:
            actual = kernels_of[k][i]["kernel"]
            t = medians[k][i] + sum(medians[k][j] for j in absorbed[i])
            ms[actual] = min(ms.get(actual, t), t)
        best = min(ms, key=ms.get)
        nodes.append(NodeTiming(row["name"], row["op"], row["kernel"], best, ms))
        if best in row["choices"]:  # a kernel only the rule picks (e.g. depthwise) is not a choice
            chosen[row["name"]] = best
    result = TuneResult(model, threads, chosen, nodes, rejected)
    if write_cache:
        result.cache = _write_cache(model, threads, chosen, nodes)
    return result


def _write_cache(model: Path, threads: int, kernels: dict[str, str], nodes: list[NodeTiming]) -> Path:
    path = cache_path(model)
    digest = _file_sha256(model)
    entries = []
    if path.is_file():
        try:
            old = json.loads(path.read_text())
            if old.get("format") == CACHE_FORMAT and old.get("model_sha256") == digest:
                entries = list(old.get("entries", []))
        except (OSError, ValueError, AttributeError):
            entries = []
    key = _machine_key(threads)
    entries = [e for e in entries if not all(e.get(k) == v for k, v in key.items())]
    entries.append({**key, "kernels": kernels,
                    "ms": {n.name: {k: round(v, 4) for k, v in n.ms.items()} for n in nodes}})
    data = {"format": CACHE_FORMAT, "model": model.name, "model_sha256": digest, "entries": entries}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def format_result(result: TuneResult) -> str:
    lines = [f"model {result.model.name}, threads {result.threads}: nodes with a kernel choice, median ms in-model",
             "| node | op | rule | chosen | " + " | ".join(sorted({k for n in result.nodes for k in n.ms})) + " |"]
    names = sorted({k for n in result.nodes for k in n.ms})
    lines.append("|---|---|---|---|" + "---:|" * len(names))
    for n in result.nodes:
        cells = [f"{n.ms[k]:.3f}" if k in n.ms else "" for k in names]
        lines.append(f"| {n.name} | {n.op} | {n.rule} | {n.chosen} | " + " | ".join(cells) + " |")
    changed = sum(n.chosen != n.rule for n in result.nodes)
    lines.append(f"\n{changed} of {len(result.nodes)} nodes changed; their sum {result.rule_ms:.3f} -> "
                 f"{result.tuned_ms:.3f} ms")
    for k, why in result.rejected.items():
        lines.append(f"kernel {k!r} not used: {why}")
    if result.cache:
        lines.append(f"cached in {result.cache} (Session(path, threads={result.threads}) uses it)")
    return "\n".join(lines)
