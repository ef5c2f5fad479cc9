"""SGD with momentum and weight decay, computing exactly what ``torch.optim.SGD`` computes (dampening 0, no Nesterov).

``torch.optim``'s optimisers import ``torch._dynamo`` (and with it sympy and the inductor) the first time one is
built: 2.5 s of CPU on the development machine in every process that trains, paid by the server's pretraining and
by each ClientApp actor in its first round. This one is plain tensor arithmetic, in the order ``torch.optim.SGD``'s
single-tensor step uses, so it gives the same numbers bit for bit (tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


class SGD:
    """``torch.optim.SGD(params, lr, momentum, weight_decay)``: ``param_groups[0]["lr"]`` may be changed between steps
    (a schedule), and ``zero_grad`` / ``step`` behave alike."""

    def __init__(
        self, params: Sequence[torch.nn.Parameter], lr: float, momentum: float = 0.0, weight_decay: float = 0.0
    ) -> None:
        self.param_groups: list[dict[str, Any]] = [
            {"params": list(params), "lr": lr, "momentum": momentum, "weight_decay": weight_decay}
        ]
        self._buffers: dict[int, torch.Tensor] = {}  # momentum buffer per parameter, made at its first step

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.param_groups[0]["params"]:
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
        for index, param in enumerate(group["params"]):
            if param.grad is None:
                continue
            grad = param.grad
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            if momentum != 0:
                buffer = self._buffers.get(index)
                if buffer is None:
                    buffer = self._buffers[index] = torch.clone(grad).detach()
                else:
                    buffer.mul_(momentum).add_(grad)
                grad = buffer
            param.add_(grad, alpha=-lr)
