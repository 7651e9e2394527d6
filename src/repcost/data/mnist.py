"""MNIST digit subsets: classification or (denoising) autoencoders (Jacot 2023 Fig 3A; Jacot et al. 2022 Figs 1–2)."""

from __future__ import annotations

import gzip
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import ConfigError, RepcostError, check
from ..registry import DATASETS
from .bundle import DataBundle, check_shared, gaussian, rng

EMBEDDED = Path(__file__).resolve().with_name("mnist_5k")  # package data: IDX files of 5,000 digits (500 per class)
ROOT_HINT = ("point data.root at a folder holding train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz] "
             "(optionally t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]; a torchvision download "
             "folder with MNIST/raw/ works)")
IDX_HINT = ROOT_HINT + ", or set data.root=null for the 5,000 embedded digits"
FETCH_HINT = "run `repcost-data fetch mnist` (or `make data-mnist`), or point data.root at a torchvision MNIST folder"


@dataclass
class MnistConfig:
    name: str = "mnist"
    seed: int = 0  # data seed: shuffles the pool before any split, draws the autoencoder noise
    # embedded (5,000 packaged digits) | full (`repcost-data fetch mnist`); ignored when root is set
    source: str = "embedded"
    # null = use source; or a folder with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz] (t10k-* optional;
    # MNIST/raw/ ok)
    root: str | None = None
    # null = all ten; e.g. [7, 8, 9]: class i is digits[i] (labels re-indexed 0..len-1)
    digits: list[int] | None = None
    n_train: int = 1000  # training images
    n_test: int = 500  # test images (0 = none); never overlap the training images (from t10k-* when present)
    # classification (int64 labels, n_classes = len(digits)) or autoencoder (targets = clean images)
    task: str = "classification"
    noise: float = 0.0  # autoencoder only: inputs = clean images + N(0, noise²) per pixel, train and test, no clipping
    normalise: str = "unit"  # unit: pixel/255 in [0,1]; center: unit minus the train mean image (meta.mean_image)
    balanced: bool = True  # equal counts per digit (remainder to the first digits; capped by what is available)

    def __post_init__(self):
        check_shared(self)
        check(self.source in ("embedded", "full"), "source", self.source,
              "embedded (5,000 packaged digits) or full (the 70,000 of `repcost-data fetch mnist`)")
        check(self.root is None or str(self.root) != "", "root", self.root,
              "null (embedded 5,000 digits) or a folder with MNIST IDX files")
        if self.digits is not None:
            check(len(self.digits) >= 1 and all(int(d) == d and 0 <= d <= 9 for d in self.digits), "digits",
                  self.digits, "null (all ten) or a non-empty list of digits in 0..9")
            check(len(set(self.digits)) == len(self.digits), "digits", self.digits, "distinct digits")
        check(self.task in ("classification", "autoencoder"), "task", self.task, "classification or autoencoder")
        check(self.task != "classification" or len(self.digit_list()) >= 2, "digits", self.digits,
              "at least 2 digits for classification")
        check(self.noise == 0 or self.task == "autoencoder", "noise", self.noise,
              "0 unless task=autoencoder (input noise of a denoising autoencoder)")
        check(self.normalise in ("unit", "center"), "normalise", self.normalise,
              "unit (pixel/255 in [0,1]) or center (unit minus the train mean image)")

    def digit_list(self) -> list[int]:
        """The digits used, in label order (class i is digit_list()[i]); null = 0..9."""
        return list(range(10)) if self.digits is None else [int(d) for d in self.digits]


# ---------------------------------------------------------------- sources

Pool = tuple[np.ndarray, np.ndarray]  # (images uint8 (N, 784), labels int64 (N,))


