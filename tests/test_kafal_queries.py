"""Query strategies on small fixed cases: exact rankings, k-centre and k-means++ picks, QBC, ALFA-Mix, LL4AL."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from methods.kafal.ksas import ksas_scores
from methods.kafal.queries import (
    QUERY_STRATEGIES,
    QueryContext,
    check_sampling_model,
    select_queries,
    supports_global_sampling,
)
from methods.kafal.queries.alfa_mix import alfa_mix_candidates, alfa_mix_query, alpha_caps, class_anchors
from methods.kafal.queries.badge import badge_query, gradient_embeddings
from methods.kafal.queries.committee import consensus_kl, qbc_query, vote_entropy
from methods.kafal.queries.coreset import kcenter_greedy
from methods.kafal.queries.kmeans import closest_members, kmeans
from methods.kafal.queries.learning_loss import LossPredictionModule, ll4al_query, loss_prediction_loss
from methods.kafal.queries.outputs import collect_outputs
from methods.kafal.queries.uncertainty import entropy_query, margin_query, random_query
from models import MLP2NN, ResNet8


def test_entropy_ranks_highest_first() -> None:
    logits = torch.log(
        torch.tensor([[0.9, 0.05, 0.05], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0 + 1e-12], [0.6, 0.3, 0.1]])
    )
    p = torch.softmax(logits, 1).numpy()
    entropy = -(p * np.log(p)).sum(1)
    assert entropy_query(logits, 4).tolist() == np.argsort(-entropy, kind="stable").tolist() == [1, 3, 2, 0]


def test_margin_ranks_smallest_top_two_gap_first() -> None:
    probs = torch.tensor([[0.5, 0.4, 0.1], [0.9, 0.05, 0.05], [0.34, 0.33, 0.33], [0.2, 0.7, 0.1]])
    # margins: 0.1, 0.85, 0.01, 0.5
    assert margin_query(torch.log(probs), 3).tolist() == [2, 0, 3]


def test_random_query_is_seeded_and_distinct() -> None:
    first = random_query(50, 10, torch.Generator().manual_seed(1))
    assert first.tolist() == random_query(50, 10, torch.Generator().manual_seed(1)).tolist()
    assert len(set(first.tolist())) == 10 and max(first.tolist()) < 50


def test_core_set_picks_the_k_centre_greedy_choice() -> None:
    unlabelled = torch.tensor([[1.0], [2.0], [10.0], [11.0], [5.0]])
    labelled = torch.tensor([[0.0]])
    # 11 is farthest from 0; then 5 (5 from 0, 6 from 11); then 2 (2 from 0, 3 from 5).
    assert kcenter_greedy(unlabelled, labelled, 3).tolist() == [3, 4, 1]


def test_core_set_equals_a_direct_numpy_greedy() -> None:
    rng = np.random.default_rng(3)
    unlabelled, labelled = rng.normal(size=(60, 4)), rng.normal(size=(8, 4))
    dist = np.linalg.norm(unlabelled[:, None] - labelled[None], axis=2).min(axis=1)
    expected = []
    for _ in range(12):
        pick = int(np.argmax(dist))
        expected.append(pick)
        dist = np.minimum(dist, np.linalg.norm(unlabelled - unlabelled[pick], axis=1))
    assert kcenter_greedy(torch.from_numpy(unlabelled), torch.from_numpy(labelled), 12).tolist() == expected


def test_core_set_never_repeats_even_on_duplicates() -> None:
    points = torch.zeros(4, 2)
    assert sorted(kcenter_greedy(points, torch.zeros(1, 2), 4).tolist()) == [0, 1, 2, 3]


def test_badge_gradient_embedding_shape_and_values() -> None:
    logits, features = torch.tensor([[2.0, 0.0, 1.0]]), torch.tensor([[1.0, -2.0]])
    p = torch.softmax(logits, 1)[0]
    expected = torch.cat([(p[0] - 1) * features[0], p[1] * features[0], p[2] * features[0]])
    embedding = gradient_embeddings(logits, features)
    assert embedding.shape == (1, 6)
    torch.testing.assert_close(embedding[0], expected)
    assert gradient_embeddings(torch.randn(5, 10), torch.randn(5, 64)).shape == (5, 640)


def numpy_badge(logits: np.ndarray, features: np.ndarray, budget: int, uniforms: np.ndarray) -> list[int]:
    """k-means++ on the materialised gradient embeddings, drawing with the given uniforms by inverse CDF."""
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(p)), p.argmax(1)] -= 1
    g = (p[:, :, None] * features[:, None, :]).reshape(len(p), -1)
    chosen = [int(np.argmax((g**2).sum(1)))]
    nearest = ((g - g[chosen[0]]) ** 2).sum(1)
    for k in range(1, budget):
        weights = np.where(np.isin(np.arange(len(g)), chosen), 0.0, nearest)
        cumulative = np.cumsum(weights)
        pick = int(np.searchsorted(cumulative, uniforms[k] * cumulative[-1], side="right"))
        chosen.append(pick)
        nearest = np.minimum(nearest, ((g - g[pick]) ** 2).sum(1))
    return chosen


def test_badge_seeded_pick_equals_kmeans_plus_plus_on_the_embeddings() -> None:
    rng = np.random.default_rng(5)
    logits, features = rng.normal(size=(40, 4)) * 2, rng.normal(size=(40, 6))
    uniforms = torch.rand(8, generator=torch.Generator().manual_seed(9), dtype=torch.float64).numpy()
    picked = badge_query(torch.from_numpy(logits), torch.from_numpy(features), 8, torch.Generator().manual_seed(9))
    assert picked.tolist() == numpy_badge(logits, features, 8, uniforms)
    assert len(set(picked.tolist())) == 8


def test_badge_can_take_the_whole_pool_without_repeats() -> None:
    picked = badge_query(torch.zeros(5, 3), torch.ones(5, 2), 5, torch.Generator().manual_seed(0))
    assert sorted(picked.tolist()) == [0, 1, 2, 3, 4]


def test_vote_entropy_and_consensus_kl_by_hand() -> None:
    # 3 members, 3 samples: unanimous, 2-1 split, 3-way split.
    votes = torch.tensor([[0, 0, 0], [0, 0, 1], [0, 1, 2]]).T  # members x samples
    logits = torch.nn.functional.one_hot(votes, 3).double() * 5
    two_one = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    torch.testing.assert_close(vote_entropy(logits), torch.tensor([0.0, two_one, math.log(3)], dtype=torch.float64))
    p = torch.softmax(logits, 2).numpy()
    mean = p.mean(0)
    expected = (p * np.log(p / mean)).sum(2).mean(0)
    np.testing.assert_allclose(consensus_kl(logits).numpy(), expected, rtol=1e-10, atol=1e-14)


def test_qbc_ranks_by_vote_entropy_then_consensus_kl() -> None:
    # Samples 0 and 2 both split 2-1; sample 2's members disagree more strongly.
    logits = torch.tensor(
        [
            [[1.0, 0.0], [0.0, 0.0], [3.0, 0.0]],
            [[1.0, 0.0], [0.0, 0.0], [3.0, 0.0]],
            [[0.0, 1.0], [0.0, 0.0], [0.0, 3.0]],
        ]
    )
    assert qbc_query(logits, 3).tolist() == [2, 0, 1]
    assert qbc_query(logits, 1, "consensus-kl").tolist() == [2]
    with pytest.raises(ValueError, match="'kafal.al-qbc-measure' must be one of vote-entropy, consensus-kl"):
        qbc_query(logits, 1, "disagreement")


def test_kmeans_recovers_separated_clusters_and_closest_members() -> None:
    gen = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = torch.cat([c + 0.1 * torch.randn(10, 2, generator=gen) for c in centres])
    found, labels = kmeans(points, 3, torch.Generator().manual_seed(1))
    groups = {tuple(labels[i * 10 : (i + 1) * 10].unique().tolist()) for i in range(3)}
    assert len(groups) == 3 and all(len(g) == 1 for g in groups)
    closest = closest_members(points, found, labels)
    expected = [
        int(torch.nonzero(labels == k).flatten()[((points[labels == k] - found[k]) ** 2).sum(1).argmin()])
        for k in range(3)
    ]
    assert closest.tolist() == expected


def test_alfa_mix_caps_and_anchors() -> None:
    assert alpha_caps(0.2) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    anchors = class_anchors(torch.tensor([[1.0, 1.0], [3.0, 1.0], [0.0, 4.0]]), torch.tensor([0, 0, 2]), 3)
    torch.testing.assert_close(anchors, torch.tensor([[2.0, 1.0], [4 / 3, 2.0], [0.0, 4.0]]))
    with pytest.raises(ValueError, match="'alfa-mix-alpha-cap' must be in"):
        alpha_caps(0.0)


def identity(z: torch.Tensor) -> torch.Tensor:
    return z


def test_alfa_mix_flags_the_sample_near_the_boundary_only() -> None:
    # The closed form moves z by ε·‖z* − z‖ along the loss gradient: far from the boundary even ε = 1/√2 is short.
    unlabelled = torch.tensor([[0.51, 0.49], [5.0, -5.0], [-20.0, 20.0]])
    labelled, labels = torch.tensor([[3.0, -3.0], [-1.0, 1.0]]), torch.tensor([0, 1])
    candidates = alfa_mix_candidates(unlabelled, labelled, labels, identity, 2, budget=1)
    assert candidates.tolist() == [True, False, False]
    assert alfa_mix_query(unlabelled, labelled, labels, identity, 2, 1, torch.Generator()).tolist() == [0]
    two = alfa_mix_query(unlabelled, labelled, labels, identity, 2, 2, torch.Generator().manual_seed(0)).tolist()
    assert two[0] == 0 and two[1] in (1, 2)  # one candidate, topped up at random


def numpy_alfa_candidates(u: np.ndarray, anchors: np.ndarray, weight: np.ndarray, budget: int) -> np.ndarray:
    """The authors' closed-form loop for a linear classifier z -> z Wᵀ, written out in NumPy."""
    logits = u @ weight.T
    pred = logits.argmax(1)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(len(u)), pred] -= 1
    grads = p @ weight
    candidates = np.zeros(len(u), dtype=bool)
    for cap in alpha_caps(0.2):
        eps = cap / math.sqrt(u.shape[1])
        for anchor in anchors:
            z = anchor - u
            alpha = (eps * np.linalg.norm(z, axis=1) / np.linalg.norm(grads, axis=1))[:, None] * grads / (z + 1e-8)
            candidates |= (((1 - alpha) * u + alpha * anchor) @ weight.T).argmax(1) != pred
        if candidates.sum() > budget:
            break
    return candidates


