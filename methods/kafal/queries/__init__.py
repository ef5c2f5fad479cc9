"""Query strategies of KAFAL and its baselines (Cao et al., Sec. 4.1-4.2), and which may sample with the global model.

Every strategy returns positions (CPU int64, distinct) into the client's unlabelled pool, ``budget`` of them; the
pool turns them into labels with ``ActivePool.add_positions``. ``select_queries`` computes what a strategy needs
from the models in a ``QueryContext``; the per-strategy functions take plain tensors.

``kafal.al-sampling-model`` picks the model a strategy scores with: ``client`` (the client model after its last local
update, the paper's default, Fig. 4(a)) or ``global`` (the downloaded aggregated model, the F-AL variant of
Fig. 4(c)(d)). The paper (Sec. 4.2) names Core-Set, Margin, Entropy, BADGE and ALFA-Mix as able to use either.

| strategy   | what it scores with                                         | ``global`` allowed |
|------------|-------------------------------------------------------------|--------------------|
| `kafal`    | client model after local update and final global model (KSAS) | no: it needs both |
| `random`   | no model                                                    | yes (no effect)    |
| `entropy`  | softmax of one model                                        | yes                |
| `margin`   | softmax of one model                                        | yes                |
| `coreset`  | penultimate features of one model, labelled pool as centres | yes                |
| `badge`    | softmax and penultimate features of one model               | yes                |
| `alfa-mix` | penultimate features and classifier of one model, anchors   | yes                |
| `ll4al`    | client model's level features + its loss-prediction module  | no: trained locally, not aggregated |
| `qbc`      | the client's committee of three local models                | no: a local committee |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from methods.kafal.ksas import KSAS_WEIGHTINGS, ksas_scores, top_scores
from methods.kafal.queries.alfa_mix import alfa_mix_query
from methods.kafal.queries.badge import badge_query
from methods.kafal.queries.committee import QBC_MEASURES, qbc_query
from methods.kafal.queries.coreset import kcenter_greedy
from methods.kafal.queries.learning_loss import LossPredictionModule, ll4al_query, predicted_losses
from methods.kafal.queries.outputs import collect_outputs
from methods.kafal.queries.uncertainty import entropy_query, margin_query, random_query
from models.split_model import SplitModel

QUERY_STRATEGIES = ("kafal", "random", "entropy", "margin", "coreset", "badge", "alfa-mix", "ll4al", "qbc")
SAMPLING_MODELS = ("client", "global")
_GLOBAL_CAPABLE = frozenset({"random", "entropy", "margin", "coreset", "badge", "alfa-mix"})


def check_strategy(strategy: str) -> None:
    """An error naming 'kafal.al-query' unless ``strategy`` is known."""
    if strategy not in QUERY_STRATEGIES:
        raise ValueError(f"'kafal.al-query' must be one of {', '.join(QUERY_STRATEGIES)}, got {strategy!r}")


def supports_global_sampling(strategy: str) -> bool:
    """Whether ``strategy`` can score with the downloaded global model (``kafal.al-sampling-model = "global"``)."""
    check_strategy(strategy)
    return strategy in _GLOBAL_CAPABLE


def check_sampling_model(strategy: str, sampling_model: str) -> None:
    """An error naming 'kafal.al-sampling-model' if it is unknown or ``global`` for a strategy that cannot use it."""
    if sampling_model not in SAMPLING_MODELS:
        raise ValueError(
            f"'kafal.al-sampling-model' must be one of {', '.join(SAMPLING_MODELS)}, got {sampling_model!r}"
        )
    if sampling_model == "global" and not supports_global_sampling(strategy):
        allowed = ", ".join(s for s in QUERY_STRATEGIES if s in _GLOBAL_CAPABLE)
        raise ValueError(
            f"'kafal.al-sampling-model' = 'global' is not possible with 'kafal.al-query' = {strategy!r}; it is with "
            f"{allowed}"
        )


@dataclass
class QueryContext:
    """Everything a strategy may need. ``model`` is the sampling model (client after local update, or global)."""

    model: SplitModel
    unlabelled_inputs: torch.Tensor
    num_classes: int
    labelled_inputs: torch.Tensor | None = None
    labelled_labels: torch.Tensor | None = None
    class_counts: torch.Tensor | None = None
    global_model: SplitModel | None = None
    committee: Sequence[SplitModel] = ()
    loss_module: LossPredictionModule | None = None
    batch_size: int = 256
    kafal_lambda: float = 1.0
    ksas_weighting: str = "specialised"
    qbc_measure: str = "vote-entropy"
    alfa_mix_cap_step: float = 0.2


def _require(strategy: str, **values: object) -> None:
    missing = [name for name, value in values.items() if value is None or (isinstance(value, Sequence) and not value)]
    if missing:
        raise ValueError(f"strategy {strategy!r} needs {', '.join(missing)} in its QueryContext")


def select_queries(strategy: str, budget: int, context: QueryContext, generator: torch.Generator) -> torch.Tensor:
    """Positions (CPU int64) of the ``budget`` unlabelled samples ``strategy`` asks to label."""
    check_strategy(strategy)
    n = len(context.unlabelled_inputs)
    if not 0 <= budget <= n:
        raise ValueError(f"budget must be in [0, {n}] (the unlabelled pool), got {budget}")
    if budget == 0:
        return torch.empty(0, dtype=torch.long)
    if strategy == "random":
        return random_query(n, budget, generator)
    if strategy == "ll4al":
        _require(strategy, loss_module=context.loss_module)
        assert context.loss_module is not None
        return ll4al_query(
            predicted_losses(context.model, context.loss_module, context.unlabelled_inputs, context.batch_size), budget
        )
    if strategy == "qbc":
        _require(strategy, committee=context.committee)
        logits = torch.stack(
            [collect_outputs(m, context.unlabelled_inputs, context.batch_size).logits for m in context.committee]
        )
        return qbc_query(logits, budget, context.qbc_measure)
    outputs = collect_outputs(context.model, context.unlabelled_inputs, context.batch_size)
    if strategy == "kafal":
        _require(strategy, global_model=context.global_model, class_counts=context.class_counts)
        assert context.global_model is not None and context.class_counts is not None
        global_logits = collect_outputs(context.global_model, context.unlabelled_inputs, context.batch_size).logits
        scores = ksas_scores(
            outputs.logits,
            global_logits.to(outputs.logits.device),
            context.class_counts,
            context.kafal_lambda,
            context.ksas_weighting,
        )
        return top_scores(scores, budget)
    if strategy == "entropy":
        return entropy_query(outputs.logits, budget)
    if strategy == "margin":
        return margin_query(outputs.logits, budget)
    if strategy == "badge":
        return badge_query(outputs.logits, outputs.embeddings, budget, generator)
    _require(strategy, labelled_inputs=context.labelled_inputs)
    assert context.labelled_inputs is not None
    labelled = (
        collect_outputs(context.model, context.labelled_inputs, context.batch_size).embeddings
        if len(context.labelled_inputs) > 0
        else outputs.embeddings[:0]
    )
    if strategy == "coreset":
        return kcenter_greedy(outputs.embeddings, labelled, budget)
    _require(strategy, labelled_labels=context.labelled_labels)
    assert context.labelled_labels is not None
    return alfa_mix_query(
        outputs.embeddings,
        labelled,
        context.labelled_labels,
        context.model.classify,
        context.num_classes,
        budget,
        generator,
        context.alfa_mix_cap_step,
    )


__all__ = [
    "KSAS_WEIGHTINGS",
    "QBC_MEASURES",
    "QUERY_STRATEGIES",
    "SAMPLING_MODELS",
    "LossPredictionModule",
    "QueryContext",
    "check_sampling_model",
    "check_strategy",
    "select_queries",
    "supports_global_sampling",
]
