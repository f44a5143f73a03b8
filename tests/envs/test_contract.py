"""check_env (fastrl.envs.contract): the env contract checked before any process starts.
(A run whose env breaks it only later: tests/runtime/test_faults.py.)"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scripted_envs import BreaksContractEnv, CountSim

from fastrl.envs.contract import check_env
from fastrl.envs.errors import EnvContractError
from fastrl.envs.source import EnvSource

SEED = 7


def breaker(breaks: str, after: int = 0) -> EnvSource:
    """A Gymnasium-API source whose env breaks ``breaks`` once it has taken ``after`` steps."""
    return EnvSource("Breaker", {"breaks": breaks, "after": after}, env_fn=BreaksContractEnv)


def sim(breaks: str = "", after: int = 0) -> EnvSource:
    """A batched source whose simulator breaks ``breaks`` once it has taken ``after`` steps."""
    return EnvSource("CountSim", {"breaks": breaks, "after": after}, vector_env_fn=CountSim)


def contract_error(source: EnvSource) -> str:
    """The message of the EnvContractError that checking ``source`` raises."""
    with pytest.raises(EnvContractError) as info:
        check_env(source, SEED)
    return str(info.value)


@pytest.mark.parametrize("breaks, after, where, field, expected, got", [
    ("obs_dtype", 0, rf"reset\(seed={SEED}\)", "the observation",
     r"a float32 array of shape \(1,\)", r"float64 array of shape \(1,\)"),
    ("obs_shape", 0, rf"reset\(seed={SEED}\)", "the observation",
     r"a float32 array of shape \(1,\)", r"float32 array of shape \(2,\)"),
    ("obs_dtype", 9, r"step\(\) \(check step 9\)", "the observation",
     r"a float32 array of shape \(1,\)", r"float64 array of shape \(1,\)"),
    ("nan_reward", 3, r"step\(\) \(check step 3\)", "the reward", "a finite number",
     "float nan"),
    ("vector_reward", 0, r"step\(\) \(check step 1\)", "the reward", "a real scalar",
     r"float64 array of shape \(2,\)"),
    ("bool_reward", 0, r"step\(\) \(check step 1\)", "the reward", "a real scalar",
     "bool True"),
    ("int_terminated", 0, r"step\(\) \(check step 1\)", "terminated", "a bool", "int 0"),
    ("info", 0, rf"reset\(seed={SEED}\)", "info", "a dict", r"list \[\]"),
    ("info", 4, r"step\(\) \(check step 4\)", "info", "a dict", r"list \[\]"),
])
def test_gymnasium_env_violation_names_env_call_field_expected_and_got(
        breaks, after, where, field, expected, got):
    message = contract_error(breaker(breaks, after))
    assert re.search(rf"env 'Breaker' broke the env contract in {where}: {field} should be "
                     rf"{expected}.*, got {got}", message), message


def test_reset_that_ignores_its_seed_is_named():
    message = contract_error(breaker("unseeded_reset"))
    assert f"env 'Breaker' broke the env contract in reset(seed={SEED}): the first " \
        "observation should be the same for the same seed" in message, message


def test_an_env_is_reset_whenever_its_episode_ends():
    resets: list[int | None] = []

    class Recording(BreaksContractEnv):
        def reset(self, *, seed=None, options=None):
            resets.append(seed)
            return super().reset(seed=seed, options=options)

    # Episodes of 5 steps: the seeded reset, the fresh env's, then after steps 5 and 10.
    check_env(EnvSource("Count", {"breaks": "info", "after": 99, "terminate_at": 5},
                        env_fn=Recording), SEED, steps=12)
    assert resets == [SEED, SEED, None, None]


@pytest.mark.parametrize("breaks, where, field, expected, got", [
    ("obs_dtype", r"reset\(\)", "obs", r"a float32 array of shape \(2, 1\)",
     r"float64 array of shape \(2, 1\)"),
    ("obs_shape", r"reset\(\)", "obs", r"a float32 array of shape \(2, 1\)",
     r"float32 array of shape \(2,\)"),
    ("reward_shape", r"step\(\)", "reward", r"a real-valued array of shape \(2,\)",
     r"float32 array of shape \(2, 1\)"),
    ("int_flags", r"step\(\)", "terminated", r"a bool array of shape \(2,\)",
     r"int64 array of shape \(2,\)"),
    ("nan_reward", r"step\(\)", r"reward\[0\]", "a finite number", "float nan"),
])
def test_batched_simulator_violation_names_env_call_field_expected_and_got(
        breaks, where, field, expected, got):
    message = contract_error(sim(breaks))
    assert re.search(rf"env 'CountSim' broke the env contract in {where}: {field} should be "
                     rf"{expected}, got {got}", message), message


def test_batched_simulator_that_ignores_its_seeds_is_named():
    message = contract_error(sim("unseeded_reset"))
    assert "env 'CountSim' broke the env contract in reset() of seeds [7, 8]: the first " \
        "observation should be the same for the same seed" in message, message


def test_violation_past_the_checked_steps_is_not_seen():
    check_env(breaker("nan_reward", after=65), SEED, steps=64)
    check_env(sim("nan_reward", after=65), SEED, steps=64)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "fastrl/CartPole-v1"])
def test_good_envs_pass(env_id):
    check_env(EnvSource(env_id, {}), SEED)


class ClosingSim(CountSim):
    """A CountSim that records being closed."""

    closed = False

    def close(self) -> None:
        self.closed = True


class ClosingEnv(BreaksContractEnv):
    """A BreaksContractEnv that records being closed."""

    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("breaks", ["", "nan_reward"])
def test_every_env_made_is_closed_whether_the_check_passes_or_fails(breaks):
    made: list[ClosingSim] = []

    def make(seeds, **kwargs):
        made.append(ClosingSim(seeds, **kwargs))
        return made[-1]

    source = EnvSource("CountSim", {"breaks": breaks}, vector_env_fn=make)
    if breaks:
        contract_error(source)
    else:
        check_env(source, SEED)
    assert len(made) == 2 and all(s.closed for s in made)


def test_every_gymnasium_env_made_is_closed():
    made: list[ClosingEnv] = []

    def make(**kwargs):
        made.append(ClosingEnv(**kwargs))
        return made[-1]

    contract_error(EnvSource("Breaker", {"breaks": "nan_reward", "after": 3}, env_fn=make))
    assert len(made) == 2 and all(e.closed for e in made)


def test_sampled_actions_reach_a_batched_simulator_as_workers_send_them():
    seen: list[np.ndarray] = []

    class Recording(CountSim):
        def step(self, actions):
            seen.append(actions)
            return super().step(actions)

    check_env(EnvSource("CountSim", {}, vector_env_fn=Recording), SEED, steps=8)
    assert len(seen) == 8
    assert all(a.shape == (2,) and a.dtype == np.int64 for a in seen)
    assert set(np.concatenate(seen).tolist()) == {0, 1}


class DeclaresLimit(CountSim):
    """A CountSim that declares the time limit it truncates at (set per test)."""

    max_episode_steps: object = None


@pytest.mark.parametrize("limit, got", [(0, "int 0"), (2.5, "float 2.5"), ("500", "str")])
def test_a_simulator_s_time_limit_is_a_positive_int_or_none(limit, got, monkeypatch):
    source = EnvSource("Limited", {}, vector_env_fn=DeclaresLimit)
    monkeypatch.setattr(DeclaresLimit, "max_episode_steps", limit)
    with pytest.raises(EnvContractError, match=r"env 'Limited' broke the env contract in the "
                       rf"factory: max_episode_steps should be a positive int or None, got {got}"):
        source.make([0, 1])
    monkeypatch.setattr(DeclaresLimit, "max_episode_steps", np.int64(7))
    assert source.make([0, 1]).max_episode_steps == 7
    monkeypatch.setattr(DeclaresLimit, "max_episode_steps", None)
    assert source.make([0, 1]).max_episode_steps is None
