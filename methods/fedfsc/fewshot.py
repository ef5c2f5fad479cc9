"""FedFSC / FedFSC+ / FSCProx: few-shot fine-tuning of the classifier (thesis Ch. 4, §4.2-4.4, Alg. 1 and 2).

Few-shot participants freeze the received base model's extractor φ^t, take its final Linear θ = {W, b} as the
starting point (not a fresh layer), and train θ alone on n shots per eligible local class. The server
averages the few-shot classifiers **uniformly** (eq. 4.2) and returns the global model {θ_fs^t, φ^t}, pairing
them with the extractor they were trained on (the base distributed at round t, not the newly aggregated one).
The base model {θ, φ} is trained as the base trainer trains it: FedAvg, or with the ``objective`` axis FedProx
(``proximal``) or MOON (``contrastive``), aggregated by |D_k| as FedAvg does.

The presets (``METHODS``) differ in who does what each round (``RolePlan``): the selection policy's cohort
(``fraction-train`` = f_n) are the non-stragglers and run the normal update for E epochs; methods with stragglers
draw a further f_fs (``fedfsc.fewshot-fraction``) of the pool from the rest. Those methods preset f_n = 0.1 (with the
default f_fs = 0.1: the thesis's §4.5.2), so ``method = <name>`` alone runs; f_n + f_fs < 1 is checked whenever a
configuration is parsed, and at the start, against the K clients, that round(f_fs·K) ≥ 1 stragglers fit beside the
cohort (``check_straggler_run``).

- ``fedfsc`` (Alg. 1): the non-stragglers also few-shot update, from round 2; no stragglers.
- ``fedfsc-plus`` (Alg. 2): the stragglers only few-shot update (from round 2; idle in round 1).
- ``fedfsc-plus-baseline-plus`` (FedFSC+(baseline+)): the stragglers run E_r epochs of the normal update, then
  a few-shot update of the distributed base (Alg. 2 implies the distributed θ^t, φ^t; the text does not say).
- ``fedavg-plus``, ``fedprox-plus``, ``moon-plus`` (baseline+): the stragglers run E_r epochs, no few-shot.

``fedfsc.fscprox`` adds μ_fsc·‖θ_cls − anchor‖² to every normal update: FSCProx with the averaged few-shot classifier of
the last round that had one (sent with the round's message), baseProx with the received classifier. The glue is
``methods/fedfsc/client_step.py`` (client step) and ``methods/fedfsc/strategy.py`` (server step).

Decisions where the sources disagree or are silent:
- Class eligibility follows the thesis's code (the text says nothing): a class takes part when it has at
  least n local samples; when no class has, n is lowered until one does (``eligible_classes``).
- Shots are redrawn at the start of every epoch, as the text says (eq. 4.1: "resampled at the start of each
  local training epoch"); the code draws once per round. ``fedfsc.fewshot-resample = false`` gives the code's rule.
- The few-shot optimiser is the text's SGD (lr 0.01, momentum 0.9, weight decay 1e-3, batch 4, 10 epochs,
  10 shots) with the code's dampening 0.9 (``fedfsc.fewshot-dampening``), which the text does not mention: the momentum
  buffer then sums 0.1 × each gradient, so steps are about 10× smaller than with PyTorch's default 0. It decides
  the result: with 0, FedFSC fell 0.6-11.8 points below its own base trainer at Dir(0.1), 3 trainers x 2 seeds
  (measurements/experiments/fedfsc-table3-dampening0); with 0.9 the measured results are in fedfsc-table3.
- FSCProx follows the text's μ_fsc·‖θ − θ_fs‖² (eq. 4.3), not the code's (β/2)·‖θ − θ_fs‖²; it applies once the
  server holds a θ_fs (from round 3: few-shot updates start in round 2); baseProx applies from round 1.
- Stragglers number round(f_fs·N) of the N available clients, drawn afresh every round from those the selection
  policy did not pick; the few-shot features are φ^t's penultimate features in eval mode, computed once a round.
- In a round without few-shot classifiers (round 1) the global model is the new base model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from client_app.objective import LocalTraining, Objective, ObjectiveFactory
from methods.common.payload_size import state_bytes
from methods.common.state_averaging import average_states
from run_config.settings import ConfigError, below_one, non_negative, one_of, positive, setting
from strategies.random_selection import cohort_size

if TYPE_CHECKING:
    from run_config import RunConfig

#: Setting keys named in error messages: f_n is the share of clients the selection policy picks each round.
NON_STRAGGLER_KEY = "fraction-train"
FEWSHOT_KEY = "fedfsc.fewshot-fraction"
SHOTS_KEY = "fedfsc.fewshot-shots"
FSCPROX_MU_KEY = "fedfsc.fscprox-mu"

#: Few-shot updates start in round 2: round 1 trains the base model only, to initialise φ (Alg. 1 line 7).
FIRST_FEWSHOT_ROUND = 2


@dataclass(frozen=True)
class FewShotOptimiser:
    """The few-shot update's SGD settings (thesis Table 4.1 and §4.5)."""

    lr: float = 0.01
    momentum: float = 0.9
    dampening: float = 0.9  # the thesis's code; `fedfsc.fewshot-dampening`
    weight_decay: float = 1e-3
    batch_size: int = 4
    epochs: int = 10


