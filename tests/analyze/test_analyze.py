"""analyze / format_analysis on hand-built IR graphs (numpy only) with hand-computed numbers."""

import numpy as np
import pytest

from deepslim.analyze import analyze, format_analysis, infer_shapes, stored_bytes, totals
from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Encoding, Graph, Value


def _const(g: Graph, name: str, *shape: int, rng=np.random.default_rng(0)) -> str:
    g.add_constant(name, rng.standard_normal(shape).astype(np.float32) * 0.1)
    return name


def _act(g: Graph, name: str, *shape: int) -> str:
    g.add_value(Value(name, shape))
    return name


def lenet5() -> Graph:
    g = Graph()
    g.inputs = [_act(g, "input", -1, 1, 28, 28)]
    g.add_node("conv2d", "conv1", ["input", _const(g, "conv1.weight", 20, 1, 5, 5), _const(g, "conv1.bias", 20)],
               [_act(g, "c1", -1, 20, 24, 24)])
    g.add_node("maxpool2d", "pool1", ["c1"], [_act(g, "p1", -1, 20, 12, 12)], kernel=[2, 2])
    g.add_node("conv2d", "conv2", ["p1", _const(g, "conv2.weight", 50, 20, 5, 5), _const(g, "conv2.bias", 50)],
               [_act(g, "c2", -1, 50, 8, 8)])
    g.add_node("maxpool2d", "pool2", ["c2"], [_act(g, "p2", -1, 50, 4, 4)], kernel=[2, 2])
    g.add_node("flatten", "flatten", ["p2"], [_act(g, "f", -1, 800)])
    g.add_node("dense", "fc1", ["f", _const(g, "fc1.weight", 500, 800), _const(g, "fc1.bias", 500)], [_act(g, "h", -1, 500)])
    g.add_node("relu", "relu", ["h"], [_act(g, "r", -1, 500)])
    g.add_node("dense", "fc2", ["r", _const(g, "fc2.weight", 10, 500), _const(g, "fc2.bias", 10)], [_act(g, "output", -1, 10)])
    g.outputs = ["output"]
    g.validate()
    return g


def lenet300() -> Graph:
    g = Graph()
    g.inputs = [_act(g, "input", -1, 784)]
    prev = "input"
    for i, (k, m) in enumerate([(784, 300), (300, 100), (100, 10)], start=1):
        out = _act(g, f"fc{i}", -1, m)
        g.add_node("dense", f"fc{i}", [prev, _const(g, f"fc{i}.weight", m, k), _const(g, f"fc{i}.bias", m)], [out])
        prev = out
        if i < 3:
            g.add_node("relu", f"relu{i}", [out], [_act(g, f"relu{i}", -1, m)])
            prev = f"relu{i}"
    g.outputs = [prev]
    return g


def test_lenet5_counts():
    stats = analyze(lenet5())
    by = {s.name: s for s in stats}
    assert by["conv1"].params == 20 * 1 * 5 * 5 + 20 == 520
    assert by["conv1"].macs == 20 * 24 * 24 * 25 == 288_000
    assert by["conv1"].output_shape == (1, 20, 24, 24)
    assert by["conv2"].params == 25_050 and by["conv2"].macs == 50 * 8 * 8 * 20 * 25 == 1_600_000
    assert by["fc1"].params == 400_500 and by["fc1"].macs == 400_000
    assert by["fc2"].params == 5_010 and by["fc2"].macs == 5_000
    assert by["pool1"].macs == 0 and by["pool1"].other_ops == 20 * 12 * 12 * 3
    assert by["relu"].other_ops == 500
    t = totals(stats)
    assert t.params == 431_080
    assert t.macs == 2_293_000
    assert t.weight_bytes == 431_080 * 4 == t.stored_bytes
    # liveness: pool1 holds conv1's output (46,080 B) and its own (11,520 B); the input is already freed
    assert by["conv1"].live_bytes == 784 * 4 + 46_080
    assert by["pool1"].live_bytes == 46_080 + 11_520
    assert t.peak_live_bytes == 57_600 and t.peak_layer == "pool1"
    assert t.activation_bytes == 4 * (11_520 + 2_880 + 3_200 + 800 + 800 + 500 + 500 + 10)
    assert by["conv1"].energy_pj == pytest.approx(288_000 * 4.6 + 520 * 640)


