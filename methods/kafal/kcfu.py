"""Knowledge-compensatory federated update, KCFU: KAFAL's local loss (Cao et al., ICCV 2023, §3.3, Eq. 4-6, Alg. 2).

    L_client = CE(g(x; ω) + log n, y)                                         balanced softmax (Eq. 4)
    L_comp   = Γ(x̃') · KL(σ(g(x̃'; Ω)) ‖ σ(g(x̃'; ω)))                         compensation (Eq. 5)
    L_KCFU   = ν · L_client + (1 − ν) · L_comp,  ν = 0.5 ('kafal.kafal-nu')           (Eq. 6)

with n the client's labelled class counts, Ω the downloaded global model (the teacher, no gradient), and
x̃' = β x'_a + (1 − β) x'_b a mix of two unlabelled samples, β ~ Beta(2, 2) drawn per sample. The weight of a
mixed sample is mixed with the same β: Γ(x̃') = β Γ(y'_a) + (1 − β) Γ(y'_b), y' being the teacher's pseudo-label.
In the first round of each cycle (Alg. 2, t = 1) the client trains on L_client alone (``compensate=False``).

Where the paper and the authors' code differ, the defaults here are:

- Γ: the paper writes Γ = Σ_c n_c / n_{y'}; the code normalises these inverse frequencies to sum to 1 over the
  classes and gives 0 to classes without labels (the paper's form is infinite there). Default: the code's
  normalised form (``normalise_gamma=False`` gives the paper's form, with 0 for unlabelled classes). The "Γ = 1/C"
  ablation is ``class_weighting="uniform"``.
- Weights: the paper's ν and 1 − ν (default); the code adds both terms with weight 1 (``authors_code``).
- KL: the paper's KL summed over classes (default); the code averages it over classes, i.e. KL / C.
- Pairs: the paper draws x'_a, x'_b at random from the unlabelled batch (default: a random permutation); the code
  pairs every sample with one shared partner (``pairing="shared"``).
- Pseudo-labels for Γ: the paper takes them from the teacher on the unmixed samples (default); the code takes
  them on the mixed batch, and the partner's label from the partner's mixed sample (``pseudo_labels="mixed"``).

Ablations (Table 1, Fig. 4(e)(f)): ``balanced=False`` (plain CE), ``compensation=False`` (L_client only, the
"Baseline"), ``mixing=False`` ("KCFU w/o mix"), ``class_weighting="uniform"`` (Γ = 1/C).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

CLASS_WEIGHTINGS = ("inverse-frequency", "uniform")
PAIRINGS = ("permutation", "shared")
PSEUDO_LABEL_SOURCES = ("unmixed", "mixed")
KL_REDUCTIONS = ("sum", "class-mean")

Model = Callable[[torch.Tensor], torch.Tensor]


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def check_nu(nu: float) -> None:
    """ν must be in [0, 1] ('kafal.kafal-nu')."""
    if not 0.0 <= nu <= 1.0:
        raise ValueError(f"'kafal.kafal-nu' must be in [0, 1], got {nu}")


@dataclass(frozen=True)
class KCFUOptions:
    """How the KCFU loss is formed; the defaults are the paper's Eq. 4-6 with the code's normalised Γ."""

    balanced: bool = True
    compensation: bool = True
    mixing: bool = True
    class_weighting: str = "inverse-frequency"
    normalise_gamma: bool = True
    client_weight: float = 0.5
    compensation_weight: float = 0.5
    kl_reduction: str = "sum"
    pairing: str = "permutation"
    pseudo_labels: str = "unmixed"
    beta: tuple[float, float] = (2.0, 2.0)

    def __post_init__(self) -> None:
        _one_of("class_weighting", self.class_weighting, CLASS_WEIGHTINGS)
        _one_of("kl_reduction", self.kl_reduction, KL_REDUCTIONS)
        _one_of("pairing", self.pairing, PAIRINGS)
        _one_of("pseudo_labels", self.pseudo_labels, PSEUDO_LABEL_SOURCES)
        if self.client_weight < 0 or self.compensation_weight < 0:
            raise ValueError(f"loss weights must be >= 0, got {self.client_weight}, {self.compensation_weight}")
        if not all(math.isfinite(b) and b > 0 for b in self.beta):
            raise ValueError(f"Beta parameters must be > 0, got {self.beta}")

    @classmethod
    def from_nu(cls, nu: float = 0.5, **changes: object) -> KCFUOptions:
        """The paper's weighting ν · L_client + (1 − ν) · L_comp, with any other field changed."""
        check_nu(nu)
        return cls(client_weight=nu, compensation_weight=1.0 - nu, **changes)  # type: ignore[arg-type]

    @classmethod
    def authors_code(cls) -> KCFUOptions:
        """What the authors' script computes: L_client + Γ̂·KL/C, shared partner, pseudo-labels on the mixed batch."""
        return cls(
            client_weight=1.0,
            compensation_weight=1.0,
            kl_reduction="class-mean",
            pairing="shared",
            pseudo_labels="mixed",
            normalise_gamma=True,
        )


@dataclass(frozen=True)
class KCFULoss:
    """The loss to back-propagate and its two parts (detached, for logging without a host sync)."""

    total: torch.Tensor
    client: torch.Tensor
    compensation: torch.Tensor | None


@dataclass(frozen=True)
class ClassTerms:
    """The per-class tensors of KCFU, computed once per round from the labelled class counts, on the device.

    ``log_counts`` is log n for the balanced loss (None: plain CE); ``gamma`` is Γ per class (Eq. 5).
    """

    log_counts: torch.Tensor | None
    gamma: torch.Tensor