@dataclass(frozen=True)
class FewShotResult:
    """A few-shot update's classifier θ_fs,k = {W, b}, the shots per class and classes it used, its mean loss."""

    weight: torch.Tensor
    bias: torch.Tensor
    shots: int
    classes: int
    loss: torch.Tensor  # 0-dim, on the features' device


def eligible_classes(labels: torch.Tensor, shots: int, num_classes: int) -> tuple[torch.Tensor, int]:
    """Which classes take part in the few-shot update, and the shot count actually used.

    A class is eligible when it has ≥ ``shots`` local samples; when none has, the count drops by one until
    some class qualifies (the thesis's code). Returns a boolean mask over ``num_classes`` and that count.
    """
    if shots < 1:
        raise ValueError(f"{SHOTS_KEY} must be >= 1, got {shots}")
    if len(labels) == 0:
        raise ValueError("few-shot update needs at least one labelled sample")
    counts = torch.bincount(labels, minlength=num_classes)
    if len(counts) > num_classes:
        raise ValueError(f"labels reach {len(counts) - 1}, beyond num_classes = {num_classes}")
    used = min(shots, int(counts.max()))
    return counts >= used, used


def draw_shots(labels: torch.Tensor, eligible: torch.Tensor, shots: int, generator: torch.Generator) -> torch.Tensor:
    """Indices of ``shots`` samples drawn uniformly without replacement from each eligible class.

    Vectorised: a random permutation (drawn on the CPU ``generator``) orders the samples within each class, and
    the first ``shots`` of each eligible class are kept. Indices come back grouped by class, ascending class.
    """
    device = labels.device
    shuffled = torch.randperm(len(labels), generator=generator).to(device)
    by_class = shuffled[torch.argsort(labels[shuffled], stable=True)]
    sorted_labels = labels[by_class]
    positions = torch.arange(len(labels), device=device)
    class_start = torch.searchsorted(sorted_labels, sorted_labels, right=False)
    rank = positions - class_start
    keep = (rank < shots) & eligible.to(device)[sorted_labels]
    return by_class[keep]


