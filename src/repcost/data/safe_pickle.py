"""A restricted unpickler for numpy arrays in tuples and lists (a plain pickle.load can run any code).

Pickle calls only the callables its GLOBAL opcodes name; this unpickler resolves exactly the three
that numpy array reconstruction needs (`_reconstruct`, `ndarray`, `dtype`) and refuses every other
name before anything is called. Containers (tuples, lists, dicts) and scalars need no globals. Python 2
pickles (byte strings read as latin1) and Python 3 pickles of protocol >= 3 qualify; a Python 3 protocol-2
pickle spells bytes as a call of `_codecs.encode` and protocol 5 arrays as one of `_frombuffer`: refused.
"""

from __future__ import annotations

import io
import pickle
from typing import Any, Callable, Dict, Tuple

import numpy as np

try:  # numpy >= 2
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy 1.x
    from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]

# (module, name) as written in the pickle -> the object it stands for. Both spellings of numpy's core
# module appear: numpy < 2 writes numpy.core, numpy >= 2 numpy._core.
ALLOWED: Dict[Tuple[str, str], Callable[..., Any]] = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class RefusedPickle(pickle.UnpicklingError):
    """The pickle names a global outside ALLOWED (it could run code); nothing it names was called."""


class NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler admitting only numpy array reconstruction (ALLOWED) besides built-in containers."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED[(module, name)]
        except KeyError:
            raise RefusedPickle(f"refused to load {module}.{name} (only numpy arrays are admitted)") from None


def load_numpy_pickle(data: bytes) -> Any:
    """Unpickle `data` admitting only numpy arrays in containers; latin1 reads Python 2 pickles' byte strings."""
    return NumpyOnlyUnpickler(io.BytesIO(data), encoding="latin1").load()
