"""`deepslim convert` (deepslim/convert.py) and the torch-free import of the ONNX front end."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from deepslim.convert import build_convert_parser, convert_command, parse_input_shape
from deepslim.format import read_dsm
from deepslim.frontends.reference import run_graph

REPO = Path(__file__).resolve().parents[2]


def _model(path: Path, x_shape=("N", 3, "H", "W")) -> Path:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc"),
    ]
    inits = {"w": rng.standard_normal((4, 3, 3, 3)), "b": rng.standard_normal(4),
             "fw": rng.standard_normal((5, 4)), "fb": rng.standard_normal(5)}
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def run_cli(argv: list[str]) -> tuple[int, str]:
    """Parse and run like deepslim.cli.main does: (exit code, one-line error or '')."""
    p = argparse.ArgumentParser(prog="deepslim")
    build_convert_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    try:
        return args.func(args), ""
    except (OSError, ValueError, ImportError) as e:
        return 1, f"deepslim {args.command}: error: {e}"


def test_convert_writes_an_optimized_dsm(tmp_path, capsys):
    src = _model(tmp_path / "m.onnx")
    out = tmp_path / "m.dsm"
    code, err = run_cli(["convert", str(src), "-o", str(out), "--input-shape", "x=1,3,16,12"])
    assert (code, err) == (0, "")
    text = capsys.readouterr().out
    assert "wrote" in text and "4 nodes (5 before optimize)" in text and "137 params" in text
    g = read_dsm(out)
    assert [n.op for n in g.nodes] == ["conv2d", "global_avgpool", "flatten", "dense"]
    assert g.nodes[0].attrs["activation"] == 1  # relu fused by optimize()
    assert g.values["x"].shape == (-1, 3, 16, 12)
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 12)).astype(np.float32)
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.max(np.abs(run_graph(g, x) - want)) <= 1e-4 * max(1.0, float(np.abs(want).max()))


def test_convert_tune_caches_kernel_choices(tmp_path, capsys):
    from deepslim.runtime.tune import cache_path, cached_kernels

    src = _model(tmp_path / "m.onnx")
    out = tmp_path / "m.dsm"
    code, _ = run_cli(["convert", str(src), "-o", str(out), "--input-shape", "x=1,3,16,12", "--tune"])
    assert code == 0 and cache_path(out).is_file()
    assert set(cached_kernels(out, 1)) == {n.name for n in read_dsm(out).nodes if n.op == "conv2d"}
    assert "nodes changed" in capsys.readouterr().out


def test_convert_no_optimize(tmp_path, capsys):
    src = _model(tmp_path / "m.onnx", x_shape=(1, 3, 8, 8))
    out = tmp_path / "m.dsm"
    assert run_cli(["convert", str(src), "-o", str(out), "--no-optimize"]) == (0, "")
    assert [n.op for n in read_dsm(out).nodes] == ["conv2d", "relu", "global_avgpool", "flatten", "dense"]


@pytest.mark.parametrize("argv_tail,match", [
    (["--input-shape", "x=1,3,a,b"], "expected NAME=D0,D1,... with integer dims"),
    (["--input-shape", "x"], "expected NAME=D0,D1,..."),
    (["--input-shape", "=1,3"], "expected NAME=D0,D1,..."),
    (["--input-shape", "x=1,3,0,8"], "dims must be >= 1"),
    (["--input-shape", "y=1,3,8,8"], "not graph inputs"),
    (["--input-shape", "x=1,3,8"], "rank 4"),
    ([], "dynamic dimension.*--input-shape x=1,3,\\?,\\?"),
])
def test_convert_bad_input_shape(tmp_path, argv_tail, match):
    import re

    src = _model(tmp_path / "m.onnx")
    code, err = run_cli(["convert", str(src), "-o", str(tmp_path / "m.dsm"), *argv_tail])
    assert code == 1 and "\n" not in err and re.search(match, err), err
    assert not (tmp_path / "m.dsm").exists()


def test_convert_missing_and_non_onnx_files(tmp_path):
    code, err = run_cli(["convert", str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "o.dsm")])
    assert code == 1 and "does not exist" in err and "\n" not in err
    junk = tmp_path / "junk.onnx"
    junk.write_text("hello, this is a text file\n" * 20)
    code, err = run_cli(["convert", str(junk), "-o", str(tmp_path / "o.dsm")])
    assert code == 1 and "is not an ONNX model" in err and "\n" not in err


def test_parse_input_shape():
    assert parse_input_shape("images=1,3,640,640") == ("images", [1, 3, 640, 640])
    assert parse_input_shape("a=b=-1,3") == ("a=b", [-1, 3])


def test_help_mentions_input_shape(capsys):
    p = argparse.ArgumentParser(prog="deepslim")
    build_convert_parser(p.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        p.parse_args(["convert", "--help"])
    assert "--input-shape" in capsys.readouterr().out


def test_onnx_front_end_and_convert_work_without_torch(tmp_path):
    src = _model(tmp_path / "m.onnx")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any import of torch now fails
        import argparse
        from deepslim.convert import build_convert_parser
        from deepslim.frontends.onnx import from_onnx
        p = argparse.ArgumentParser()
        build_convert_parser(p.add_subparsers(dest="command"))
        args = p.parse_args(["convert", {str(src)!r}, "-o", {str(tmp_path / 'm.dsm')!r}, "--input-shape", "x=1,3,8,8"])
        assert args.func(args) == 0
        assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")
