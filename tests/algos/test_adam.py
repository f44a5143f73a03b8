"""fastrl's Adam (fastrl.algos.adam): the same steps as torch.optim.Adam(fused=True), and
state dicts that either optimizer loads."""

from __future__ import annotations

import copy

import pytest
import torch

from fastrl.algos.adam import Adam


def net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def train(model: torch.nn.Module, opt, steps: range, skip_last_layer_at: int = -1) -> None:
    """Steps of a fixed regression loss; at step ``skip_last_layer_at`` only the first
    layer gets gradients; the learning rate is annealed through ``param_groups``."""
    g = torch.Generator().manual_seed(1)
    for i in steps:
        x = torch.randn(16, 3, generator=g)
        opt.param_groups[0]["lr"] = 1e-2 / (1 + i)
        opt.zero_grad()
        out = model[1](model[0](x)) if i == skip_last_layer_at else model(x)
        out.square().mean().backward()
        opt.step()


def test_steps_match_torch_fused_adam_bit_for_bit():
    ours, theirs = net(), net()
    train(ours, Adam(ours.parameters(), lr=1e-2, eps=1e-5), range(6), skip_last_layer_at=2)
    train(theirs, torch.optim.Adam(theirs.parameters(), lr=1e-2, eps=1e-5, fused=True),
          range(6), skip_last_layer_at=2)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("save_with", ["ours", "torch"])
def test_a_state_dict_continues_training_in_the_other_optimizer(save_with):
    ours = net()
    make = {"ours": lambda m: Adam(m.parameters(), lr=1e-2),
            "torch": lambda m: torch.optim.Adam(m.parameters(), lr=1e-2, fused=True)}
    first = make[save_with](ours)
    train(ours, first, range(3))
    theirs = copy.deepcopy(ours)
    load_with = "torch" if save_with == "ours" else "ours"
    second = make[load_with](theirs)
    second.load_state_dict(first.state_dict())
    assert second.param_groups[0]["lr"] == first.param_groups[0]["lr"]
    train(ours, first, range(3, 6))
    train(theirs, second, range(3, 6))
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)


def test_a_state_for_other_parameters_is_refused():
    opt = Adam(net().parameters(), lr=1e-3)
    other = Adam([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    with pytest.raises(ValueError, match="state is for 1 parameters"):
        opt.load_state_dict(other.state_dict())
