"""deepslim.runtime.Session through the C API: fixtures, error mapping, shapes, batch."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deepslim.runtime import ChecksumError, FormatError, Session, ShapeError, VersionError

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _sidecar(name: str, shape) -> np.ndarray:
    return np.fromfile(FIXTURES / name, dtype="<f4").reshape(shape)


@pytest.mark.parametrize("fixture", ["tiny_dense", "tiny_compressed"])
def test_fixture_matches_numpy_reference(fixture):
    s = Session(FIXTURES / f"{fixture}.dsm")
    shape = (1,) + s.input_shapes[0][1:]
    x = _sidecar(f"{fixture}.input.bin", shape)
    y = s.run(x)
    expected = _sidecar(f"{fixture}.output.bin", y.shape)
    assert y.shape == (1,) + s.output_shapes[0][1:]
    np.testing.assert_allclose(y, expected, atol=1e-4, rtol=0)


def test_wrong_input_shape_is_a_shape_error_naming_the_input():
    s = Session(FIXTURES / "tiny_dense.dsm")
    c, h, w = s.input_shapes[0][1:]
    with pytest.raises(ShapeError, match=s.input_names[0]):
        s.run(np.zeros((1, c + 1, h, w), np.float32))
    with pytest.raises(ShapeError):
        s.run(np.zeros((c, h, w), np.float32))  # rank 3 instead of 4
    # the session still works after a refused input
    assert s.run(np.zeros((1, c, h, w), np.float32)).shape[0] == 1


def test_wrong_number_of_inputs():
    s = Session(FIXTURES / "tiny_dense.dsm")
    with pytest.raises(TypeError, match="takes 1 input"):
        s.run()
    with pytest.raises(KeyError, match="unknown input"):
        s.run(nope=np.zeros(1, np.float32))


def test_future_version_is_a_version_error():
    with pytest.raises(VersionError, match="version"):
        Session(FIXTURES / "bad_version.dsm")


def test_corrupt_and_truncated_files_raise_format_errors(tmp_path):
    data = (FIXTURES / "tiny_compressed.dsm").read_bytes()
    bad = tmp_path / "bad.dsm"
    bad.write_bytes(b"NOTADSM!" + data[8:])
    with pytest.raises(FormatError, match="magic"):
        Session(bad)
    for cut in (0, 10, 63, 64, 100, len(data) // 2, len(data) - 1):
        bad.write_bytes(data[:cut])
        with pytest.raises(FormatError):
            Session(bad)
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF  # inside the last stream: its CRC no longer matches
    bad.write_bytes(bytes(flipped))
    with pytest.raises(ChecksumError):
        Session(bad)


def test_missing_file_and_bad_threads():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Session("/nonexistent/model.dsm")
    with pytest.raises(ValueError, match="threads"):
        Session(FIXTURES / "tiny_dense.dsm", threads=0)


def test_closed_session_refuses_to_run():
    s = Session(FIXTURES / "tiny_dense.dsm")
    s.close()
    with pytest.raises(Exception):
        s.run(np.zeros((1,) + s.input_shapes[0][1:], np.float32))


def test_importing_the_runtime_does_not_import_torch():
    code = "import sys, deepslim.runtime, deepslim.format; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_node_profile_times_every_node_only_when_asked():
    shape = Session(FIXTURES / "tiny_dense.dsm").input_shapes[0]
    x = np.zeros(tuple(max(1, d) for d in shape), np.float32)
    plain = Session(FIXTURES / "tiny_dense.dsm")
    plain.run(x)
    assert all(r["runs"] == 0 and r["ms"] == 0.0 for r in plain.node_profile())
    s = Session(FIXTURES / "tiny_dense.dsm", profile=True)
    for _ in range(3):
        s.run(x)
    rows = s.node_profile()
    assert len(rows) == len(plain.node_profile()) >= 1
    assert all(r["runs"] == 3 and r["ms"] > 0.0 and r["op"] and r["name"] for r in rows)


def test_read_only_non_contiguous_and_float64_inputs_give_the_same_output():
    s = Session(FIXTURES / "tiny_dense.dsm")
    shape = tuple(max(1, d) for d in s.input_shapes[0])
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    expected = s.run(x)
    ro = x.copy()
    ro.flags.writeable = False
    strided = np.asfortranarray(x)
    for variant in (ro, strided, x.astype(np.float64)):
        np.testing.assert_array_equal(s.run(variant), expected)


def test_time_nodes_averages_only_the_timed_runs():
    s = Session(FIXTURES / "tiny_dense.dsm", profile=True)
    x = np.zeros(tuple(max(1, d) for d in s.input_shapes[0]), np.float32)
    rows = s.time_nodes(x, runs=4, warmup=2)
    assert rows and all(r["runs"] == 4 and r["ms"] > 0.0 for r in rows)
    assert all(r["runs"] == 6 for r in s.node_profile())


def test_node_profile_index_out_of_range_is_an_error_naming_it():
    import ctypes

    from deepslim.runtime.session import _load

    s = Session(FIXTURES / "tiny_dense.dsm", profile=True)
    lib = _load()
    status = lib.ds_session_node_profile(s._session, 10_000, None, None, None, None)
    assert status != 0
    assert b"node index 10000 is out of range" in lib.ds_last_error()
    count = ctypes.c_size_t()
    assert lib.ds_session_node_count(s._session, ctypes.byref(count)) == 0 and count.value >= 1


def test_repeated_calls_take_the_one_call_path_and_agree():
    s = Session(FIXTURES / "tiny_compressed.dsm")
    shape = (1,) + s.input_shapes[0][1:]
    x = _sidecar("tiny_compressed.input.bin", shape)
    first = s.run(x)  # the general path, which remembers the shape
    assert shape in s._single
    again = s.run(x)  # one C call
    assert again is not first and np.array_equal(again, first)
    np.testing.assert_array_equal(s.run(x.astype(np.float64)), first)  # other dtypes: the general path
    np.testing.assert_array_equal(s.run(np.asfortranarray(x)), first)
    with pytest.raises(ShapeError):
        s.run(np.zeros((1,) + shape, np.float32))
    np.testing.assert_array_equal(s.run(x), first)