def class_terms(class_counts: torch.Tensor, options: KCFUOptions, device: torch.device | str) -> ClassTerms:
    """``ClassTerms`` for a client's labelled class counts under ``options``, placed on ``device``."""
    counts = class_counts.detach().cpu().double()
    log_counts = torch.log(counts).float().to(device) if options.balanced else None
    gamma = compensation_class_weights(counts, options.normalise_gamma, options.class_weighting).to(device)
    return ClassTerms(log_counts, gamma)


def client_loss(logits: torch.Tensor, labels: torch.Tensor, log_counts: torch.Tensor | None) -> torch.Tensor:
    """Mean balanced-softmax cross-entropy CE(logits + log n, y) (Eq. 4); plain CE when ``log_counts`` is None.

    Classes with n = 0 get a −inf logit (probability 0, zero gradient); a label of such a class would give an
    infinite loss, which cannot happen when n counts the labelled pool the labels come from.
    """
    if log_counts is None:
        return F.cross_entropy(logits, labels)
    return F.cross_entropy(logits + log_counts.to(logits.dtype), labels)


def compensation_class_weights(
    class_counts: torch.Tensor, normalise: bool = True, weighting: str = "inverse-frequency"
) -> torch.Tensor:
    """Γ per class (CPU): Σn / n_c for labelled classes, 0 for the others, optionally normalised to sum 1; or 1/C."""
    _one_of("class_weighting", weighting, CLASS_WEIGHTINGS)
    counts = class_counts.detach().cpu().double()
    if weighting == "uniform":
        return torch.full_like(counts, 1.0 / counts.numel()).float()
    total = counts.sum()
    if not bool(total > 0):
        raise ValueError("compensation weights need at least one labelled sample")
    gamma = torch.where(counts > 0, total / counts.clamp(min=1.0), torch.zeros_like(counts))
    if normalise:
        gamma = gamma / gamma.sum()
    return gamma.float()


def draw_mixing(
    batch_size: int, generator: torch.Generator, beta: tuple[float, float] = (2.0, 2.0), pairing: str = "permutation"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample mixing weights β ~ Beta(a, b) and partner positions, drawn on the CPU from ``generator``."""
    _one_of("pairing", pairing, PAIRINGS)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    weights = torch.from_numpy(np.random.default_rng(seed).beta(beta[0], beta[1], size=batch_size)).float()
    if pairing == "permutation":
        partner = torch.randperm(batch_size, generator=generator)
    else:
        partner = torch.randint(0, batch_size, (1,), generator=generator).expand(batch_size).clone()
    return weights, partner


def mix(x: torch.Tensor, weights: torch.Tensor, partner: torch.Tensor) -> torch.Tensor:
    """β x + (1 − β) x[partner], β broadcast over every dimension but the first."""
    w = weights.to(x.device, x.dtype).view(-1, *([1] * (x.dim() - 1)))
    return w * x + (1 - w) * x[partner.to(x.device)]


def compensation_loss(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, sample_weights: torch.Tensor, kl_reduction: str = "sum"
) -> torch.Tensor:
    """Batch mean of Γ(x) · KL(σ(teacher) ‖ σ(student)) (Eq. 5); the KL summed over classes or averaged (code)."""
    _one_of("kl_reduction", kl_reduction, KL_REDUCTIONS)
    kl = F.kl_div(
        torch.log_softmax(student_logits, dim=1),
        torch.log_softmax(teacher_logits.detach(), dim=1),
        reduction="none",
        log_target=True,
    ).sum(dim=1)
    if kl_reduction == "class-mean":
        kl = kl / student_logits.shape[1]
    return (sample_weights.to(kl.device, kl.dtype) * kl).mean()


def kcfu_loss(
    student: Model,
    teacher: Model,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    unlabelled_inputs: torch.Tensor | None,
    terms: ClassTerms,
    generator: torch.Generator,
    options: KCFUOptions = KCFUOptions(),
    compensate: bool = True,
) -> KCFULoss:
    """KCFU loss of one step: a labelled batch (``inputs``, ``labels``) and an unlabelled batch, on one device.

    ``terms`` come from ``class_terms`` (once per round). The mixing draws are made on the CPU from ``generator``.

    ``student`` is the client model being trained; ``teacher`` the downloaded global model (called without
    gradient; the caller chooses its mode: eval is our recommendation, the authors' code left it in train mode).
    ``compensate=False`` (the first round of a cycle), ``options.compensation=False`` or an empty unlabelled batch
    give L_client alone, with weight 1 as in Alg. 2 line 6.
    """
    l_client = client_loss(student(inputs), labels, terms.log_counts)
    if not (compensate and options.compensation) or unlabelled_inputs is None or len(unlabelled_inputs) == 0:
        return KCFULoss(l_client, l_client.detach(), None)
    device = unlabelled_inputs.device
    batch = len(unlabelled_inputs)
    if options.mixing:
        weights, partner = draw_mixing(batch, generator, options.beta, options.pairing)
        weights, partner = weights.to(device), partner.to(device)
        mixed = mix(unlabelled_inputs, weights, partner)
    else:
        weights, partner = torch.ones(batch, device=device), torch.arange(batch, device=device)
        mixed = unlabelled_inputs
    with torch.no_grad():
        teacher_logits = teacher(mixed)
        use_unmixed = options.mixing and options.pseudo_labels == "unmixed"
        pseudo = (teacher(unlabelled_inputs) if use_unmixed else teacher_logits).argmax(dim=1)
        sample_weights = weights * terms.gamma[pseudo] + (1 - weights) * terms.gamma[pseudo[partner]]
    l_comp = compensation_loss(student(mixed), teacher_logits, sample_weights, options.kl_reduction)
    total = options.client_weight * l_client + options.compensation_weight * l_comp
    return KCFULoss(total, l_client.detach(), l_comp.detach())
