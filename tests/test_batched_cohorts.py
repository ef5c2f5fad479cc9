"""simulation/batched_cohorts.py and the in-process runner's ``batched``: whole runs whose rounds train their clients
as one computation end where the one-client-at-a-time runs end; what cannot be batched is refused before it starts."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from client_app.epoch_training import train_alone
from client_app.objective import CrossEntropy
from experiments.__main__ import main as experiments_main
from models.cohort_training import CohortError, train_cohort
from models.device import available_devices
from simulation import batched_cohorts
from simulation.batched_cohorts import CohortRendezvous, covered_methods, refusal
from simulation.in_process import run_cell_in_process
from simulation.local_run import Resources
from tests.in_process import small_run_config
from tests.test_cohort_training import jobs_for


def run(tmp_path: Path, name: str, batched: bool, **overrides) -> Path:
    config = small_run_config(tmp_path, **{"run-name": name, **overrides})
    code = run_cell_in_process(config, 4, Resources(), tmp_path / f"{name}.log", batched=batched)
    assert code == 0, (tmp_path / f"{name}.log").read_text()
    return Path(config["results-dir"]) / name


@pytest.mark.parametrize(
    "overrides",
    [
        {"method": "fedavg", "pretrain": "none"},
        {"method": "fedft-eds", "local-epochs": 2},  # θ on cached features, each client its own selected count
        {"method": "fedavg", "pretrain": "none", "client-selection": "fedentopt", "fraction-train": 0.5},
    ],
)
@pytest.mark.parametrize("device", [str(device) for device in available_devices()])
def test_a_batched_run_ends_where_the_one_at_a_time_run_ends(tmp_path, overrides, device, monkeypatch):
    overrides = {**overrides, "device": device, "server-device": device, "num-server-rounds": 1}
    alone = run(tmp_path, "alone", False, **overrides)
    cohorts: list[list[int]] = []

    def spy(jobs):
        cohorts.append([job.client for job in jobs])
        return train_cohort(jobs)

    monkeypatch.setattr(batched_cohorts, "train_cohort", spy)
    together = run(tmp_path, "together", True, **overrides)
    selected = json.loads((together / "rounds.jsonl").read_text().splitlines()[0])["clients"]
    assert cohorts == [sorted(selected)]  # the round's clients trained as one cohort, in partition order
    weights_alone = torch.load(alone / "model.pt", map_location="cpu")
    weights_together = torch.load(together / "model.pt", map_location="cpu")
    for key, value in weights_alone.items():  # one round: float32 rounding, nothing more (it grows with rounds)
        assert torch.allclose(value.float(), weights_together[key].float(), atol=1e-5), key
    rounds_alone = [json.loads(line) for line in (alone / "rounds.jsonl").read_text().splitlines()]
    rounds_together = [json.loads(line) for line in (together / "rounds.jsonl").read_text().splitlines()]
    assert [r["accuracy"] for r in rounds_together] == pytest.approx([r["accuracy"] for r in rounds_alone], abs=0.01)
    assert [r["num_examples"] for r in rounds_together] == [r["num_examples"] for r in rounds_alone]
    assert [r["clients"] for r in rounds_together] == [r["clients"] for r in rounds_alone]
    assert all(s["train_seconds"] > 0 for r in rounds_together for s in r["client_stats"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"method": "moon"}, "method 'moon' trains with objective 'contrastive'"),
        ({"method": "fedprox"}, "method 'fedprox' trains with objective 'proximal'"),
        ({"method": "scaffold"}, "method 'scaffold' trains its clients with its own step"),
        ({"method": "fedft-eds", "objective": "proximal"}, "method 'fedft-eds' trains with objective 'proximal'"),
    ],
)
def test_a_method_it_cannot_batch_is_refused_naming_it(tmp_path, overrides, message):
    config = small_run_config(tmp_path, **overrides)
    assert message in (refusal(config) or "")
    log = tmp_path / "cell.log"
    assert run_cell_in_process(config, 4, Resources(), log, batched=True) == 1
    assert message in log.read_text()
    assert not (Path(config["results-dir"]) / "run" / "rounds.jsonl").exists()


def test_the_covered_methods_are_those_on_the_shared_plain_step():
    covered = covered_methods()
    assert {"fedavg", "fedavg-rds", "fedft-eds", "fedft-rds", "fedft-all"} <= set(covered)
    assert not {"moon", "fedprox", "scaffold", "kafal", "fedmd"} & set(covered)


def test_the_experiments_cli_refuses_before_any_cell_runs(tmp_path, capsys):
    experiment = tmp_path / "e.yaml"
    experiment.write_text(
        "name: e\ndescription: d\nscaled-down: s\nclients: 2\ncost: seconds\n"
        "base: {dataset: synthetic, num-server-rounds: 1}\n"
        "methods: [fedavg, moon]\nseeds: [0]\n"
    )
    results = tmp_path / "out"
    code = experiments_main(
        ["run", str(experiment), "--in-process", "--batched-cohorts", "--results-dir", str(results)]
    )
    assert code == 2
    assert "method 'moon' trains with objective 'contrastive'" in capsys.readouterr().err
    assert not results.exists()
    assert experiments_main(["run", str(experiment), "--batched-cohorts"]) == 2


def plain(job):
    """The plain cross-entropy objective of a job's module (all an objective reads of its round here)."""
    return CrossEntropy(SimpleNamespace(forward=job.module))


