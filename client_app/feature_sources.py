"""φ(x) of a client's local samples, read in order by chunks (the entropy pass) and by selected rows (training).

Three places can hold them, behind one small interface:

- ``InMemory``: a host tensor (the memory tier of the feature cache);
- ``OnDisk``: a ``.npy`` file read a chunk at a time with plain file reads, so the features pass through the page
  cache and never sit whole in the process's memory (a small node with a bounded ``feature-cache-mb``);
- ``Computed``: computed on the device from the images when asked (no cache, or φ changed).

Whatever the source, the entropy pass reads every sample once and training reads only the selected rows, so a
round's peak memory is the source's own footprint plus one chunk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from client_app.local_data import LocalData
from models import SplitModel


class Features(Protocol):
    """φ(x) of the local samples, in sample order."""

    def __len__(self) -> int: ...

    def chunks(self, batch_size: int) -> Iterator[torch.Tensor]:
        """Consecutive blocks of at most ``batch_size`` samples, covering all of them in order."""
        ...

    def rows(self, indices: torch.Tensor) -> torch.Tensor:
        """The samples at ``indices`` (a CPU index tensor), in that order."""
        ...


@dataclass(frozen=True)
class InMemory:
    """Features held in a host tensor."""

    tensor: torch.Tensor

    def __len__(self) -> int:
        return len(self.tensor)

    def chunks(self, batch_size: int) -> Iterator[torch.Tensor]:
        for start in range(0, len(self.tensor), batch_size):
            yield self.tensor[start : start + batch_size]

    def rows(self, indices: torch.Tensor) -> torch.Tensor:
        return self.tensor[indices]


class OnDisk:
    """Features in a ``.npy`` file, read with plain file reads (never memory-mapped, never loaded whole)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, fortran_order, dtype = read_header(handle)
            self._offset = handle.tell()
        if fortran_order or len(shape) < 1:
            raise ValueError(f"{path} does not hold C-ordered features")
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self._row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        """The features' size (without the file's header)."""
        return len(self) * self._row_bytes

    def _read(self, handle, start: int, count: int) -> torch.Tensor:
        buffer = bytearray(count * self._row_bytes)
        handle.seek(self._offset + start * self._row_bytes)
        if handle.readinto(buffer) != len(buffer):
            raise OSError(f"{self.path} is shorter than its header says")
        return torch.from_numpy(np.frombuffer(buffer, dtype=self.dtype).reshape(count, *self.shape[1:]))

    def chunks(self, batch_size: int) -> Iterator[torch.Tensor]:
        with self.path.open("rb", buffering=0) as handle:
            for start in range(0, len(self), batch_size):
                yield self._read(handle, start, min(batch_size, len(self) - start))

    def rows(self, indices: torch.Tensor) -> torch.Tensor:
        order = torch.argsort(indices)  # read the file front to back, then put the rows in the asked order
        with self.path.open("rb", buffering=0) as handle:
            ordered = torch.cat(
                [self._read(handle, index, 1) for index in indices[order].tolist()] or [self._read(handle, 0, 0)]
            )
        out = torch.empty_like(ordered)
        out[order] = ordered
        return out


def write_features(
    path: Path, chunks: Iterable[torch.Tensor], length: int, row_shape: tuple[int, ...], dtype: torch.dtype
) -> OnDisk:
    """Stream ``chunks`` (``length`` rows of ``row_shape`` in total) into a ``.npy`` file, atomically."""
    numpy_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with partial.open("wb") as handle:
        header = {
            "descr": np.lib.format.dtype_to_descr(numpy_dtype),
            "fortran_order": False,
            "shape": (length, *row_shape),
        }
        np.lib.format.write_array_header_2_0(handle, header)
        for chunk in chunks:
            handle.write(chunk.to("cpu", dtype).contiguous().numpy().tobytes())
            written += len(chunk)
    if written != length:
        partial.unlink(missing_ok=True)
        raise ValueError(f"wrote {written} rows of features, expected {length}")
    partial.replace(path)
    return OnDisk(path)


class Computed:
    """φ(x) computed on ``device`` from the client's images when read (φ in eval mode, no gradients)."""

    def __init__(self, model: SplitModel, data: LocalData, level: str, device: torch.device) -> None:
        self.model, self.data, self.level, self.device = model, data, level, device

    def __len__(self) -> int:
        return len(self.data)

    @torch.no_grad()
    def chunks(self, batch_size: int) -> Iterator[torch.Tensor]:
        for start in range(0, len(self.data), batch_size):
            yield self.model.forward_to(self.data.inputs(self.device, start, start + batch_size), self.level)

    @torch.no_grad()
    def rows(self, indices: torch.Tensor) -> torch.Tensor:
        return self.model.forward_to(self.data.rows(self.device, indices), self.level)

    @torch.no_grad()
    def row_shape(self) -> tuple[int, ...]:
        """The shape of one sample's features (from a forward pass of the first sample)."""
        return tuple(self.model.forward_to(self.data.inputs(self.device, 0, 1), self.level).shape[1:])
