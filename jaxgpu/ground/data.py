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


def teacher(n_train: int = 16384, n_test: int = 4096, input_dim: int = 64, n_classes: int = 10, hidden: int = 64,
            margin: float = 0.5, seed: int = 0) -> Dataset:
    """A task as large as wanted: inputs labelled by a fixed random network (the teacher,
    ``input_dim`` -> tanh ``hidden`` -> ``n_classes``, argmax), keeping only inputs whose top two
    teacher logits differ by more than ``margin`` standard deviations (near-ties would cap the
    accuracy any student can reach). The time a student takes to a target accuracy then grows
    with its size, unlike digits, which a small MLP learns in a fraction of a second."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((input_dim, hidden)) / np.sqrt(input_dim)
    w2 = rng.standard_normal((hidden, n_classes)) / np.sqrt(hidden)
    n = n_train + n_test
    xs, ys = [], []
    while sum(len(x) for x in xs) < n:
        x = rng.standard_normal((n, input_dim)).astype(np.float32)
        z = np.tanh(x.astype(np.float64) @ w1) @ w2
        top = np.sort(z, axis=1)
        keep = top[:, -1] - top[:, -2] > margin * z.std()
        xs.append(x[keep])
        ys.append(np.argmax(z[keep], axis=1).astype(np.int32))
    x, y = np.concatenate(xs)[:n], np.concatenate(ys)[:n]
    return Dataset(x[:n_train], y[:n_train], x[n_train:], y[n_train:])
