"""The learner's side of the solved verdict (fastrl.learner.evaluations): the weights that
reached the target come back, and a population's members are solved one by one."""

from __future__ import annotations

import queue

import torch

from fastrl.config import load_config
from fastrl.core.timing import StageTimer
from fastrl.learner.evaluations import Evaluations
from fastrl.memory.control import RunControl
from fastrl.plan import plan_run


def _evaluations(*overrides: str) -> tuple[Evaluations, RunControl]:
    plan = plan_run(load_config(None, list(overrides)))
    control = RunControl(memoryview(bytearray(plan.control_bytes)))
    evals = Evaluations(plan, plan.policy(), torch.device("cpu"), control, queue.Queue(),
                        StageTimer(), elsewhere=True, should_stop=lambda: False)
    return evals, control


def _train(policy: torch.nn.Module) -> None:
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.5)


def _params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_each_member_takes_back_the_weights_that_solved_it_and_trains_no_more():
    evals, control = _evaluations("population.size=3")
    policy = evals.policy
    evals.run(1000)  # (sent to be evaluated elsewhere; training goes on)
    sent = [_params(m) for m in policy.members]
    _train(policy)
    trained = [_params(m) for m in policy.members]
    control.mark_solved(1000, member=1)
    assert not evals.solved()
    assert policy.frozen == {1} and evals.solved_at == {1: 1000}
    for k, member in enumerate(policy.members):
        expected = sent[k] if k == 1 else trained[k]
        assert all(torch.equal(a, b) for a, b in zip(_params(member), expected)), k
    control.mark_solved(1000, member=0)
    control.mark_solved(1000, member=2)
    assert evals.solved() and policy.frozen == {0, 1, 2}
    assert all(torch.equal(a, b) for a, b in zip(_params(policy.member(2)), sent[2]))


def test_a_single_run_takes_back_the_weights_that_solved_it():
    evals, control = _evaluations()
    evals.run(1000)
    sent = _params(evals.policy)
    _train(evals.policy)
    assert not evals.solved()
    control.mark_solved(1000)
    assert evals.solved()
    assert all(torch.equal(a, b) for a, b in zip(_params(evals.policy), sent))


def test_the_members_solved_survive_a_checkpoint():
    evals, control = _evaluations("population.size=2")
    control.mark_solved(3000, member=0)
    evals.solved()
    state = evals.state()
    again, again_control = _evaluations("population.size=2")
    again.restore(state, 4000)
    assert again.policy.frozen == {0} and again_control.member_solved_step(0) == 3000
    assert not again.solved()
