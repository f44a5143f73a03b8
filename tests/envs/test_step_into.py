"""Zero-copy stepping (fastrl.envs.batched): ``step_into`` writes what ``step`` returns,
``rollout_into`` what as many ``step`` calls return, and a user's simulator may implement
either step form."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scripted_envs  # noqa: F401 - registers Count-v0
from gymnasium import spaces

from fastrl.envs import BatchedCartPole, BatchedCatch
from fastrl.envs.batched import SlotRows, StepRows, own_rows
from fastrl.envs.heavy import spin_iters_for
from fastrl.envs.source import CheckedBatchedEnv, EnvContractError, EnvGroup, EnvSource

N, T = 6, 300  # CartPole episodes end (and reset) within the T steps


def twins(kind: str):
    """Two simulators of ``kind`` made with the same seeds, and their action count."""
    seeds = list(range(10, 10 + N))
    if kind == "cartpole":
        return BatchedCartPole(seeds), BatchedCartPole(seeds), 2
    if kind == "heavy cartpole":
        iters = spin_iters_for(2)
        return BatchedCartPole(seeds, spin_iters=iters), BatchedCartPole(seeds), 2
    if kind == "catch":
        return BatchedCatch(seeds), BatchedCatch(seeds), 3
    source = EnvSource("scripted_envs:Count-v0", {"terminate_at": 7, "max_episode_steps": 5})
    return EnvGroup(source, seeds), EnvGroup(source, seeds), 2


def assert_same_step(rows: StepRows, ref: tuple, t: int) -> None:
    obs, reward, terminated, truncated, final_obs = ref
    np.testing.assert_array_equal(rows.obs, obs, err_msg=f"obs at step {t}")
    np.testing.assert_array_equal(rows.reward, reward, err_msg=f"reward at step {t}")
    np.testing.assert_array_equal(rows.terminated, terminated)
    np.testing.assert_array_equal(rows.truncated, truncated)
    ended = terminated | truncated
    np.testing.assert_array_equal(rows.final_obs[ended], final_obs[ended])


@pytest.mark.parametrize("kind", ["cartpole", "heavy cartpole", "catch", "gymnasium group"])
def test_step_into_writes_what_step_returns(kind):
    sim, ref, n_actions = twins(kind)
    np.testing.assert_array_equal(sim.reset(), ref.reset())
    shape, dtype = sim.observation_space.shape, sim.observation_space.dtype
    rows = own_rows(N, shape, dtype)
    rng = np.random.default_rng(0)
    ended = 0
    for t in range(T):
        actions = rng.integers(n_actions, size=N)
        sim.step_into(actions, rows)
        result = ref.step(actions)
        assert_same_step(rows, result, t)
        ended += int((result[2] | result[3]).sum())
    assert ended > N, "no episode ended: the reset path went untested"


def test_a_rollout_is_as_many_steps_in_one_call():
    sim, ref, _ = twins("cartpole")
    first = sim.reset().copy()
    ref.reset()
    actions = np.random.default_rng(1).integers(2, size=(T, N))
    obs = np.zeros((T, N, 4), np.float32)
    obs[0] = first
    rows = SlotRows(obs, np.zeros((N, 4), np.float32), np.zeros((T, N), np.float32),
                    np.zeros((T, N), bool), np.zeros((T, N), bool), np.zeros((T, N, 4), np.float32))
    sim.rollout_into(actions, rows)
    for t in range(T):
        assert_same_step(rows.step(t), ref.step(actions[t]), t)
    assert rows.terminated.sum() > N
    with pytest.raises(ValueError, match=r"actions of shape \(300, 6\) in \{0, 1\}"):
        sim.rollout_into(actions + 1, rows)


class StepOnly:
    """A user's simulator with ``step`` alone: one env counting up, ending every 3 steps."""

    observation_space = spaces.Box(0, 100, (1,), np.float32)
    action_space = spaces.Discrete(2)
    num_envs = 1

    def __init__(self):
        self.t = 0

    def reset(self):
        self.t = 0
        return np.zeros((1, 1), np.float32)

    def step(self, actions):
        self.t += 1
        done = self.t % 3 == 0
        final = np.full((1, 1), self.t, np.float32)
        obs = np.zeros((1, 1), np.float32) if done else final.copy()
        return obs, np.ones(1, np.float32), np.array([done]), np.zeros(1, bool), final

    def close(self):
        pass


class StepIntoOnly(StepOnly):
    """The same simulator writing with ``step_into`` alone."""

    def step_into(self, actions, out):
        for field, value in zip(out, StepOnly.step(self, actions)):
            field[...] = value

    step = property()  # no step


def test_a_user_simulator_may_implement_either_step_form():
    for cls in (StepOnly, StepIntoOnly):
        a, b = CheckedBatchedEnv(cls(), "Counter", 1), CheckedBatchedEnv(cls(), "Counter", 1)
        a.reset(), b.reset()
        rows = own_rows(1, (1,), np.dtype(np.float32))
        rows.final_obs[...] = last_final = -1
        for t in range(1, 7):
            a.step_into(np.zeros(1, np.int64), rows)
            result = b.step(np.zeros(1, np.int64))
            assert_same_step(rows, result, t)
            assert rows.obs[0, 0] == (0 if t % 3 == 0 else t)
            last_final = t if t % 3 == 0 else last_final
            if cls is StepOnly:  # the copy takes final_obs where an episode ended only
                assert rows.final_obs[0, 0] == last_final


def test_a_step_into_simulator_is_checked_when_fastrl_steps_it():
    class NaNReward(StepIntoOnly):
        def step_into(self, actions, out):
            super().step_into(actions, out)
            out.reward[0] = np.nan

    sim = CheckedBatchedEnv(NaNReward(), "Counter", 1)
    sim.reset()
    with pytest.raises(EnvContractError, match=r"reward\[0\] should be a finite number"):
        sim.step(np.zeros(1, np.int64))


def test_a_simulator_without_either_step_form_is_refused():
    class NoStep:
        observation_space, action_space, num_envs = StepOnly.observation_space, \
            StepOnly.action_space, 1
        reset, close = StepOnly.reset, StepOnly.close

    with pytest.raises(EnvContractError, match="has no 'step \\(or step_into\\)'"):
        CheckedBatchedEnv(NoStep(), "Broken", 1)


def test_simulators_parked_by_an_older_fastrl_still_step():
    sim, ref, _ = twins("cartpole")
    sim.reset(), ref.reset()
    state = dict(sim.__dict__)
    # the older layout: one array per field, no spin_iters
    for old, arr in zip(("_obs", "_reward", "_term", "_trunc", "_final"), state.pop("_rows")):
        state[old] = arr
    del state["spin_iters"], state["_sink"]
    old = object.__new__(BatchedCartPole)
    old.__dict__.update(state)
    revived = pickle.loads(pickle.dumps(old))
    actions = np.ones(N, np.int64)
    assert_same_step(revived.step(actions), ref.step(actions), 0)
