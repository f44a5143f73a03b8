"""Fill one trajectory slot: action selection and env steps for ``rollout_len`` steps.

Everything is written in place into the slot's shared memory: the actor reads step ``t``'s
observations from the slot's row ``t``, the simulator writes the next ones into row ``t + 1``
(fastrl.envs.batched.StepRows), and one numba pass over the slot adds what follows from
them (episode returns and lengths, ids, steps) once the steps are done. Final observations
are the exception: the simulator writes them into rows of the collector's own, and only
those of truncated episodes, the ones the learner reads, are kept in the slot's sparse
``final_obs`` (fastrl.memory.layout)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from numba import njit

from fastrl.envs import BatchedEnv
from fastrl.envs.batched import SlotRows, StepRows, live_rows_of, step_into_of, weighs_rows
from fastrl.envs.source import EnvContractError
from fastrl.memory.layout import pack_final_obs
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


@njit(cache=True, nogil=True)
def finish_slot(reward, terminated, truncated, weight, ep_return, ep_length, episodes, env_ids,
                total_envs, first_step, clip, out_return, out_length, episode_id, env_id,
                global_step) -> int:
    """Fill the per-transition bookkeeping of a slot whose steps are written, in one pass:
    running episode returns and lengths (the episode's own where it ended; carried in
    ``ep_return`` / ``ep_length`` / ``episodes`` from slot to slot), episode and env ids and
    global steps; with ``clip``, rewards become their signs (the returns stay the env's).
    Steps of weight 0 (a multi-agent env's padding) leave the episode as it was; ``weight``
    None weighs every step 1.
    Returns the number of non-finite rewards, which are left as they came."""
    bad = 0
    for t in range(reward.shape[0]):
        step = (first_step + t) * total_envs
        for e in range(reward.shape[1]):
            env_id[t, e] = env_ids[e]
            global_step[t, e] = step + env_ids[e]
            episode_id[t, e] = episodes[e] * total_envs + env_ids[e]
            # (None: every row live; numba compiles that case without the loads)
            if weight is None:
                live = True
            else:
                live = weight[t, e]
            if live:
                r = reward[t, e]
                if not np.isfinite(r):
                    bad += 1
                elif clip:
                    reward[t, e] = np.sign(r)
                ep_return[e] += r
                ep_length[e] += 1
            out_return[t, e] = ep_return[e]
            out_length[t, e] = ep_length[e]
            if live and (terminated[t, e] or truncated[t, e]):
                ep_return[e] = 0.0
                ep_length[e] = 0
                episodes[e] += 1
    return bad


def warm_up() -> None:
    """Load :func:`finish_slot` for the slot's dtypes (from numba's cache, or compile it):
    the fork server calls this, so that no worker pays it on its first slot."""
    t, b = np.zeros((1, 1), np.float32), np.zeros((1, 1), np.bool_)
    i32, i64 = np.zeros((1, 1), np.int32), np.zeros((1, 1), np.int64)
    for weight in (~b, None):
        finish_slot(t, b, b, weight, np.zeros(1), np.zeros(1, np.int32),
                    np.zeros(1, np.int64), np.zeros(1, np.int32), 1, 0, False, t.copy(), i32,
                    i64, i32.copy(), i64.copy())


def slot_rows(slot: dict[str, np.ndarray], final_obs: np.ndarray) -> SlotRows:
    """The rows of ``slot`` a simulator writes (see fastrl.envs.batched.SlotRows), with
    ``final_obs`` ``[T, E, *obs]`` rows outside the slot for its final observations."""
    return SlotRows(slot["obs"], slot["bootstrap_obs"], slot["reward"], slot["terminated"],
                    slot["truncated"], final_obs)


def too_many_truncations(env_id: int, slot: dict[str, np.ndarray], limit: int | None
                         ) -> EnvContractError:
    """The error for an env that truncated more episodes in one slot than its declared
    ``max_episode_steps`` (``limit``) allows, leaving no room for their final observations."""
    steps, rows = len(slot["truncated"]), slot["final_obs"].shape[1]
    declared = f" ({limit})" if limit is not None else ""
    return EnvContractError(
        f"env {env_id} truncated more than {rows} episode(s) within one slot of {steps} "
        f"steps, more than its declared max_episode_steps{declared} allows: the ring keeps "
        f"room for {rows} final observation(s) per env and slot. An env that truncates "
        "episodes before its time limit must not declare one (max_episode_steps=None)")


class Collector:
    """Steps a :class:`BatchedEnv` with an actor and writes the trajectory schema into slots.

    ``first_env_id`` is the run-wide id of this group's first env and ``total_envs`` the
    number of envs in the run: together they make ``env_id``, ``episode_id`` and
    ``global_step`` unique across workers. ``heartbeat`` is called after every env step
    (after every slot where a whole slot is one call). ``act_ns`` / ``env_ns`` / ``fill_ns``
    add up the time spent choosing actions, stepping envs, and filling slots in all (the
    rest of ``fill_ns`` is writing the slot). ``clip_rewards`` stores the sign of every
    reward; the episode returns stay the env's.

    What a feature adds per row or per slot reaches the collector through the actor's hooks
    (fastrl.models.actors.Actor: ``begin_slot``, ``end_step``, ``state`` / ``restore``)
    and, where the envs weigh their rows (fastrl.envs.batched.weighs_rows, as the slot
    layout does), the slot's ``weight``: each step's weight per row, 1 where the env says
    its row is live (fastrl.envs.batched.live_rows_of; all rows where it says nothing),
    lowered by the actor's ``end_step`` where it wants.
    """

    def __init__(
        self, envs: BatchedEnv, act: Actor, first_env_id: int, total_envs: int,
        heartbeat: Callable[[], None] = lambda: None, clip_rewards: bool = False,
    ) -> None:
        self.envs = envs
        self.clip_rewards = clip_rewards
        self.act = act
        self.heartbeat = heartbeat
        self.weighted = weighs_rows(envs)
        self.act_ns = self.env_ns = self.fill_ns = 0
        n = envs.num_envs
        self.total_envs = total_envs
        self.env_ids = np.arange(first_env_id, first_env_id + n, dtype=np.int32)
        self.obs = envs.reset().copy()
        # the simulator's final observations: one step's for step-by-step, a slot's for a
        # whole-slot rollout (made on first use); the slot keeps the truncated ones
        self._final_step = np.zeros_like(self.obs)
        self._final_slot: np.ndarray | None = None
        self.ep_return = np.zeros(n, np.float64)
        self.ep_length = np.zeros(n, np.int32)
        self.episodes = np.zeros(n, np.int64)
        self._live = live_rows_of(envs)  # (None: every row is live)

    def state(self) -> dict:
        """What continues this collector's episodes in another process: the envs themselves
        (pickled by the caller, when they can be), the per-env episode bookkeeping and the
        actor's state."""
        return {"envs": self.envs, "obs": self.obs, "ep_return": self.ep_return,
                "ep_length": self.ep_length, "episodes": self.episodes, **self.act.state()}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state` (its envs replace, and close, the current ones)."""
        self.envs.close()
        self.envs = state["envs"]
        self._live = live_rows_of(self.envs)
        for key in ("obs", "ep_return", "ep_length", "episodes"):
            getattr(self, key)[:] = state[key]
        self.act.restore(state)

    def fill(self, slot: dict[str, np.ndarray], slot_seq: int, policy_version: int) -> None:
        """Write ``len(slot['reward'])`` steps into ``slot`` (the slot numbered ``slot_seq``).

        ``global_step`` of step ``t`` is ``(slot_seq * T + t) * total_envs + env_id``: unique
        per transition, and the run's env-step count when workers advance in lockstep.
        ``episode_return`` / ``episode_length`` hold the running totals after each step, so
        where an episode ended they are its return and length.
        """
        clock = time.perf_counter_ns
        t_fill = clock()
        slot["obs"][0] = self.obs
        self.act.begin_slot(slot, slot_seq, policy_version)
        actions_into = getattr(self.act, "actions_into", None)
        rollout_into = getattr(self.envs, "rollout_into", None)
        if actions_into is not None and rollout_into is not None and not self.weighted:
            act_ns, env_ns = self._rollout(slot, actions_into, rollout_into)
        else:
            act_ns, env_ns = self._step_by_step(slot)
        self.obs[:] = slot["bootstrap_obs"]
        rollout_len = len(slot["reward"])
        bad = finish_slot(slot["reward"], slot["terminated"], slot["truncated"],
                          slot["weight"] if self.weighted else None, self.ep_return,
                          self.ep_length, self.episodes, self.env_ids, self.total_envs,
                          slot_seq * rollout_len, self.clip_rewards, slot["episode_return"],
                          slot["episode_length"], slot["episode_id"], slot["env_id"],
                          slot["global_step"])
        if bad:
            check_rewards(slot["reward"], self.env_ids)
        slot["policy_version"][...] = policy_version
        self.act_ns += act_ns
        self.env_ns += env_ns
        self.fill_ns += clock() - t_fill

    def _step_by_step(self, slot: dict[str, np.ndarray]) -> tuple[int, int]:
        """One actor call and one env step per time step; returns their nanoseconds."""
        clock = time.perf_counter_ns
        act, heartbeat, step_into = self.act, self.heartbeat, step_into_of(self.envs)
        s_obs, s_action, s_logp, s_value, s_reward, s_term, s_trunc, s_boot = (
            slot[k] for k in ("obs", "action", "log_prob", "value", "reward", "terminated",
                              "truncated", "bootstrap_obs"))
        steps = len(s_reward)
        kept = np.zeros(len(self.env_ids), np.int64)  # final observations kept, per env
        act_ns = env_ns = 0
        s_weight = slot["weight"] if self.weighted else None
        live = self._live
        if s_weight is not None and live is None:
            s_weight[...] = True  # (every row live: only the actor lowers a weight)
        for t in range(steps):
            weight = None if s_weight is None else s_weight[t]
            if live is not None and weight is not None:
                weight[...] = live()
            t0 = clock()
            action, log_prob, value = act(s_obs[t])
            t1 = clock()
            s_action[t] = action
            s_logp[t] = log_prob
            s_value[t] = value
            t2 = clock()
            step_into(action, StepRows(s_obs[t + 1] if t + 1 < steps else s_boot, s_reward[t],
                                       s_term[t], s_trunc[t], self._final_step))
            t3 = clock()
            if s_trunc[t].any():
                self._keep_final_obs(slot, np.flatnonzero(s_trunc[t]), kept)
            act.end_step(s_term[t], s_trunc[t], weight)
            act_ns += t1 - t0
            env_ns += t3 - t2
            heartbeat()
        return act_ns, env_ns

    def _keep_final_obs(self, slot: dict[str, np.ndarray], envs: np.ndarray,
                        kept: np.ndarray) -> None:
        """Copy the final observations of ``envs``, truncated at this step, into the slot's
        next free row of each; ``kept`` counts the rows used."""
        rows = kept[envs]
        full = np.flatnonzero(rows >= slot["final_obs"].shape[1])
        if len(full):
            raise too_many_truncations(int(self.env_ids[envs[full[0]]]), slot,
                                       getattr(self.envs, "max_episode_steps", None))
        slot["final_obs"][envs, rows] = self._final_step[envs]
        kept[envs] += 1

    def _rollout(self, slot: dict[str, np.ndarray], actions_into,
                 rollout_into) -> tuple[int, int]:
        """An actor that ignores observations and a simulator that steps a whole slot:
        every action at once, then one call for every step; returns their nanoseconds."""
        clock = time.perf_counter_ns
        if self._final_slot is None or self._final_slot.shape[0] != len(slot["reward"]):
            self._final_slot = np.zeros((len(slot["reward"]), *self.obs.shape), self.obs.dtype)
        t0 = clock()
        actions_into(slot["action"])
        t1 = clock()
        rollout_into(slot["action"], slot_rows(slot, self._final_slot))
        t2 = clock()
        try:
            pack_final_obs(self._final_slot, slot["truncated"], slot["final_obs"])
        except ValueError:
            over = np.cumsum(slot["truncated"], axis=0)[-1] > slot["final_obs"].shape[1]
            raise too_many_truncations(int(self.env_ids[np.argmax(over)]), slot,
                                       getattr(self.envs, "max_episode_steps", None)) from None
        self.heartbeat()
        slot["log_prob"][...] = 0.0  # (such actors have no log-probabilities or values)
        slot["value"][...] = 0.0
        return t1 - t0, t2 - t1
