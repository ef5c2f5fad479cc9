"""The CIFAR unpickler: numpy arrays and plain data load; a pickle naming any other global runs nothing."""

from __future__ import annotations

import io
import os
import pickle
import shlex
from pathlib import Path

import numpy as np
import pytest

from data.catalog import DATASETS
from data.file_formats import DataFormatError, read_cifar_pickles
from data.restricted_pickle import ForbiddenGlobal, load_array_pickle


class RunsAShellCommand:
    """Unpickling it with ``pickle.load`` runs ``command`` through ``os.system``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def touching(marker: Path) -> bytes:
    return pickle.dumps({b"data": RunsAShellCommand(f"touch {shlex.quote(str(marker))}"), b"labels": [0]})


def test_the_payload_runs_code_under_plain_pickle(tmp_path: Path) -> None:
    """The payload of the next test is real: the standard unpickler creates the marker file."""
    marker = tmp_path / "ran"
    pickle.loads(touching(marker))
    assert marker.exists()


def test_a_cifar_batch_that_would_run_code_is_refused_naming_the_file(tmp_path: Path) -> None:
    marker, batch = tmp_path / "ran", tmp_path / "data_batch_1"
    batch.write_bytes(touching(marker))
    with pytest.raises(DataFormatError) as err:
        read_cifar_pickles([batch], "labels", DATASETS["cifar10"])
    assert not marker.exists()
    assert str(err.value).startswith(
        f"refused to read CIFAR batch {batch}: it names posix.system, which is not part of the format"
    )


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_numpy_arrays_and_plain_data_load_under_every_protocol(protocol: int) -> None:
    batch = {
        b"data": np.arange(12, dtype=np.uint8).reshape(2, 6),
        b"labels": [1, 2],
        b"batch_label": b"x",
        "name": "text",
    }
    loaded = load_array_pickle(io.BytesIO(pickle.dumps(batch, protocol=protocol)))
    assert np.array_equal(loaded[b"data"], batch[b"data"]) and loaded[b"data"].dtype == np.uint8
    assert loaded[b"labels"] == [1, 2] and loaded[b"batch_label"] == b"x" and loaded["name"] == "text"


def test_globals_beyond_the_format_are_refused_even_from_numpy() -> None:
    with pytest.raises(ForbiddenGlobal, match=r"names numpy\._?core\.multiarray\.scalar"):
        load_array_pickle(io.BytesIO(pickle.dumps(np.float64(1.0))))


def test_codecs_encode_is_admitted_for_latin1_only() -> None:
    rot13 = b"c_codecs\nencode\n(X\x03\x00\x00\x00abcX\x05\x00\x00\x00rot13tR."
    with pytest.raises(ForbiddenGlobal, match="admitted only for latin-1 text, not 'rot13'"):
        load_array_pickle(io.BytesIO(rot13))
    latin1 = rot13.replace(b"\x05\x00\x00\x00rot13", b"\x06\x00\x00\x00latin1")
    assert load_array_pickle(io.BytesIO(latin1)) == b"abc"


def test_persistent_references_are_refused() -> None:
    with pytest.raises(ForbiddenGlobal, match="persistent object"):
        load_array_pickle(io.BytesIO(b"\x80\x02X\x01\x00\x00\x00xQ."))
