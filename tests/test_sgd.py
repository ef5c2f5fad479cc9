"""The hand-written SGD computes what torch.optim.SGD computes, bit for bit."""

from __future__ import annotations

import pytest
import torch

from models.sgd import SGD


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.5, 1e-5), (0.9, 5e-4)])
def test_steps_equal_torch_optim_sgd(momentum: float, weight_decay: float) -> None:
    torch.manual_seed(0)
    ours = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    theirs = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    theirs.load_state_dict(ours.state_dict())
    mine = SGD(list(ours.parameters()), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    reference = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    for step in range(5):
        x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
        for model, optimizer in ((ours, mine), (theirs, reference)):
            if step == 3:
                optimizer.param_groups[0]["lr"] = 0.03  # a schedule changes the rate between steps
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b)


def test_parameters_without_gradient_are_left_alone() -> None:
    frozen, trained = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    optimizer = SGD([frozen, trained], lr=0.5, momentum=0.9)
    (trained * 2).sum().backward()
    optimizer.step()
    assert torch.equal(frozen, torch.ones(3)) and torch.equal(trained, torch.zeros(3))
