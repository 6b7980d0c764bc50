"""deepslim bench: protocol and reporting (timing values themselves are never asserted)."""

import numpy as np
import pytest

from deepslim.bench.run import bench, format_results
from deepslim.cli import main


def test_bench_times_ours_and_a_peer_after_checking_agreement(tmp_path):
    results = bench("lenet300", threads=1, batches=[1, 3], vs=["onnxruntime"],
                    seconds=0.2, workdir=tmp_path, log=lambda *_: None)
    engines = {(r.engine, r.batch) for r in results}
    assert {("deepslim", 1), ("onnxruntime", 1), ("deepslim", 3), ("onnxruntime", 3)} <= engines
    for r in results:
        assert r.median_ms is not None and r.p10_ms <= r.median_ms <= r.p90_ms
        assert r.max_abs_diff is not None and r.max_abs_diff < 1e-3
        assert np.isclose(r.ms_per_image, r.median_ms / r.batch)
    ours = [r for r in results if r.engine == "deepslim"]
    assert all(r.ratio_to_ours == 1.0 for r in ours)
    table = format_results(results, "lenet300")
    assert "| 3 | onnxruntime |" in table


def test_missing_peer_is_skipped_with_a_note(tmp_path, monkeypatch):
    import deepslim.bench.run as run

    def unavailable(*_a, **_k):
        raise run.EngineUnavailable("not installed here")

    monkeypatch.setattr(run, "OpenVino", unavailable)
    results = bench("lenet300", vs=["openvino"], seconds=0.1, workdir=tmp_path, log=lambda *_: None)
    (skipped,) = [r for r in results if r.engine == "openvino"]
    assert skipped.median_ms is None and "not installed here" in skipped.note


def test_cli_rejects_a_bad_batch_list(capsys):
    assert main(["bench", "lenet300", "--batch", "1,x"]) == 1
    assert "--batch" in capsys.readouterr().err


def test_bench_tune_tunes_once_then_uses_the_cache(tmp_path):
    from deepslim.runtime.tune import cache_path

    logs = []
    bench("lenet5", vs=[], seconds=0.1, workdir=tmp_path, log=logs.append, tune=True)
    assert cache_path(tmp_path / "lenet5.dsm").is_file()
    assert any("nodes changed" in str(line) for line in logs)
    logs.clear()
    bench("lenet5", vs=[], seconds=0.1, workdir=tmp_path, log=logs.append, tune=True)
    assert any("kernel choices from lenet5.dsm.tune.json" in str(line) for line in logs)
