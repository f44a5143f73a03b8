"""Dict and Tuple observations at the env end: Gymnasium envs, batched simulators and the
env contract (fastrl.envs.source, fastrl.envs.contract), and sb3-contrib's
``action_masks()`` moved into the observations (fastrl.envs.masks)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import scripted_envs  # noqa: F401  (registers PickLegal-v0)
from gymnasium import spaces
from scripted_envs import PickLegal

from fastrl.envs.batched import StepRows
from fastrl.envs.contract import check_env
from fastrl.envs.errors import EnvContractError
from fastrl.envs.source import EnvSource
from fastrl.memory.records import ObsRecord

SPACE = spaces.Dict({"pos": spaces.Box(-10, 10, (2,), np.float32),
                     "mask": spaces.MultiBinary(3)})


def test_gymnasium_envs_store_records_of_their_leaves():
    envs = EnvSource("PickLegal-v0").make([1, 2, 3])
    record = ObsRecord(envs.observation_space)
    first = envs.reset().copy()
    views = record.views(first)
    assert first.shape == (3, record.nbytes) and first.dtype == np.uint8
    # each env's own first observation, leaf by leaf
    for i, seed in enumerate([1, 2, 3]):
        obs, _ = PickLegal().reset(seed=seed)
        np.testing.assert_array_equal(views["observation"][i], obs["observation"])
        np.testing.assert_array_equal(views["action_mask"][i], obs["action_mask"])
        assert views["cue"][i] == obs["cue"]
    envs.close()


def test_an_action_masks_method_becomes_the_action_mask_key():
    env = EnvSource("PickLegalMethod-v0").make_one()
    assert set(env.observation_space.spaces) == {"observation", "action_mask"}
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs["action_mask"], env.unwrapped.mask)
    obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    np.testing.assert_array_equal(obs["action_mask"], env.unwrapped.mask)  # the new one
    # an env that already has the key is left as it is
    assert EnvSource("PickLegal-v0").make_one().observation_space == PickLegal().observation_space


def test_the_contract_steps_a_masked_env_with_legal_actions_only():
    check_env(EnvSource("PickLegal-v0"), seed=0, steps=200)  # it raises on an illegal one


class WrongLeaf(gym.Env):
    observation_space = SPACE
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return {"pos": np.zeros(2, np.float32), "mask": np.zeros(3, np.int8)}, {}

    def step(self, action):
        return {"pos": np.zeros(3, np.float32), "mask": np.zeros(3, np.int8)}, 0.0, False, \
            False, {}


def test_a_wrong_leaf_is_named_by_the_contract_and_by_workers():
    source = EnvSource("WrongLeaf", env_fn=WrongLeaf)
    with pytest.raises(EnvContractError, match=r"in step\(\) \(check step 1\): in the "
                                               r"observation, leaf 'pos' should be a float32 "
                                               r"array of shape \(2,\)"):
        check_env(source, seed=0)
    envs = source.make([0])
    envs.reset()
    rows = StepRows(np.zeros((1, ObsRecord(SPACE).nbytes), np.uint8), np.zeros(1, np.float32),
                    np.zeros(1, bool), np.zeros(1, bool),
                    np.zeros((1, ObsRecord(SPACE).nbytes), np.uint8))
    with pytest.raises(EnvContractError, match="leaf 'pos'"):
        envs.step_into(np.zeros(1, np.int64), rows)


class DictSim:
    """A batched simulator of Dict observations: ``pos`` counts steps, ``mask`` is the
    step's parity; with ``into`` it writes leaves with ``step_into``, else returns dicts."""

    def __init__(self, seeds, into: bool = True, wrong: bool = False):
        self.observation_space, self.action_space = SPACE, spaces.Discrete(2)
        self.num_envs, self.t, self.wrong = len(seeds), 0, wrong
        if not into:
            self.step = self._step

    def _obs(self):
        pos = np.full((self.num_envs, 2), self.t, np.float32)
        mask = np.full((self.num_envs, 3), self.t % 2, np.int8)
        return {"pos": pos[:, :1] if self.wrong else pos, "mask": mask}

    def reset(self):
        self.t = 0
        return self._obs()

    def step_into(self, actions, out):
        self.t += 1
        out.obs["pos"][:] = self.t
        out.obs["mask"][:] = self.t % 2
        out.reward[:], out.terminated[:], out.truncated[:] = 1.0, False, False

    def _step(self, actions):
        self.t += 1
        zeros = np.zeros(self.num_envs, bool)
        return self._obs(), np.ones(self.num_envs, np.float32), zeros, zeros, self._obs()

    def close(self):
        pass


@pytest.mark.parametrize("into", [True, False])
def test_a_batched_simulator_writes_or_returns_leaves(into):
    sim = EnvSource("DictSim", {"into": into}, vector_env_fn=DictSim).make([0, 1])
    record = ObsRecord(SPACE)
    assert record.views(sim.reset())["pos"].tolist() == [[0, 0], [0, 0]]
    rows = StepRows(np.zeros((2, record.nbytes), np.uint8), np.zeros(2, np.float32),
                    np.zeros(2, bool), np.zeros(2, bool), np.zeros((2, record.nbytes), np.uint8))
    for t in (1, 2, 3):
        sim.step_into(np.zeros(2, np.int64), rows)
        views = record.views(rows.obs)
        assert views["pos"].tolist() == [[t, t], [t, t]]
        assert views["mask"].tolist() == [[t % 2] * 3] * 2
    check_env(EnvSource("DictSim", {"into": into}, vector_env_fn=DictSim), seed=0)


def test_a_batched_simulator_s_wrong_leaf_is_named():
    source = EnvSource("DictSim", {"wrong": True}, vector_env_fn=DictSim)
    with pytest.raises(EnvContractError, match=r"reset\(\): in obs, leaf 'pos' should be a "
                                               r"float32 array of shape \(2, 2\)"):
        check_env(source, seed=0)


class MultiDiscreteMasks(gym.Env):
    """sb3-contrib's masks for MultiDiscrete actions, which fastrl leaves unused."""

    observation_space = spaces.Box(0, 1, (2,), np.float32)
    action_space = spaces.MultiDiscrete([2, 3])

    def action_masks(self):
        return np.ones(5, bool)


def test_masks_of_actions_fastrl_does_not_mask_leave_the_env_as_it_is():
    env = EnvSource("MultiDiscreteMasks", env_fn=MultiDiscreteMasks).make_one()
    assert isinstance(env, MultiDiscreteMasks)


class MaskedSim(DictSim):
    """A batched simulator with an action mask (every other action legal, by the step's
    parity) that raises on an illegal action."""

    def __init__(self, seeds):
        super().__init__(seeds)
        self.observation_space = spaces.Dict({"pos": SPACE["pos"],
                                              "action_mask": spaces.MultiBinary(4)})
        self.action_space = spaces.Discrete(4)

    def _obs(self):
        legal = (np.arange(4) % 2 == self.t % 2).astype(np.int8)
        return {"pos": np.full((self.num_envs, 2), self.t, np.float32),
                "action_mask": np.tile(legal, (self.num_envs, 1))}

    def _step(self, actions):
        if (np.asarray(actions) % 2 != self.t % 2).any():
            raise RuntimeError(f"illegal actions {actions} at step {self.t}")
        return super()._step(actions)

    step = _step


def test_the_contract_steps_a_masked_batched_simulator_with_legal_actions():
    check_env(EnvSource("MaskedSim", vector_env_fn=MaskedSim), seed=0, steps=100)
