"""KAFAL, knowledge-aware federated active learning (Cao et al., ICCV 2023), on the plug-in: ``method =
"kafal"``. This module is the glue: settings, the checks at start, the client's training and query steps and the
server's strategy; the algorithms are in ``pools``, ``ksas``, ``kcfu``, ``queries``, ``local_update``,
``schedule`` and ``strategy``.

The loop (Alg. 1): each client draws ⌈``kafal.al-initial-fraction``·n⌉ of its samples at random (seeded by ``seed`` and
its partition id) and asks its labeller for their labels (``labelling``: the dataset in simulation, a labels file
on a deployed node); the rest is its unlabelled pool, whose labels it never reads. A cycle is
``kafal.al-rounds-per-cycle`` rounds of FedAvg (weights: the labelled pools, Eq. 7) with a random ``fraction-train`` of
the clients; every client's local update is KCFU (Alg. 2). After each cycle but the last, the server sends every
client a ``query.al_query`` with the cycle's final global model; the client scores its unlabelled pool with
``kafal.al-query`` and labels the top ⌈``kafal.al-budget-fraction``·n⌉ samples. ``kafal.al-cycles`` queries: A + 1
cycles, so ``num-server-rounds`` = (A + 1)·T: the defaults, A = 1 and T = 5, fill the app's default 10 rounds (10% → 15%
labelled; the paper's A = 5, T = 50 go to 35%). The pools live in the node's ``context.state``.

The method's preset starts from random weights (``pretrain = "none"``) and ``kafal.al-reinitialise`` restarts every
cycle from them, as the paper's Alg. 1 (line 3) and the authors' code do: a pretrained start would make the cycles'
accuracies measure the pretraining as much as the labels. Stragglers (``straggler-fraction``, ``-mode``, ``-work``)
are drawn as for every method; one doing partial work runs its shortened epochs of KCFU and still reports its whole
labelled pool as ``num-examples``.

Where the paper and the authors' code (github.com/ycao5602/KAFAL) differ, this follows:

- the paper's KCFU weights ν·L_client + (1 − ν)·L_comp with the KL summed over classes, random mixing partners and
  pseudo-labels from the unmixed samples (``kafal.kafal-update = "paper"``, default); ``"authors-code"`` is the code's
  L_client + Γ·KL/C with one shared partner and pseudo-labels on the mixed batch. Γ is the code's normalised inverse
  labelled frequency by default (``kafal.kafal-gamma``; ``paper`` = Σn/n_y', ``uniform`` = 1/C, the ablation);
- both: the global model is re-initialised to Ω⁰ at each cycle's start (``kafal.al-reinitialise``; Alg. 1 line 3);
  no compensation in a cycle's first round (Alg. 2); initial and query budgets rounded up; n_y are the labelled
  counts in KSAS (``kafal.kafal-lambda``) and KCFU;
- the code: every client trains in a cycle's last round (``kafal.al-final-round-all``), so KSAS compares each client's
  model after its last local update with the final aggregated global model, as the code does (the paper's Alg. 1
  picks ``fraction-train`` every round and compares with the global model after the client's own last round).

Query strategies (``kafal.al-query``): ``kafal`` (KSAS), ``random``, ``entropy``, ``margin``, ``coreset``, ``badge``,
``alfa-mix`` score with the client's model after its last local update (``kafal.al-sampling-model = "client"``) or,
except ``kafal``, with the received global model (``"global"``, the F-AL variant of Fig. 4(c)); ``ll4al`` scores with a
loss-prediction module trained beside the client model in every local update (on detached features, reset each
cycle, never aggregated); ``qbc`` with a committee of three: the client's model and two more trained at query time
from the same downloaded global model with the same KCFU update and other random draws. A client that did not train
in the cycle scores with the received global model as its "client" model.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

from methods.base import Method
from methods.kafal import client_state
from methods.kafal.kcfu import KCFUOptions, check_nu
from methods.kafal.ksas import KSAS_WEIGHTINGS, check_lambda
from methods.kafal.labelling import labeller_for
from methods.kafal.local_update import KCFUResult, LocalSGD, kcfu_update
from methods.kafal.pools import ActivePool
from methods.kafal.queries import (
    QBC_MEASURES,
    QUERY_STRATEGIES,
    SAMPLING_MODELS,
    LossPredictionModule,
    QueryContext,
    check_sampling_model,
    select_queries,
)
from methods.kafal.records import (
    AL_COUNTS_RECORD,
    AL_CYCLE,
    AL_CYCLE_ROUND,
    AL_QUERY_RECORD,
    CLIENT_LOSS,
    COMPENSATION_LOSS,
    NUM_LABELLED,
    NUM_QUERIED,
    QUERY_SECONDS,
)
from methods.kafal.results import CYCLES
from methods.kafal.schedule import CycleSchedule, pool_problem
from methods.kafal.strategy import ActiveLearningFedAvg, cycle_cohorts, merge_round_config
from protocol.messages import (
    ARRAYS,
    CONFIG,
    COUNTS,
    METRICS,
    NUM_EXAMPLES,
    NUM_LOCAL,
    PARTITION_ID,
    THREADS,
    TRAIN_LOSS,
    TRAIN_SECONDS,
)
from run_config.derived import build_model_for, dataset_info
from run_config.settings import ConfigError, non_negative, one_of, open_fraction, positive, setting
from server_app.lifecycle import learning_rate_schedule

if TYPE_CHECKING:
    from client_app.node import Node
    from models import SplitModel
    from run_config import RunConfig
    from server_app.lifecycle import FederatedRun

KCFU_FORMS = ("paper", "authors-code")
GAMMA_FORMS = ("normalised", "paper", "uniform")
COMMITTEE_SIZE = 3


def _non_negative_finite(v: float) -> str | None:
    try:
        check_lambda(v)
    except ValueError:
        return "must be a finite number >= 0"
    return None


def _nu(v: float) -> str | None:
    try:
        check_nu(v)
    except ValueError:
        return "must be in [0, 1]"
    return None


@dataclass(frozen=True)
class KAFALSettings:
    NAMESPACE: ClassVar[str] = "kafal"

    al_query: str = setting(
        "kafal",
        "KAFAL: query strategy after each cycle: `kafal` (KSAS), `random`, `entropy`, `margin`, `coreset`, `badge`, "
        "`alfa-mix`, `ll4al` or `qbc`.",
        one_of(*QUERY_STRATEGIES),
    )
    al_sampling_model: str = setting(
        "client",
        "KAFAL: model the query scores with: `client` (after its local update) or `global` (the received global "
        "model, F-AL; not with `kafal`, `ll4al`, `qbc`).",
        one_of(*SAMPLING_MODELS),
    )
    al_initial_fraction: float = setting(
        0.1, "KAFAL: share of each client's data labelled at random before the first cycle.", open_fraction
    )
    al_budget_fraction: float = setting(
        0.05, "KAFAL: share of each client's data it queries after each cycle (rounded up).", open_fraction
    )
    al_cycles: int = setting(
        1,
        "KAFAL: queries A (paper 5); the run trains A + 1 cycles, so `num-server-rounds` = (A + 1) · T (0: one cycle "
        "on the initial labels, no query).",
        non_negative,
    )
    al_rounds_per_cycle: int = setting(
        5, "KAFAL: rounds per cycle T (paper 50): 2 cycles of 5 fill the default 10 rounds.", positive
    )
    al_reinitialise: bool = setting(True, "KAFAL: start every cycle from the initial global model (Alg. 1, code).")
    al_final_round_all: bool = setting(
        True, "KAFAL: every client trains in a cycle's last round (authors' code); false: `fraction-train` always."
    )
    kafal_update: str = setting(
        "paper",
        "KAFAL: KCFU form: `paper` (ν·L_client + (1 − ν)·L_comp) or `authors-code` (L_client + Γ·KL/C, shared "
        "mixing partner).",
        one_of(*KCFU_FORMS),
    )
    kafal_nu: float = setting(0.5, "KAFAL: ν of KCFU's `paper` form (Eq. 6).", _nu)
    kafal_gamma: str = setting(
        "normalised",
        "KAFAL: Γ of the compensation term: `normalised` inverse labelled frequency (code), `paper` (Σn / n_y') or "
        "`uniform` (1/C, ablation).",
        one_of(*GAMMA_FORMS),
    )
    kafal_balanced: bool = setting(True, "KAFAL: balanced cross-entropy (logits + log n_y, Eq. 4); false: plain CE.")
    kafal_compensation: bool = setting(True, "KAFAL: the compensation term (Eq. 5); false: L_client only.")
    kafal_mixing: bool = setting(True, "KAFAL: mix unlabelled pairs (β ~ Beta(2, 2)) for the compensation term.")
    kafal_lambda: float = setting(1.0, "KAFAL: λ of KSAS's knowledge weights n_y^λ (Eq. 1-2).", _non_negative_finite)
    kafal_ksas_weighting: str = setting(
        "specialised",
        "KAFAL: KSAS weights: `specialised` (n_y^λ), `vanilla` (plain symmetric KL) or `reversed` (n_y^−λ).",
        one_of(*KSAS_WEIGHTINGS),
    )
    al_qbc_measure: str = setting(
        "vote-entropy", "KAFAL: QBC disagreement: `vote-entropy` or `consensus-kl`.", one_of(*QBC_MEASURES)
    )


def kcfu_options(settings: KAFALSettings) -> KCFUOptions:
    """The KCFU loss the settings describe."""
    form = (
        KCFUOptions.authors_code()
        if settings.kafal_update == "authors-code"
        else KCFUOptions.from_nu(settings.kafal_nu)
    )
    return dataclasses.replace(
        form,
        balanced=settings.kafal_balanced,
        compensation=settings.kafal_compensation,
        mixing=settings.kafal_mixing,
        class_weighting="uniform" if settings.kafal_gamma == "uniform" else "inverse-frequency",
        normalise_gamma=settings.kafal_gamma != "paper",
    )


def schedule_of(settings: KAFALSettings) -> CycleSchedule:
    return CycleSchedule(settings.al_rounds_per_cycle, settings.al_cycles)


def check_kafal(config: RunConfig, client_sizes: Mapping[int, int] | None) -> None:
    """Refuse, naming the key, what KAFAL cannot run: at parse time (``client_sizes`` None) the combinations of
    settings; at start also the clients' data (``client_sizes``: partition id -> samples held)."""
    settings = config.settings(KAFALSettings)
    try:
        check_sampling_model(settings.al_query, settings.al_sampling_model)
    except ValueError as err:
        raise ConfigError(f"run config {err}") from None
    if config.evaluate_every != 1:
        raise ConfigError(
            f"run config 'evaluate-every' = {config.evaluate_every}: KAFAL records each cycle's accuracy at the "
            "cycle's last round, so it evaluates every round (set it to 1)"
        )
    total = schedule_of(settings).total_rounds
    if config.num_server_rounds != total:
        raise ConfigError(
            f"run config 'num-server-rounds' = {config.num_server_rounds}, but KAFAL runs 'kafal.al-cycles' + 1 = "
            f"{settings.al_cycles + 1} cycles of 'kafal.al-rounds-per-cycle' = {settings.al_rounds_per_cycle} rounds: "
            f"set it to {total}"
        )
    fixed = {"freeze": "none", "data-selection": "all", "objective": "plain", "client-selection": "random"}
    for key, allowed in fixed.items():
        value = getattr(config, key.replace("-", "_"))
        if value != allowed:
            raise ConfigError(
                f"run config '{key}' = {value!r} does not apply to KAFAL (its clients train the whole model on their "
                f"labelled pool with KCFU, and know no label counts to select by): use {allowed!r}"
            )
    if config.fraction_evaluate > 0:
        raise ConfigError(
            "run config 'fraction-evaluate' must be 0 with KAFAL: federated evaluation reads every local label, "
            "and a KAFAL client knows only its labelled pool"
        )
    share = settings.al_initial_fraction + settings.al_cycles * settings.al_budget_fraction
    if share > 1 + 1e-9:
        raise ConfigError(
            f"run config 'kafal.al-budget-fraction' = {settings.al_budget_fraction}: 'kafal.al-initial-fraction' + "
            f"'kafal.al-cycles' · 'kafal.al-budget-fraction' = {share:g} exceeds the whole local data"
        )
    for pid, size in sorted((client_sizes or {}).items()):
        problem = pool_problem(size, settings.al_initial_fraction, settings.al_budget_fraction, settings.al_cycles)
        if problem:
            raise ConfigError(
                f"run config 'kafal.al-budget-fraction' = {settings.al_budget_fraction} exceeds the unlabelled pool of "
                f"client {pid}: {problem}; lower it or 'kafal.al-cycles'"
            )


