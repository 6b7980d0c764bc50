"""Write the small .dsm fixtures in tests/fixtures/ that the Python and native readers both load.

    .venv/bin/python tools/make_fixtures.py [OUT_DIR]

Each model NAME.dsm comes with NAME.input.bin and NAME.output.bin: raw little-endian float32 of an
input (batch 1) and of the output a plain numpy reference forward pass computes for it (float64
arithmetic, rounded to float32 at the end). bad_version.dsm is tiny_dense.dsm marked version 2.
Everything is seeded, so running this again gives identical bytes (tests/format/test_fixtures.py).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deepslim.format import encode_dsm  # noqa: E402
from deepslim.ir import Encoding, Graph, Value  # noqa: E402

SEED = 20240601


# ---- numpy reference forward pass (NCHW, float64) ----

def conv2d(x, w, b, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1, activation=0):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (h + top + bottom - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + left + right - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // group
    for g in range(group):
        xs = xp[:, g * cg : (g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                di, dj = i * dilations[0], j * dilations[1]
                patch = xs[:, :, di : di + strides[0] * oh : strides[0], dj : dj + strides[1] * ow : strides[1]]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og : (g + 1) * og, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return np.maximum(out, 0) if activation == 1 else out


def maxpool2d(x, kernel, strides=None, pads=(0, 0, 0, 0)):
    strides = strides or kernel
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=-np.inf)
    oh = (x.shape[2] + top + bottom - kernel[0]) // strides[0] + 1
    ow = (x.shape[3] + left + right - kernel[1]) // strides[1] + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            out = np.maximum(out, xp[:, :, i : i + strides[0] * oh : strides[0], j : j + strides[1] * ow : strides[1]])
    return out


def dense(x, w, b, activation=0):
    out = np.einsum("nk,mk->nm", x, w) + (0 if b is None else b)
    return np.maximum(out, 0) if activation == 1 else out


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def run_reference(graph: Graph, x: np.ndarray) -> np.ndarray:
    env = {graph.inputs[0]: x.astype(np.float64)}
    env.update({v.name: v.data.astype(np.float64) for v in graph.constants()})
    for node in graph.nodes:
        args = [env[n] if n else None for n in node.inputs]
        a = node.attrs
        if node.op == "conv2d":
            y = conv2d(*args + [None] * (3 - len(args)), **a)
        elif node.op == "dense":
            y = dense(*args + [None] * (3 - len(args)), **a)
        elif node.op == "maxpool2d":
            y = maxpool2d(args[0], **a)
        elif node.op == "relu":
            y = np.maximum(args[0], 0)
        elif node.op == "flatten":
            axis = a.get("axis", 1)
            y = args[0].reshape(int(np.prod(args[0].shape[:axis])), -1)
        elif node.op == "softmax":
            y = softmax(args[0], a.get("axis", -1))
        else:
            raise ValueError(f"the reference has no {node.op}")
        env[node.outputs[0]] = y
    return env[graph.outputs[0]].astype(np.float32)


# ---- the fixture models ----

def _quantize(w: np.ndarray, keep: float, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Prune to the `keep` fraction of largest magnitudes, share the rest among `clusters` centroids
    (quantiles of the kept weights); returns (weights, codebook with 0.0 first)."""
    threshold = np.quantile(np.abs(w), 1 - keep)
    kept = w[np.abs(w) > threshold]
    centroids = np.quantile(kept, (np.arange(clusters - 1) + 0.5) / (clusters - 1)).astype(np.float32)
    book = np.concatenate([[0.0], centroids]).astype(np.float32)
    nearest = centroids[np.argmin(np.abs(w[..., None] - centroids), axis=-1)]
    return np.where(np.abs(w) > threshold, nearest, 0).astype(np.float32), book


def tiny_net(compressed: bool) -> Graph:
    """x (1,1,8,8) -> conv2d 3x3 pad 1 (4 ch) -> relu -> maxpool 2x2 -> flatten -> dense 64->10 -> softmax."""
    rng = np.random.default_rng(SEED)
    conv_w = (rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32)
    conv_b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    fc_w = (rng.standard_normal((10, 64)) * 0.2).astype(np.float32)
    fc_b = (rng.standard_normal(10) * 0.1).astype(np.float32)
    conv_enc = fc_enc = None
    if compressed:
        conv_w, conv_book = _quantize(conv_w, keep=0.6, clusters=8)
        fc_w, fc_book = _quantize(fc_w, keep=0.25, clusters=16)
        conv_enc = Encoding("sparse_rel", 1, conv_book, 4, huffman=False)  # fillers, bitpack
        fc_enc = Encoding("sparse_rel", 5, fc_book, 8, huffman=True)  # huffman wins here
    g = Graph()
    for name, shape in (("input", (1, 1, 8, 8)), ("conv1", (1, 4, 8, 8)), ("relu1", (1, 4, 8, 8)),
                        ("pool1", (1, 4, 4, 4)), ("flat", (1, 64)), ("fc", (1, 10)), ("prob", (1, 10))):
        g.add_value(Value(name, shape))
    g.add_constant("conv1.weight", conv_w, conv_enc)
    g.add_constant("conv1.bias", conv_b)
    g.add_constant("fc.weight", fc_w, fc_enc)
    g.add_constant("fc.bias", fc_b)
    g.add_node("conv2d", "conv1", ["input", "conv1.weight", "conv1.bias"], ["conv1"], pads=[1, 1, 1, 1])
    g.add_node("relu", "relu1", ["conv1"], ["relu1"])
    g.add_node("maxpool2d", "pool1", ["relu1"], ["pool1"], kernel=[2, 2], strides=[2, 2])
    g.add_node("flatten", "flatten", ["pool1"], ["flat"], axis=1)
    g.add_node("dense", "fc", ["flat", "fc.weight", "fc.bias"], ["fc"])
    g.add_node("softmax", "softmax", ["fc"], ["prob"], axis=-1)
    g.inputs, g.outputs = ["input"], ["prob"]
    return g


def build_fixtures() -> dict[str, bytes]:
    """File name -> bytes of every fixture."""
    files = {}
    x = np.random.default_rng(SEED + 1).standard_normal((1, 1, 8, 8)).astype(np.float32)
    for name, compressed in (("tiny_dense", False), ("tiny_compressed", True)):
        graph = tiny_net(compressed)
        files[f"{name}.dsm"] = encode_dsm(graph)[0]
        files[f"{name}.input.bin"] = x.astype("<f4").tobytes()
        files[f"{name}.output.bin"] = run_reference(graph, x).astype("<f4").tobytes()
    bad = bytearray(files["tiny_dense.dsm"])
    struct.pack_into("<I", bad, 8, 2)  # the version field
    files["bad_version.dsm"] = bytes(bad)
    return files


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "tests" / "fixtures"
    out.mkdir(parents=True, exist_ok=True)
    for name, data in build_fixtures().items():
        (out / name).write_bytes(data)
        print(f"{out / name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
