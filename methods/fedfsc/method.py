"""The FedFSC family's methods: who does what each round (``RolePlan``), wired to the client and server steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from methods.base import Method, ServerStep
from methods.fedfsc.client_step import fedfsc_train
from methods.fedfsc.fewshot import NON_STRAGGLER_KEY, FedFscSettings, RolePlan, check_straggler_run, straggler_check
from methods.fedfsc.strategy import fewshot_classifier_strategy
from run_config.catalogue import SettingValue

if TYPE_CHECKING:
    from server_app.lifecycle import FederatedRun
    from strategies.cohort_fedavg import CohortFedAvg


def _strategy(plan: RolePlan) -> ServerStep:
    def build(run: FederatedRun) -> CohortFedAvg:
        return fewshot_classifier_strategy(run, plan)

    return build


_NORMAL: dict[str, SettingValue] = {"freeze": "none", "data-selection": "all", "selection-fraction": 1.0}
#: f_n of the methods with stragglers: the thesis's §4.5.2 (f_n = f_fs = 0.1; ``fedfsc.fewshot-fraction`` defaults to
# 0.1).
STRAGGLER_PRESETS: dict[str, SettingValue] = {NON_STRAGGLER_KEY: 0.1}
FEDFSC_PLAN = RolePlan(cohort_fewshot=True, straggler_epochs=False, straggler_fewshot=False)
FEDFSC_PLUS_PLAN = RolePlan(cohort_fewshot=False, straggler_epochs=False, straggler_fewshot=True)
FEDFSC_PLUS_BASELINE_PLUS_PLAN = RolePlan(cohort_fewshot=False, straggler_epochs=True, straggler_fewshot=True)
BASELINE_PLUS_PLAN = RolePlan(cohort_fewshot=False, straggler_epochs=True, straggler_fewshot=False)


def _family(name: str, summary: str, plan: RolePlan, objective: str = "plain") -> Method:
    return Method(
        name,
        summary,
        presets={**_NORMAL, "objective": objective, **(STRAGGLER_PRESETS if plan.uses_stragglers else {})},
        settings=(FedFscSettings,),
        client_train=fedfsc_train,
        strategy=_strategy(plan),
        check=straggler_check(plan) if plan.uses_stragglers else None,
        check_run=check_straggler_run if plan.uses_stragglers else None,
        paper="thesis Ch. 4, Algorithms 1 and 2",
    )


METHODS = (
    _family(
        "fedfsc",
        "FedFSC (Alg. 1): every participant runs the normal update and, from round 2, a few-shot update of the "
        "classifier; global model {θ_fs^t, φ^t}. The base trainer is `objective` (plain: FedAvg).",
        FEDFSC_PLAN,
    ),
    _family(
        "fedfsc-plus",
        "FedFSC+ (Alg. 2): the `fraction-train` non-stragglers run the normal update, a further "
        "`fedfsc.fewshot-fraction` of the clients (stragglers) only few-shot updates.",
        FEDFSC_PLUS_PLAN,
    ),
    _family(
        "fedfsc-plus-baseline-plus",
        "FedFSC+(baseline+): as `fedfsc-plus`, its stragglers first run `fedfsc.straggler-epochs` epochs of the normal "
        "update, aggregated into the base model.",
        FEDFSC_PLUS_BASELINE_PLUS_PLAN,
    ),
    _family(
        "fedavg-plus",
        "FedAvg+ (baseline+): FedAvg whose `fedfsc.fewshot-fraction` stragglers run `fedfsc.straggler-epochs` epochs.",
        BASELINE_PLUS_PLAN,
    ),
    _family("fedprox-plus", "FedProx+ (baseline+): FedAvg+ with the proximal term.", BASELINE_PLUS_PLAN, "proximal"),
    _family("moon-plus", "MOON+ (baseline+): FedAvg+ with MOON's contrastive term.", BASELINE_PLUS_PLAN, "contrastive"),
)
