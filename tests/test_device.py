"""Device placement: every compute path runs on every device torch sees here, and on a fake accelerator that
enforces CUDA's placement rules on the CPU (tests/fake_accelerator.py), so CI without a GPU catches a tensor left on
the wrong device. On a GPU machine the same tests run on each CUDA device too."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import client_app.node as client_module
import server_app.centralised as centralised
import server_app.lifecycle as server_module
from client_app.data_selection import select_samples
from client_app.feature_cache import FeatureCache
from client_app.local_data import LocalData
from client_app.local_update import frozen_features, local_update
from data.catalog import DATASETS
from data.image_data import ImageData
from data.loading import load_dataset
from data.transforms import random_crop_flip
from experiments.cka import cka_matrix
from experiments.client_similarity import client_models, level_similarity
from experiments.entropy_histogram import client_entropies
from methods.registry import METHODS, OBJECTIVES, for_run
from models.device import (
    DeviceUnavailableError,
    available_devices,
    compute_description,
    cpu_name,
    describe_machine,
    is_device_name,
    make_cuda_deterministic,
    resolve_device,
)
from models.training import accuracy_per_class, cross_entropy_of, evaluate, train_epochs
from run_config import build_model_for
from server_app.pretraining import pretrain
from tests.conftest import make_config
from tests.fake_accelerator import FAKE, DeviceMismatch, FakeAccelerator
from tests.in_process import run_in_process, small_run_config
from tests.test_custom_size_models import CUSTOM, SMALL_FEDMD

DEVICES = [*(str(d) for d in available_devices()), "fake-accelerator"]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> Iterator[torch.device]:
    """Each real device, and the fake accelerator (with its placement checks switched on)."""
    if request.param != "fake-accelerator":
        yield torch.device(request.param)
        return
    with FakeAccelerator():
        yield FAKE


def synthetic_data(n: int = 40, seed: int = 0) -> LocalData:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 32, 32), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, 4, (n,), generator=generator)
    return LocalData(images, labels, DATASETS["synthetic"])


# --- the harness itself: it must catch what CUDA catches --------------------------------------------------------


def test_the_fake_accelerator_catches_what_a_gpu_rejects() -> None:
    labels = torch.arange(10)
    with FakeAccelerator() as accelerator:
        on_device = torch.randn(10, 3).to(FAKE)
        assert accelerator.on_device(on_device) and on_device.device == FAKE
        chosen = on_device[:, 0].argsort()
        with pytest.raises(DeviceMismatch, match="indices or values on the accelerator"):
            labels[chosen]  # the bug that once made every FedFT-EDS client fail on CUDA
        with pytest.raises(DeviceMismatch, match="expected all tensors on one device"):
            torch.nn.functional.linear(on_device, torch.randn(2, 3))
        with pytest.raises(DeviceMismatch, match="a CPU generator cannot draw on the accelerator"):
            torch.randperm(5, generator=torch.Generator(), device=FAKE)
        with pytest.raises(DeviceMismatch, match="numpy"):
            on_device.numpy()
        assert torch.equal(on_device[torch.arange(2)].cpu(), on_device.cpu()[:2])  # CPU indices into the device: fine
        assert not accelerator.on_device(on_device.cpu())
        model = torch.nn.Linear(3, 2).to(FAKE)
        assert accelerator.on_device(model.weight) and model(on_device).device == FAKE


# --- settings ---------------------------------------------------------------------------------------------------


def test_device_names_and_a_missing_accelerator_is_named_with_what_torch_sees() -> None:
    assert all(is_device_name(n) for n in ("auto", "cpu", "cuda", "cuda:1", "mps"))
    assert not any(is_device_name(n) for n in ("gpu", "cuda:", "tpu", "cuda:x"))
    assert resolve_device("cpu") == torch.device("cpu")
    if len(available_devices()) == 1:
        assert resolve_device("auto") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(
            DeviceUnavailableError,
            match=r"run config 'server-device' = 'cuda' but this node has no "
            r"such device; torch sees: cpu \(torch .*\)",
        ):
            resolve_device("cuda", key="run config 'server-device'")
    with pytest.raises(DeviceUnavailableError, match=r"'device' = 'tpu' is not a device name"):
        resolve_device("tpu")
    with pytest.raises(DeviceUnavailableError, match="cuda:7"):
        resolve_device("cuda:7")


def test_bad_device_settings_are_refused_naming_the_key() -> None:
    from run_config import ConfigError

    with pytest.raises(ConfigError, match="'server-device' = 'gpu' is invalid"):
        make_config(server_device="gpu")
    assert make_config(device="cuda:1").device == "cuda:1"  # a valid name; availability is checked where it runs


# --- compute paths --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "cache"),
    [
        ("fedavg", False),
        ("fedprox", False),
        ("fedft-all", True),
        ("fedft-rds", True),
        ("fedft-eds", True),
        ("fedft-eds", False),
    ],
)
def test_local_update_trains_on_the_device(device: torch.device, method: str, cache: bool) -> None:
    config = make_config(
        method=method,
        dataset="synthetic",
        model="wrn-10-1",
        local_epochs=1,
        batch_size=8,
        selection_fraction=0.5,
        eval_batch_size=16,
    )
    model = build_model_for(config, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = local_update(
        model,
        synthetic_data(24),
        config,
        server_round=2,
        partition_id=1,
        learning_rate=0.1,
        device=device,
        cache=FeatureCache(2**30) if cache else None,
        cache_key="client",
        objective_factory=OBJECTIVES[config.objective],
    )
    assert all(p.device == device for p in model.parameters())
    assert result.num_examples == (24 if method in ("fedavg", "fedprox", "fedft-all") else 12)
    after = {k: v.cpu() for k, v in model.state_dict().items()}
    assert any(not torch.equal(before[k], after[k]) for k in model.upper_state_keys(config.freeze))


def test_augmented_training_and_evaluation_on_the_device(device: torch.device) -> None:
    config = make_config(
        method="fedavg", dataset="synthetic", model="lenet5", local_epochs=1, batch_size=8, augment=True
    )
    model = build_model_for(config, seed=0)
    data = synthetic_data()
    local_update(model, data, config, server_round=1, partition_id=0, learning_rate=0.1, device=device)
    loss, accuracy = evaluate(model.eval(), data.inputs(device), data.labels.to(device), 16)
    assert loss > 0 and 0 <= accuracy <= 1


def test_per_class_accuracy_counts_on_the_device(device: torch.device) -> None:
    labels, predictions = torch.tensor([0, 0, 2, 2, 2]), torch.tensor([0, 1, 2, 2, 0])
    assert accuracy_per_class(predictions.to(device), labels.to(device), 4) == [0.5, None, 2 / 3, None]


def test_the_fake_accelerator_computes_exactly_what_the_cpu_computes() -> None:
    """Random draws come from CPU generators, so a device changes no selection and no batch order."""
    config = make_config(
        method="fedft-eds",
        dataset="synthetic",
        model="lenet5",
        local_epochs=2,
        batch_size=8,
        selection_fraction=0.3,
    )
    states = []
    for accelerate in (False, True):
        model = build_model_for(config, seed=0)
        if accelerate:
            with FakeAccelerator():
                result = local_update(
                    model, synthetic_data(), config, server_round=3, partition_id=2, learning_rate=0.1, device=FAKE
                )
                states.append(({k: v.cpu() for k, v in model.state_dict().items()}, result))
        else:
            result = local_update(
                model,
                synthetic_data(),
                config,
                server_round=3,
                partition_id=2,
                learning_rate=0.1,
                device=torch.device("cpu"),
            )
            states.append((model.state_dict(), result))
    (cpu_state, cpu_result), (fake_state, fake_result) = states
    assert all(torch.equal(cpu_state[k], fake_state[k]) for k in cpu_state)
    assert cpu_result.entropy == fake_result.entropy and cpu_result.entropy is not None


def test_selection_indices_live_on_the_entropies_device(device: torch.device) -> None:
    entropies = torch.tensor([0.1, 0.9, 0.5, 0.3]).to(device)
    for policy in ("all", "random", "entropy"):
        chosen = select_samples(policy, entropies, 0.5, torch.Generator().manual_seed(0))
        assert chosen.device == device
        assert entropies[chosen].numel() == (4 if policy == "all" else 2)


def test_frozen_features_and_crops_on_the_device(device: torch.device) -> None:
    model = build_model_for(make_config(dataset="synthetic", model="wrn-10-1"), seed=0).to(device).eval()
    features = frozen_features(model, synthetic_data(10), "mid", 4, device, torch.float16)
    assert features.device == torch.device("cpu") and features.dtype == torch.float16 and len(features) == 10
    crops = random_crop_flip(torch.randn(6, 1, 32, 32).to(device), torch.Generator().manual_seed(1))
    assert crops.device == device and crops.shape == (6, 1, 32, 32)


def test_training_loop_and_pretraining_on_the_device(device: torch.device, tmp_path: Path) -> None:
    config = make_config(dataset="synthetic", model="wrn-10-1", pretrain_epochs=2, batch_size=16, eval_batch_size=32)
    model = build_model_for(config, seed=0)
    train = load_dataset("synthetic").train
    report = pretrain(model, ImageData(train.images[:48], train.labels[:48]), "synthetic", config, device)
    assert report["kept_epoch"] == 2 and report["fit_samples"] + report["validation_samples"] == 48
    assert report["machine"] == compute_description(device)  # what made the weights, stored beside the cache
    assert all(p.device == device for p in model.parameters())
    x, y = torch.randn(12, 1, 32, 32).to(device), torch.randint(0, 4, (12,)).to(device)
    loss = train_epochs(cross_entropy_of(model), list(model.parameters()), x, y, epochs=1, batch_size=5, lr=0.01)
    assert loss > 0


def test_cka_and_entropy_histograms_on_the_device(device: torch.device, tmp_path: Path) -> None:
    config = make_config(
        method="fedavg",
        dataset="synthetic",
        model="lenet5",
        local_epochs=1,
        pretrain="none",
        pretrain_cache_dir=str(tmp_path),
    )
    models = client_models(config, 2, device)
    inputs = torch.randn(16, 1, 32, 32).to(device)
    similarity = level_similarity(models, inputs, batch_size=8)
    assert all(matrix.shape == (2, 2) for matrix in similarity.values())
    assert cka_matrix([[inputs, inputs * 2]])[0, 1] == pytest.approx(1.0)
    entropies = client_entropies(config, 0, 4, [0.1, 1.0], device)
    assert set(entropies) == {0.1, 1.0}


def test_centralised_baseline_on_the_device(device: torch.device, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(centralised, "resolve_device", lambda name, key: device)
    summary = centralised.main(
        [
            "--epochs",
            "1",
            "--num-partitions",
            "2",
            "--run-config",
            f'dataset="synthetic" model="lenet5" pretrain="none" results-dir="{tmp_path}"',
        ]
    )
    assert summary["rounds"] == 1 and summary["best_accuracy"] is not None


def test_a_whole_fedft_eds_run_on_the_device_aggregates_every_round(
    device: torch.device, tmp_path: Path, monkeypatch
) -> None:
    """Server and clients both on the device: the run must train (the bug this guards against left every
    round without an update and still ended 'successfully')."""
    monkeypatch.setattr(client_module, "resolve_device", lambda name, key: device)
    monkeypatch.setattr(server_module, "resolve_device", lambda name, key: device)
    config = small_run_config(tmp_path, **{"num-server-rounds": 2})
    run_in_process(config, num_partitions=3)
    summary = json.loads((tmp_path / "results" / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["rounds_aggregated"] == 2
    assert summary["machine"]["device"] == str(device)
    assert (tmp_path / "results" / "run" / "accuracy.png").stat().st_size > 10_000  # the run's plot


ZEN5_CPUINFO = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n"
    "flags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\n"
)
ARM_CPUINFO = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\nprocessor\t: 1\n"


def test_the_cpu_is_named_with_its_generation_where_linux_gives_it() -> None:
    """A hypervisor's ``AMD EPYC`` covers generations whose kernels round differently: family and model tell them
    apart. An ARM board's /proc/cpuinfo has no model name: the architecture stands in."""
    assert cpu_name(ZEN5_CPUINFO) == "AMD EPYC (family 26, model 2)"
    assert cpu_name(ARM_CPUINFO) == platform.machine()
    assert cpu_name()  # this machine's, whatever it is


