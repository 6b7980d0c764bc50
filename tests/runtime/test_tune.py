"""Per-node kernel choices (Session(kernels=...), node_kernels) and `deepslim tune`'s cache."""

import json

import numpy as np
import pytest

from deepslim.cli import main
from deepslim.format import write_dsm
from deepslim.ir import Graph, Value
from deepslim.runtime import InvalidArgumentError, Session
from deepslim.runtime.session import isa
from deepslim.runtime.tune import absorbed_nodes, cache_path, cached_kernels, tune


def _conv_net(path, c=16, o=16, hw=12):
    """x -> conv 3x3 s1 p1 (Winograd-shaped) + relu -> conv 1x1 -> depthwise 3x3 -> maxpool 2x2 -> y."""
    rng = np.random.default_rng(3)
    g = Graph()
    g.add_value(Value("x", (1, c, hw, hw)))
    g.add_constant("c1.w", rng.standard_normal((o, c, 3, 3)).astype(np.float32) * 0.2)
    g.add_constant("c1.b", rng.standard_normal(o).astype(np.float32))
    g.add_constant("c2.w", rng.standard_normal((o, o, 1, 1)).astype(np.float32) * 0.2)
    g.add_constant("dw.w", rng.standard_normal((o, 1, 3, 3)).astype(np.float32) * 0.2)
    for name in ("h1", "h2", "h3"):
        g.add_value(Value(name, (1, o, hw, hw)))
    g.add_value(Value("y", (1, o, hw // 2, hw // 2)))
    g.add_node("conv2d", "c1", ["x", "c1.w", "c1.b"], ["h1"], pads=[1, 1, 1, 1], activation=1)
    g.add_node("conv2d", "c2", ["h1", "c2.w"], ["h2"])
    g.add_node("conv2d", "dw", ["h2", "dw.w"], ["h3"], pads=[1, 1, 1, 1], group=o)
    g.add_node("maxpool2d", "pool", ["h3"], ["y"], kernel=[2, 2], strides=[2, 2])
    g.inputs, g.outputs = ["x"], ["y"]
    write_dsm(g, path)
    return path


def test_node_kernels_list_choices_and_a_choice_changes_the_kernel(tmp_path):
    model = _conv_net(tmp_path / "net.dsm")
    rule = Session(model, kernels={})
    rows = {r["name"]: r for r in rule.node_kernels()}
    assert rows["c1"]["op"] == "conv2d" and rows["c1"]["choices"] == ["gemm", "pixels", "winograd", "winograd23"]
    assert rows["pool"]["kernel"] == "" and rows["pool"]["choices"] == []
    x = np.random.default_rng(0).standard_normal((1, 16, 12, 12)).astype(np.float32)
    want = rule.run(x)
    for kernel in ("gemm", "pixels", "winograd", "winograd23"):
        s = Session(model, kernels={"c1": kernel})
        assert {r["name"]: r["kernel"] for r in s.node_kernels()}["c1"] == kernel
        np.testing.assert_allclose(s.run(x), want, atol=1e-4, rtol=1e-4)
    # Winograd does not apply to a 1x1 conv: the rule keeps its kernel
    for kernel in ("winograd", "winograd23"):
        s = Session(model, kernels={"c2": kernel})
        assert {r["name"]: r["kernel"] for r in s.node_kernels()}["c2"] in ("gemm", "pixels")


@pytest.mark.parametrize("kernels, message", [
    ({"nope": "gemm"}, "no node of that name"),
    ({"c1": "fast"}, "has no kernel 'fast'.*gemm,pixels,winograd,winograd23"),
    ({"pool": "gemm"}, "maxpool2d has no kernel choices"),
    ({"c1": ""}, "not of the form node=kernel"),
])
def test_bad_kernel_choices_are_refused_by_name(tmp_path, kernels, message):
    model = _conv_net(tmp_path / "net.dsm")
    with pytest.raises(InvalidArgumentError, match=message):
        Session(model, kernels=kernels)


def test_tune_caches_the_fastest_kernels_and_sessions_use_them(tmp_path):
    model = _conv_net(tmp_path / "net.dsm")
    result = tune(model, threads=1, rounds=2, runs=2)
    assert set(result.kernels) == {"c1", "c2"}  # not "dw": depthwise has no choice, whatever is asked
    for node in result.nodes:
        assert node.chosen == min(node.ms, key=node.ms.get)  # the fastest measured
        assert node.rule in node.ms
    assert {"gemm", "pixels", "winograd", "winograd23"} <= set(next(n for n in result.nodes if n.name == "c1").ms)
    assert result.cache == cache_path(model) and result.cache.is_file()
    assert cached_kernels(model, 1) == result.kernels
    assert cached_kernels(model, 2) == {}  # tuned for 1 thread only
    kernels = {r["name"]: r["kernel"] for r in Session(model).node_kernels()}
    assert {k: kernels[k] for k in result.kernels} == result.kernels
    assert Session(model).kernels == result.kernels and Session(model, kernels={}).kernels == {}


def test_a_stale_or_broken_cache_is_not_used(tmp_path, capsys):
    model = _conv_net(tmp_path / "net.dsm")
    tune(model, threads=1, rounds=1, runs=1)
    cache = cache_path(model)
    data = json.loads(cache.read_text())
    data["entries"][0]["cpu"] = "another CPU"
    cache.write_text(json.dumps(data))
    assert cached_kernels(model, 1) == {}
    tune(model, threads=1, rounds=1, runs=1)
    data = json.loads(cache.read_text())
    rule = {r["name"]: r["kernel"] for r in Session(model, kernels={}).node_kernels()}["c1"]
    data["entries"][-1]["kernels"] = {"c1": rule}
    cache.write_text(json.dumps(data))
    assert cached_kernels(model, 1) == {"c1": rule}
    data["entries"][-1]["runtime"] = "0" * 64  # tuned with another build of the native library
    cache.write_text(json.dumps(data))
    assert cached_kernels(model, 1) == {}
    cache.write_text("{not json")
    assert Session(model).kernels == {}
    assert "ignoring the tuning cache" in capsys.readouterr().err
    # A cache naming a kernel this runtime does not have (another version's): the rules, with a note.
    tune(model, threads=1, rounds=1, runs=1)
    data = json.loads(cache.read_text())
    data["entries"][0]["kernels"]["c1"] = "fft"
    cache.write_text(json.dumps(data))
    assert Session(model).kernels == {}
    assert "has no kernel 'fft'" in capsys.readouterr().err
    tune(model, threads=1, rounds=1, runs=1)
    model.write_bytes(_conv_net(tmp_path / "other.dsm", o=8).read_bytes())  # the model changed
    assert cached_kernels(model, 1) == {}


def test_tune_cli_prints_the_table_and_refuses_other_files(tmp_path, capsys):
    model = _conv_net(tmp_path / "net.dsm")
    assert main(["tune", str(model), "--rounds", "1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "| c1 | conv2d |" in out and "nodes changed" in out
    assert not cache_path(model).exists()
    assert main(["tune", str(tmp_path / "net.onnx")]) != 0
    assert "not a .dsm file" in capsys.readouterr().err


def _square_3x3_layer(tmp_path, channels, size):
    rng = np.random.default_rng(5)
    g = Graph()
    g.add_value(Value("x", (1, channels, size, size)))
    g.add_constant("c.w", rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.02)
    g.add_value(Value("y", (1, channels, size, size)))
    g.add_node("conv2d", "c", ["x", "c.w"], ["y"], pads=[1, 1, 1, 1])
    g.inputs, g.outputs = ["x"], ["y"]
    model = tmp_path / "layer.dsm"
    write_dsm(g, model)
    return model


def _kernel_at(model, level, monkeypatch, kernels):
    monkeypatch.setenv("DS_FORCE_ISA", level)
    try:
        s = Session(model, kernels=kernels)
    except InvalidArgumentError as e:
        if "is not available" not in str(e):
            raise
        pytest.skip(f"{level} is not available here")
    return {r["name"]: r["kernel"] for r in s.node_kernels()}["c"]


@pytest.mark.parametrize("level", ["avx2", "avx512"])
@pytest.mark.parametrize("channels, size, kernel", [
    (256, 14, "winograd"), (512, 7, "winograd23"), (64, 7, "winograd23"), (512, 14, "pixels"), (512, 6, "pixels")])
def test_the_rule_takes_the_winograd_that_pays(tmp_path, monkeypatch, level, channels, size, kernel):
    # ResNet-18's stage 2 (256 x 256 at 14 x 14): F(4x4, 3x3) 0.87-0.93 ms in-model against 2.27 as
    # pixels; stage 3 (512 x 512 at 7 x 7, 4 tiles of 4 x 4): F(2x2, 3x3) 1.67-1.71 against 2.24,
    # and 64 x 64 at 7 x 7 0.033 against 0.054 (winograd_rule). 512 x 512 at 14 x 14: F(4x4)'s 37 MB
    # of filters overflow the L3; at 6 x 6 F(2x2) has 9 tiles, under the 16 it needs.
    model = _square_3x3_layer(tmp_path, channels, size)
    assert _kernel_at(model, level, monkeypatch, {}) == kernel


@pytest.mark.parametrize("asked", ["gemm", "pixels", "winograd"])
def test_a_kernel_asked_for_replaces_the_rules_winograd(tmp_path, monkeypatch, asked):
    model = _square_3x3_layer(tmp_path, 512, 7)  # the rule: winograd23
    assert _kernel_at(model, "avx512", monkeypatch, {"c": asked}) == asked


def test_nodes_fused_into_a_later_node_count_for_it():
    # expand, depthwise (no time: run inside project), project, add (no time, another op), conv
    ops = ["conv2d", "conv2d", "conv2d", "add", "conv2d"]
    assert absorbed_nodes(ops, [0.0, 0.0, 0.5, 0.0, 0.2]) == [[], [0], [1, 0], [], []]
    assert absorbed_nodes(ops, [0.1, 0.2, 0.5, 0.0, 0.2]) == [[], [], [], [], []]


def test_a_fused_depthwise_and_1x1_runs_the_fused_node_and_matches(tmp_path):
    """expand 1x1 -> depthwise 3x3 -> 1x1 large enough (>= 256K floats) for the runtime to run as one
    node: the same output as with the depthwise output also a graph output (not fused), and the
    two absorbed nodes take no time in the profile (AVX-512)."""
    rng = np.random.default_rng(5)
    outs = {}
    for fused in (True, False):
        g = Graph()
        g.add_value(Value("x", (1, 8, 96, 96)))
        g.add_constant("e.w", rng.standard_normal((32, 8, 1, 1)).astype(np.float32) * 0.3)
        g.add_constant("dw.w", rng.standard_normal((32, 1, 3, 3)).astype(np.float32) * 0.3)
        g.add_constant("p.w", rng.standard_normal((16, 32, 1, 1)).astype(np.float32) * 0.3)
        g.add_value(Value("e", (1, 32, 96, 96)))
        g.add_value(Value("d", (1, 32, 96, 96)))
        g.add_value(Value("y", (1, 16, 96, 96)))
        g.add_node("conv2d", "e", ["x", "e.w"], ["e"], activation=2)
        g.add_node("conv2d", "dw", ["e", "dw.w"], ["d"], pads=[1, 1, 1, 1], group=32, activation=2)
        g.add_node("conv2d", "p", ["d", "p.w"], ["y"])
        g.inputs, g.outputs = ["x"], ["y"] if fused else ["y", "d"]
        rng = np.random.default_rng(5)  # the same weights in both
        write_dsm(g, tmp_path / f"{fused}.dsm")
        s = Session(tmp_path / f"{fused}.dsm", profile=True, kernels={})
        x = np.random.default_rng(1).standard_normal((1, 8, 96, 96)).astype(np.float32)
        y = s.run(x)
        outs[fused] = y if fused else y["y"]
        if fused and isa().startswith("avx512"):  # the level with gemm_rows, which the fusion needs
            rows = s.time_nodes(x, runs=2, warmup=0)
            assert rows[0]["ms"] == 0.0 and rows[1]["ms"] == 0.0 and rows[2]["ms"] > 0.0
    np.testing.assert_array_equal(outs[True], outs[False])
