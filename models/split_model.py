"""A model built as an ordered chain of named stages, splittable at a level (the split levels of FedFT-EDS, §III).

FedFT freezes the lower part φ (every stage up to and including the split level) and trains the upper
part θ (every stage above it). Because φ never changes, its output can be computed once and cached;
``forward_to`` and ``forward_from`` make that possible without knowing the architecture.

Active-learning queries need two more views of a model: the penultimate features (the embedding the final
Linear classifies; core-set, BADGE, ALFA-Mix) and the output of every level in one pass (the loss-prediction
module of LL4AL). ``embed_and_classify`` and ``forward_with_levels`` give them for any chain whose last stage
is either an ``nn.Linear`` or a ``ClassifierHead``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

#: The level name meaning "freeze nothing": the whole model is θ.
NO_FREEZE = "none"


class ClassifierHead(nn.Module):
    """A last stage that maps features to an embedding (``embed``) and classifies it with the Linear ``fc``."""

    fc: nn.Linear

    def embed(self, h: torch.Tensor) -> torch.Tensor:
        """The penultimate features: the input of ``fc``."""
        raise NotImplementedError

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(self.embed(h))


class SplitModel(nn.Module):
    """Sequential chain of named stages, splittable after any stage named in ``levels``."""

    def __init__(self, stages: Mapping[str, nn.Module], levels: tuple[str, ...]) -> None:
        super().__init__()
        self.stages = nn.ModuleDict(stages)
        names = list(stages)
        if any(level not in names[:-1] for level in levels):
            raise ValueError(f"split levels {levels} must name stages before the last of {names}")
        #: Names at which the model can be split (frozen up to and including the level).
        self.levels = levels

    def _check_level(self, level: str) -> int:
        names = list(self.stages.keys())
        if level == NO_FREEZE:
            return -1
        if level not in self.levels:
            raise ValueError(f"unknown split level {level!r}; this model has {', '.join((NO_FREEZE, *self.levels))}")
        return names.index(level)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages.values():
            x = stage(x)
        return x

    def forward_with_levels(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Logits and the output of every split level, from one forward pass."""
        outputs: dict[str, torch.Tensor] = {}
        for name, stage in self.stages.items():
            x = stage(x)
            if name in self.levels:
                outputs[name] = x
        return x, outputs

    def embed_and_classify(self, x: torch.Tensor, level: str = NO_FREEZE) -> tuple[torch.Tensor, torch.Tensor]:
        """Penultimate features (N x D, what the final Linear reads) and logits, from one forward pass.

        ``x`` is the input of the stages above ``level``: the model's input for ``none``, φ's output at ``level``
        otherwise (the cached features a partial model trains on). This is the one place the methods read the
        representation from (MOON's z, FedFSC's few-shot features, the active-learning embeddings).
        """
        last = self._check_level(level)
        *body, head = list(self.stages.values())[last + 1 :]
        for stage in body:
            x = stage(x)
        if isinstance(head, ClassifierHead):
            embedding = head.embed(x)
            return embedding, head.fc(embedding)
        if isinstance(head, nn.Linear):
            embedding = x.flatten(1)
            return embedding, head(embedding)
        raise TypeError(f"the last stage must be nn.Linear or ClassifierHead, not {type(head).__name__}")

    def classify(self, embedding: torch.Tensor) -> torch.Tensor:
        """Logits of the final Linear applied to penultimate features (ALFA-Mix classifies mixed embeddings)."""
        head = list(self.stages.values())[-1]
        if isinstance(head, ClassifierHead):
            return head.fc(embedding)
        if isinstance(head, nn.Linear):
            return head(embedding)
        raise TypeError(f"the last stage must be nn.Linear or ClassifierHead, not {type(head).__name__}")

    def forward_to(self, x: torch.Tensor, level: str) -> torch.Tensor:
        """Output of the lower part φ: every stage up to and including ``level``."""
        last = self._check_level(level)
        for index, stage in enumerate(self.stages.values()):
            if index > last:
                break
            x = stage(x)
        return x

    def forward_from(self, h: torch.Tensor, level: str) -> torch.Tensor:
        """Output of the upper part θ applied to features ``h`` taken at ``level``."""
        last = self._check_level(level)
        for index, stage in enumerate(self.stages.values()):
            if index > last:
                h = stage(h)
        return h

    def lower_stages(self, level: str) -> list[nn.Module]:
        """The stages of φ for a split at ``level`` (empty for ``none``)."""
        last = self._check_level(level)
        return [stage for index, stage in enumerate(self.stages.values()) if index <= last]

    def upper_stages(self, level: str) -> list[nn.Module]:
        """The stages of θ for a split at ``level`` (all of them for ``none``)."""
        last = self._check_level(level)
        return [stage for index, stage in enumerate(self.stages.values()) if index > last]

    def upper_parameters(self, level: str) -> list[nn.Parameter]:
        """θ's trainable parameters."""
        return [p for stage in self.upper_stages(level) for p in stage.parameters()]

    def set_frozen(self, level: str) -> None:
        """Freeze φ: no gradients, eval mode (BatchNorm statistics fixed, dropout off); θ in train mode."""
        self.train()
        for stage in self.lower_stages(level):
            stage.eval()
            for p in stage.parameters():
                p.requires_grad_(False)

    def classifier_keys(self) -> list[str]:
        """State keys of the final Linear layer (re-initialised when pretraining used other classes)."""
        name = [n for n, m in self.named_modules() if isinstance(m, nn.Linear)][-1]
        return [k for k in self.state_dict() if k.startswith(name + ".")]

    def upper_state_keys(self, level: str) -> list[str]:
        """State-dict keys (parameters and buffers) of θ for a split at ``level``, in state-dict order."""
        last = self._check_level(level)
        names = list(self.stages.keys())
        upper = {f"stages.{name}." for name in names[last + 1 :]}
        return [key for key in self.state_dict() if any(key.startswith(prefix) for prefix in upper)]
