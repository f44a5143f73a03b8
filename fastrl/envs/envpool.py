"""EnvPool as an env backend (``env.backend=envpool``): each worker steps its envs as one
EnvPool batch on one C++ thread, for the Atari and MuJoCo ids EnvPool ships.

EnvPool resets an env on the step *after* its episode ended (that step ignores its action).
fastrl's slots need the reset in the same step (fastrl.envs.source), so a step that ends
episodes resets exactly those envs at once (EnvPool's ``reset(env_id)``): ``final_obs`` is
the real last observation, ``obs`` the next episode's first, and no stored transition is a
fake one. An ``ALE/<Game>-v5`` id is EnvPool's ``<Game>-v5`` with ``env.atari``'s settings
mapped onto EnvPool's options (:func:`envpool_atari`); rewards stay unclipped (fastrl clips
them itself under ``env.clip_rewards``). Evaluation episodes step Gymnasium's env of the
same id. EnvPool comes with the ``bench`` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from fastrl.envs.atari import PREFIX, AtariSettings, is_atari
from fastrl.envs.batched import StepRows, WritesRows, own_rows
from fastrl.envs.errors import EnvError
from fastrl.memory.layout import storage_of
from fastrl.memory.records import is_structured

EXTRA = "pip install -c constraints.txt -e '.[bench]'"


def envpool_atari(atari: AtariSettings) -> dict[str, Any]:
    """EnvPool's options for fastrl.envs.atari's preprocessing (``atari``): the same frames,
    no-ops, sticky actions and episode ends, and no reward clipping. EnvPool's FIRE presses
    at reset only, where fastrl's ``fire_reset`` also presses it after a lost life."""
    return {"episodic_life": atari.terminal_on_life_loss, "reward_clip": False,
            "use_fire_reset": atari.fire_reset, "stack_num": atari.frame_stack,
            "frame_skip": atari.frame_skip, "noop_max": atari.noop_max,
            "img_height": atari.screen_size, "img_width": atari.screen_size,
            "gray_scale": True, "repeat_action_probability": atari.sticky_actions}


def envpool_task(env_id: str, kwargs: dict[str, Any],
                 atari: AtariSettings) -> tuple[str, dict[str, Any]]:
    """EnvPool's task id and options for fastrl's ``env_id`` and ``env.kwargs``; raises
    :class:`EnvError` naming the backend's ids when EnvPool lacks this one, or its extra
    when EnvPool is not installed."""
    try:
        import envpool
    except ImportError:
        raise EnvError(f"env.backend=envpool needs EnvPool, in the bench extra: {EXTRA}") \
            from None
    task, options = env_id, dict(kwargs)
    if is_atari(env_id):
        task, options = env_id.removeprefix(PREFIX), {**envpool_atari(atari), **options}
    if task not in envpool.list_all_envs():
        raise EnvError(f"env.backend=envpool: EnvPool has no env {env_id!r}; it ships Atari "
                       "games as ALE/<Game>-v5 and MuJoCo ids such as Hopper-v5 and "
                       "HalfCheetah-v5 (envpool.list_all_envs() lists them all; use "
                       "env.backend=gymnasium for others)")
    return task, options


class EnvPoolGroup(WritesRows):
    """``len(seeds)`` envs of one EnvPool task on one thread, behind the
    :class:`~fastrl.envs.batched.BatchedEnv` interface; env ``i`` is seeded ``seeds[0] + i``
    (EnvPool seeds its envs consecutively from one seed)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], atari: AtariSettings,
                 seeds: list[int]) -> None:
        import envpool

        task, options = envpool_task(env_id, kwargs, atari)
        n = len(seeds)
        try:
            self.pool = envpool.make_gymnasium(task, num_envs=n, batch_size=n, num_threads=1,
                                               seed=seeds[0] % 2**31, **options)
        except (TypeError, ValueError, RuntimeError) as e:
            raise EnvError(f"env.backend=envpool cannot make {env_id!r} "
                           f"(env.kwargs={kwargs}): {e}") from None
        self.env_id, self.num_envs = env_id, n
        self.observation_space = self.pool.observation_space
        act = self.pool.action_space
        # Gymnasium's MuJoCo envs take float32 actions; EnvPool declares float64
        self.action_space = spaces.Box(act.low.astype(np.float32), act.high.astype(np.float32),
                                       dtype=np.float32) if isinstance(act, spaces.Box) else act
        self._box_action = isinstance(act, spaces.Box)
        self.max_episode_steps = int(self.pool.spec.config.max_episode_steps)
        if is_structured(self.observation_space):
            self.pool.close()
            raise EnvError(f"env.backend=envpool steps array observations; {env_id!r} "
                           f"observes a {type(self.observation_space).__name__} space: use "
                           "env.backend=gymnasium")
        shape, dtype = storage_of(self.observation_space, "observation")
        self._rows = own_rows(n, shape, dtype)

    def reset(self) -> np.ndarray:
        """Reset every env; returns the first observations ``[n, *obs]``."""
        obs, info = self.pool.reset()
        self._rows.obs[info["env_id"]] = obs
        return self._rows.obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env once into ``out``; envs whose episode ended are reset in the same
        call (module doc)."""
        if self._box_action:
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        obs, reward, terminated, truncated, info = self.pool.step(actions)
        ids = info["env_id"]  # (the pool's order: all envs, as a sync batch)
        out.reward[ids], out.terminated[ids], out.truncated[ids] = reward, terminated, truncated
        out.obs[ids] = obs
        ended = np.flatnonzero(out.terminated | out.truncated)
        if len(ended):
            out.final_obs[ended] = out.obs[ended]
            first, info = self.pool.reset(ended)
            out.obs[info["env_id"]] = first

    def close(self) -> None:
        """Close the pool."""
        self.pool.close()
