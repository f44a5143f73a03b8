"""Small deterministic envs for tests; importable by spawned workers as 'scripted_envs:...'.

The tests put this folder on PYTHONPATH so that ``gymnasium.make("scripted_envs:Count-v0")``
imports this module (registering the ids) in every process.
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class CountEnv(gym.Env):
    """Observation ``[100 * episode + t]``; reward 1 every real step; terminates after
    ``terminate_at`` steps (never when 0). Truncation comes from ``max_episode_steps``.
    With ``pid_log`` every env appends the pid of the process that made it to that file."""

    metadata: dict = {"render_modes": []}

    def __init__(self, terminate_at: int = 0, fail_at_step: int = 0, hang_at_step: int = 0,
                 hang_marker: str = "", hang_once: bool = False, pid_log: str = ""):
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.terminate_at = terminate_at
        self.fail_at_step = fail_at_step
        self.hang_at_step = hang_at_step
        self.hang_marker = hang_marker
        self.hang_once = hang_once  # hang only while hang_marker does not exist yet
        self.episode = -1
        self.t = 0
        self.total = 0
        if pid_log:
            with open(pid_log, "a") as f:
                f.write(f"{os.getpid()}\n")

    def _obs(self):
        return np.array([100 * self.episode + self.t], np.float32)

    def _claim_hang(self) -> bool:
        """Create the marker (tells the test we are stuck now). With ``hang_once`` only the
        env that creates it hangs: an exclusive create, since envs in other workers reach
        the same step at the same moment."""
        if not self.hang_marker:
            return True
        if not self.hang_once:
            open(self.hang_marker, "a").close()
            return True
        try:
            os.close(os.open(self.hang_marker, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.total += 1
        if self.fail_at_step and self.total >= self.fail_at_step:
            raise RuntimeError(f"scripted failure at step {self.total}")
        if self.hang_at_step and self.total >= self.hang_at_step and self._claim_hang():
            try:
                time.sleep(3600)  # a simulator that stopped answering
            finally:  # only an exception gets here (SIGTERM via the worker), never SIGKILL
                if self.hang_marker:
                    open(self.hang_marker + ".interrupted", "a").close()
        terminated = bool(self.terminate_at and self.t >= self.terminate_at)
        return self._obs(), 1.0, terminated, False, {}


class WrongShapeEnv(CountEnv):
    """Declares a (1,) observation but returns (3,)."""

    def _obs(self):
        return np.zeros(3, np.float32)


class BreaksContractEnv(CountEnv):
    """A CountEnv that breaks one rule of the env contract once it has taken ``after`` steps
    (counted over all its episodes; 0: from the first reset on). ``breaks`` is one of
    :attr:`BREAKS`; reset-only rules (``unseeded_reset``) break at every reset."""

    BREAKS = ("obs_dtype", "obs_shape", "nan_reward", "vector_reward", "bool_reward",
              "int_terminated", "info", "unseeded_reset")

    def __init__(self, breaks: str, after: int = 0, **kwargs):
        if breaks not in self.BREAKS:
            raise ValueError(f"breaks={breaks!r}: expected one of {self.BREAKS}")
        super().__init__(**kwargs)
        self.breaks, self.after = breaks, after

    def _broken(self, rule: str) -> bool:
        return self.breaks == rule and self.total >= self.after

    def _obs(self):
        obs = super()._obs()
        if self._broken("obs_dtype"):
            return obs.astype(np.float64)
        if self._broken("obs_shape"):
            return np.zeros(2, np.float32)
        if self.breaks == "unseeded_reset" and self.t == 0:  # OS entropy, whatever the seed
            return obs + np.random.default_rng().random(1, np.float32)
        return obs

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, [] if self._broken("info") else info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._broken("nan_reward"):
            reward = float("nan")
        elif self._broken("vector_reward"):
            reward = np.array([reward, reward])
        elif self._broken("bool_reward"):
            reward = True
        elif self._broken("int_terminated"):
            terminated = int(terminated)
        elif self._broken("info"):
            info = []
        return obs, reward, terminated, truncated, info


class CountSim:
    """A batched simulator (fastrl.envs.BatchedEnv) of ``len(seeds)`` CountEnvs, each
    terminating after ``terminate_at`` steps, that breaks one rule of the contract (see
    :attr:`BREAKS`) once it has taken ``after`` steps (0: from the first reset on)."""

    BREAKS = ("", "obs_dtype", "obs_shape", "reward_shape", "int_flags", "nan_reward",
              "unseeded_reset")

    def __init__(self, seeds: list[int], breaks: str = "", after: int = 0,
                 terminate_at: int = 5):
        if breaks not in self.BREAKS:
            raise ValueError(f"breaks={breaks!r}: expected one of {self.BREAKS}")
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.num_envs = len(seeds)
        self.breaks, self.after, self.terminate_at = breaks, after, terminate_at
        self.t = np.zeros(self.num_envs, np.int64)
        self.total = 0

    def _broken(self, rule: str) -> bool:
        return self.breaks == rule and self.total >= self.after

    def _obs(self) -> np.ndarray:
        obs = self.t[:, None].astype(np.float32)
        if self._broken("obs_dtype"):
            return obs.astype(np.float64)
        if self._broken("obs_shape"):
            return obs[:, 0]
        return obs

    def reset(self) -> np.ndarray:
        self.t[:] = 0
        obs = self._obs()
        if self.breaks == "unseeded_reset":
            obs += np.random.default_rng().random(obs.shape, np.float32)
        return obs

    def step(self, actions):
        self.t += 1
        self.total += 1
        final = self._obs()
        terminated = self.t >= self.terminate_at
        self.t[terminated] = 0
        reward = np.ones(self.num_envs, np.float32)
        if self._broken("reward_shape"):
            reward = reward[:, None]
        if self._broken("nan_reward"):
            reward[0] = np.nan
        if self._broken("int_flags"):
            terminated = terminated.astype(np.int64)
        return self._obs(), reward, terminated, np.zeros(self.num_envs, np.bool_), final

    def close(self) -> None:
        """Nothing to free."""


class PickLegal(gym.Env):
    """Dict observations with an action mask: ``observation`` one-hot marks the rewarded
    action among ``n``, ``action_mask`` a random set of legal ones that includes it, and
    ``cue`` a Discrete copy of it beside an ``aux`` Tuple leaf. An illegal action raises
    (a worker then exits with the env named). ``mask_method`` hands the mask over by
    sb3-contrib's ``action_masks()`` instead, with Box observations."""

    metadata: dict = {"render_modes": []}

    def __init__(self, n: int = 6, episode: int = 10, mask_method: bool = False):
        self.n, self.episode, self.mask_method = n, episode, mask_method
        box = gym.spaces.Box(0, 1, (n,), np.float32)
        self.observation_space = box if mask_method else gym.spaces.Dict({
            "observation": box, "action_mask": gym.spaces.Box(0, 1, (n,), np.int8),
            "cue": gym.spaces.Discrete(n),
            "aux": gym.spaces.Tuple((gym.spaces.MultiBinary(3),
                                     gym.spaces.Box(-1, 1, (2,), np.float64)))})
        self.action_space = gym.spaces.Discrete(n)

    def _obs(self):
        self.mask = (self.np_random.random(self.n) < 0.4).astype(np.int8)
        self.target = int(self.np_random.integers(self.n))
        self.mask[self.target] = 1
        onehot = np.zeros(self.n, np.float32)
        onehot[self.target] = 1
        if self.mask_method:
            return onehot
        return {"observation": onehot, "action_mask": self.mask, "cue": self.target,
                "aux": (np.zeros(3, np.int8), np.zeros(2))}

    def action_masks(self) -> np.ndarray:
        return self.mask.astype(bool)  # (with the key too, the key is what counts)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        if not self.mask[action]:
            raise RuntimeError(f"illegal action {action} under the mask {self.mask}")
        reward = float(action == self.target)
        self.t += 1
        return self._obs(), reward, False, self.t >= self.episode, {}