def test_alfa_mix_candidates_equal_the_written_out_closed_form() -> None:
    rng = np.random.default_rng(2)
    weight, u = rng.normal(size=(4, 6)), rng.normal(size=(80, 6))
    labelled, labels = rng.normal(size=(20, 6)), rng.integers(0, 3, size=20)  # class 3 has no labels
    classifier = nn.Linear(6, 4, bias=False).double()
    classifier.weight.data = torch.from_numpy(weight)
    anchors = class_anchors(torch.from_numpy(labelled), torch.from_numpy(labels), 4).numpy()
    expected = numpy_alfa_candidates(u, anchors, weight, budget=10)
    found = alfa_mix_candidates(
        torch.from_numpy(u), torch.from_numpy(labelled), torch.from_numpy(labels), classifier, 4, budget=10
    )
    assert found.numpy().tolist() == expected.tolist() and 0 < expected.sum() < 80


def test_loss_prediction_loss_by_hand() -> None:
    predicted = torch.tensor([0.5, 0.1, 0.3, 0.9])
    target = torch.tensor([2.0, 1.0, 1.0, 0.5])
    # pairs (0, 3): target up, predicted diff −0.4 -> 1.4; (1, 2): target tie counts as −1, diff −0.2 -> 0.8.
    assert loss_prediction_loss(predicted, target).item() == pytest.approx(1.1)
    assert loss_prediction_loss(predicted[:1], target[:1]).item() == 0.0


