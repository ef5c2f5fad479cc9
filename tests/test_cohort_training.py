"""models/cohort_training.py: clients trained as one vmap-ed computation get the updates they get trained alone.

Compared in float64, so that the comparison measures the arithmetic and not how float32 rounding differences grow
over steps: after several epochs of SGD with momentum the parameters agree to 1e-9 (float32 agrees to ~1e-7 after
one step and drifts apart as any two summation orders do).
"""

from __future__ import annotations

import copy

import pytest
import torch

from client_app.epoch_training import ThetaForward
from data.transforms import random_crop_flip
from models import NO_FREEZE
from models.cohort_training import ClientJob, CohortError, batches, train_alone, train_cohort
from models.device import available_devices
from models.registry import build_model
from models.training import cross_entropy_of

TOLERANCE = 1e-9
DEVICES = [str(device) for device in available_devices()]


def jobs_for(
    model_name, level, sizes, *, epochs=2, momentum=0.9, weight_decay=5e-4, augment=False, seed=0, device="cpu"
):
    """One job per client over its own random data, each on its own copy of one float64 model on ``device``."""
    torch.manual_seed(seed)
    base = build_model(model_name, 1, 10, dropout=0.0).double().to(device)
    jobs = []
    for client, size in enumerate(sizes):
        model = copy.deepcopy(base)
        model.set_frozen(level)
        images = torch.randn(size, 1, 32, 32, dtype=torch.float64).to(device)
        with torch.no_grad():
            inputs = images if level == NO_FREEZE or augment else model.forward_to(images, level)
        lower = (lambda x, m=model: m.forward_to(x, level)) if augment and level != NO_FREEZE else (lambda x: x)
        theta = ThetaForward(model, level, lower)
        trained = {id(p) for p in model.upper_parameters(level)}
        jobs.append(
            ClientJob(
                theta,
                {name: p for name, p in theta.named_parameters() if id(p) in trained},
                inputs,
                torch.randint(0, 10, (size,)).to(device),
                epochs=epochs,
                batch_size=16,
                lr=0.05,
                momentum=momentum,
                weight_decay=weight_decay,
                generator=torch.Generator().manual_seed(100 + client),
                augment=random_crop_flip if augment else None,
                client=client,
            )
        )
    return jobs


def train_each_alone(jobs):
    return [train_alone(job, cross_entropy_of(job.module)) for job in jobs]


def largest_difference(alone, together):
    return max(
        float((a.detach() - b.detach()).abs().max())
        for job_a, job_b in zip(alone, together, strict=True)
        for a, b in zip(job_a.module.parameters(), job_b.module.parameters(), strict=True)
    )


@pytest.mark.parametrize(
    ("model_name", "level", "sizes", "options"),
    [
        ("lenet5", NO_FREEZE, [48, 48, 48], {}),  # equal sizes: every step one group
        ("lenet5", NO_FREEZE, [40, 71, 16], {}),  # ragged: different last batches and numbers of steps
        ("lenet5", "mid", [40, 71, 16], {"momentum": 0.0, "weight_decay": 0.0}),  # θ on φ's cached features
        ("lenet5", "low", [40, 33], {"augment": True}),  # crops drawn from each client's generator, φ per batch
        ("wrn-10-1", NO_FREEZE, [40, 23], {"epochs": 1}),  # BatchNorm in train mode
        ("wrn-10-1", "mid", [40, 23, 50], {}),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_a_cohort_gets_the_updates_its_clients_get_alone(model_name, level, sizes, options, device):
    alone = jobs_for(model_name, level, sizes, device=device, **options)
    together = jobs_for(model_name, level, sizes, device=device, **options)
    before = [p.detach().clone() for p in together[0].module.parameters()]
    losses_alone = train_each_alone(alone)
    losses_together = train_cohort(together)
    assert largest_difference(alone, together) < TOLERANCE
    assert losses_together == pytest.approx(losses_alone, rel=1e-6)  # train_epochs sums the loss in float32
    moved = [not torch.equal(b, a.detach()) for b, a in zip(before, together[0].module.parameters(), strict=True)]
    assert any(moved)
    assert all(p.device.type == torch.device(device).type for job in together for p in job.module.parameters())


@pytest.mark.parametrize("device", DEVICES)
def test_frozen_parameters_stay_bitwise_frozen(device):
    jobs = jobs_for("lenet5", "mid", [30, 20], device=device)
    frozen = [
        {name: p.detach().clone() for name, p in job.module.named_parameters() if name not in job.params}
        for job in jobs
    ]
    train_cohort(jobs)
    for job, kept in zip(jobs, frozen, strict=True):
        assert kept
        current = dict(job.module.named_parameters())
        assert all(torch.equal(current[name].detach(), value) for name, value in kept.items())


def test_batches_draw_what_train_epochs_draws():
    job = jobs_for("lenet5", NO_FREEZE, [37], epochs=3)[0]
    sizes = [len(y) for _, y in batches(job)]
    assert sizes == [16, 16, 5] * 3


def test_clients_of_different_models_are_refused_naming_both():
    lenet = jobs_for("lenet5", NO_FREEZE, [20])
    wrn = jobs_for("wrn-10-1", NO_FREEZE, [20])[0]
    wrn.client = 7
    with pytest.raises(CohortError, match="clients 0 and 7 train different parameters"):
        train_cohort([lenet[0], wrn])


def test_clients_of_different_sgd_settings_are_refused():
    jobs = jobs_for("lenet5", NO_FREEZE, [20, 20])
    jobs[1].lr = 0.1
    with pytest.raises(CohortError, match="clients 0 and 1 differ in model or SGD settings"):
        train_cohort(jobs)


def test_an_empty_cohort_trains_nothing():
    assert train_cohort([]) == []
