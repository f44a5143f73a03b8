"""Fill one trajectory slot: action selection and env steps for ``rollout_len`` steps."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from fastrl.envs import BatchedEnv
from fastrl.rollout.actors import Actor


class Collector:
    """Steps a :class:`BatchedEnv` with an actor and writes the trajectory schema into slots.

    ``first_env_id`` is the run-wide id of this group's first env and ``total_envs`` the
    number of envs in the run: together they make ``env_id``, ``episode_id`` and
    ``global_step`` unique across workers. ``heartbeat`` is called after every env step.
    ``act_ns`` / ``env_ns`` / ``fill_ns`` add up the time spent choosing actions, stepping
    envs, and filling slots in all (the rest of ``fill_ns`` is writing the slot).
    """

    def __init__(
        self, envs: BatchedEnv, act: Actor, first_env_id: int, total_envs: int,
        heartbeat: Callable[[], None] = lambda: None,
    ) -> None:
        self.envs = envs
        self.act = act
        self.heartbeat = heartbeat
        self.act_ns = self.env_ns = self.fill_ns = 0
        n = envs.num_envs
        self.total_envs = total_envs
        self.env_ids = np.arange(first_env_id, first_env_id + n, dtype=np.int32)
        self.obs = envs.reset().copy()
        self.ep_return = np.zeros(n, np.float64)
        self.ep_length = np.zeros(n, np.int32)
        self.episodes = np.zeros(n, np.int64)

    def fill(self, slot: dict[str, np.ndarray], slot_seq: int, policy_version: int) -> None:
        """Write ``len(slot['reward'])`` steps into ``slot`` (the slot numbered ``slot_seq``).

        ``global_step`` of step ``t`` is ``(slot_seq * T + t) * total_envs + env_id``: unique
        per transition, and the run's env-step count when workers advance in lockstep.
        """
        clock = time.perf_counter_ns
        t_fill = clock()
        rollout_len = slot["reward"].shape[0]
        for t in range(rollout_len):
            t0 = clock()
            action, log_prob, value = self.act(self.obs)
            t1 = clock()
            slot["obs"][t] = self.obs
            slot["action"][t] = action
            slot["log_prob"][t] = log_prob
            slot["value"][t] = value
            slot["env_id"][t] = self.env_ids
            slot["episode_id"][t] = self.episodes * self.total_envs + self.env_ids
            slot["policy_version"][t] = policy_version
            slot["global_step"][t] = (slot_seq * rollout_len + t) * self.total_envs + self.env_ids

            t2 = clock()
            obs, reward, terminated, truncated, final_obs = self.envs.step(action)
            self.env_ns += clock() - t2
            self.act_ns += t1 - t0
            self.heartbeat()
            slot["reward"][t] = reward
            slot["terminated"][t] = terminated
            slot["truncated"][t] = truncated
            self.ep_return += reward
            self.ep_length += 1
            done = terminated | truncated
            slot["episode_return"][t] = np.where(done, self.ep_return, 0.0)
            slot["episode_length"][t] = np.where(done, self.ep_length, 0)
            if done.any():
                # final_obs is read only where truncated; elsewhere the slot keeps stale bytes.
                slot["final_obs"][t][truncated] = final_obs[truncated]
                self.ep_return[done] = 0.0
                self.ep_length[done] = 0
                self.episodes[done] += 1
            self.obs[:] = obs
        slot["bootstrap_obs"][:] = self.obs
        self.fill_ns += clock() - t_fill
