"""A stand-in accelerator on the CPU that enforces CUDA's placement rules, so CI without a GPU catches a tensor
left on the wrong device.

Inside ``FakeAccelerator()``, the device ``FAKE`` (spelled ``meta``, which no code path here computes on) behaves
like a GPU whose memory is the CPU's: ``.to(FAKE)``, ``module.to(FAKE)`` and factories with ``device=FAKE`` give
real CPU tensors with real values that the mode remembers as "on the accelerator" (by storage), and
``tensor.device`` reports ``FAKE`` for them. Every torch call then checks what CUDA would: all non-scalar tensor
arguments on one device, and no accelerator indices into a CPU tensor. A violation raises ``DeviceMismatch``
where the real GPU would have raised, e.g. labels left on the host and indexed by indices computed on the device.

A torch function mode is thread-local, so threads started inside the mode (the ServerApp pretrains in one while its
clients connect) run under it too: ``Thread.run`` is wrapped while the mode is on.

Gradients made by autograd are marked when read through ``.grad`` of a parameter on the accelerator. Storages
marked once are kept alive for the mode's lifetime (so their addresses are never reused): meant for small tests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

FAKE = torch.device("meta")
CPU = torch.device("cpu")

#: Calls that inspect or re-wrap a tensor without computing across devices.
_UNCHECKED = frozenset(
    {
        "_has_compatible_shallow_copy_type",
        "__set__",
        "is_same_size",
        "_is_view",
        "__len__",
        "dim",
        "size",
        "numel",
        "__repr__",
        "__format__",
        "element_size",
        "is_floating_point",
        "is_complex",
        "requires_grad_",
        "detach",
        "untyped_storage",
        "data_ptr",
        "stride",
        "is_contiguous",
        "nelement",
        "__hash__",
        "__bool__",
        "item",
        "tolist",
        "__index__",
        "__int__",
        "__float__",
        "copy_",
    }
)


class DeviceMismatch(RuntimeError):
    """What CUDA would have raised: tensors on the accelerator and the CPU in one call."""


def _is_fake(device: Any) -> bool:
    return device is not None and torch.device(device).type == FAKE.type


class FakeAccelerator(TorchFunctionMode):
    """Context manager: inside it, ``FAKE`` is an accelerator with CUDA's placement rules (see module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self._on_device: dict[int, torch.Tensor] = {}  # storage address -> a tensor keeping that storage alive

    def __enter__(self) -> FakeAccelerator:
        mode, run = self, threading.Thread.run
        self._thread_run = run

        def run_under_the_mode(thread: threading.Thread) -> None:
            TorchFunctionMode.__enter__(mode)  # the same mode (and its record of what is on the device)
            try:
                run(thread)
            finally:
                TorchFunctionMode.__exit__(mode, None, None, None)

        threading.Thread.run = run_under_the_mode  # type: ignore[method-assign, assignment]
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.Thread.run = self._thread_run  # type: ignore[method-assign]
        super().__exit__(*exc)

    def on_device(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` lives on the fake accelerator."""
        with torch._C.DisableTorchFunction():
            if tensor.numel() == 0:
                return False
            return tensor.untyped_storage().data_ptr() in self._on_device

    def _mark(self, out: Any) -> Any:
        def mark(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                with torch._C.DisableTorchFunction():
                    if value.numel():
                        self._on_device[value.untyped_storage().data_ptr()] = value
            return value

        tree_map(mark, out)
        return out

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", str(func))
        if name == "__get__":
            return self._attribute(func, args, kwargs)
        if func in (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu):
            return self._move(func, args, kwargs)
        if name == "numpy" and self.on_device(args[0]):
            raise DeviceMismatch("numpy(): the tensor is on the accelerator; move it to the CPU first")
        if (
            kwargs.get("generator") is not None
            and kwargs["generator"].device.type == "cpu"
            and (_is_fake(kwargs.get("device")) or any(self.on_device(t) for t in args if isinstance(t, torch.Tensor)))
        ):
            raise DeviceMismatch(f"{name}: a CPU generator cannot draw on the accelerator")
        if name in _UNCHECKED:
            with torch._C.DisableTorchFunction():
                return func(*args, **kwargs)
        if _is_fake(kwargs.get("device")):  # a factory asked for the accelerator
            kwargs["device"] = CPU
            with torch._C.DisableTorchFunction():
                return self._mark(func(*args, **kwargs))
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        placement = [(self.on_device(t), t.dim()) for t in tensors]
        any_on_device = any(on for on, _ in placement)
        if name in ("__getitem__", "__setitem__", "index_select", "gather", "take"):
            if any_on_device and not placement[0][0]:
                raise DeviceMismatch(f"{name}: indices or values on the accelerator used with a CPU tensor")
        elif any_on_device and any(not on and dims > 0 for on, dims in placement):
            raise DeviceMismatch(f"{name}: expected all tensors on one device, found the accelerator and the CPU")
        with torch._C.DisableTorchFunction():
            out = func(*args, **kwargs)
        return self._mark(out) if any_on_device else out

    def _attribute(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        attribute = getattr(getattr(func, "__self__", None), "__name__", "")
        on_device = isinstance(args[0], torch.Tensor) and self.on_device(args[0])
        if attribute == "device" and on_device:
            return FAKE
        with torch._C.DisableTorchFunction():
            out = func(*args, **kwargs)
        if attribute == "grad" and on_device and out is not None:
            self._mark(out)
        return out

    def _move(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        tensor, call_args = args[0], list(args)
        target: torch.device | None = None
        if func is torch.Tensor.cuda:
            target, call_args, kwargs = FAKE, [tensor], {}
        elif func is torch.Tensor.cpu:
            target, call_args, kwargs = CPU, [tensor], {}
        else:
            if kwargs.get("device") is not None:
                target, kwargs["device"] = torch.device(kwargs["device"]), CPU
            for index, value in enumerate(args[1:], start=1):
                if isinstance(value, (str, torch.device)):
                    target, call_args[index] = torch.device(value), CPU
                elif isinstance(value, torch.Tensor):
                    target = FAKE if self.on_device(value) else CPU
        source_on_device = self.on_device(tensor)
        with torch._C.DisableTorchFunction():
            out = torch.Tensor.to(*call_args, **kwargs) if func is torch.Tensor.to else tensor
            on_device = source_on_device if target is None else _is_fake(target)
            if (
                on_device != source_on_device
                and out.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
            ):
                out = out.clone()  # a real transfer makes a new tensor even where the CPU would not
        return self._mark(out) if on_device else out
