"""tools/quant_accuracy.py on a tiny MobileNet V2 and a few hundred Fashion-MNIST images."""

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from deepslim.data.fashion_mnist import DatasetNotFoundError, find_data_dir  # noqa: E402

TOOL = Path(__file__).resolve().parents[2] / "tools" / "quant_accuracy.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("quant_accuracy", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cache_names_and_method_validation():
    tool = load_tool()
    # The width-0.5 checkpoint of docs/quantization.md is cached under this name.
    assert tool.cache_name("mobilenet_v2_fmnist", 0.5) == "mobilenet_v2_fmnist-w0.5"
    assert tool.cache_name("mobilenet_v2_fmnist", 1.0) == "mobilenet_v2_fmnist"
    assert tool.cache_name("mobilenet_v2_fmnist", None) == "mobilenet_v2_fmnist"
    assert tool.parse_args(["--methods", "minmax,kl"]).methods == ["minmax", "kl"]
    assert tool.parse_args(["--methods", ""]).methods == []
    with pytest.raises(SystemExit):
        tool.parse_args(["--methods", "minmax,median"])
    assert tool.parse_args(["--skip", "fp32,qat"]).skip == {"fp32", "qat"}
    with pytest.raises(SystemExit):
        tool.parse_args(["--skip", "training"])
    assert tool.parse_args([]).activation_bits == [8]
    assert tool.parse_args(["--activation-bits", "8,16"]).activation_bits == [8, 16]
    for bad in ("4", "", "8,x"):
        with pytest.raises(SystemExit):
            tool.parse_args(["--activation-bits", bad])


def test_measures_ptq_and_qat_and_reuses_the_checkpoint(tmp_path, monkeypatch, capsys):
    try:
        find_data_dir()
    except DatasetNotFoundError:
        pytest.skip("Fashion-MNIST is not installed")
    from deepslim import zoo
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.quant import quantize_graph, run_quantized
    from deepslim.train import evaluate, load_checkpoint
    from deepslim.workflow import load_data

    tool = load_tool()
    monkeypatch.setenv("DEEPSLIM_CACHE", str(tmp_path / "cache"))
    argv = ["--width", "0.25", "--epochs", "1", "--train-samples", "512", "--calib", "64", "--test", "200",
            "--val", "200", "--methods", "minmax,mse", "--qat-train-samples", "256", "--out", str(tmp_path / "out"),
            "--quiet"]
    assert tool.main(argv) == 0
    printed = capsys.readouterr().out
    (json_path,) = (tmp_path / "out").glob("quant_accuracy-mobilenet_v2_fmnist-w0.25-*.json")
    result = json.loads(json_path.read_text())
    acc = result["accuracy"]
    assert set(acc) == {"fp32", "ptq_sim_minmax", "ptq_int8_minmax", "ptq_int8_mse", "qat_sim", "qat_int8"}
    assert result["test_images"] == 200 and result["calib_images"] == 64
    row = tool.table_row(result)
    assert row in printed
    assert re.search(rf"\| {acc['ptq_int8_minmax']:.2f} / – / {acc['ptq_int8_mse']:.2f} \|", row)

    # The int8 number is quantize_graph + run_quantized of the cached checkpoint, recomputed here.
    splits = load_data(None)
    tx, ty = (a[:200] for a in splits["test"])
    model = zoo.get("mobilenet_v2_fmnist", width_mult=0.25)
    load_checkpoint(model, result["checkpoint"])
    graph = optimize(from_torch(model, torch.zeros(1, 1, 28, 28)))
    y = run_quantized(quantize_graph(graph, calib=splits["train"][0][:64], method="minmax"), tx)
    assert float((y.argmax(1) == ty).mean() * 100) == acc["ptq_int8_minmax"]
    assert evaluate(model, (tx, ty)) == acc["fp32"]
    # QAT's integer graph runs what the simulation ran (one output step apart at most, so only a few
    # top-1 predictions may differ).
    assert abs(acc["qat_int8"] - acc["qat_sim"]) <= 3.0
    assert set(result["qat_ranges"]) >= {"input", "output"}

    # A second run loads the checkpoint instead of training again.
    mtime = Path(result["checkpoint"]).stat().st_mtime_ns
    assert tool.main(argv[:-5] + ["--methods", "", "--skip", "qat", "--out", str(tmp_path / "out2"), "--quiet"]) == 0
    (again,) = (tmp_path / "out2").glob("*.json")
    again = json.loads(again.read_text())
    assert again["checkpoint"] == result["checkpoint"]
    assert Path(result["checkpoint"]).stat().st_mtime_ns == mtime
    assert again["accuracy"]["fp32"] == acc["fp32"]
    assert np.isclose(again["accuracy"]["ptq_sim_minmax"], acc["ptq_sim_minmax"])

    # The native runtime gives the same int8 accuracy (it checks its outputs against run_quantized).
    from deepslim.quant.fallback import runtime_available

    if runtime_available() is not None:
        pytest.skip(f"native runtime not available: {runtime_available()}")
    argv3 = argv[:-5] + ["--methods", "minmax", "--skip", "fp32,ptq-sim,qat", "--engine", "runtime", "--check", "200",
                         "--activation-bits", "8,16", "--out", str(tmp_path / "out3"), "--quiet"]
    assert tool.main(argv3) == 0
    (native,) = (tmp_path / "out3").glob("*.json")
    native = json.loads(native.read_text())
    assert native["int8_engine"] == "runtime"
    assert set(native["accuracy"]) == {"ptq_int8_minmax", "ptq_int16_minmax"}
    assert native["accuracy"]["ptq_int8_minmax"] == acc["ptq_int8_minmax"]
    # 16x8 with the runtime's outputs checked against run_quantized's, as for int8
    y16 = run_quantized(quantize_graph(graph, calib=splits["train"][0][:64], method="minmax", activation_bits=16), tx)
    assert native["accuracy"]["ptq_int16_minmax"] == float((y16.argmax(1) == ty).mean() * 100)
