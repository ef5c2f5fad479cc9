"""The centralised upper bound: pooled client data, results in the federated format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server_app.centralised import main


def test_centralised_trains_on_the_pooled_client_data(tmp_path: Path) -> None:
    summary = main(
        [
            "--epochs",
            "2",
            "--num-partitions",
            "3",
            "--run-config",
            f"dataset=synthetic model=lenet5 pretrain=none results-dir={tmp_path} run-name=c",
        ]
    )
    rounds = [json.loads(line) for line in (tmp_path / "c" / "rounds.jsonl").read_text().splitlines()]
    assert summary["method"] == "centralised" and summary["rounds"] == 2
    assert [r["num_examples"] for r in rounds] == [640, 640]  # 800 synthetic images less the 20% public split
    assert summary["best_accuracy"] > summary["initial_accuracy"]
    assert json.loads((tmp_path / "c" / "summary.json").read_text()) == summary


def test_unknown_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["--run-config", "no-such-key=1"])


def test_a_second_run_into_the_same_folder_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    overrides = f"dataset=synthetic model=lenet5 pretrain=none results-dir={tmp_path} run-name=c"
    main(["--epochs", "1", "--num-partitions", "2", "--run-config", overrides])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["--epochs", "1", "--num-partitions", "2", "--run-config", overrides])
    assert exit_.value.code == 1
    assert capsys.readouterr().err == (
        f"cannot start the run: run folder {tmp_path.resolve() / 'c'} holds an earlier "
        "run; choose another run-name (or remove the folder)\n"
    )
