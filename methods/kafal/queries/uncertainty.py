"""Uncertainty and random queries (Cao et al., Sec. 4.1 (I), (V)): entropy, top-2 margin, random."""

from __future__ import annotations

import torch

from methods.kafal.ksas import top_scores


def entropy_scores(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy H(p) = −Σ p log p of softmax(logits), per row (nats)."""
    log_p = torch.log_softmax(logits, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1)


def margin_scores(logits: torch.Tensor) -> torch.Tensor:
    """Top-2 margin p_(1) − p_(2) of softmax(logits), per row; the smallest margins are queried."""
    top2 = torch.softmax(logits, dim=1).topk(2, dim=1).values
    return top2[:, 0] - top2[:, 1]


def entropy_query(logits: torch.Tensor, budget: int) -> torch.Tensor:
    """Positions of the ``budget`` highest entropies, highest first (ties: lower position first)."""
    return top_scores(entropy_scores(logits), budget)


def margin_query(logits: torch.Tensor, budget: int) -> torch.Tensor:
    """Positions of the ``budget`` smallest top-2 margins, smallest first (ties: lower position first)."""
    return top_scores(-margin_scores(logits), budget)


def random_query(num_unlabelled: int, budget: int, generator: torch.Generator) -> torch.Tensor:
    """``budget`` distinct positions drawn uniformly from ``num_unlabelled`` (CPU)."""
    if not 0 <= budget <= num_unlabelled:
        raise ValueError(f"budget must be in [0, {num_unlabelled}], got {budget}")
    return torch.randperm(num_unlabelled, generator=generator)[:budget]