class DictPendulum(gym.ObservationWrapper):
    """Pendulum-v1 with its observation split into a Dict of a Box and a Tuple leaf."""

    def __init__(self):
        super().__init__(gym.make("Pendulum-v1"))
        self.observation_space = gym.spaces.Dict({
            "cos_sin": gym.spaces.Box(-1, 1, (2,), np.float32),
            "velocity": gym.spaces.Tuple((gym.spaces.Box(-8, 8, (1,), np.float32),))})

    def observation(self, observation):
        return {"cos_sin": observation[:2], "velocity": (observation[2:],)}


class BoxMasked(DictPendulum):
    """DictPendulum with an ``action_mask`` key, which Box actions cannot use."""

    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Dict({**self.observation_space.spaces,
                                                  "action_mask": gym.spaces.MultiBinary(2)})

    def observation(self, observation):
        return {**super().observation(observation), "action_mask": np.ones(2, np.int8)}


gym.register("Count-v0", entry_point=CountEnv)
gym.register("Faulty-v0", entry_point=CountEnv, kwargs={"fail_at_step": 300})
gym.register("Hang-v0", entry_point=CountEnv, kwargs={"hang_at_step": 300})
gym.register("WrongShape-v0", entry_point=WrongShapeEnv)
gym.register("LateNaNReward-v0", entry_point=BreaksContractEnv,
             kwargs={"breaks": "nan_reward", "after": 100})
gym.register("PickLegal-v0", entry_point=PickLegal)
gym.register("DictPendulum-v0", entry_point=DictPendulum)
gym.register("BoxMasked-v0", entry_point=BoxMasked)
gym.register("PickLegalMethod-v0", entry_point=PickLegal, kwargs={"mask_method": True})
gym.register("LateWrongShape-v0", entry_point=BreaksContractEnv,
             kwargs={"breaks": "obs_shape", "after": 100})


