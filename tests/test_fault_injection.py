"""The injected faults and attacks: exact tampered arrays, weights and labels for each mode."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from flwr.app import ArrayRecord, MetricRecord

from client_app.fault_injection import (
    InjectedFault,
    attacked_state,
    before_training,
    flipped_labels,
    reported_examples,
    tamper,
)
from client_app.local_data import LocalData
from data.catalog import DATASETS
from run_config.fail_partitions import FAULT_MODES, parse_fail_partitions

ROOT = Path(__file__).resolve().parents[1]
SENT = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.5]), "n": torch.tensor(4)}
TRAINED = {"w": torch.tensor([1.5, 1.0]), "b": torch.tensor([0.5]), "n": torch.tensor(7)}  # Δ = (0.5, −1), (0)


def attacked(mode: str) -> dict[str, torch.Tensor]:
    return attacked_state(TRAINED, SENT, mode, torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("mode", "w"),
    [
        ("scale100", [1 + 50.0, 2 - 100.0]),
        ("signflip10", [1 - 5.0, 2 + 10.0]),
        ("inflate", [0.5, 3.0]),
        ("huge", [1e20, 1e20]),
        ("labelflip", [1.5, 1.0]),
        ("hang", [1.5, 1.0]),
    ],
)
def test_update_attacks_send_theta_sent_plus_a_multiple_of_the_update(mode: str, w: list[float]) -> None:
    state = attacked(mode)
    torch.testing.assert_close(state["w"], torch.tensor(w))
    assert state["n"] == 7 and state["n"].dtype == torch.int64  # integer buffers are sent as trained


def test_garbage_is_nan_in_every_float_array() -> None:
    state = attacked("garbage")
    assert torch.isnan(state["w"]).all() and torch.isnan(state["b"]).all() and state["n"] == 7


def test_gaussian_update_has_the_honest_norm_and_a_seeded_direction() -> None:
    state = attacked("gaussian")
    update = torch.cat([state["w"] - SENT["w"], state["b"] - SENT["b"]])
    assert update.norm().item() == pytest.approx(torch.tensor([0.5, -1.0]).norm().item(), rel=1e-6)
    assert not torch.allclose(update[:2], torch.tensor([0.5, -1.0]))
    torch.testing.assert_close(attacked("gaussian")["w"], state["w"])  # same generator seed, same direction


def test_inflate_multiplies_the_reported_examples() -> None:
    assert reported_examples(12, "inflate") == 12_000 and reported_examples(12, "scale100") == 12


def test_tamper_changes_the_reply_of_attackers_only() -> None:
    metrics = MetricRecord({"num-examples": 3, "train-loss": 0.5})
    state, reported = tamper("inflate", dict(TRAINED), ArrayRecord(SENT), metrics, (0, 1, 2))
    torch.testing.assert_close(state["w"], torch.tensor([0.5, 3.0]))
    assert reported["num-examples"] == 3000 and reported["train-loss"] == 0.5 and metrics["num-examples"] == 3
    state, reported = tamper(None, TRAINED, ArrayRecord(SENT), metrics, (0, 1, 2))
    assert state is TRAINED and reported is metrics


def test_labelflip_trains_on_the_mirrored_labels() -> None:
    data = LocalData(torch.zeros(3, 1, 32, 32, dtype=torch.uint8), torch.tensor([0, 3, 9]), DATASETS["synthetic"])
    torch.testing.assert_close(flipped_labels(data, 10).labels, torch.tensor([9, 6, 0]))


def test_raise_raises() -> None:
    with pytest.raises(InjectedFault, match="set to raise"):
        before_training("raise", 1.0)


def test_every_attack_mode_parses() -> None:
    assert parse_fail_partitions("0:scale100,1:signflip10,2:huge,3:inflate,4:gaussian,5:labelflip") == dict(
        enumerate(("scale100", "signflip10", "huge", "inflate", "gaussian", "labelflip"))
    )
    assert FAULT_MODES[:4] == ("raise", "hang", "garbage", "die")


def test_a_client_set_to_die_kills_its_own_process_with_sigkill() -> None:
    code = subprocess.call([sys.executable, "-c", "from client_app.fault_injection import before_training; "
                            "before_training('die', 1.0); print('still alive')"], cwd=ROOT)  # fmt: skip
    assert code == -signal.SIGKILL
