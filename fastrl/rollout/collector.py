"""Fill one trajectory slot: action selection and env steps for ``rollout_len`` steps."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from fastrl.envs import BatchedEnv
from fastrl.envs.source import EnvContractError
from fastrl.models.actors import Actor


def check_rewards(rewards: np.ndarray, env_ids: np.ndarray) -> None:
    """Raise :class:`EnvContractError` naming the first NaN or infinite reward of a slot
    ``[T, E]``: one would poison every value estimate (and replay priority) it reaches."""
    bad = ~np.isfinite(rewards)
    if bad.any():
        t, e = (int(i[0]) for i in np.nonzero(bad))
        raise EnvContractError(
            f"env {int(env_ids[e])} returned the reward {rewards[t, e]} at step {t} of a slot "
            f"({int(bad.sum())} non-finite rewards in it); rewards must be finite numbers"
        )


class Collector:
    """Steps a :class:`BatchedEnv` with an actor and writes the trajectory schema into slots.

    ``first_env_id`` is the run-wide id of this group's first env and ``total_envs`` the
    number of envs in the run: together they make ``env_id``, ``episode_id`` and
    ``global_step`` unique across workers. ``heartbeat`` is called after every env step.
    ``act_ns`` / ``env_ns`` / ``fill_ns`` add up the time spent choosing actions, stepping
    envs, and filling slots in all (the rest of ``fill_ns`` is writing the slot).
    ``clip_rewards`` stores the sign of every reward; the episode returns stay the env's.
    """

    def __init__(
        self, envs: BatchedEnv, act: Actor, first_env_id: int, total_envs: int,
        heartbeat: Callable[[], None] = lambda: None, clip_rewards: bool = False,
    ) -> None:
        self.envs = envs
        self.clip_rewards = clip_rewards
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
        self._alive = np.zeros(n, np.bool_)

    def state(self) -> dict:
        """What continues this collector's episodes in another process: the envs themselves
        (pickled by the caller, when they can be) and the per-env episode bookkeeping."""
        return {"envs": self.envs, "obs": self.obs, "ep_return": self.ep_return,
                "ep_length": self.ep_length, "episodes": self.episodes}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state` (its envs replace, and close, the current ones)."""
        self.envs.close()
        self.envs = state["envs"]
        for key in ("obs", "ep_return", "ep_length", "episodes"):
            getattr(self, key)[:] = state[key]

    def fill(self, slot: dict[str, np.ndarray], slot_seq: int, policy_version: int) -> None:
        """Write ``len(slot['reward'])`` steps into ``slot`` (the slot numbered ``slot_seq``).

        ``global_step`` of step ``t`` is ``(slot_seq * T + t) * total_envs + env_id``: unique
        per transition, and the run's env-step count when workers advance in lockstep.
        ``episode_return`` / ``episode_length`` hold the running totals after each step, so
        where an episode ended they are its return and length.
        """
        clock = time.perf_counter_ns
        t_fill = clock()
        # Only what changes every step is written in the loop, by whole-row numpy stores;
        # the per-slot columns are filled after it. The loop's Python cost per step is what
        # fastrl adds to an env step.
        obs, act, envs, heartbeat = self.obs, self.act, self.envs, self.heartbeat
        s_obs, s_action, s_logp, s_value = (slot[k] for k in ("obs", "action", "log_prob",
                                                              "value"))
        s_reward, s_term, s_trunc, s_final = (slot[k] for k in ("reward", "terminated",
                                                                "truncated", "final_obs"))
        s_ret, s_len = slot["episode_return"], slot["episode_length"]
        ep_return, ep_length, alive = self.ep_return, self.ep_length, self._alive
        clip = self.clip_rewards
        act_ns = env_ns = 0
        rollout_len = s_reward.shape[0]
        for t in range(rollout_len):
            t0 = clock()
            action, log_prob, value = act(obs)
            t1 = clock()
            s_obs[t] = obs
            s_action[t] = action
            s_logp[t] = log_prob
            s_value[t] = value
            t2 = clock()
            next_obs, reward, terminated, truncated, final_obs = envs.step(action)
            t3 = clock()
            act_ns += t1 - t0
            env_ns += t3 - t2
            heartbeat()
            if clip:
                np.sign(reward, out=s_reward[t])
            else:
                s_reward[t] = reward
            s_term[t] = terminated
            s_trunc[t] = truncated
            ep_return += reward
            ep_length += 1
            s_ret[t] = ep_return
            s_len[t] = ep_length
            if truncated.any():
                # final_obs is read only where truncated; elsewhere the slot keeps stale bytes.
                s_final[t][truncated] = final_obs[truncated]
            np.logical_not(terminated | truncated, out=alive)
            ep_return *= alive
            ep_length *= alive
            obs[:] = next_obs
        slot["bootstrap_obs"][:] = obs
        check_rewards(s_reward, self.env_ids)  # once per slot: nothing per step
        self._fill_slot_columns(slot, slot_seq, policy_version)
        self.act_ns += act_ns
        self.env_ns += env_ns
        self.fill_ns += clock() - t_fill

    def _fill_slot_columns(self, slot: dict[str, np.ndarray], slot_seq: int,
                           policy_version: int) -> None:
        """env_id, episode_id, policy_version and global_step for the whole slot at once."""
        done = slot["terminated"] | slot["truncated"]
        # episodes started before step t: those before the slot plus the ends at steps < t
        before = self.episodes + np.cumsum(done, axis=0) - done
        slot["episode_id"][:] = before * self.total_envs + self.env_ids
        self.episodes += done.sum(axis=0)
        slot["env_id"][:] = self.env_ids
        slot["policy_version"][:] = policy_version
        steps = slot_seq * done.shape[0] + np.arange(done.shape[0])[:, None]
        slot["global_step"][:] = steps * self.total_envs + self.env_ids