def test_what_computes_is_described_for_every_device(device: torch.device) -> None:
    description = compute_description(device)
    assert description["device"] == str(device) and description["torch"] == torch.__version__
    assert description["threads"] == torch.get_num_threads() >= 1
    assert description["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert ("gpu" in description) == (device.type == "cuda")
    json.dumps(description)  # it goes into summary.json as it is
    words = describe_machine({**description, "threads": 1})
    assert words.startswith(f"{description['gpu']} with " if "gpu" in description else description["cpu"])
    assert words.endswith(f", CPU kernels {description['cpu_capability']}, 1 thread")


def test_a_cuda_device_is_made_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolving CUDA asks for deterministic kernels (two runs of a configuration compute the same models); a
    cuBLAS workspace setting the user chose is kept."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", False)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        make_cuda_deterministic()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
        make_cuda_deterministic()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    finally:
        torch.use_deterministic_algorithms(False)


#: Settings a preset needs beyond ``small_run_config`` to run one or two small rounds (as its own tests set them).
_STRAGGLERS = {"fraction-train": 0.5, "fedfsc.fewshot-fraction": 0.25, "local-epochs": 2}
PRESET_SETTINGS: dict[str, dict[str, object]] = {
    "kafal": {
        "public-fraction": 0.0,
        "fraction-train": 0.5,
        "kafal.al-initial-fraction": 0.2,
        "kafal.al-budget-fraction": 0.1,
        "kafal.al-cycles": 1,
        "kafal.al-rounds-per-cycle": 1,
    },
    "fedfsc-plus": _STRAGGLERS,
    "fedfsc-plus-baseline-plus": _STRAGGLERS,
    "fedavg-plus": _STRAGGLERS,
    "fedprox-plus": _STRAGGLERS,
    "moon-plus": _STRAGGLERS,
    "fedsplit-kmeans": {"fedsplit.meta-epochs": 1, "fedsplit.n-com": 8, "fedsplit.k-means-clusters": 2},
    "fedsplit-all": {"fedsplit.meta-epochs": 1},
    # FedAT's server steps (AT, metadata, refinement) run once per client trained: 2 of the 4 (the seed's 1 and 3),
    # client 1 with its own WRN-16-1 and client 3 with the global WRN-10-1, run every path of its round (about 10 s
    # alone with all 4, 4.5 s with 2)
    "fedat": {**CUSTOM, "fraction-train": 0.5, "common.client-models": "1:wrn-16-1"},
    # FedKAD's and FedMD's steps run on LeNet-5 clients in a few seconds (the WRNs of CUSTOM took 11-14 s here; a 2NN
    # client has no prototypes of θ's shape for FedKAD)
    "fedkad": {**CUSTOM, "model": "lenet5", "common.client-models": ""},
    # one epoch of the transfer learning on public data (10 by default) runs the same code on the device
    "fedmd": {**CUSTOM, **SMALL_FEDMD, "fedkad.fedmd-public-epochs": 1},
}


