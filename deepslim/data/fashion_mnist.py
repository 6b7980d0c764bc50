"""Fashion-MNIST from its four IDX .gz files (numpy only; no torch, nothing downloaded).

The folder is searched in this order: the explicit `data_dir` argument (then only it is searched),
$DEEPSLIM_DATA, ~/.cache/deepslim/fashion-mnist, /usr/share/datasets/fashion-mnist (Debian package
dataset-fashion-mnist). The first folder holding all four files is used.

IDX layout (big-endian): u8 0, u8 0, u8 type (0x08 = unsigned byte), u8 ndim, u32 dims[ndim],
then prod(dims) bytes.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
TRAIN_COUNT = 60_000
TEST_COUNT = 10_000
IMAGE_SHAPE = (28, 28)
NUM_CLASSES = 10
CLASS_NAMES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
# Mean and standard deviation of the 60,000 training images, pixel values scaled to [0, 1].
MEAN = 0.2860
STD = 0.3530
VALIDATION_SIZE = 5_000

HOW_TO_GET = (
    "apt-get install dataset-fashion-mnist, or set DEEPSLIM_DATA to a folder holding the four .gz files "
    f"({', '.join(FILES.values())})"
)


class DatasetNotFoundError(FileNotFoundError):
    """No searched folder holds the four Fashion-MNIST files."""


class DatasetCorruptError(ValueError):
    """A Fashion-MNIST file exists but cannot be read as the expected IDX data."""


@dataclass(frozen=True)
class FashionMNIST:
    """uint8 images (N, 28, 28) and uint8 labels (N,) of both official splits."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    folder: Path


def search_dirs(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders searched for the files, in order."""
    if data_dir is not None:
        return [Path(data_dir)]
    dirs = []
    if os.environ.get("DEEPSLIM_DATA"):
        dirs.append(Path(os.environ["DEEPSLIM_DATA"]))
    dirs.append(Path.home() / ".cache" / "deepslim" / "fashion-mnist")
    dirs.append(Path("/usr/share/datasets/fashion-mnist"))
    return dirs


def find_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The first searched folder that holds all four files; DatasetNotFoundError otherwise."""
    dirs = search_dirs(data_dir)
    for folder in dirs:
        if all((folder / name).is_file() for name in FILES.values()):
            return folder
    details = []
    for folder in dirs:
        missing = [name for name in FILES.values() if not (folder / name).is_file()]
        details.append(f"{folder} (missing {', '.join(missing)})")
    raise DatasetNotFoundError(
        f"Fashion-MNIST not found; searched: {'; '.join(details)}. To get it: {HOW_TO_GET}"
    )


def read_idx(path: str | os.PathLike, ndim: int) -> np.ndarray:
    """Read one gzip-compressed IDX file of unsigned bytes with `ndim` dimensions."""
    path = Path(path)

    def corrupt(reason: str) -> DatasetCorruptError:
        return DatasetCorruptError(f"{path}: {reason}. To get a good copy: {HOW_TO_GET}")

    if not path.is_file():
        raise DatasetNotFoundError(f"{path}: no such file. To get it: {HOW_TO_GET}")
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise corrupt(f"not a readable gzip file ({e})") from e
    if len(raw) < 4:
        raise corrupt(f"only {len(raw)} bytes, shorter than the IDX magic number")
    zero0, zero1, dtype, got_ndim = raw[:4]
    if zero0 != 0 or zero1 != 0 or dtype != 0x08:
        raise corrupt(f"bad IDX magic number {raw[:4].hex()} (expected 000008{ndim:02x})")
    if got_ndim != ndim:
        raise corrupt(f"IDX data has {got_ndim} dimensions, expected {ndim}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise corrupt(f"truncated IDX header ({len(raw)} bytes, need {header})")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != expected:
        raise corrupt(
            f"size mismatch: header dims {dims} need {expected} data bytes, file has {len(raw) - header}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims).copy()


def _read_pair(folder: Path, split: str, count: int | None) -> tuple[np.ndarray, np.ndarray]:
    img_path, lab_path = folder / FILES[f"{split}_images"], folder / FILES[f"{split}_labels"]
    images = read_idx(img_path, 3)
    labels = read_idx(lab_path, 1)
    if images.shape[1:] != IMAGE_SHAPE:
        raise DatasetCorruptError(
            f"{img_path}: images are {images.shape[1]}x{images.shape[2]}, expected 28x28. {HOW_TO_GET}"
        )
    if len(images) != len(labels):
        raise DatasetCorruptError(
            f"{img_path} holds {len(images)} images but {lab_path} holds {len(labels)} labels. {HOW_TO_GET}"
        )
    if count is not None and len(images) != count:
        raise DatasetCorruptError(
            f"{img_path}: {len(images)} images, expected {count} for the {split} split. {HOW_TO_GET}"
        )
    if labels.size and labels.max() >= NUM_CLASSES:
        raise DatasetCorruptError(f"{lab_path}: label {labels.max()} is not a class in 0..9. {HOW_TO_GET}")
    return images, labels


def load(data_dir: str | os.PathLike | None = None, check_counts: bool = True) -> FashionMNIST:
    """Read the four files; with `check_counts`, insist on the official 60,000 / 10,000 images."""
    folder = find_data_dir(data_dir)
    train = _read_pair(folder, "train", TRAIN_COUNT if check_counts else None)
    test = _read_pair(folder, "test", TEST_COUNT if check_counts else None)
    return FashionMNIST(train[0], train[1], test[0], test[1], folder)


def split_train_val(
    images: np.ndarray, labels: np.ndarray, val_size: int = VALIDATION_SIZE
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Deterministic split: the last `val_size` training images are the validation set."""
    if not 0 < val_size < len(images):
        raise ValueError(f"val_size must be in 1..{len(images) - 1}, got {val_size}")
    cut = len(images) - val_size
    return (images[:cut], labels[:cut]), (images[cut:], labels[cut:])


def normalize(images: np.ndarray, mean: float = MEAN, std: float = STD) -> np.ndarray:
    """uint8 (N, 28, 28) -> float32 (N, 1, 28, 28), scaled to [0, 1] then standardised."""
    x = images.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(mean)) / np.float32(std)
    return x[:, None, :, :]


def load_splits(
    data_dir: str | os.PathLike | None = None, val_size: int = VALIDATION_SIZE
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Normalised float32 images and int64 labels: {"train", "val", "test"} -> (x, y)."""
    ds = load(data_dir)
    (tx, ty), (vx, vy) = split_train_val(ds.train_images, ds.train_labels, val_size)

    def prep(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return normalize(x), y.astype(np.int64)

    return {"train": prep(tx, ty), "val": prep(vx, vy), "test": prep(ds.test_images, ds.test_labels)}