def full_dir() -> Path:
    """Where `repcost-data fetch mnist` writes and `data.source=full` reads the IDX files: $REPCOST_DATA/mnist, else
    $XDG_CACHE_HOME/repcost/mnist, else ~/.cache/repcost/mnist."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repcost"
    return Path(os.environ.get("REPCOST_DATA") or cache).expanduser() / "mnist"


def find_idx(root: Path, split: str) -> tuple[str, str] | None:
    """The (images, labels) IDX files of split (train/t10k) under root, or None when either is missing."""
    paths = []
    for kind, ndim in (("images", 3), ("labels", 1)):
        names = [f"{split}-{kind}{sep}idx{ndim}-ubyte{gz}" for sep in "-." for gz in ("", ".gz")]
        folders = (root, root / "MNIST" / "raw", root / "raw")
        paths.append(next((str(f / n) for f in folders for n in names if (f / n).is_file()), None))
    return None if None in paths else (paths[0], paths[1])


def read_idx(path: Path) -> np.ndarray:
    """An unsigned-byte IDX array (MNIST format: magic 0x0000 08 ndim, big-endian int32 dims), .gz allowed."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError) as e:
        raise RepcostError(f"MNIST: cannot read {path} ({e}); {IDX_HINT}") from None
    if len(raw) < 4 or raw[:3] != b"\0\0\x08" or not 1 <= raw[3] <= 4:
        raise RepcostError(f"MNIST: {path} is not an unsigned-byte IDX file (bad magic number); {IDX_HINT}")
    header = 4 + 4 * raw[3]
    dims = [int.from_bytes(raw[i:i + 4], "big") for i in range(4, header, 4)]
    if len(raw) != header + math.prod(dims):  # a header cut short too
        raise RepcostError(f"MNIST: {path} is truncated or corrupt ({len(raw)} bytes, its header {dims} needs "
                           f"{header + math.prod(dims)}); {IDX_HINT}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def read_pool(images_path: str, labels_path: str) -> Pool:
    """Images (N, 784) and labels of an IDX pair."""
    images, labels = read_idx(Path(images_path)), read_idx(Path(labels_path))  # uint8 arrays
    if images.shape[1:] not in ((784,), (28, 28)) or labels.shape != images.shape[:1] or (labels > 9).any():
        raise RepcostError(f"MNIST: {images_path} and {labels_path} hold {images.shape} images and "
                           f"{labels.shape} labels, not (N, 28, 28) uint8 images with one label 0..9 each; "
                           f"{IDX_HINT}")
    return images.reshape(len(images), 784), labels.astype(np.int64)


def mnist_source(cfg: MnistConfig) -> tuple[Pool, Pool | None, str]:
    """(train pool, test pool or None, description): the IDX files of data.root, of source=full or of the
    embedded digits.

    data.root, when set, is an IDX folder; otherwise source=embedded is the 5,000 packaged digits (500 per
    class, no t10k-*: both splits come from one pool) and source=full the folder `repcost-data fetch mnist`
    writes. The train split comes from train-* and the test split from t10k-* (from the rest of train-* if
    absent).
    """
    if cfg.root is not None:
        root, what, hint = Path(cfg.root).expanduser(), "data.root", IDX_HINT
    elif cfg.source == "full":
        root, what, hint = full_dir(), "data.source=full", FETCH_HINT
    else:
        root, what = EMBEDDED, "the embedded digits"
        hint = f"missing from the repcost install: reinstall repcost, or {ROOT_HINT}"
    if not root.is_dir():
        raise RepcostError(f"MNIST: {what}: {root} is not a folder; {hint}")
    train, test = find_idx(root, "train"), find_idx(root, "t10k")
    if train is None:
        raise RepcostError(f"MNIST: {what}: no train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz] in "
                           f"{root} (nor in {root / 'MNIST' / 'raw'}); {hint}")
    source = f"embedded:{EMBEDDED.name}" if root == EMBEDDED else f"idx:{Path(train[0]).parent}"
    return read_pool(*train), None if test is None else read_pool(*test), source


# ---------------------------------------------------------------- sampling


def balanced_counts(n: int, available: np.ndarray) -> np.ndarray:
    """Per-class counts summing to n, as equal as possible (remainder to the first classes), capped by available."""
    counts = np.zeros_like(available)
    left = n
    while left > 0:
        open_ = np.flatnonzero(counts < available)  # never empty: callers ask for n <= available.sum()
        share, extra = divmod(left, len(open_))
        for i, c in enumerate(open_):
            give = min(share + (1 if i < extra else 0), available[c] - counts[c])
            counts[c] += give
            left -= give
    return counts


def _select(pool: Pool, digits: list[int], seed: int, stream: int):
    """(images, class indices) of the pool restricted to digits, shuffled with (seed, stream)."""
    images, labels = pool
    lut = np.full(10, -1, dtype=np.int64)
    lut[digits] = np.arange(len(digits))
    keep = rng(seed, stream).permutation(np.flatnonzero(lut[labels] >= 0))
    return images[keep], lut[labels[keep]]


def _draw(cfg: MnistConfig, key: str, classes: np.ndarray, free: np.ndarray, where: str) -> np.ndarray:
    """cfg.<key> positions among `free` (positions in the shuffled pool of `classes`): balanced per class or the
    first ones; a ConfigError naming the key when free holds too few."""
    n, k = getattr(cfg, key), len(cfg.digit_list())
    if n > len(free):
        more = ", or use data.source=full (after `repcost-data fetch mnist`)" if where.startswith("the embedded") else ""
        raise ConfigError(f"data.{key}", n, f"at most {len(free)} (digits {cfg.digit_list()} have {len(classes)} "
                          f"samples in {where}); lower data.n_train/data.n_test or add digits{more}")
    if not cfg.balanced:
        return free[:n]
    free_classes = classes[free]
    counts = balanced_counts(n, np.bincount(free_classes, minlength=k))
    return np.sort(np.concatenate([free[free_classes == c][:counts[c]] for c in range(k)]))  # classes interleaved


@DATASETS.register("mnist", MnistConfig)
def load_mnist(cfg: MnistConfig) -> DataBundle:
    """MNIST digits as 784-d rows in [0,1]: digit classification or (denoising) autoencoding (Jacot 2023 Fig 3A)."""
    digits = cfg.digit_list()
    k = len(digits)
    train_pool, test_pool, source = mnist_source(cfg)
    x_pool, c_pool = _select(train_pool, digits, cfg.seed, 0)
    where = "the train-* files"
    if test_pool is None:  # one pool for both splits: the test split draws from what the train split left
        where = ("the embedded 5,000 digits, shared by train and test" if source.startswith("embedded:")
                 else "train-* (no t10k-*)") + f"; n_train + n_test = {cfg.n_train + cfg.n_test}"
    tr = _draw(cfg, "n_train", c_pool, np.arange(len(c_pool)), where)
    x_tr, c_tr = x_pool[tr], c_pool[tr]
    x_te = c_te = None
    if cfg.n_test > 0:
        free = np.setdiff1d(np.arange(len(c_pool)), tr)
        if test_pool is not None:  # a pool of its own, nothing taken from it yet
            x_pool, c_pool = _select(test_pool, digits, cfg.seed, 1)
            free, where = np.arange(len(c_pool)), "the t10k-* files"
        te = _draw(cfg, "n_test", c_pool, free, where)
        x_te, c_te = x_pool[te], c_pool[te]

    x_train, x_test = (None if x is None else torch.from_numpy(x.astype(np.float64) / 255.0) for x in (x_tr, x_te))
    meta = {"digits": digits, "source": source, "normalise": cfg.normalise, "image_shape": [28, 28],
            "train_counts": np.bincount(c_tr, minlength=k).tolist(),
            "test_source": "none" if x_te is None else ("t10k" if test_pool is not None else "train pool")}
    if x_te is not None:
        meta["test_counts"] = np.bincount(c_te, minlength=k).tolist()
    if cfg.normalise == "center":
        mean = x_train.mean(dim=0)
        x_train = x_train - mean
        x_test = None if x_test is None else x_test - mean
        meta["mean_image"] = mean.tolist()  # add back to view images

    if cfg.task == "classification":
        y_test = None if c_te is None else torch.from_numpy(c_te)
        return DataBundle("mnist", x_train, torch.from_numpy(c_tr), x_test, y_test, task="classification",
                          n_classes=k, meta=meta)
    # autoencoder: targets are the clean images; inputs get N(0, noise²) pixel noise (both splits)
    meta["noise"] = cfg.noise

    def noisy(y: torch.Tensor, stream: int) -> torch.Tensor:
        return y + cfg.noise * gaussian(rng(cfg.seed, stream), *y.shape) if cfg.noise > 0 else y.clone()

    return DataBundle("mnist", noisy(x_train, 2), x_train, None if x_test is None else noisy(x_test, 3), x_test,
                      meta=meta)
