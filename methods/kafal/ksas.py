"""Knowledge-specialised active sampling, KSAS (Cao et al., ICCV 2023, §3.2, Eq. 1-3).

For an unlabelled sample x of client i, with g(x; ω_i) the client model's logits after its last local update and
g(x; Ω̂_i) the final aggregated global model's logits:

    P_y ∝ n_{i,y}^λ exp(g_y(x; ω_i)),   Q_y ∝ n_{i,y}^λ exp(g_y(x; Ω̂_i))                     (Eq. 1, 2)
    D(x) = ½ Σ_y [P_y ln(P_y/Q_y) + Q_y ln(Q_y/P_y)] = ½ Σ_y (P_y − Q_y)(ln P_y − ln Q_y)     (Eq. 3)

and the b_i samples with the largest D are queried. Implemented, as in the authors' code, as a logit
adjustment: softmax(logits + λ·log n). Where the paper and the code differ:

- n_{i,y} are the client's **labelled** class counts (the paper's text says D_i^U, whose labels are unknown; the
  code uses the labelled pool).
- Eq. 3 has no ½; the code multiplies by 0.5. The factor does not change the ranking; we follow the code.
- A class with no labelled sample has weight 0^λ = 0, so P_y = Q_y = 0 and its term is 0 (0·ln 0 = 0). In the
  code log 0 = −inf and current torch's ``kl_div`` returns NaN for every sample; here those terms are 0.

Ablations of Fig. 4(e) (``kafal.kafal-ksas-weighting``):

- ``vanilla``: no knowledge weights, the symmetric KL of the plain softmaxes (Eq. 3 with λ = 0; the paper,
  A.4, says λ → 0 approaches the vanilla KL).
- ``reversed``: n_{i,y} replaced by 1 / n_{i,y}, i.e. logits − λ·log n. The paper is silent on classes with no
  labels (1/0); we exclude them as in the specialised form (weight 0), so the scores stay finite.
"""

from __future__ import annotations

import math

import torch

KSAS_WEIGHTINGS = ("specialised", "vanilla", "reversed")


def check_lambda(lam: float) -> None:
    """λ must be a finite number >= 0 ('kafal.kafal-lambda')."""
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"'kafal.kafal-lambda' must be a finite number >= 0, got {lam}")


def knowledge_log_weights(class_counts: torch.Tensor, lam: float = 1.0, weighting: str = "specialised") -> torch.Tensor:
    """log of the knowledge weights per class: λ·log n (specialised), −λ·log n (reversed) or 0 (vanilla).

    Classes with n = 0 get −inf under ``specialised`` and ``reversed`` (weight 0: they drop out).
    """
    check_lambda(lam)
    if weighting not in KSAS_WEIGHTINGS:
        raise ValueError(f"'kafal.kafal-ksas-weighting' must be one of {', '.join(KSAS_WEIGHTINGS)}, got {weighting!r}")
    counts = class_counts.detach().double().cpu()
    if weighting == "vanilla":
        return torch.zeros_like(counts)
    if not bool((counts > 0).any()):
        raise ValueError("knowledge-specialised weights need at least one labelled sample")
    sign = 1.0 if weighting == "specialised" else -1.0
    log_counts = torch.log(counts.clamp(min=1.0))
    return torch.where(counts > 0, sign * lam * log_counts, torch.full_like(counts, -math.inf))


def symmetric_kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """½(KL(P‖Q) + KL(Q‖P)) per row, from log-probabilities; classes where both are −inf contribute 0."""
    terms = (log_p.exp() - log_q.exp()) * (log_p - log_q)
    both_impossible = torch.isinf(log_p) & torch.isinf(log_q)
    return 0.5 * torch.where(both_impossible, torch.zeros_like(terms), terms).sum(dim=1)


def ksas_scores(
    client_logits: torch.Tensor,
    global_logits: torch.Tensor,
    class_counts: torch.Tensor,
    lam: float = 1.0,
    weighting: str = "specialised",
) -> torch.Tensor:
    """D(x) for each row: the knowledge-specialised symmetric KL between client and global predictions (Eq. 3).

    ``client_logits`` and ``global_logits`` are N x C on one device; ``class_counts`` (C) are the client's labelled
    class counts. Returns N scores in the logits' dtype, on their device.
    """
    if client_logits.shape != global_logits.shape or client_logits.dim() != 2:
        raise ValueError(
            f"logits must be equal N x C, got {tuple(client_logits.shape)} and {tuple(global_logits.shape)}"
        )
    if class_counts.shape != (client_logits.shape[1],):
        raise ValueError(f"class_counts must have {client_logits.shape[1]} entries, got {tuple(class_counts.shape)}")
    log_w = knowledge_log_weights(class_counts, lam, weighting).to(client_logits.device, client_logits.dtype)
    log_p = torch.log_softmax(client_logits + log_w, dim=1)
    log_q = torch.log_softmax(global_logits + log_w, dim=1)
    return symmetric_kl(log_p, log_q)


def top_scores(scores: torch.Tensor, budget: int) -> torch.Tensor:
    """Positions of the ``budget`` largest scores, largest first; ties keep the lower position first (CPU)."""
    if not 0 <= budget <= scores.numel():
        raise ValueError(f"budget must be in [0, {scores.numel()}], got {budget}")
    return torch.argsort(scores, descending=True, stable=True)[:budget].cpu()
