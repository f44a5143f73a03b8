"""EnvGroup: seeding, and envs that break their declared spaces."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import scripted_envs  # noqa: F401 - registers the scripted ids

from fastrl.envs.source import EnvContractError, EnvError, EnvGroup, EnvSource, env_seeds


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium's own checker warns first
def test_wrong_observation_shape_names_env_and_shapes():
    with pytest.raises(EnvContractError,
                       match=r"WrongShape-v0.*observation.*\(1,\).*got float32 .*\(3,\)"):
        EnvGroup(EnvSource("scripted_envs:WrongShape-v0", {}), [0]).reset()


def test_unknown_env_or_kwarg_is_an_env_error():
    with pytest.raises(EnvError, match="NoSuch-v0"):
        EnvGroup(EnvSource("NoSuch-v0", {}), [0])
    with pytest.raises(EnvError, match="bogus"):
        EnvGroup(EnvSource("CartPole-v1", {"bogus": 1}), [0])


def test_seeds_are_deterministic_distinct_and_differ_per_worker():
    a = env_seeds(1, 0, 8)
    assert a == env_seeds(1, 0, 8) and len(set(a)) == 8
    assert not set(a) & set(env_seeds(1, 1, 8))
    assert a != env_seeds(2, 0, 8)


def test_same_seeds_same_trajectories():
    def roll(seeds):
        envs = EnvGroup(EnvSource("CartPole-v1", {}), seeds)
        out = [envs.reset().copy()]
        for _ in range(50):
            out.append(envs.step(np.zeros(len(seeds), np.int64))[0].copy())
        return np.stack(out)
    assert np.array_equal(roll([3, 4]), roll([3, 4]))
    assert not np.array_equal(roll([3, 4]), roll([5, 6]))


def test_a_time_limit_is_declared_only_where_it_is_the_env_s_only_cut():
    def limit(source: EnvSource) -> int | None:
        envs = EnvGroup(source, [0])
        envs.close()
        return envs.max_episode_steps

    # Gymnasium's own envs truncate only in their TimeLimit, whatever its length
    assert limit(EnvSource("CartPole-v1", {})) == 500
    assert limit(EnvSource("CartPole-v1", {"max_episode_steps": 50})) == 50
    # anything else may truncate whenever it likes: a user's env, or a factory that could
    # wrap a Gymnasium env in a wrapper of its own
    assert limit(EnvSource("scripted_envs:Count-v0", {"max_episode_steps": 50})) is None
    assert limit(EnvSource("scripted_envs:JitterCartPole-v0", {})) is None
    assert limit(EnvSource("CartPole-v1", {}, env_fn=lambda: gym.make("CartPole-v1"))) is None
