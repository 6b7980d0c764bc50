"""The measured per-layer fp32 fallback: decisions from an injected timer (no timing in tests), the
record in the .dsm, `deepslim inspect`, and the quantize command's options."""

import argparse

import numpy as np
import pytest

from deepslim.format import read_dsm, write_dsm
from deepslim.format.inspect import format_inspect
from deepslim.quant import quantize_graph, run_quantized
from deepslim.quant.fallback import RECORD, FallbackReport, profile_graph, quantize_with_fallback, read_report
from test_quantize import CALIB, TEST, small_cnn


def _fake_timer(int8_slow: dict[str, float], calls: list, conversion_ms: float = 0.0):
    """fp32 nodes take 1 ms; int8 ones 0.5 ms, except those in `int8_slow` (their int8 ms); quantize
    and dequantize nodes `conversion_ms` (the graph input's quantize and the output's dequantize: 0)."""
    def timer(graph, x, threads):
        calls.append(sorted(n.op for n in graph.nodes))
        out = {}
        for node in graph.nodes:
            if node.op in ("quantize", "dequantize"):
                edge = node.inputs[0] in graph.inputs or node.outputs[0] in graph.outputs
                out[node.name] = 0.0 if edge else conversion_ms
            elif node.op.startswith("q"):
                out[node.name] = int8_slow.get(node.name, 0.5)
            else:
                out[node.name] = 1.0
        return out
    return timer


def _quantize(graph):
    return lambda keep: quantize_graph(graph, calib=CALIB, keep_fp32=keep)


def test_slower_int8_layers_fall_back_to_fp32_and_the_decision_is_stored(tmp_path):
    graph = small_cnn()
    calls = []
    # conv2's int8 time includes the hard swish qlut split off it (conv2.act): 2.5 + 0.5 > 1.1; in
    # fp32 the split-off activation stays a node of its own (1 ms): 2 ms < 3 ms, still worth it
    q, report = quantize_with_fallback(graph, _quantize(graph), CALIB[:1], timer=_fake_timer(
        {"fc4": 1.5, "conv2": 2.5}, calls), passes=1, progress=False)
    assert report.keep_fp32 == ["conv2", "fc4"]
    assert report.rounds == 1
    assert len(calls) == 3  # fp32, first int8 candidate, the re-quantized one (its islands pay)
    ops = {n.name: n.op for n in q.nodes}
    assert ops["conv2"] == "conv2d" and ops["fc4"] == "dense"
    assert ops["conv1"] == "qconv2d" and ops["fc3"] == "qdense" and ops["fc5"] == "qdense"
    assert report.nodes["fc4"].int8_ms == 1.5 and report.nodes["fc4"].fp32_ms == 1.0
    assert report.nodes["conv2"].int8_ms == pytest.approx(3.0)
    assert not report.nodes["conv1"].fp32
    # the graph is the one keep_fp32 gives, plus the record no node reads
    expected = quantize_graph(graph, calib=CALIB, keep_fp32=["conv2", "fc4"])
    np.testing.assert_array_equal(run_quantized(q, TEST), run_quantized(expected, TEST))
    assert RECORD in q.values and all(RECORD not in n.inputs for n in q.nodes)

    path = tmp_path / "fb.dsm"
    write_dsm(q, path)
    stored = read_report(read_dsm(path))
    assert stored.keep_fp32 == ["conv2", "fc4"] and stored.nodes["fc4"].int8_ms == 1.5
    text = format_inspect(path)
    assert "fp32 (int8 measured 1.5000 ms > fp32 1.0000 ms)" in text
    assert "2 of 5 conv/dense layers kept in fp32" in text


def test_small_differences_stay_int8():
    graph = small_cnn()
    calls = []
    # 1.05 ms is within 10% of fp32's 1 ms; 1.0015 ms within 2 us: both stay int8
    q, report = quantize_with_fallback(graph, _quantize(graph), CALIB[:1], timer=_fake_timer(
        {"fc3": 1.05, "fc4": 1.0015}, calls), passes=1, progress=False)
    assert report.keep_fp32 == [] and report.rounds == 0 and len(calls) == 2
    assert {n.op for n in q.nodes} >= {"qconv2d", "qdense"}
    assert report.fp32_total_ms > 0 and report.int8_total_ms > 0