class Jitter(gym.Wrapper):
    """A Gymnasium env whose steps take a random extra 0-0.4 ms (from an unseeded RNG): the
    same data, arriving at other moments in every run."""

    def step(self, action):
        time.sleep(int.from_bytes(os.urandom(2), "little") / 65536 * 4e-4)
        return self.env.step(action)


gym.register("JitterCartPole-v0", entry_point=lambda: Jitter(gym.make("CartPole-v1")))
gym.register("JitterPendulum-v0", entry_point=lambda: Jitter(gym.make("Pendulum-v1")))


class Relay(ParallelEnv):
    """A PettingZoo Parallel env whose agents come and go: ``runner_0`` and ``runner_1``
    from the reset on, ``chaser_0`` joins after the first step, ``runner_1`` terminates
    after ``runner_steps`` steps, and all that are left truncate after ``length``.
    Observation ``[agent index, t, episodes so far]``; reward ``action * (1 + agent
    index)``, so an episode's return tells what its agent did. ``breaks`` names one way to
    break the multi-agent contract."""

    metadata = {"name": "relay_v0"}
    possible_agents = ["runner_0", "runner_1", "chaser_0"]

    def __init__(self, length: int = 5, runner_steps: int = 2, breaks: str = "") -> None:
        self.length, self.runner_steps, self.breaks = length, runner_steps, breaks
        self.episodes, self.t, self.agents = -1, 0, []

    def observation_space(self, agent):
        # "chaser_sees_more": the chaser's group sees a wider observation (allowed);
        # "group_spaces": runner_1 sees another space than runner_0 (its group's)
        wide = self.breaks == "chaser_sees_more" and agent == "chaser_0" or \
            self.breaks == "group_spaces" and agent == "runner_1"
        return gym.spaces.Box(-np.inf, np.inf, (4 if wide else 3,), np.float32)

    def action_space(self, agent):
        # "chaser_acts_more": the chaser's group has a third action (allowed, masked for
        # the runners); "box_actions": it acts in a Box (refused)
        if agent == "chaser_0" and self.breaks == "box_actions":
            return gym.spaces.Box(-1, 1, (2,), np.float32)
        return gym.spaces.Discrete(3 if self.breaks == "chaser_acts_more" and
                                   agent == "chaser_0" else 2)

    def _obs(self, agent: str) -> np.ndarray:
        index = self.possible_agents.index(agent)
        seen = [index, self.t, self.episodes]
        if self.breaks == "chaser_sees_more" and agent == "chaser_0":
            seen.append(-1.0)
        return np.array(seen, np.float32)

    def reset(self, seed=None, options=None):
        self.episodes, self.t = self.episodes + 1, 0
        self.agents = ["runner_0", "runner_1"]
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self.breaks == "chaser_acts_more":
            assert all(actions[a] < 2 for a in self.agents if a != "chaser_0"), actions
        rewards = {a: float(actions[a] == 1) * (1 + self.possible_agents.index(a))
                   for a in self.agents}
        if self.breaks == "reward_array":
            rewards = {a: np.array([r]) for a, r in rewards.items()}
        terms = {a: a == "runner_1" and self.t >= self.runner_steps for a in self.agents}
        truncs = {a: self.t >= self.length for a in self.agents}
        observations = {a: self._obs(a) for a in self.agents}
        left = [a for a in self.agents if not (terms[a] or truncs[a])]
        if self.breaks == "leave_silently" and self.t == 1:
            left.remove("runner_1")
        if self.t == 1 and self.t < self.length:
            left.append("chaser_0")
            observations["chaser_0"] = self._obs("chaser_0")
        self.agents = left
        return observations, rewards, terms, truncs, {a: {} for a in observations}


class SmallGrid(gym.Env):
    """A Dict observation with a uint8 grid leaf of shape (1, 3, 7), as MiniGrid-like envs
    give it, beside a Box leaf; a lit cell moves along the grid's middle row, and the
    action that names its column's third (0, 1, 2) earns 1. Episodes of 20 steps."""

    metadata: dict = {"render_modes": []}

    def __init__(self):
        self.observation_space = gym.spaces.Dict({
            "grid": gym.spaces.Box(0, 255, (1, 3, 7), np.uint8),
            "time": gym.spaces.Box(0, 1, (1,), np.float32)})
        self.action_space = gym.spaces.Discrete(3)
        self.t, self.col = 0, 0

    def _obs(self):
        grid = np.zeros((1, 3, 7), np.uint8)
        grid[0, 1, self.col] = 255
        return {"grid": grid, "time": np.array([self.t / 20], np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.col = 0, int(self.np_random.integers(7))
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == min(self.col * 3 // 7, 2))
        self.t += 1
        self.col = int(self.np_random.integers(7))
        return self._obs(), reward, False, self.t >= 20, {}