#: Presets whose every round runs the same steps, run for one round: FedAT's WRN steps are the slowest of all on the
#: fake accelerator (22 s for two rounds of 4 clients), and its second round runs no path the first did not.
PRESET_ROUNDS = {"fedat": 1}
#: Clients that must reply with an update in a preset's first round: those its settings give a model of their own.
OWN_MODEL_CLIENTS = {"fedat": [1]}


@pytest.mark.parametrize("method", list(METHODS))
def test_every_preset_runs_on_the_fake_accelerator(method: str, tmp_path: Path, monkeypatch) -> None:
    """Server and clients on a device that enforces CUDA's placement rules: each method's client update, server
    step and evaluation keep their tensors together (on a GPU machine tests/ runs these presets on CUDA too)."""
    monkeypatch.setattr(client_module, "resolve_device", lambda name, key: FAKE)
    monkeypatch.setattr(server_module, "resolve_device", lambda name, key: FAKE)
    rounds = PRESET_ROUNDS.get(method, 2)  # FedFSC's few-shot update starts in round 2; KAFAL: (1 cycle + 1) x 1 round
    settings = {"method": method, "pretrain": "none", **PRESET_SETTINGS.get(method, {}), "num-server-rounds": rounds}
    config = for_run(small_run_config(tmp_path, **settings))  # CUSTOM is shared by FedAT, FedKAD and FedMD
    with FakeAccelerator():
        run_in_process(config, num_partitions=4)
    summary = json.loads((tmp_path / "results" / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["rounds_aggregated"] == rounds
    records = [json.loads(line) for line in (tmp_path / "results" / "run" / "rounds.jsonl").read_text().splitlines()]
    for record in records:  # every client drawn replied with an update: none failed on the device
        assert not record.get("failed") and not record.get("rejected") and not record.get("timed_out"), record
    replied = {stats["partition_id"] for stats in records[0]["client_stats"]}
    assert set(OWN_MODEL_CLIENTS.get(method, [])) <= replied, replied
