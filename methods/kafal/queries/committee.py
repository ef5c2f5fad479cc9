"""Query by committee, QBC (Seung et al. 1992; Dagan & Engelson 1995, the paper's [7]), baseline (IV).

Each client keeps a committee of three models (the paper: "3 models on each client", 0.156M extra parameters =
two extra ResNet-8s). Disagreement is measured by

- ``vote-entropy`` (default, Dagan & Engelson's measure): −Σ_c (V_c/M) log(V_c/M), V_c the members voting for c.
  With three members it takes only three values, so ties are broken by the consensus KL below (our choice), then
  by position.
- ``consensus-kl`` (McCallum & Nigam): mean over members of KL(p_m ‖ p̄), p̄ the members' mean softmax.
"""

from __future__ import annotations

import math

import torch

QBC_MEASURES = ("vote-entropy", "consensus-kl")


def vote_entropy(member_logits: torch.Tensor) -> torch.Tensor:
    """Vote entropy per sample from M x N x C logits (nats)."""
    members, _, classes = member_logits.shape
    votes = torch.nn.functional.one_hot(member_logits.argmax(dim=2), classes).sum(dim=0).to(member_logits.dtype)
    share = votes / members
    return -torch.where(share > 0, share * torch.log(share.clamp(min=1e-30)), torch.zeros_like(share)).sum(dim=1)


def consensus_kl(member_logits: torch.Tensor) -> torch.Tensor:
    """Mean over members of KL(p_m ‖ mean_m p_m) per sample, from M x N x C logits."""
    log_p = torch.log_softmax(member_logits, dim=2)
    log_mean = torch.logsumexp(log_p, dim=0) - math.log(len(member_logits))
    return (log_p.exp() * (log_p - log_mean)).sum(dim=2).mean(dim=0)


def qbc_query(member_logits: torch.Tensor, budget: int, measure: str = "vote-entropy") -> torch.Tensor:
    """Positions (CPU) of the ``budget`` samples the committee disagrees on most, most first."""
    if measure not in QBC_MEASURES:
        raise ValueError(f"'kafal.al-qbc-measure' must be one of {', '.join(QBC_MEASURES)}, got {measure!r}")
    if member_logits.dim() != 3 or len(member_logits) < 2:
        raise ValueError(f"QBC needs M >= 2 members' logits as M x N x C, got {tuple(member_logits.shape)}")
    n = member_logits.shape[1]
    if not 0 <= budget <= n:
        raise ValueError(f"budget must be in [0, {n}], got {budget}")
    order = torch.argsort(consensus_kl(member_logits), descending=True, stable=True)
    if measure == "vote-entropy":
        order = order[torch.argsort(vote_entropy(member_logits)[order], descending=True, stable=True)]
    return order[:budget].cpu()
