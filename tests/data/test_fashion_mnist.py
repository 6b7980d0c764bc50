import gzip
import struct
import sys

import numpy as np
import pytest

from deepslim.data import fashion_mnist as fm


def idx_bytes(array: np.ndarray) -> bytes:
    return bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_dataset(folder, n_train=12, n_test=4, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, n_train, dtype=np.uint8),
        "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for key, array in arrays.items():
        (folder / fm.FILES[key]).write_bytes(gzip.compress(idx_bytes(array)))
    return arrays


def test_reads_synthetic_files(tmp_path):
    arrays = write_dataset(tmp_path)
    ds = fm.load(tmp_path, check_counts=False)
    for key, array in arrays.items():
        got = getattr(ds, key)
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, array)
    assert ds.folder == tmp_path


def test_official_counts_are_checked(tmp_path):
    write_dataset(tmp_path)
    with pytest.raises(fm.DatasetCorruptError, match="expected 60000"):
        fm.load(tmp_path)


def test_search_order_env_then_defaults(tmp_path, monkeypatch):
    env_dir, home = tmp_path / "env", tmp_path / "home"
    cache_dir = home / ".cache" / "deepslim" / "fashion-mnist"
    write_dataset(cache_dir, seed=1)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DEEPSLIM_DATA", raising=False)
    assert fm.find_data_dir() == cache_dir
    write_dataset(env_dir, seed=2)
    monkeypatch.setenv("DEEPSLIM_DATA", str(env_dir))
    assert fm.find_data_dir() == env_dir
    explicit = tmp_path / "explicit"
    write_dataset(explicit, seed=3)
    assert fm.find_data_dir(explicit) == explicit


def test_missing_files_name_file_and_remedy(tmp_path):
    write_dataset(tmp_path)
    (tmp_path / fm.FILES["test_labels"]).unlink()
    with pytest.raises(FileNotFoundError) as err:
        fm.load(tmp_path, check_counts=False)
    assert isinstance(err.value, fm.DatasetNotFoundError)
    assert "t10k-labels-idx1-ubyte.gz" in str(err.value)
    assert "apt-get install dataset-fashion-mnist" in str(err.value)
    assert "DEEPSLIM_DATA" in str(err.value)


def corrupt_cases():
    labels = np.arange(12, dtype=np.uint8) % 10
    good = idx_bytes(labels)
    return {
        "not gzip": b"this is not gzip data",
        "truncated gzip": gzip.compress(good)[:-12],
        "bad magic": gzip.compress(b"\x00\x00\x09\x01" + good[4:]),
        "wrong ndim": gzip.compress(b"\x00\x00\x08\x02" + good[4:]),
        "size mismatch": gzip.compress(good[:-3]),
        "too short": gzip.compress(b"\x00\x00"),
    }


@pytest.mark.parametrize("case", sorted(corrupt_cases()))
def test_corrupt_label_file(tmp_path, case):
    write_dataset(tmp_path)
    name = fm.FILES["train_labels"]
    (tmp_path / name).write_bytes(corrupt_cases()[case])
    with pytest.raises(ValueError) as err:
        fm.load(tmp_path, check_counts=False)
    assert isinstance(err.value, fm.DatasetCorruptError)
    assert name in str(err.value)
    assert "apt-get install dataset-fashion-mnist" in str(err.value)


def test_image_and_label_counts_must_agree(tmp_path):
    write_dataset(tmp_path)
    labels = np.zeros(11, dtype=np.uint8)
    (tmp_path / fm.FILES["train_labels"]).write_bytes(gzip.compress(idx_bytes(labels)))
    with pytest.raises(fm.DatasetCorruptError, match="12 images but"):
        fm.load(tmp_path, check_counts=False)


def test_labels_out_of_range(tmp_path):
    write_dataset(tmp_path)
    labels = np.full(12, 10, dtype=np.uint8)
    (tmp_path / fm.FILES["train_labels"]).write_bytes(gzip.compress(idx_bytes(labels)))
    with pytest.raises(fm.DatasetCorruptError, match="label 10"):
        fm.load(tmp_path, check_counts=False)


def test_split_is_deterministic_tail():
    images = np.arange(10 * 2 * 2, dtype=np.uint8).reshape(10, 2, 2)
    labels = np.arange(10, dtype=np.uint8)
    (tx, ty), (vx, vy) = fm.split_train_val(images, labels, val_size=3)
    np.testing.assert_array_equal(ty, np.arange(7))
    np.testing.assert_array_equal(vy, [7, 8, 9])
    np.testing.assert_array_equal(vx, images[7:])
    with pytest.raises(ValueError):
        fm.split_train_val(images, labels, val_size=10)


def test_normalize():
    images = np.array([[[0, 255]]], dtype=np.uint8)
    x = fm.normalize(images, mean=0.5, std=0.25)
    assert x.dtype == np.float32 and x.shape == (1, 1, 1, 2)
    np.testing.assert_allclose(x.ravel(), [-2.0, 2.0])


def test_importing_data_does_not_import_torch():
    import subprocess

    code = "import sys, deepslim.data; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