def test_lenet300_counts():
    stats = analyze(lenet300())
    t = totals(stats)
    assert t.params == 266_610
    assert t.macs == 266_200
    assert [s.live_bytes for s in stats] == [4 * (784 + 300), 4 * 600, 4 * 400, 4 * 200, 4 * 110]
    assert t.peak_layer == "fc1"
    assert t.energy_compute_pj == pytest.approx(266_200 * 4.6)
    assert t.energy_dram_pj == pytest.approx(266_610 * 640.0)


def test_graph_output_stays_live_and_shared_constant_counted_once():
    g = Graph()
    g.inputs = [_act(g, "x", -1, 4)]
    _const(g, "w", 4, 4)
    g.add_node("dense", "a", ["x", "w"], [_act(g, "y1", -1, 4)])
    g.add_node("dense", "b", ["y1", "w"], [_act(g, "y2", -1, 4)])
    g.add_node("relu", "c", ["y2"], [_act(g, "y3", -1, 4)])
    g.outputs = ["y1", "y3"]
    stats = analyze(g)
    assert [s.params for s in stats] == [16, 0, 0]
    assert [s.macs for s in stats] == [16, 16, 0]
    assert [s.live_bytes for s in stats] == [32, 32, 48]  # y1 is an output: live to the end


def test_stored_bytes_sparse_and_codebook():
    data = np.zeros(21, np.float32)
    data[[5, 7, 16]] = [1.0, 2.0, 3.0]
    g = Graph()
    # index_bits 2: runs of up to 3 zeros; gaps 5, 1, 8 need 1 + 0 + 2 fillers -> 6 entries
    v = g.add_constant("s", data, Encoding(layout="sparse_rel", index_bits=2))
    assert stored_bytes(v) == 2 + 6 * 4
    v = g.add_constant("c", data, Encoding(layout="sparse_rel", index_bits=2, codebook=[0, 1, 2, 3], cluster_bits=2))
    assert stored_bytes(v) == 2 + 2 + 4 * 4
    v = g.add_constant("d", data, Encoding(codebook=[0, 1, 2, 3], cluster_bits=2))
    assert stored_bytes(v) == 6 + 16  # 21 indices of 2 bits + 4 centroids
    v = g.add_constant("r", data)
    assert stored_bytes(v) == 84


def test_infer_shapes_matches_reference_run():
    g = Graph()
    g.inputs = [_act(g, "x", -1, 3, 11, 10)]
    g.add_node("conv2d", "c", ["x", _const(g, "w", 4, 3, 3, 2)], [_act(g, "y", 0)],
               strides=[2, 1], pads=[1, 0, 2, 1], dilations=[1, 2])
    g.add_node("maxpool2d", "p", ["y"], [_act(g, "z", 0)], kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    g.add_node("avgpool2d", "a", ["z"], [_act(g, "u", 0)], kernel=[2, 2], ceil_mode=1)
    g.add_node("flatten", "f", ["u"], [_act(g, "v", 0)])
    g.outputs = ["v"]
    shapes = infer_shapes(g, batch=2)
    x = np.random.default_rng(1).standard_normal((2, 3, 11, 10)).astype(np.float32)
    assert shapes["v"] == run_graph(g, x).shape
    assert shapes["y"] == (2, 4, 6, 9)  # (11+3-2-1)//2+1, (10+1-2-1)+1


def test_format_analysis_table():
    text = format_analysis(analyze(lenet5()))
    lines = text.splitlines()
    assert lines[0].split()[:5] == ["layer", "op", "output", "params", "MACs"]
    total = next(line for line in lines if line.startswith("total"))
    assert "431,080" in total and "2,293,000" in total
    conv1 = next(line for line in lines if line.startswith("conv1"))
    assert "1x20x24x24" in conv1 and "288,000" in conv1
    # columns are aligned: every row of the table has the same width up to its last cell
    rows = lines[: lines.index("")]
    assert len({len(r) for r in rows}) == 1
    assert "4.6 pJ per MAC" in text and "640 pJ" in text and "Horowitz" in text
    assert "peak activation memory" in text and "56.2 KiB" in text  # 57,600 B
