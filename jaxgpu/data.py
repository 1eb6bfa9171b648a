"""Data: the handwritten digits scikit-learn ships (no download), and synthetic batches for throughput."""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A classification set with a fixed train/test split: fp32 inputs, int32 labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def input_dim(self) -> int:
        return self.x_train.shape[1]

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def digits(test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits (1797 images, 10 classes), scaled to [0, 1], a fixed seeded split."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return Dataset(x[train], y[train], x[test], y[test])


def synthetic(n: int, input_dim: int, n_classes: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random normal inputs and uniform labels: for throughput only, at sizes digits cannot fill."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, input_dim), dtype=np.float32), rng.integers(0, n_classes, n).astype(np.int32)
