"""Datasets as numpy arrays (no torch needed to read them)."""

from deepslim.data.fashion_mnist import (
    DatasetCorruptError,
    DatasetNotFoundError,
    FashionMNIST,
    find_data_dir,
    load,
    load_splits,
    normalize,
    read_idx,
    split_train_val,
)

__all__ = [
    "DatasetCorruptError",
    "DatasetNotFoundError",
    "FashionMNIST",
    "find_data_dir",
    "load",
    "load_splits",
    "normalize",
    "read_idx",
    "split_train_val",
]