def test_loss_prediction_module_on_resnet8_has_the_papers_size() -> None:
    model = ResNet8()
    module = LossPredictionModule.for_model(model, (3, 32, 32))
    assert sum(p.numel() for p in module.parameters()) == 15_105  # the paper's "0.015M"
    _, levels = model.forward_with_levels(torch.randn(4, 3, 32, 32))
    assert module(list(levels.values())).shape == (4,)
    assert ll4al_query(torch.tensor([0.1, 0.9, 0.5]), 2).tolist() == [1, 2]


def test_collect_outputs_uses_eval_mode_and_restores_the_mode() -> None:
    model = ResNet8().train()
    x = torch.randn(5, 3, 32, 32)
    outputs = collect_outputs(model, x, batch_size=2)
    assert model.training
    model.eval()
    embedding, logits = model.embed_and_classify(x)
    torch.testing.assert_close(outputs.logits, logits)
    torch.testing.assert_close(outputs.embeddings, embedding)


def test_global_sampling_table() -> None:
    allowed = {s for s in QUERY_STRATEGIES if supports_global_sampling(s)}
    assert allowed == {"random", "entropy", "margin", "coreset", "badge", "alfa-mix"}
    check_sampling_model("coreset", "global")
    with pytest.raises(
        ValueError, match="'kafal.al-sampling-model' = 'global' is not possible with 'kafal.al-query' = 'kafal'"
    ):
        check_sampling_model("kafal", "global")
    with pytest.raises(ValueError, match="'kafal.al-sampling-model' must be one of client, global"):
        check_sampling_model("entropy", "server")
    with pytest.raises(ValueError, match="'kafal.al-query' must be one of kafal, random"):
        supports_global_sampling("bald")


