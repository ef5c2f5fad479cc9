"""FedKAD / FedMD kernels: prototypes, holder-only global prototypes, consensus, L1 distillation, prototype CE, the
distillation and FedMD's transfer learning."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from methods.fedkad.distillation import (
    BETA_KEY,
    GENERIC_SAMPLES_KEY,
    REFERENCE_DIGEST,
    Recipe,
    check_fedkad_settings,
    class_prototypes,
    client_consensus,
    distil,
    draw_generic_indices,
    fedkad_loss,
    fedmd_distillation_loss,
    global_prototypes,
    l1_distillation_loss,
    local_prototypes,
    model_logits,
    prototype_bytes,
    prototype_cross_entropy,
    transfer_on_public,
)
from models import build_model
from models.batchnorm import settle_batchnorm


def test_class_prototypes_are_class_means_with_absent_classes_zero() -> None:
    maps = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 0.0], [5.0, 6.0]])
    labels = torch.tensor([0, 0, 2, 0])
    prototypes, present = class_prototypes(maps, labels, num_classes=4)
    assert prototypes.tolist() == [[3.0, 4.0], [0.0, 0.0], [10.0, 0.0], [0.0, 0.0]]
    assert present.tolist() == [True, False, True, False]


def test_local_prototypes_use_the_penultimate_maps_in_eval_mode() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 3, 5).train()
    x, labels = torch.randn(7, 3, 8, 8), torch.tensor([0, 1, 1, 3, 0, 1, 3])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    prototypes, present = local_prototypes(model, x, labels, 5, batch_size=3)
    assert model.training and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    model.eval()
    expected, expected_present = class_prototypes(model.forward_to(x, "up"), labels, 5)
    assert prototypes.shape == (5, 64, 2, 2)
    torch.testing.assert_close(prototypes, expected)
    assert torch.equal(present, expected_present) and present.tolist() == [True, True, False, True, False]


def test_global_prototypes_average_over_holders_only() -> None:
    # Three clients, three classes, 1-d maps. Class 0: held by clients 0 and 2; class 1 by client 1; class 2 by none.
    prototypes = torch.tensor([[[2.0], [0.0], [0.0]], [[0.0], [5.0], [0.0]], [[4.0], [0.0], [0.0]]])
    present = torch.tensor([[True, False, False], [False, True, False], [True, False, False]])
    global_maps, held = global_prototypes(prototypes, present)
    assert global_maps.tolist() == [[3.0], [5.0], [0.0]]  # not (2+0+4)/3 and not 5/3
    assert held.tolist() == [True, True, False]


def test_global_prototypes_trust_the_mask_not_zero_maps() -> None:
    # A client holding a class whose mean map happens to be zero still counts as a holder.
    prototypes = torch.tensor([[[0.0]], [[6.0]]])
    global_maps, _ = global_prototypes(prototypes, torch.tensor([[True], [True]]))
    assert global_maps.tolist() == [[3.0]]
    with pytest.raises(ValueError, match="disagree"):
        global_prototypes(prototypes, torch.tensor([[True, False]]))


def test_consensus_is_the_uniform_mean_of_client_logits() -> None:
    a = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    b = torch.tensor([[3.0, -2.0], [6.0, 3.0]])
    assert client_consensus([a, b]).tolist() == [[2.0, 0.0], [3.0, 1.5]]
    with pytest.raises(ValueError, match="at least one"):
        client_consensus([])


def test_l1_distillation_is_the_mean_absolute_error_over_samples_and_logits() -> None:
    student = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], requires_grad=True)
    consensus = torch.tensor([[0.0, 4.0, 3.0], [-1.0, 1.0, 0.5]], requires_grad=True)
    loss = l1_distillation_loss(student, consensus)
    assert loss.item() == pytest.approx(((1 + 2 + 0) + (1 + 1 + 0.5)) / 6)  # per logit, not per sample
    loss.backward()
    torch.testing.assert_close(student.grad, torch.tensor([[1.0, -1.0, 0.0], [1.0, -1.0, -1.0]]) / 6)
    assert consensus.grad is None  # a fixed target
    assert fedmd_distillation_loss(student, consensus).item() == loss.item()


def test_prototype_cross_entropy_is_the_mean_over_held_classes() -> None:
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [9.0, 0.0, 0.0]])
    held = torch.tensor([True, True, False])
    expected = (-math.log(math.exp(2) / (math.exp(2) + 2)) - math.log(math.e / (math.e + 2))) / 2
    assert prototype_cross_entropy(logits, held).item() == pytest.approx(expected)
    assert prototype_cross_entropy(logits, torch.zeros(3, dtype=torch.bool)).item() == 0.0


def test_fedkad_loss_adds_beta_times_prototype_loss_and_switches_it_off() -> None:
    g = torch.Generator().manual_seed(0)
    student, consensus = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    proto_logits, held = torch.randn(3, 3, generator=g), torch.tensor([True, False, True])
    kd = l1_distillation_loss(student, consensus)
    ce = prototype_cross_entropy(proto_logits, held)
    assert fedkad_loss(student, consensus, proto_logits, held, beta=0.5).item() == pytest.approx((kd + 0.5 * ce).item())
    assert fedkad_loss(student, consensus, use_prototypes=False).item() == kd.item()
    with pytest.raises(ValueError, match=BETA_KEY):
        fedkad_loss(student, consensus, proto_logits, held, beta=-1.0)
    with pytest.raises(ValueError, match="held-class mask"):
        fedkad_loss(student, consensus)


def test_prototypes_train_theta_through_the_head() -> None:
    torch.manual_seed(0)
    model = build_model("wrn-10-1", 3, 4).eval()
    global_maps = torch.randn(4, 64, 2, 2)
    held = torch.tensor([True, True, True, False])
    loss = prototype_cross_entropy(model.forward_from(global_maps, "up"), held)
    loss.backward()
    assert model.stages["head"].fc.weight.grad is not None
    assert model.stages["stem"].weight.grad is None  # φ is not on this path
    manual = sum(F.cross_entropy(model.forward_from(global_maps[c : c + 1], "up"), torch.tensor([c])) for c in range(3))
    assert loss.item() == pytest.approx(manual.item() / 3, rel=1e-5)


def test_generic_draw_is_seeded_and_without_replacement() -> None:
    a = draw_generic_indices(100, 30, torch.Generator().manual_seed(0))
    b = draw_generic_indices(100, 30, torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and len(set(a.tolist())) == 30
    assert len(draw_generic_indices(10, 30, torch.Generator())) == 10
    with pytest.raises(ValueError, match=GENERIC_SAMPLES_KEY):
        draw_generic_indices(10, 0, torch.Generator())


def test_prototype_bytes_match_table_5_10() -> None:
    assert 20 * prototype_bytes(10, (64, 8, 8)) == 3_276_800  # 3.28 MB, CIFAR-10
    assert 20 * prototype_bytes(35, (64, 8, 8)) == 11_468_800  # 11.47 MB, GSC


@pytest.mark.parametrize(("beta", "samples", "key"), [(-0.5, 10, BETA_KEY), (1.0, 0, GENERIC_SAMPLES_KEY)])
def test_settings_are_validated_naming_the_key(beta: float, samples: int, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        check_fedkad_settings(beta, samples)
    check_fedkad_settings(0.5, 5000)


def _student_and_draw(seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    student, teacher = build_model("lenet5", 1, 4), build_model("lenet5", 1, 4)
    inputs = torch.randn(96, 1, 32, 32)
    with torch.no_grad():
        consensus = 3 * teacher.eval()(inputs)
    return student, inputs, consensus


@pytest.mark.parametrize("recipe", [Recipe("sgd", 0.1, epochs=5, batch_size=16, momentum=0.9), REFERENCE_DIGEST])
def test_distillation_fits_the_consensus(recipe: Recipe) -> None:
    student, inputs, consensus = _student_and_draw()
    before = l1_distillation_loss(model_logits(student, inputs, 32), consensus).item()
    fit = distil(student, inputs, consensus, None, None, recipe=recipe, generator=torch.Generator().manual_seed(0))
    after = l1_distillation_loss(model_logits(student, inputs, 32), consensus).item()
    assert len(fit.kd) == recipe.epochs and fit.prototype is None
    assert after < 0.9 * before, (before, after, fit)


def test_both_terms_are_fitted_at_the_thesis_step() -> None:
    # FedKAD's distillation at §5.6's SGD lr 0.1 (momentum 0.9) on a batch of 64: the prototype term and the
    # L1 term both fall, over the epochs, on this scale (a per-logit mean, a per-class mean).
    student, inputs, consensus = _student_and_draw()
    prototypes, held = torch.randn(4, 84).abs(), torch.tensor([True, True, True, False])
    recipe = Recipe("sgd", 0.1, epochs=5, batch_size=64, momentum=0.9)
    fit = distil(
        student, inputs, consensus, prototypes, held, recipe=recipe, generator=torch.Generator().manual_seed(0)
    )
    assert fit.prototype is not None and fit.prototype[-1] < 0.5 * fit.prototype[0], fit
    assert fit.kd[-1] < fit.kd[0], fit
    assert set(fit.report()) == {"kd_loss_first", "kd_loss_last", "prototype_loss_first", "prototype_loss_last"}


def test_distillation_ends_with_settled_batchnorm() -> None:
    torch.manual_seed(0)
    student, inputs = build_model("wrn-10-1", 1, 4), torch.randn(24, 1, 32, 32)
    consensus = torch.randn(24, 4)
    distil(student, inputs, consensus, None, None, recipe=REFERENCE_DIGEST, generator=torch.Generator().manual_seed(0))
    settled = {k: v.clone() for k, v in student.state_dict().items()}
    settle_batchnorm(student, inputs)
    assert all(torch.equal(v, settled[k]) for k, v in student.state_dict().items())


def test_public_transfer_learns_the_labelled_public_data() -> None:
    torch.manual_seed(0)
    model = build_model("lenet5", 1, 3)
    labels = torch.arange(60) % 3
    inputs = torch.randn(60, 1, 32, 32) + labels.view(-1, 1, 1, 1).float()  # separable by brightness
    before = (model_logits(model, inputs, 32).argmax(1) == labels).float().mean().item()
    transfer_on_public(model, inputs, labels, epochs=20, generator=torch.Generator().manual_seed(0))
    after = (model_logits(model, inputs, 32).argmax(1) == labels).float().mean().item()
    assert after >= 0.9 and after > before


def test_recipes_are_checked() -> None:
    with pytest.raises(ValueError, match="optimizer"):
        Recipe("rmsprop", 0.1, epochs=1, batch_size=1)
    with pytest.raises(ValueError, match="epochs"):
        Recipe("sgd", 0.1, epochs=0, batch_size=1)
    assert REFERENCE_DIGEST == Recipe("adam", 1e-3, epochs=1, batch_size=256)  # FedMD_clean's digest
