"""The baselines, each stepped with precomputed random actions in this process (and the
subprocesses it starts): the raw loop, Gymnasium's vector envs, SB3 and EnvPool; for a
PettingZoo env, SuperSuit's vectorisation into an SB3 VecEnv."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from fastrl.bench.measure import Result, skipped, snapshot, summarize
from fastrl.envs.atari import AtariSettings
from fastrl.envs.envpool import envpool_task
from fastrl.envs.errors import EnvError
from fastrl.envs.multiagent import pettingzoo_factory
from fastrl.envs.source import make_env
from fastrl.models.actors import RANDOM_TABLE, RandomActor

CHUNK = 256  # steps between clock checks


def _window(step_chunk: Callable[[], int], warmup_s: float, duration_s: float):
    """Run ``step_chunk`` (returns env steps done) through warm-up, then a measured window."""
    end = time.monotonic() + warmup_s
    steps = 0
    while time.monotonic() < end:
        steps += step_chunk()
    start = snapshot(steps)
    end = start.t + duration_s
    while time.monotonic() < end:
        steps += step_chunk()
    return start, snapshot(steps)


def _random_actions(space, num_envs: int) -> np.ndarray:
    """``[4096, num_envs, ...]`` random actions, drawn up front exactly as fastrl's random
    actor draws them, so that choosing an action costs nothing in the loop."""
    act = RandomActor(space, num_envs, seed=0)
    return np.stack([act(None)[0] for _ in range(RANDOM_TABLE)])


def raw_loop(env_id: str, kwargs: dict[str, Any], warmup_s: float, duration_s: float) -> Result:
    """(a) The raw limit: one env, a tight Python loop, manual reset, no framework."""
    env = make_env(env_id, kwargs)
    env.reset(seed=0)
    # numpy scalars in a list: the cheapest to index here and to check in Discrete.contains
    actions = list(_random_actions(env.action_space, 1)[:, 0])
    i = 0

    def chunk() -> int:
        nonlocal i
        for _ in range(CHUNK):
            _, _, term, trunc, _ = env.step(actions[i & 4095])
            i += 1
            if term or trunc:
                env.reset()
        return CHUNK

    start, end = _window(chunk, warmup_s, duration_s)
    env.close()
    return summarize("raw loop", "collect", 1, 1, start, end)


def _vector(name: str, make_vec: Callable[[], Any], workers: int, num_envs: int,
            warmup_s: float, duration_s: float) -> Result:
    vec = make_vec()
    try:
        vec.reset()
        space = getattr(vec, "single_action_space", None) or vec.action_space
        actions = _random_actions(space, num_envs)
        i = 0
        calls = max(1, CHUNK // num_envs)

        def chunk() -> int:
            nonlocal i
            for _ in range(calls):
                vec.step(actions[i & 4095])
                i += 1
            return calls * num_envs

        start, end = _window(chunk, warmup_s, duration_s)
    finally:
        vec.close()
    return summarize(name, "collect", workers, num_envs, start, end)


def gymnasium_sync(env_id, kwargs, num_envs, warmup_s, duration_s) -> Result:
    """(b) gymnasium SyncVectorEnv: every env in this one process."""
    import gymnasium as gym

    fns = [partial(make_env, env_id, kwargs)] * num_envs
    return _vector("gymnasium SyncVectorEnv", lambda: gym.vector.SyncVectorEnv(fns), 1,
                   num_envs, warmup_s, duration_s)


def gymnasium_async(env_id, kwargs, num_envs, warmup_s, duration_s) -> Result:
    """(b) gymnasium AsyncVectorEnv(shared_memory=True): one process per env."""
    import gymnasium as gym

    fns = [partial(make_env, env_id, kwargs)] * num_envs
    return _vector("gymnasium AsyncVectorEnv",
                   lambda: gym.vector.AsyncVectorEnv(fns, shared_memory=True), num_envs,
                   num_envs, warmup_s, duration_s)


def sb3_subproc(env_id, kwargs, num_envs, warmup_s, duration_s) -> Result:
    """(c) Stable-Baselines3 SubprocVecEnv: one process per env."""
    try:
        from stable_baselines3.common.vec_env import SubprocVecEnv
    except ImportError:
        return skipped("SB3 SubprocVecEnv", "collect", num_envs, num_envs,
                       "stable-baselines3 not installed (pip install -e '.[bench]')")
    fns = [partial(make_env, env_id, kwargs)] * num_envs
    return _vector("SB3 SubprocVecEnv", lambda: SubprocVecEnv(fns), num_envs, num_envs,
                   warmup_s, duration_s)


def envpool(env_id, kwargs, num_envs, workers, warmup_s, duration_s) -> Result:
    """(c) EnvPool (C++ threads): ``num_envs`` envs on ``workers`` threads, the task and
    options fastrl's EnvPool backend would use (fastrl.envs.envpool)."""
    try:
        task, options = envpool_task(env_id, kwargs, AtariSettings())
    except EnvError as e:  # not installed, or no such env in EnvPool
        return skipped("EnvPool", "collect", workers, num_envs, str(e))
    import envpool as ep

    return _vector("EnvPool", lambda: ep.make_gymnasium(
        task, num_envs=num_envs, num_threads=workers, **options), workers, num_envs,
        warmup_s, duration_s)


def supersuit(env_id, kwargs, num_rows, workers, warmup_s, duration_s) -> Result:
    """(d) A PettingZoo env the way SB3 users vectorise one: SuperSuit's
    ``pettingzoo_env_to_vec_env_v1`` (one row per agent) and ``concat_vec_envs_v1`` over
    ``workers`` processes, ``num_rows`` agent rows in all (fastrl's row count)."""
    factory = pettingzoo_factory(env_id)
    try:
        import supersuit as ss
    except ImportError:
        return skipped("SuperSuit", "collect", workers, num_rows,
                       "supersuit not installed (pip install -e '.[bench]')")
    agents = len(factory(**kwargs).possible_agents)

    def make_vec():
        markov = ss.pettingzoo_env_to_vec_env_v1(factory(**kwargs))
        return ss.concat_vec_envs_v1(markov, max(1, num_rows // agents), num_cpus=workers,
                                     base_class="stable_baselines3")

    return _vector("SuperSuit + SB3 VecEnv", make_vec, workers, num_rows, warmup_s,
                   duration_s)