def context() -> QueryContext:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(4)
    model, global_model = MLP2NN(1, 3), MLP2NN(1, 3)
    labelled_labels = torch.tensor([0, 0, 1, 2, 1])
    return QueryContext(
        model=model,
        unlabelled_inputs=torch.randn(30, 1, 32, 32, generator=gen),
        num_classes=3,
        labelled_inputs=torch.randn(5, 1, 32, 32, generator=gen),
        labelled_labels=labelled_labels,
        class_counts=torch.bincount(labelled_labels, minlength=3).float(),
        global_model=global_model,
        committee=[model, MLP2NN(1, 3), MLP2NN(1, 3)],
        loss_module=LossPredictionModule.for_model(model, (1, 32, 32)),
        batch_size=7,
    )


@pytest.mark.parametrize("strategy", QUERY_STRATEGIES)
def test_every_strategy_returns_budget_distinct_positions(strategy: str) -> None:
    positions = select_queries(strategy, 6, context(), torch.Generator().manual_seed(0))
    assert positions.dtype == torch.long and positions.device.type == "cpu"
    assert len(positions) == 6 and len(set(positions.tolist())) == 6 and 0 <= min(positions) and max(positions) < 30


def test_dispatcher_kafal_and_entropy_match_their_kernels() -> None:
    ctx = context()
    assert ctx.global_model is not None and ctx.class_counts is not None
    client = collect_outputs(ctx.model, ctx.unlabelled_inputs).logits
    global_ = collect_outputs(ctx.global_model, ctx.unlabelled_inputs).logits
    expected = torch.argsort(ksas_scores(client, global_, ctx.class_counts), descending=True, stable=True)[:5]
    assert select_queries("kafal", 5, ctx, torch.Generator()).tolist() == expected.tolist()
    assert select_queries("entropy", 5, ctx, torch.Generator()).tolist() == entropy_query(client, 5).tolist()


def test_dispatcher_names_what_a_strategy_is_missing() -> None:
    ctx = context()
    ctx.global_model = None
    with pytest.raises(ValueError, match="strategy 'kafal' needs global_model"):
        select_queries("kafal", 2, ctx, torch.Generator())
    ctx.committee = ()
    with pytest.raises(ValueError, match="strategy 'qbc' needs committee"):
        select_queries("qbc", 2, ctx, torch.Generator())
    with pytest.raises(ValueError, match=r"budget must be in \[0, 30\]"):
        select_queries("random", 31, ctx, torch.Generator())


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", QUERY_STRATEGIES)
def test_strategies_run_with_models_and_inputs_on_the_device(device: str, strategy: str) -> None:
    ctx = context()
    on_cpu = select_queries(strategy, 6, ctx, torch.Generator().manual_seed(0))
    for module in [ctx.model, ctx.global_model, ctx.loss_module, *ctx.committee]:
        assert module is not None
        module.to(device)
    ctx.unlabelled_inputs = ctx.unlabelled_inputs.to(device)
    positions = select_queries(strategy, 6, ctx, torch.Generator().manual_seed(0))
    assert positions.device.type == "cpu" and len(set(positions.tolist())) == 6
    if strategy in ("kafal", "entropy", "margin", "ll4al", "qbc", "random", "coreset"):
        assert positions.tolist() == on_cpu.tolist()
