"""SCAFFOLD's corrected local gradient as an objective: the configured loss plus Σ_p ⟨p, c − c_i⟩ over θ's
parameters, whose gradient is the loss's gradient plus (c − c_i) exactly (Alg. 1 line 10: y ← y − η_l (g_i(y) − c_i +
c)). The term enters with its value taken back out (t − t.detach(): zero, gradient c − c_i), so the loss the round
reports (``train-loss``) is the configured objective's own: the linear term's value means nothing, and it can make the
sum negative, which the server refuses as a training loss. It wraps the round's objective (the plain cross-entropy,
or FedProx's proximal one), so it composes with it, and counts its calls: ``train_epochs`` calls the loss once per
optimiser step, so that count is K of option II."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence

import torch

from client_app.objective import LocalTraining, Objective, ObjectiveFactory


def correction_term(params: Sequence[torch.Tensor], corrections: Sequence[torch.Tensor]) -> torch.Tensor:
    """Σ_p ⟨p, d_p⟩ with its value removed: zero, and its gradient with respect to each p is d_p."""
    term = functools.reduce(operator.add, [(p * d).sum() for p, d in zip(params, corrections, strict=True)])
    return term - term.detach()


class Corrected:
    """``base``'s loss + Σ_p ⟨p, c − c_i⟩ over ``params`` (its value removed, its gradient kept); ``steps`` counts
    the mini-batch losses computed."""

    def __init__(self, base: Objective, params: Sequence[torch.nn.Parameter], corrections: Sequence[torch.Tensor]):
        self.base = base
        self.params = list(params)
        self.corrections = list(corrections)
        self.steps = 0

    def loss(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        return self.base.loss(inputs, labels) + correction_term(self.params, self.corrections)

    def finish(self) -> None:
        self.base.finish()


class CorrectedFactory:
    """Builds the round's ``Corrected`` objective around ``base``'s, for the correction c − c_i (parameter name ->
    tensor); keeps it in ``built`` so the client step reads its step count."""

    def __init__(self, base: ObjectiveFactory, correction: Mapping[str, torch.Tensor]) -> None:
        self.base = base
        self.correction = dict(correction)
        self.built: Corrected | None = None

    def __call__(self, training: LocalTraining) -> Corrected:
        named = dict(training.model.named_parameters())
        params = [named[key] for key in self.correction]
        if {id(p) for p in params} != {id(p) for p in training.params}:
            raise ValueError("SCAFFOLD's control variates do not cover exactly the parameters the round trains")
        corrections = [d.to(p.device, p.dtype) for d, p in zip(self.correction.values(), params, strict=True)]
        self.built = Corrected(self.base(training), params, corrections)
        return self.built
