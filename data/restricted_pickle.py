"""Unpickling that cannot run code: only the globals a pickled numpy array needs are resolved.

A pickle names functions by module and name, and the unpickler calls them: ``pickle.load`` on a file from
elsewhere runs whatever it names (``os.system`` included). The CIFAR "python version" files hold only
dicts, lists, strings, bytes, ints and numpy arrays, so everything else is refused before it is imported.
The numpy globals are the ones numpy's ``ndarray.__reduce__``/``__reduce_ex__`` name, under numpy 1
(``numpy.core``) and numpy 2 (``numpy._core``) module paths; ``_codecs.encode`` is how a Python 3 pickle of
protocol 2 or lower stores bytes, and is admitted for latin-1 only, which is all such a pickle asks for.
"""

from __future__ import annotations

import pickle
from typing import Any, BinaryIO

import numpy as np

try:
    from numpy._core import multiarray, numeric
except ImportError:  # numpy < 2
    from numpy.core import multiarray, numeric  # type: ignore[no-redef]


class ForbiddenGlobal(pickle.UnpicklingError):
    """The pickle names a global outside the allowed set; it was not imported or called."""


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it (bytes stored as latin-1 text), and nothing more."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise ForbiddenGlobal(f"_codecs.encode is admitted only for latin-1 text, not {encoding!r}")
    return text.encode("latin1")


ARRAY_GLOBALS: dict[tuple[str, str], Any] = {
    **{(f"numpy.{core}.multiarray", "_reconstruct"): multiarray._reconstruct for core in ("core", "_core")},
    **{
        (f"numpy.{core}.numeric", "_frombuffer"): numeric._frombuffer  # type: ignore[attr-defined]
        for core in ("core", "_core")
    },
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("_codecs", "encode"): _latin1_encode,
}


class _ArrayUnpickler(pickle.Unpickler):
    """Resolves the globals of ``ARRAY_GLOBALS`` and refuses every other."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return ARRAY_GLOBALS[(module, name)]
        except KeyError:
            raise ForbiddenGlobal(f"it names {module}.{name}, which is not part of the format") from None

    def persistent_load(self, pid: Any) -> Any:
        raise ForbiddenGlobal("it refers to a persistent object, which is not part of the format")


def load_array_pickle(handle: BinaryIO) -> Any:
    """Unpickle plain data and numpy arrays from ``handle``; ``ForbiddenGlobal`` for anything else.

    Python 2 strings are returned as bytes (``encoding="bytes"``), as in the CIFAR files."""
    return _ArrayUnpickler(handle, encoding="bytes").load()