def train_fewshot_classifier(
    features: torch.Tensor,
    labels: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    *,
    shots: int = 10,
    optimiser: FewShotOptimiser = FewShotOptimiser(),
    generator: torch.Generator,
    resample_each_epoch: bool = True,
) -> FewShotResult:
    """θ_fs,k: the Linear {W, b} fine-tuned on frozen features of n shots per eligible class (eq. 4.1).

    ``features`` (N × D) are φ^t's outputs entering the Linear layer (``model_outputs.penultimate_features``,
    eval mode); ``weight`` (C × D) and ``bias`` (C) are the base model's classifier, copied and not modified.
    Returns new tensors. ``generator`` (CPU) drives the shot draws and the batch order; the loss is summed on the
    features' device and never read back during training.
    """
    num_classes = weight.shape[0]
    eligible, used = eligible_classes(labels, shots, num_classes)
    w = weight.detach().clone().requires_grad_(True)
    b = bias.detach().clone().requires_grad_(True)
    sgd = torch.optim.SGD(
        [w, b],
        lr=optimiser.lr,
        momentum=optimiser.momentum,
        dampening=optimiser.dampening,
        weight_decay=optimiser.weight_decay,
    )
    support = draw_shots(labels, eligible, used, generator)
    total = torch.zeros((), device=features.device)
    for epoch in range(optimiser.epochs):
        if resample_each_epoch and epoch > 0:
            support = draw_shots(labels, eligible, used, generator)
        order = support[torch.randperm(len(support), generator=generator).to(support.device)]
        for start in range(0, len(order), optimiser.batch_size):
            batch = order[start : start + optimiser.batch_size]
            loss = F.cross_entropy(F.linear(features[batch], w, b), labels[batch])
            sgd.zero_grad(set_to_none=True)
            loss.backward()
            sgd.step()
            total += loss.detach() * len(batch)
    steps = optimiser.epochs * len(support)
    return FewShotResult(w.detach(), b.detach(), used, len(support) // used, total / max(steps, 1))


def average_fewshot_classifiers(classifiers: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """θ_fs^t = (1/|F|) Σ_k θ_fs,k^t: the uniform mean of the few-shot classifiers (eq. 4.2), not size-weighted."""
    return average_states(classifiers)


def compose_global_state(
    base_state: Mapping[str, torch.Tensor], fewshot_classifier: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """w_g^t = {θ_fs^t, φ^t}: the round-t base state with its classifier entries replaced by θ_fs^t.

    ``base_state`` must be the base model *distributed* at round t (the one the few-shot classifiers were
    trained on), not the newly aggregated base. Every key of ``fewshot_classifier`` must exist in the base
    with the same shape.
    """
    for key, value in fewshot_classifier.items():
        if key not in base_state:
            raise ValueError(f"few-shot classifier key {key!r} is not in the base model")
        if base_state[key].shape != value.shape:
            raise ValueError(f"{key}: few-shot shape {tuple(value.shape)} != base shape {tuple(base_state[key].shape)}")
    return {key: fewshot_classifier.get(key, value).clone() for key, value in base_state.items()}


def fscprox_penalty(classifier: Sequence[torch.Tensor], anchor: Sequence[torch.Tensor], mu: float) -> torch.Tensor:
    """μ_fsc · ‖θ − θ_fs‖² over the classifier's tensors (eq. 4.3), added to the full update's loss.

    With the base model's own classifier as ``anchor`` this is baseProx. The anchor carries no gradient.
    """
    if mu < 0:
        raise ValueError(f"{FSCPROX_MU_KEY} must be >= 0, got {mu}")
    return mu * torch.stack([((p - a.detach()) ** 2).sum() for p, a in zip(classifier, anchor, strict=True)]).sum()


@dataclass(frozen=True)
class Role:
    """One participant's work in a round: epochs of the normal (full) update (0: none) and a few-shot update."""

    epochs: int
    fewshot: bool


@dataclass(frozen=True)
class RolePlan:
    """Who does what in a method of the FedFSC family (thesis Alg. 1, Alg. 2 and the baseline+ variants).

    The round's cohort (``fraction-train`` of the clients, chosen by the selection policy) are the non-stragglers:
    they run the normal update for E epochs. A further f_fs (``fedfsc.fewshot-fraction``) of the pool are stragglers.
    """

    cohort_fewshot: bool  # the non-stragglers also few-shot update (FedFSC, Alg. 1)
    straggler_epochs: bool  # the stragglers run E_r epochs of the normal update (baseline+)
    straggler_fewshot: bool  # the stragglers few-shot update (FedFSC+, Alg. 2)

    @property
    def uses_stragglers(self) -> bool:
        return self.straggler_epochs or self.straggler_fewshot


def check_role_fractions(non_straggler_fraction: float, fewshot_fraction: float) -> None:
    """Refuse f_n outside (0, 1], f_fs outside (0, 1) and f_n + f_fs ≥ 1: some stragglers are always lost
    (§4.5.2), and a method that uses stragglers needs some."""
    if not 0 < non_straggler_fraction <= 1:
        raise ValueError(f"'{NON_STRAGGLER_KEY}' must be in (0, 1], got {non_straggler_fraction}")
    if not 0 < fewshot_fraction < 1:
        raise ValueError(
            f"'{FEWSHOT_KEY}' (f_fs) must be in (0, 1) for a method with stragglers, got {fewshot_fraction}"
        )
    if non_straggler_fraction + fewshot_fraction >= 1:
        raise ValueError(
            f"'{NON_STRAGGLER_KEY}' (f_n) + '{FEWSHOT_KEY}' (f_fs) must be < 1 (the remaining stragglers are "
            f"dropped), got {non_straggler_fraction} + {fewshot_fraction} = {non_straggler_fraction + fewshot_fraction}"
        )


def draw_stragglers(
    pool: Sequence[int], non_stragglers: Sequence[int], fraction: float, seed: int, server_round: int
) -> list[int]:
    """S = round(f_fs·N) stragglers (N = the pool's size) drawn uniformly from the pool's clients outside the
    round's non-stragglers, afresh each round, seeded by (seed, round); in draw order."""
    rest = sorted(set(pool) - set(non_stragglers))
    count = min(round(fraction * len(pool)), len(rest))
    rng = np.random.default_rng([seed, server_round, 0xF5C])
    return [rest[i] for i in rng.choice(len(rest), size=count, replace=False)]


def assign_roles(
    plan: RolePlan,
    non_stragglers: Sequence[int],
    stragglers: Sequence[int],
    server_round: int,
    epochs: int,
    reduced_epochs: int,
) -> dict[int, Role]:
    """Each participant's role (partition id -> Role), non-stragglers first. There are no few-shot updates before
    round 2 (Alg. 1 line 7, Alg. 2 line 8): a straggler left with no work then is not a participant."""
    fewshot = server_round >= FIRST_FEWSHOT_ROUND
    roles = {pid: Role(epochs, plan.cohort_fewshot and fewshot) for pid in non_stragglers}
    straggler = Role(reduced_epochs if plan.straggler_epochs else 0, plan.straggler_fewshot and fewshot)
    if straggler.epochs or straggler.fewshot:
        roles.update({pid: straggler for pid in stragglers if pid not in roles})
    return roles


def uplink_bytes(
    state: Mapping[str, torch.Tensor], classifier_keys: Sequence[str], *, full: bool, fewshot: bool
) -> int:
    """Bytes one client uploads: the full model state if it ran a full update, plus the Linear layer if few-shot.

    FedFSC (Alg. 1, round ≥ 2) and FedFSC+(baseline+) stragglers send both: full model + one Linear layer.
    """
    return (state_bytes(state) if full else 0) + (state_bytes(state, classifier_keys) if fewshot else 0)


@dataclass(frozen=True)
class FedFscSettings:
    NAMESPACE: ClassVar[str] = "fedfsc"

    fewshot_shots: int = setting(
        10, "FedFSC n: samples drawn per eligible local class for a few-shot update.", positive
    )
    fewshot_epochs: int = setting(10, "FedFSC E_fs: epochs of a few-shot update.", positive)
    fewshot_learning_rate: float = setting(0.01, "FedFSC few-shot SGD learning rate (thesis Table 4.2).", positive)
    fewshot_momentum: float = setting(0.9, "FedFSC few-shot SGD momentum.", below_one)
    fewshot_weight_decay: float = setting(1e-3, "FedFSC few-shot SGD weight decay.", non_negative)
    fewshot_dampening: float = setting(
        0.9, "FedFSC few-shot SGD dampening: 0.9 as the thesis's code (its text gives none).", below_one
    )
    fewshot_batch_size: int = setting(4, "FedFSC few-shot mini-batch size.", positive)
    fewshot_resample: bool = setting(
        True, "FedFSC: draw the shots afresh every few-shot epoch (the text); false: once per round (its code)."
    )
    fewshot_fraction: float = setting(
        0.1,
        "f_fs: share of all clients drawn each round, beyond the `fraction-train` non-stragglers, as stragglers "
        "that do reduced work: few-shot updates (`fedfsc-plus`), E_r epochs (`fedavg-plus`, …) or both; "
        "needs fraction-train + f_fs < 1.",
        below_one,
    )
    straggler_epochs: int = setting(
        1,
        "FedFSC family: E_r, epochs of the normal update a straggler runs in the baseline+ variants (below "
        "`local-epochs`).",
        positive,
    )
    fscprox: str = setting(
        "none",
        "Classifier regulariser of the FedFSC family's normal updates: `fewshot` (FSCProx, anchor θ_fs of the "
        "last few-shot round), `base` (baseProx, anchor the received classifier) or `none`.",
        one_of("none", "fewshot", "base"),
    )
    fscprox_mu: float = setting(0.1, "μ_fsc of FSCProx / baseProx: adds μ·‖θ_cls − anchor‖².", non_negative)

    def optimiser(self) -> FewShotOptimiser:
        """The few-shot update's SGD."""
        return FewShotOptimiser(
            lr=self.fewshot_learning_rate,
            momentum=self.fewshot_momentum,
            dampening=self.fewshot_dampening,
            weight_decay=self.fewshot_weight_decay,
            batch_size=self.fewshot_batch_size,
            epochs=self.fewshot_epochs,
        )


class ClassifierProx:
    """An objective plus μ_fsc·‖θ_cls − anchor‖² over the final Linear layer (eq. 4.3): FSCProx when the anchor is
    the averaged few-shot classifier θ_fs, baseProx when it is the received base classifier."""

    def __init__(
        self, base: Objective, classifier: Sequence[torch.nn.Parameter], anchor: Sequence[torch.Tensor], mu: float
    ) -> None:
        self.base, self.classifier, self.anchor, self.mu = base, list(classifier), list(anchor), mu

    def loss(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.base.loss(inputs, labels) + fscprox_penalty(self.classifier, self.anchor, self.mu)

    def finish(self) -> None:
        self.base.finish()


def with_classifier_prox(
    factory: ObjectiveFactory, anchor: Mapping[str, torch.Tensor] | None, mu: float
) -> ObjectiveFactory:
    """``factory``'s objective regularised towards ``anchor`` (classifier key -> tensor; None: the classifier the
    round starts from, i.e. baseProx)."""

    def build(training: LocalTraining) -> Objective:
        keys = training.model.classifier_keys()
        named = dict(training.model.named_parameters())
        classifier = [named[key] for key in keys]
        device = classifier[0].device
        targets = [(anchor[key] if anchor is not None else named[key]).detach().clone().to(device) for key in keys]
        return ClassifierProx(factory(training), classifier, targets, mu)

    return build


def straggler_check(plan: RolePlan) -> Callable[[RunConfig, Mapping[int, int] | None], None]:
    """The check of a method with stragglers: f_n + f_fs < 1 with f_fs > 0, and E_r < E where they run E_r epochs
    (§4.5.2), raising ``ConfigError`` naming the keys. The clients' sizes play no part."""

    def check(config: RunConfig, client_sizes: Mapping[int, int] | None = None) -> None:
        settings = config.settings(FedFscSettings)
        try:
            check_role_fractions(config.fraction_train, settings.fewshot_fraction)
        except ValueError as err:
            raise ConfigError(f"run config {err}") from None
        if plan.straggler_epochs and settings.straggler_epochs >= config.local_epochs:
            raise ConfigError(
                f"run config 'fedfsc.straggler-epochs' = {settings.straggler_epochs} must be below 'local-epochs' = "
                f"{config.local_epochs}: a straggler does less than a full update"
            )

    return check


def straggler_population_problem(
    num_clients: int, non_straggler_fraction: float, fewshot_fraction: float
) -> str | None:
    """Why K clients cannot hold the round's non-stragglers and at least one straggler, or None.

    The cohort is ``cohort_size(K, f_n)`` clients and the stragglers round(f_fs·K) of the rest (``draw_stragglers``):
    none at all makes a method with stragglers its base trainer, and more than the rest cannot be drawn."""
    cohort = cohort_size(num_clients, non_straggler_fraction)
    stragglers = round(fewshot_fraction * num_clients)
    if stragglers < 1:
        return (
            f"'{FEWSHOT_KEY}' = {fewshot_fraction} gives round({fewshot_fraction} × {num_clients}) = 0 stragglers of "
            f"{num_clients} clients: set it to at least {1 / num_clients:.3g} (half a client rounds up)"
        )
    if cohort + stragglers > num_clients:
        return (
            f"'{NON_STRAGGLER_KEY}' = {non_straggler_fraction} gives {cohort} non-stragglers and '{FEWSHOT_KEY}' = "
            f"{fewshot_fraction} {stragglers} stragglers, more than the {num_clients} clients"
        )
    return None


def check_straggler_run(config: RunConfig, num_clients: int) -> None:
    """At start, with the population's size K: refuse a method with stragglers that would draw none (or more than
    there are), naming the keys."""
    problem = straggler_population_problem(
        num_clients, config.fraction_train, config.settings(FedFscSettings).fewshot_fraction
    )
    if problem:
        raise ConfigError(f"run config {problem}")
