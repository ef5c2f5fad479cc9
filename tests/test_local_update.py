"""The client's round: φ stays bitwise frozen, the cache changes nothing but speed, counts are the selected ones."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from client_app.data_selection import hardened_entropy, select_by_entropy
from client_app.feature_cache import FeatureCache
from client_app.local_data import LocalData
from client_app.local_update import local_update
from data.catalog import DATASETS
from methods.registry import OBJECTIVES
from models import WideResNet
from models.batchnorm import settle_batchnorm
from tests.conftest import make_config

torch.set_flush_denormal(True)


def tiny_setup(n: int = 60) -> tuple[WideResNet, LocalData]:
    torch.manual_seed(0)
    model = WideResNet(10, 1, in_channels=1, num_classes=4, dropout=0.3)
    images = torch.randint(0, 256, (n, 1, 32, 32), dtype=torch.uint8)
    data = LocalData(images, torch.randint(0, 4, (n,)), DATASETS["synthetic"])
    return model, data


CPU = torch.device("cpu")


def config(**kw):
    return make_config(dataset="synthetic", model="wrn-10-1", local_epochs=2, batch_size=16, eval_batch_size=32, **kw)


def test_phi_parameters_and_batchnorm_buffers_are_bitwise_unchanged() -> None:
    model, data = tiny_setup()
    lower_before = {k: v.clone() for k, v in model.state_dict().items() if k not in set(model.upper_state_keys("mid"))}
    upper_before = {k: v.clone() for k, v in model.state_dict().items() if k in set(model.upper_state_keys("mid"))}
    for cache in (None, FeatureCache(2**30)):
        local_update(
            model,
            data,
            config(method="fedft-eds"),
            server_round=1,
            partition_id=0,
            learning_rate=0.1,
            cache=cache,
            cache_key="k",
            device=CPU,
        )
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in lower_before.items())  # running stats included
    assert any(not torch.equal(after[k], v) for k, v in upper_before.items())


def test_cache_gives_the_same_selection_and_update_as_recomputation() -> None:
    model, data = tiny_setup()
    cached_model, plain_model = copy.deepcopy(model), copy.deepcopy(model)
    cache = FeatureCache(2**30)
    cfg = config(method="fedft-eds", selection_fraction=0.25, feature_cache_dtype="float32")
    a = local_update(
        cached_model,
        data,
        cfg,
        server_round=3,
        partition_id=1,
        learning_rate=0.1,
        cache=cache,
        cache_key="k",
        device=CPU,
    )
    b = local_update(plain_model, data, cfg, server_round=3, partition_id=1, learning_rate=0.1, cache=None, device=CPU)
    assert a.cache_seconds > 0 and b.cache_seconds == 0
    assert a.entropy == b.entropy and a.num_examples == b.num_examples == 15
    for (name, x), (_, y) in zip(cached_model.state_dict().items(), plain_model.state_dict().items()):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6, msg=name)
    again = local_update(
        copy.deepcopy(model),
        data,
        cfg,
        server_round=4,
        partition_id=1,
        learning_rate=0.1,
        cache=cache,
        cache_key="k",
        device=CPU,
    )
    assert again.cache_seconds == 0  # second round: features come from the cache


def test_entropy_selection_matches_a_direct_computation_on_the_received_model() -> None:
    model, data = tiny_setup()
    received = copy.deepcopy(model).eval()
    with torch.no_grad():
        h = hardened_entropy(received(data.inputs(CPU)), 0.1)
    expected = select_by_entropy(h, math.ceil(0.1 * len(data)))
    result = local_update(
        model, data, config(method="fedft-eds"), server_round=1, partition_id=0, learning_rate=0.1, device=CPU
    )
    assert result.num_examples == 6 and result.num_local == 60
    assert result.entropy is not None
    assert math.isclose(result.entropy.selected_mean, float(h[expected].mean()), rel_tol=1e-6)
    assert math.isclose(result.entropy.local_mean, float(h.mean()), rel_tol=1e-6)


def test_fedavg_trains_every_parameter_on_all_data() -> None:
    model, data = tiny_setup()
    before = copy.deepcopy(model.state_dict())
    result = local_update(
        model, data, config(method="fedavg"), server_round=1, partition_id=0, learning_rate=0.1, device=CPU
    )
    assert result.num_examples == 60 and result.cache_seconds == 0
    assert not torch.equal(model.state_dict()["stages.stem.weight"], before["stages.stem.weight"])


def test_random_selection_is_redrawn_each_round() -> None:
    model, data = tiny_setup()
    cfg = config(method="fedft-rds", selection_fraction=0.5, entropy_metrics=True)
    sizes = [
        local_update(copy.deepcopy(model), data, cfg, server_round=r, partition_id=0, learning_rate=0.1, device=CPU)
        for r in (1, 2)
    ]
    assert [s.num_examples for s in sizes] == [30, 30]
    assert sizes[0].entropy is not None and sizes[1].entropy is not None
    assert sizes[0].entropy.selected_mean != sizes[1].entropy.selected_mean


@pytest.mark.parametrize("method", ["fedavg", "fedft-rds", "fedft-all"])
def test_the_entropy_pass_runs_only_where_asked_and_changes_no_update(method: str) -> None:
    """All-data and random selection need no entropies: without `entropy-metrics` the pass is left out (no entropy
    reported) and the round trains the model it trains with the pass, bit for bit."""
    model, data = tiny_setup()
    results, states = [], []
    for metrics in (False, True):
        trained = copy.deepcopy(model)
        cfg = config(method=method, selection_fraction=0.5, entropy_metrics=metrics)
        results.append(local_update(trained, data, cfg, server_round=2, partition_id=1, learning_rate=0.1, device=CPU))
        states.append(trained.state_dict())
    without, with_pass = results
    assert without.entropy is None and with_pass.entropy is not None
    assert without.num_examples == with_pass.num_examples
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_same_seed_same_round_gives_identical_updates() -> None:
    model, data = tiny_setup()
    m1, m2 = copy.deepcopy(model), copy.deepcopy(model)
    cfg = config(method="fedprox")
    proximal = OBJECTIVES["proximal"]
    local_update(
        m1, data, cfg, server_round=2, partition_id=5, learning_rate=0.1, device=CPU, objective_factory=proximal
    )
    local_update(
        m2, data, cfg, server_round=2, partition_id=5, learning_rate=0.1, device=CPU, objective_factory=proximal
    )
    assert all(torch.equal(a, b) for a, b in zip(m1.state_dict().values(), m2.state_dict().values()))


def test_half_precision_cache_selects_and_trains_as_full_precision() -> None:
    """float16 features (the default) pick exactly the samples float32 picks, on a fixed model and real data, and
    the trained θ differs only by rounding."""
    from client_app.local_data import load_local_data
    from client_app.local_update import frozen_features
    from models.training import predict_logits
    from run_config import federated_split

    configs = {
        dtype: make_config(
            dataset="fashion-mnist-mini", local_epochs=1, batch_size=32, method="fedft-eds", feature_cache_dtype=dtype
        )
        for dtype in ("float16", "float32")
    }
    data = load_local_data(federated_split(configs["float32"]), 0, 10)
    torch.manual_seed(0)
    model = WideResNet(16, 1, in_channels=1, num_classes=10, dropout=0.3).eval()
    size = math.ceil(0.1 * len(data))
    chosen = {}
    for dtype, torch_dtype in (("float16", torch.float16), ("float32", torch.float32)):
        features = frozen_features(model, data, "mid", 100, CPU, torch_dtype)
        logits = predict_logits(lambda h: model.forward_from(h.float(), "mid"), features, 100)
        chosen[dtype] = set(select_by_entropy(hardened_entropy(logits, 0.1), size).tolist())
    assert chosen["float16"] == chosen["float32"]
    models = {dtype: copy.deepcopy(model) for dtype in configs}
    for dtype, trained in models.items():
        local_update(
            trained,
            data,
            configs[dtype],
            server_round=1,
            partition_id=0,
            learning_rate=0.1,
            cache=FeatureCache(2**30),
            cache_key=dtype,
            device=CPU,
        )
    half, full = models["float16"].state_dict(), models["float32"].state_dict()
    for key in model.upper_state_keys("mid"):
        torch.testing.assert_close(half[key].float(), full[key].float(), rtol=1e-2, atol=1e-3, msg=key)


def test_features_streamed_from_disk_give_the_update_held_features_give(tmp_path) -> None:
    """A node whose memory cap is below its features reads them from disk a chunk at a time: same result."""
    model, data = tiny_setup()
    cfg = config(method="fedft-eds", selection_fraction=0.25)
    held, streamed = copy.deepcopy(model), copy.deepcopy(model)
    a = local_update(
        held,
        data,
        cfg,
        server_round=2,
        partition_id=1,
        learning_rate=0.1,
        cache=FeatureCache(2**30),
        cache_key="k",
        device=CPU,
    )
    for _ in range(2):  # the round that writes the file, then one that reads it
        streamed = copy.deepcopy(model)
        b = local_update(
            streamed,
            data,
            cfg,
            server_round=2,
            partition_id=1,
            learning_rate=0.1,
            cache=FeatureCache(2**10, tmp_path),
            cache_key="k",
            device=CPU,
        )
    assert b.cache_seconds == 0 and len(list(tmp_path.glob("*.npy"))) == 1
    assert a.entropy == b.entropy
    assert all(torch.equal(x, y) for x, y in zip(held.state_dict().values(), streamed.state_dict().values()))


def test_the_trained_model_leaves_with_the_statistics_of_what_it_trained_on() -> None:
    """The round ends by settling θ's BatchNorm statistics on the selected samples with dropout off, for the full
    model (FedAvg) and for θ above a frozen φ (FedFT-EDS): settling again on those samples changes nothing."""
    for method, level in (("fedavg", "none"), ("fedft-eds", "mid")):
        model, data = tiny_setup()
        received = copy.deepcopy(model)
        cfg = config(method=method, selection_fraction=0.25, feature_cache_dtype="float32")
        local_update(model, data, cfg, server_round=1, partition_id=0, learning_rate=0.1, device=CPU)
        with torch.no_grad():
            received.eval()
            features = received.forward_to(data.inputs(CPU), level) if level != "none" else data.inputs(CPU)
            chosen = (
                select_by_entropy(hardened_entropy(received.forward_from(features, level), 0.1), 15)
                if level != "none"
                else torch.arange(len(data))
            )
        trained = {k: v.clone() for k, v in model.state_dict().items()}
        settle_batchnorm(
            model,
            features[chosen],
            forward=lambda h, m=model, lv=level: m.forward_from(h, lv),
            within=model.upper_stages(level),
            batch_size=32,
        )
        for key, value in model.state_dict().items():
            torch.testing.assert_close(value, trained[key], rtol=1e-5, atol=1e-6, msg=f"{method}: {key}")