class _NotPlain:
    def loss(self, inputs, labels):  # pragma: no cover - never called
        raise AssertionError

    def finish(self) -> None:  # pragma: no cover - never called
        raise AssertionError


def _in_threads(targets):
    errors: list[BaseException] = []

    def guarded(target):
        try:
            target()
        except BaseException as err:  # noqa: BLE001 - collected for the test's assertions
            errors.append(err)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a seat is still waiting: the cohort never trained"
    return errors


def test_the_cohort_trains_once_the_clients_that_do_not_train_have_left():
    jobs = jobs_for("lenet5", "none", [20, 30])
    expected = jobs_for("lenet5", "none", [20, 30])
    rendezvous = CohortRendezvous(3)
    seats = [rendezvous.seat() for _ in range(3)]
    losses: dict[int, float] = {}
    errors = _in_threads(
        [
            lambda: losses.setdefault(0, seats[0].train(jobs[0], plain(jobs[0])).loss),
            lambda: losses.setdefault(1, seats[1].train(jobs[1], plain(jobs[1])).loss),
            seats[2].leave,  # a client whose handler failed before training
        ]
    )
    assert not errors
    alone = [train_alone(job, plain(job)).loss for job in expected]
    assert [losses[0], losses[1]] == pytest.approx(alone, rel=1e-6)


def test_another_objective_at_the_rendezvous_is_refused_and_the_rest_still_train():
    jobs = jobs_for("lenet5", "none", [20, 30])
    rendezvous = CohortRendezvous(2)
    seats = [rendezvous.seat() for _ in range(2)]
    errors = _in_threads(
        [lambda: seats[0].train(jobs[0], _NotPlain()), lambda: seats[1].train(jobs[1], plain(jobs[1]))]
    )
    assert len(errors) == 1 and isinstance(errors[0], CohortError)
    assert "plain cross-entropy only" in str(errors[0])


def test_a_failed_cohort_fails_every_client():
    jobs = jobs_for("lenet5", "none", [20]) + jobs_for("wrn-10-1", "none", [20])
    jobs[1].client = 3
    rendezvous = CohortRendezvous(2)
    seats = [rendezvous.seat() for _ in range(2)]
    errors = _in_threads(
        [lambda: seats[0].train(jobs[0], plain(jobs[0])), lambda: seats[1].train(jobs[1], plain(jobs[1]))]
    )
    assert len(errors) == 2
    assert all("clients 0 and 3 train different parameters" in str(err) for err in errors)


def test_a_cohort_has_no_seat_beyond_its_size():
    rendezvous = CohortRendezvous(1)
    rendezvous.seat()
    with pytest.raises(RuntimeError, match="no seat"):
        rendezvous.seat()