def test_an_island_whose_conversions_cost_more_goes_back_to_int8():
    graph = small_cnn()
    # conv1 (1.5 ms int8) alone: fp32 1 ms + quantize after it 0.4 ms < 1.5: stays fp32.
    # fc3 and fc4 (1.5 ms each) are two islands sharing the dequantize before them, each with a
    # quantize after it for the qadd: 1 ms + 2 x 0.4 ms = 1.8 ms >= 1.5 ms: both back to int8.
    calls = []
    q, report = quantize_with_fallback(graph, _quantize(graph), CALIB[:1], timer=_fake_timer(
        {"conv1": 1.5, "fc3": 1.5, "fc4": 1.5}, calls, conversion_ms=0.4), passes=1, progress=False)
    assert report.rounds == 2 and len(calls) == 3
    assert report.keep_fp32 == ["conv1"]
    assert report.nodes["conv1"].boundary_ms == pytest.approx(0.4)
    assert report.nodes["fc3"].boundary_ms == pytest.approx(0.8) and not report.nodes["fc3"].fp32
    ops = {n.name: n.op for n in q.nodes}
    assert ops["conv1"] == "conv2d" and ops["fc3"] == "qdense" and ops["fc4"] == "qdense"
    assert "its fp32 island's quantize/dequantize 0.4000 ms" in report.nodes["conv1"].describe()

    # rounds=1: the per-node rule only, no second timing
    calls = []
    q, report = quantize_with_fallback(graph, _quantize(graph), CALIB[:1], timer=_fake_timer(
        {"conv1": 1.5, "fc3": 1.5, "fc4": 1.5}, calls, conversion_ms=0.4), rounds=1, passes=1, progress=False)
    assert report.rounds == 1 and len(calls) == 2 and report.keep_fp32 == ["conv1", "fc3", "fc4"]
    # rounds=0: measured and recorded, nothing re-quantized
    q, report = quantize_with_fallback(graph, _quantize(graph), CALIB[:1], timer=_fake_timer(
        {"conv1": 1.5}, []), rounds=0, passes=1, progress=False)
    assert report.rounds == 0 and report.keep_fp32 == [] and {n.name: n.op for n in q.nodes}["conv1"] == "qconv2d"


def test_each_node_keeps_its_least_time_over_the_passes():
    # the first int8 timing is disturbed (conv1 3 ms), the next two are not: conv1 stays int8; fc3
    # is slow in every pass and falls back. Each pass times fp32 then int8.
    graph = small_cnn()
    calls = []
    steady = _fake_timer({"fc3": 1.5}, [])
    disturbed = _fake_timer({"fc3": 1.5, "conv1": 3.0}, [])

    def timer(g, x, threads):
        calls.append(any(n.op.startswith("q") for n in g.nodes))
        return (disturbed if len(calls) == 2 else steady)(g, x, threads)

    q, report = quantize_with_fallback(graph, _quantize(graph), CALIB[:1], timer=timer, passes=3, progress=False)
    assert calls[:6] == [False, True] * 3 and len(calls) == 9  # 3 passes of (fp32, int8), then 3 of the candidate
    assert report.keep_fp32 == ["fc3"]
    assert report.nodes["conv1"].int8_ms == 0.5 and not report.nodes["conv1"].fp32


def test_no_record_without_a_measurement(tmp_path):
    q = quantize_graph(small_cnn(), calib=CALIB)
    write_dsm(q, tmp_path / "q.dsm")
    assert read_report(read_dsm(tmp_path / "q.dsm")) is None
    assert "kept in fp32" not in format_inspect(tmp_path / "q.dsm")