# The client.


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


POOL_SEED, TRAIN_SEED, QUERY_SEED = 1, 2, 3  # the streams of a client's random draws


def client_pool(node: Node, num_samples: int, labels: torch.Tensor) -> ActivePool:
    """The client's pools: kept in its node state, or drawn (and labelled) the first time they are needed."""
    settings = node.config.settings(KAFALSettings)
    oracle = labeller_for(node, labels)
    pool = client_state.load_pool(node.state, num_samples, oracle)
    if pool is None:
        generator = torch.Generator().manual_seed(_seed(node.config.seed, POOL_SEED, node.partition_id))
        pool = ActivePool.draw_initial(num_samples, settings.al_initial_fraction, oracle, generator)
        client_state.save_pool(node.state, pool)
    return pool


def local_sgd(config: RunConfig, learning_rate: float, epochs: int) -> LocalSGD:
    """A round's local SGD: ``epochs`` (the run's ``local-epochs``, fewer for a straggler doing partial work)."""
    return LocalSGD(epochs, config.batch_size, learning_rate, config.momentum, config.weight_decay)


def _pool_inputs(node: Node, pool: ActivePool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Labelled inputs, their labels, unlabelled inputs, class counts: on the node's device."""
    data = node.data()
    num_classes = dataset_info(node.config).num_classes
    return (
        data.rows(node.device, pool.labelled),
        pool.labels.to(node.device),
        data.rows(node.device, pool.unlabelled),
        pool.class_counts(num_classes),
    )


def train_on_pool(
    node: Node,
    model: SplitModel,
    pool: ActivePool,
    optimisation: LocalSGD,
    compensate: bool,
    seed: int,
    loss_module: LossPredictionModule | None = None,
) -> KCFUResult:
    """One KCFU local update of ``model`` (moved to the node's device) on the client's pools."""
    labelled, labels, unlabelled, counts = _pool_inputs(node, pool)
    model.to(node.device)
    return kcfu_update(
        model,
        labelled,
        labels,
        unlabelled,
        counts,
        optimisation,
        kcfu_options(node.config.settings(KAFALSettings)),
        compensate=compensate,
        generator=torch.Generator().manual_seed(seed),
        loss_module=loss_module,
    )


def _loss_module(node: Node, model: SplitModel, cycle: int) -> LossPredictionModule:
    """LL4AL's module for this cycle: kept in the node state, or new (seeded) at the cycle's start."""
    torch.manual_seed(_seed(node.config.seed, TRAIN_SEED, node.partition_id, cycle))
    input_shape = node.data().rows(node.device, torch.zeros(1, dtype=torch.long)).shape[1:]
    module = LossPredictionModule.for_model(model.to(node.device), tuple(input_shape))
    client_state.load_module(node.state, client_state.LOSS_MODULE, module, cycle)
    return module


def kafal_train(node: Node, msg: Message) -> RecordDict:
    """A round of KAFAL on a client: the KCFU update of the received global model on its pools; replies the model
    and ``num-examples`` = its labelled pool."""
    tick = time.perf_counter()
    config = node.config
    settings = config.settings(KAFALSettings)
    data = node.data()
    pool = client_pool(node, len(data), data.labels)
    model, _ = node.global_model(msg)
    server_round, learning_rate = node.round_of(msg)
    round_config = msg.content.config_records[CONFIG]
    cycle, cycle_round = int(round_config[AL_CYCLE]), int(round_config[AL_CYCLE_ROUND])  # type: ignore[arg-type]
    compensate = cycle_round > 1
    epochs = node.local_epochs(msg)  # fewer for a straggler doing partial work ('straggler-work' = "partial")
    info = client_state.ModelInfo(cycle, server_round, learning_rate, compensate, epochs)
    if settings.al_query == "qbc":
        client_state.save_module(node.state, client_state.START_MODEL, model, info)
    module = _loss_module(node, model, cycle) if settings.al_query == "ll4al" else None
    seed = _seed(config.seed, TRAIN_SEED, server_round, node.partition_id)
    result = train_on_pool(node, model, pool, local_sgd(config, learning_rate, epochs), compensate, seed, module)
    client_state.save_module(node.state, client_state.LOCAL_MODEL, model, info)
    if module is not None:
        client_state.save_module(node.state, client_state.LOSS_MODULE, module, info)
    metrics = MetricRecord(
        {
            PARTITION_ID: node.partition_id,
            NUM_EXAMPLES: len(pool.labelled),
            NUM_LOCAL: len(data),
            TRAIN_LOSS: result.loss,
            CLIENT_LOSS: result.client_loss,
            COMPENSATION_LOSS: result.compensation_loss,
            TRAIN_SECONDS: time.perf_counter() - tick,
            THREADS: torch.get_num_threads(),
        }
    )
    state = ArrayRecord({k: v.detach().cpu() for k, v in model.state_dict().items()})
    return RecordDict({ARRAYS: state, METRICS: metrics})


def committee(node: Node, local: SplitModel, pool: ActivePool, cycle: int) -> list[SplitModel]:
    """QBC's members: the client's model and ``COMMITTEE_SIZE`` − 1 more, trained now from the global model it
    downloaded for that update, with the same KCFU update and their own random draws."""
    members = [local]
    for member in range(1, COMMITTEE_SIZE):
        model = node_model(node)
        info = client_state.load_module(node.state, client_state.START_MODEL, model, cycle)
        if info is None:  # the client did not train this cycle: its members are copies of the received model
            members.append(local)
            continue
        seed = _seed(node.config.seed, TRAIN_SEED, info.server_round, node.partition_id, member)
        train_on_pool(node, model, pool, local_sgd(node.config, info.learning_rate, info.epochs), info.compensate, seed)
        members.append(model)
    return members


def node_model(node: Node) -> SplitModel:
    """A fresh model of the run's architecture on the node's device."""
    return build_model_for(node.config).to(node.device)


def kafal_query(node: Node, msg: Message) -> RecordDict:
    """The end-of-cycle query: score the unlabelled pool with ``kafal.al-query``, label the top budget, reply the
    counts."""
    tick = time.perf_counter()
    config = node.config
    settings = config.settings(KAFALSettings)
    num_classes = dataset_info(config).num_classes
    data = node.data()
    pool = client_pool(node, len(data), data.labels)
    cycle = int(msg.content.config_records[CONFIG][AL_CYCLE])  # type: ignore[arg-type]
    global_model, _ = node.global_model(msg)
    global_model.to(node.device)
    local = node_model(node)
    if client_state.load_module(node.state, client_state.LOCAL_MODEL, local, cycle) is None:
        local = global_model  # no local update this cycle: the received model stands for it
    context = QueryContext(
        model=global_model if settings.al_sampling_model == "global" else local,
        unlabelled_inputs=data.rows(node.device, pool.unlabelled),
        num_classes=num_classes,
        class_counts=pool.class_counts(num_classes),
        global_model=global_model,
        batch_size=config.eval_batch_size,
        kafal_lambda=settings.kafal_lambda,
        ksas_weighting=settings.kafal_ksas_weighting,
        qbc_measure=settings.al_qbc_measure,
    )
    if settings.al_query in ("coreset", "alfa-mix"):
        context.labelled_inputs = data.rows(node.device, pool.labelled)
        context.labelled_labels = pool.labels.to(node.device)
    if settings.al_query == "ll4al":
        context.loss_module = _loss_module(node, local, cycle)
    if settings.al_query == "qbc":
        context.committee = committee(node, local, pool, cycle)
    budget = pool.budget(settings.al_budget_fraction)
    generator = torch.Generator().manual_seed(_seed(config.seed, QUERY_SEED, cycle, node.partition_id))
    pool.add_positions(select_queries(settings.al_query, budget, context, generator))
    client_state.save_pool(node.state, pool)
    numbers = MetricRecord(
        {
            PARTITION_ID: node.partition_id,
            NUM_LOCAL: len(data),
            NUM_QUERIED: budget,
            NUM_LABELLED: len(pool.labelled),
            QUERY_SECONDS: time.perf_counter() - tick,
        }
    )
    counts = MetricRecord({COUNTS: [int(c) for c in pool.class_counts(num_classes).tolist()]})
    return RecordDict({AL_QUERY_RECORD: numbers, AL_COUNTS_RECORD: counts})


# The server.


def kafal_strategy(run: FederatedRun) -> ActiveLearningFedAvg:
    """``ActiveLearningFedAvg`` with the run's cohorts, schedule and settings."""
    config = run.config
    if run.first_round > 1:
        raise ConfigError(
            "a KAFAL run cannot resume from its checkpoint: its clients' labelled pools lived in the interrupted "
            "run's node state; start it afresh (remove the run folder, or choose another 'run-name')"
        )
    settings = config.settings(KAFALSettings)
    schedule = schedule_of(settings)

    def cycle_position(server_round: int) -> dict[str, int]:
        return {AL_CYCLE: schedule.cycle_of(server_round), AL_CYCLE_ROUND: schedule.round_in_cycle(server_round)}

    return ActiveLearningFedAvg(
        schedule=schedule,
        initial_arrays=ArrayRecord(run.trained),
        reinitialise=settings.al_reinitialise,
        initial_fraction=settings.al_initial_fraction,
        budget_fraction=settings.al_budget_fraction,
        num_classes=dataset_info(config).num_classes,
        query_timeout=config.round_timeout,
        report_cycle=partial(run.recorder.report, CYCLES),
        **{
            **run.cohort_arguments(),  # stragglers (mode, work, epochs), aggregation: as every method
            "select": cycle_cohorts(schedule, run.select, settings.al_final_round_all),
            "round_config": merge_round_config(learning_rate_schedule(config), cycle_position),
        },
    )


KAFAL = Method(
    "kafal",
    "KAFAL: federated active learning with KSAS queries and the KCFU local update (or a baseline query).",
    presets={"freeze": "none", "data-selection": "all", "objective": "plain", "pretrain": "none", "model": "mlp-2nn"},
    settings=(KAFALSettings,),
    client_train=kafal_train,
    strategy=kafal_strategy,
    queries={"al_query": kafal_query},
    check=check_kafal,
    result_files=(CYCLES,),
    paper="Cao et al., Knowledge-Aware Federated Active Learning with Non-IID Data, ICCV 2023",
)
METHODS = (KAFAL,)