def test_int16_layers_are_timed_and_named_as_int16():
    graph = small_cnn()
    calls = []
    q, report = quantize_with_fallback(
        graph, lambda keep: quantize_graph(graph, calib=CALIB, keep_fp32=keep,
                                           int16=[n for n in ("conv1", "fc3") if n not in keep]),
        CALIB[:1], timer=_fake_timer({"fc3": 1.5}, calls), passes=1, progress=False)
    assert report.keep_fp32 == ["fc3"]
    assert report.nodes["conv1"].activation_bits == 16 and report.nodes["fc4"].activation_bits == 8
    assert report.nodes["fc3"].describe() == "fp32 (int16 measured 1.5000 ms > fp32 1.0000 ms)"
    assert report.nodes["conv1"].describe().startswith("int16 (int16 measured 0.5000 ms")
    assert report.nodes["fc4"].describe().startswith("int8 (int8 measured")


def test_report_json_round_trip():
    r = FallbackReport(2, 1, fp32_total_ms=3.5, int8_total_ms=4.25)
    from deepslim.quant.fallback import NodeTiming

    r.nodes["a"] = NodeTiming("qconv2d", 0.25, 0.125, True, 0.0625)
    r.nodes["b"] = NodeTiming("qdense", 0.01, 0.02, False)
    r.nodes["c"] = NodeTiming("qconv2d", 0.5, 0.25, True, activation_bits=16)
    back = FallbackReport.from_json(r.to_json())
    assert back == r


def test_profile_graph_times_every_node_in_the_runtime():
    pytest.importorskip("deepslim.runtime")
    from deepslim.quant.fallback import runtime_available

    if runtime_available() is not None:
        pytest.skip("native runtime not built")
    q = quantize_graph(small_cnn(), calib=CALIB)
    ms = profile_graph(q, CALIB[:1], warmup=1, runs=2)
    assert set(ms) == {n.name for n in q.nodes}
    assert all(v >= 0 for v in ms.values())


def _parse(argv):
    from deepslim.quantize_cmd import build_quantize_parser

    p = argparse.ArgumentParser()
    build_quantize_parser(p.add_subparsers())
    return p.parse_args(argv)


def test_quantize_command_fallback_options(tmp_path, capsys, monkeypatch):
    from deepslim.quant import fallback

    src, calib = tmp_path / "f.dsm", tmp_path / "c.npy"
    write_dsm(small_cnn(), src)
    np.save(calib, CALIB)
    out = tmp_path / "q.dsm"
    args = _parse(["quantize", str(src), "--calib", str(calib), "-o", str(out), "--fallback", "none"])
    assert args.func(args) == 0
    assert read_report(read_dsm(out)) is None and "fallback:" not in capsys.readouterr().out

    # measure, with the timer replaced: fc5 is slower in int8
    monkeypatch.setattr(fallback, "profile_graph", _fake_timer({"fc5": 3.0}, []))
    monkeypatch.setattr(fallback, "runtime_available", lambda: None)
    args = _parse(["quantize", str(src), "--calib", str(calib), "-o", str(out), "--threads", "2"])
    assert args.fallback is None  # default: measure when the runtime loads
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "1 kept in fp32" in text and "fc5: fp32 (int8 measured 3.0000 ms > fp32 1.0000 ms)" in text
    report = read_report(read_dsm(out))
    assert report.keep_fp32 == ["fc5"] and report.threads == 2

    # no runtime: the default falls back to none with a note; an explicit measure is an error
    monkeypatch.setattr(fallback, "runtime_available", lambda: "libdeepslim.so not found")
    args = _parse(["quantize", str(src), "--calib", str(calib), "-o", str(out)])
    assert args.func(args) == 0
    assert "note: the native runtime did not load" in capsys.readouterr().out
    args = _parse(["quantize", str(src), "--calib", str(calib), "-o", str(out), "--fallback", "measure"])
    with pytest.raises(ImportError, match="needs the native runtime"):
        args.func(args)
    args = _parse(["quantize", str(src), "--calib", str(calib), "-o", str(out), "--threads", "0"])
    with pytest.raises(ValueError, match="--threads"):
        args.func(args)
