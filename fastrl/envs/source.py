"""Env sources: the ``env`` config section, and a group of single Gymnasium envs stepped in
lockstep, reset by hand.

fastrl does not use Gymnasium's vector envs here: their default next-step autoreset turns
the step after an episode end into a fake transition (the action ignored, reward 0). Resetting
each env ourselves, in the same step that ended its episode, means every stored transition is
real and the true final observation is in hand for truncation bootstrapping.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from fastrl.core.settings import setting
from fastrl.envs import BUILTIN_BATCHED, BatchedEnv
from fastrl.envs.atari import AtariSettings, atari_step_limit, is_atari, make_atari
from fastrl.envs.batched import SlotRows, StepRows, WritesRows, copy_step, own_rows
from fastrl.envs.envpool import EnvPoolGroup, envpool_task
from fastrl.envs.errors import (
    EnvContractError,
    EnvError,
    check_batch_arrays,
    contract_violation,
    record_violation,
)
from fastrl.envs.masks import with_action_masks
from fastrl.envs.mujoco import is_mujoco, prepare_mujoco
from fastrl.envs.multiagent import ParallelEnvGroup, as_parallel, is_multi_agent, pettingzoo_factory
from fastrl.envs.obs_store import ObsStore
from fastrl.memory.layout import storage_of
from fastrl.memory.records import obs_record


@dataclass
class EnvConfig:
    """Which environment the workers step."""

    id: str = setting("CartPole-v1", "gymnasium.make id ('module:Env-v0' imports module "
                      "first); with fn or vector_fn, the run's name for the env")
    kwargs: dict[str, Any] = setting({}, "keyword arguments passed to gymnasium.make, fn or "
                                     "vector_fn")
    fn: str = setting("", "import string 'package.module:make_env' of a Gymnasium-API env "
                      "factory, called as make_env(**kwargs), instead of gymnasium.make(id)")
    vector_fn: str = setting("", "import string 'package.module:make_sim' of a batched "
                             "simulator factory, called as make_sim(seeds, **kwargs) "
                             "(fastrl.envs.BatchedEnv)")
    backend: str = setting("gymnasium", "what steps a worker's envs: gymnasium (one "
                           "gymnasium.make env each, stepped in turn) or envpool (one EnvPool "
                           "batch on one C++ thread, for the Atari and MuJoCo ids EnvPool "
                           "ships; evaluation steps Gymnasium's env)",
                           choices=("gymnasium", "envpool"))
    clip_rewards: bool = setting(False, "train on the sign of every reward (Atari's usual "
                                 "clipping); returns are logged and evaluated unclipped")
    atari: AtariSettings = field(default_factory=AtariSettings)


def env_seeds(run_seed: int, worker_id: int, num_envs: int, incarnation: int = 0) -> list[int]:
    """Deterministic, distinct per-env seeds for one worker; a restarted worker (incarnation
    k > 0) gets fresh ones, so that it does not replay the episodes of the one it replaces."""
    seq = np.random.SeedSequence([run_seed, worker_id, *([incarnation] if incarnation else [])])
    return [int(s) for s in seq.generate_state(num_envs, np.uint32)]


def worker_seeds(run_seed: int, worker_id: int, num_envs: int,
                 incarnation: int = 0) -> tuple[list[int], int]:
    """``(env seeds, action-sampling seed)`` of one worker: :func:`env_seeds` of its envs,
    and one more of the same sequence for the process's action sampling."""
    *envs, sampling = env_seeds(run_seed, worker_id, num_envs + 1, incarnation)
    return envs, sampling


def make_env(env_id: str, kwargs: dict[str, Any], atari: AtariSettings | None = None) -> gym.Env:
    """``gymnasium.make`` with fastrl's config arguments (an ``ALE/`` game preprocessed by
    ``atari``'s settings, fastrl.envs.atari); failures become :class:`EnvError`.

    Gymnasium's own passive checker is off (unless ``kwargs`` asks for it): fastrl's
    contract checks cover it and word their errors (a bare assertion otherwise comes first).
    """
    try:
        if is_atari(env_id):
            return make_atari(env_id, kwargs, atari or AtariSettings())
        if is_mujoco(env_id):
            prepare_mujoco(env_id)
        return gym.make(env_id, **{"disable_env_checker": True, **kwargs})
    except (gym.error.Error, ImportError, TypeError) as e:
        raise cannot_make(env_id, kwargs, e) from e


def episode_step_limit(env: gym.Env, atari: AtariSettings) -> int | None:
    """The steps after which ``env``, made by :func:`make_env`, truncates an episode, where
    that is its only cause of truncation: Gymnasium's own envs truncate only in their
    ``TimeLimit``, an ALE game only at its frame limit (:func:`atari_step_limit`). None for
    any other env: it may truncate whenever it likes."""
    spec = env.spec
    entry = spec.entry_point if spec is not None else None
    if not isinstance(entry, str):
        return None
    if entry.startswith("ale_py."):
        return atari_step_limit(env, atari)
    if entry.startswith("gymnasium.envs.") and spec.max_episode_steps:
        return int(spec.max_episode_steps)
    return None


def cannot_make(env_id: str, kwargs: dict[str, Any], cause: Exception) -> EnvError:
    """The error for an env that could not be constructed, naming the id and kwargs."""
    return EnvError(f"cannot make env '{env_id}' (env.kwargs={kwargs}): {cause}")


def load_factory(ref: str, key: str) -> Callable[..., Any]:
    """The callable an import string ``'package.module:attr.path'`` names; ``key`` is the
    config key or argument it came from, for the error."""
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise EnvError(f"{key}={ref!r}: expected an import string 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
        for attr in attr_path.split("."):
            obj = getattr(obj, attr)
    except (ImportError, AttributeError) as e:
        raise EnvError(f"{key}={ref!r}: cannot import it ({e})") from None
    if not callable(obj):
        raise EnvError(f"{key}={ref!r}: names a {type(obj).__name__}, not a callable")
    return obj


def import_string(fn: Callable[..., Any]) -> str | None:
    """``'module:qualname'`` when importing that gives ``fn`` back (a module-level function or
    class outside ``__main__``), else None: a run directory can then rebuild its env."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        return f"{module}:{qualname}" if load_factory(f"{module}:{qualname}", "") is fn \
            else None
    except EnvError:
        return None


@dataclass(frozen=True)
class EnvSource:
    """Where a run's envs come from, picklable for ``spawn`` workers.

    Exactly one of: ``gymnasium.make(env_id, **kwargs)`` (both factories None);
    ``env_fn(**kwargs)``, a Gymnasium-API env factory; ``vector_env_fn(seeds, **kwargs)``, a
    natively batched simulator (:class:`~fastrl.envs.batched.BatchedEnv`). A factory is a
    callable or an import string, which each process resolves for itself.
    """

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    env_fn: Callable[..., gym.Env] | str | None = None
    vector_env_fn: Callable[..., BatchedEnv] | str | None = None
    atari: AtariSettings = field(default_factory=AtariSettings)
    backend: str = "gymnasium"
    grouped: bool = False  # a multi-agent env's rows tell their agent group (multiagent)

    @property
    def batched(self) -> bool:
        """True for a natively batched simulator (built in, or ``vector_env_fn``)."""
        return self.vector_env_fn is not None or \
            (self.env_fn is None and self.env_id in BUILTIN_BATCHED)

    def _factory(self) -> Callable[..., Any]:
        ref = self.vector_env_fn if self.vector_env_fn is not None else self.env_fn
        if isinstance(ref, str):
            return load_factory(ref, "env.vector_fn" if self.vector_env_fn else "env.fn")
        return ref

    def make_one(self) -> Any:
        """One env (not for batched simulators): a Gymnasium-API env, or a PettingZoo env
        under the Parallel API (an AEC one converted, fastrl.envs.multiagent)."""
        if self.env_fn is None:
            factory = pettingzoo_factory(self.env_id)
            if factory is None:
                return with_action_masks(make_env(self.env_id, self.kwargs, self.atari))
        else:
            factory = self._factory()
        try:
            env = factory(**self.kwargs)
        except TypeError as e:
            raise cannot_make(self.env_id, self.kwargs, e) from e
        if is_multi_agent(env):
            return as_parallel(env, self.env_id)
        if not isinstance(env, gym.Env):
            raise EnvContractError(
                f"env {self.env_id!r}: its factory {self.env_fn or self.env_id!r} returned a "
                f"{type(env).__name__}; expected a gymnasium.Env or a PettingZoo env")
        return with_action_masks(env)

    def make(self, seeds: list[int]) -> BatchedEnv:
        """One env per seed behind the :class:`~fastrl.envs.batched.BatchedEnv` interface."""
        if self.backend == "envpool":
            return EnvPoolGroup(self.env_id, self.kwargs, self.atari, seeds)
        if not self.batched:
            envs = [self.make_one() for _ in seeds]
            if is_multi_agent(envs[0]):
                return ParallelEnvGroup(envs, self.env_id, seeds, self.grouped)
            return EnvGroup(self, seeds, envs)
        if self.vector_env_fn is None:
            factory = BUILTIN_BATCHED[self.env_id]
        else:
            factory = self._factory()
        try:
            sim = factory(seeds, **self.kwargs)
        except TypeError as e:
            raise cannot_make(self.env_id, self.kwargs, e) from e
        if self.vector_env_fn is None:
            return sim  # fastrl's own simulators are trusted
        return CheckedBatchedEnv(sim, self.env_id, len(seeds))


def env_source(cfg: EnvConfig, env_fn: Callable[..., gym.Env] | str | None = None,
               vector_env_fn: Callable[..., BatchedEnv] | str | None = None) -> EnvSource:
    """The :class:`EnvSource` of an env config; factories given here override the config's
    ``env.fn`` / ``env.vector_fn``."""
    env_fn = env_fn if env_fn is not None else (cfg.fn or None)
    vector_env_fn = vector_env_fn if vector_env_fn is not None else (cfg.vector_fn or None)
    if env_fn is not None and vector_env_fn is not None:
        raise EnvError("give an env factory (env_fn / env.fn) or a batched simulator "
                       "(vector_env_fn / env.vector_fn), not both")
    if cfg.backend == "envpool":
        if env_fn is not None or vector_env_fn is not None or cfg.id in BUILTIN_BATCHED:
            raise EnvError("env.backend=envpool steps EnvPool's own envs by env.id; a factory "
                           "(env.fn, env.vector_fn) or a built-in simulator takes "
                           "env.backend=gymnasium")
        envpool_task(cfg.id, dict(cfg.kwargs), cfg.atari)  # refuses ids EnvPool lacks
    for name, ref in (("env_fn", env_fn), ("vector_env_fn", vector_env_fn)):
        if ref is not None and not (isinstance(ref, str) or callable(ref)):
            raise EnvError(f"{name}={ref!r}: expected a callable or an import string "
                           "'package.module:function'")
    return EnvSource(cfg.id, dict(cfg.kwargs), env_fn, vector_env_fn, cfg.atari, cfg.backend)


OBS_FIELDS = ("obs", "next_obs", "final_obs")  # the observation rows of StepRows, SlotRows


class CheckedBatchedEnv:
    """A user's batched simulator with every ``reset`` and ``step`` result checked against
    the contract (:func:`~fastrl.envs.errors.check_batch_arrays`), offering both step
    forms whichever it implements: ``step`` on a ``step_into``-only simulator writes into
    arrays of this wrapper, ``step_into`` on a ``step``-only one copies the checked result.
    A ``step_into`` writes into arrays of the right shapes and dtypes by construction, so
    only its rewards remain to check (once per slot, by the collector)."""

    def __init__(self, sim: BatchedEnv, env_id: str, n: int) -> None:
        missing = [a for a in ("observation_space", "action_space", "reset", "close")
                   if not hasattr(sim, a)]
        if not (hasattr(sim, "step") or hasattr(sim, "step_into")):
            missing.append("step (or step_into)")
        if missing:
            raise EnvContractError(
                f"env {env_id!r}: its batched simulator {type(sim).__name__} has no "
                f"{', '.join(repr(m) for m in missing)}; see fastrl.envs.BatchedEnv for the "
                "interface")
        self.agents = tuple(getattr(sim, "agents", None) or ())
        rows = n * max(1, len(self.agents))
        if getattr(sim, "num_envs", rows) != rows:
            per_agent = f", times its {len(self.agents)} agents" if self.agents else ""
            raise contract_violation(env_id, "the factory", "num_envs",
                                     f"{rows} (one env per seed{per_agent})", sim.num_envs)
        self.sim, self.env_id, self.num_envs = sim, env_id, rows
        self.observation_space = sim.observation_space
        self.action_space = sim.action_space
        self._obs_shape, self._obs_dtype = storage_of(self.observation_space, "observation")
        self._record = obs_record(self.observation_space)
        self._rows = own_rows(rows, self._obs_shape, self._obs_dtype)
        self.max_episode_steps = getattr(sim, "max_episode_steps", None)
        self.baseline = getattr(sim, "baseline", None)  # (the env's scripted player)
        if self.max_episode_steps is not None and not (
                isinstance(self.max_episode_steps, int | np.integer)
                and self.max_episode_steps > 0):
            raise contract_violation(env_id, "the factory", "max_episode_steps",
                                     "a positive int or None", self.max_episode_steps)
        if hasattr(sim, "rollout_into"):
            self.rollout_into = self._rollout_into

    @property
    def active(self) -> np.ndarray | None:
        """A multi-agent simulator's live rows, where it says (fastrl.envs.multiagent)."""
        return getattr(self.sim, "active", None)

    def _leaf_rows(self, rows: StepRows | SlotRows) -> StepRows | SlotRows:
        """``rows`` as the simulator writes them: for a Dict or Tuple space, the
        observation fields as nested views of their leaves (fastrl.memory.records)."""
        if self._record is None:
            return rows
        return type(rows)(*(self._record.views(x) if name in OBS_FIELDS else x
                            for name, x in zip(rows._fields, rows)))

    def _checked_obs(self, where: str, obs: Any, into: np.ndarray) -> np.ndarray:
        """Observations as stored: checked, and for a Dict or Tuple space packed into
        ``into`` (records ``[n, nbytes]``)."""
        if self._record is None:
            check_batch_arrays(self.env_id, where, self.num_envs, self._obs_shape,
                               self._obs_dtype, obs)
            return obs
        wrong = self._record.check(obs, (self.num_envs,))
        if wrong:
            raise record_violation(self.env_id, where, "obs", wrong)
        self._record.write(into, obs)
        return into

    def reset(self) -> np.ndarray:
        """Reset every env with its seed (checked)."""
        return self._checked_obs("reset()", self.sim.reset(), self._rows.obs)

    def step(self, actions: np.ndarray):
        """Step every env once (checked); see :class:`~fastrl.envs.batched.BatchedEnv`."""
        if not hasattr(self.sim, "step"):
            self.sim.step_into(actions, self._leaf_rows(self._rows))
            # rows of the right shapes by construction; its rewards may not be finite
            check_batch_arrays(self.env_id, "step_into()", self.num_envs, self._obs_shape,
                               self._obs_dtype, *self._rows[:4])
            return self._rows
        out = self.sim.step(actions)
        if not isinstance(out, tuple) or len(out) != 5:
            raise contract_violation(self.env_id, "step()", "the result", "a 5-tuple (obs, "
                                     "reward, terminated, truncated, final_obs)", out)
        obs, reward, terminated, truncated, final_obs = out
        obs = self._checked_obs("step()", obs, self._rows.obs)
        check_batch_arrays(self.env_id, "step()", self.num_envs, self._obs_shape,
                           self._obs_dtype, obs, reward, terminated, truncated)
        final_obs = self._checked_obs("step() final_obs", final_obs, self._rows.final_obs)
        return obs, reward, terminated, truncated, final_obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env once into ``out`` (a ``step`` result is checked, then copied);
        a multi-agent simulator is held to the padding rules."""
        live_before = None if self.active is None else self.active.copy()
        if hasattr(self.sim, "step_into"):
            self.sim.step_into(actions, self._leaf_rows(out))
        else:
            copy_step(self.step(actions), out)
        if live_before is not None:
            self._check_padding(live_before, out.terminated, out.truncated)

    def _check_padding(self, live_before: np.ndarray, terminated: np.ndarray,
                       truncated: np.ndarray) -> None:
        """The padding rules of a multi-agent simulator (fastrl.envs.multiagent): a padding
        step ends no return (``terminated`` is set on it here), and a row whose agent
        leaves ends its episode in that step; else an :class:`EnvContractError`."""
        terminated |= ~live_before
        left = live_before & ~self.active & ~(terminated | truncated)
        if left.any():
            raise EnvContractError(
                f"env {self.env_id!r}: row {int(np.flatnonzero(left)[0])} of its batched "
                "simulator went from active to inactive in a step without terminated or "
                "truncated: an agent that leaves must end its episode in that step")

    def _rollout_into(self, actions: np.ndarray, out: SlotRows) -> None:
        self.sim.rollout_into(actions, self._leaf_rows(out))

    def close(self) -> None:
        """Close the simulator."""
        self.sim.close()


class EnvGroup(WritesRows):
    """``len(seeds)`` Gymnasium-API envs of one source behind the :class:`BatchedEnv` interface."""

    def __init__(self, source: EnvSource, seeds: list[int],
                 envs: list[gym.Env] | None = None) -> None:
        self.envs = envs if envs is not None else [source.make_one() for _ in seeds]
        self._step_fns = [env.step for env in self.envs]
        self.env_id = source.env_id
        self.seeds = seeds
        self.num_envs = len(seeds)
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self._store = ObsStore(self.env_id, self.observation_space)
        self._box_action = isinstance(self.action_space, gym.spaces.Box)
        self._rows = own_rows(len(seeds), self._store.shape, self._store.dtype)
        # (an env.fn factory's envs may wrap a registered env in wrappers that truncate)
        self.max_episode_steps = None if source.env_fn is not None else \
            episode_step_limit(self.envs[0], source.atari)

    def reset(self) -> np.ndarray:
        """Reset every env with its seed; returns the first observations ``[n, *obs]``."""
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            obs, _ = env.reset(seed=seed)
            self._store.one(self._rows.obs, i, obs, "reset()")
        return self._rows.obs

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env once, each field stored straight into ``out``'s rows; envs whose
        episode ended are reset in the same call (``out.obs[i]`` is then the first
        observation of the next episode, ``out.final_obs[i]`` the real last one)."""
        if self._box_action:
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        # Iterating the array hands each env a numpy scalar, which Gymnasium's
        # Discrete.contains checks faster than a Python int.
        # The per-env Python cost is what bounds collection speed, so the loop is one list
        # comprehension over bound methods and every field is written by one array store.
        results = [step(a) for step, a in zip(self._step_fns, actions)]
        observations, rewards, terms, truncs, _ = zip(*results)
        out.reward[:], out.terminated[:], out.truncated[:] = self._checked(rewards, terms,
                                                                          truncs)
        ended = np.flatnonzero(out.terminated | out.truncated)
        if len(ended):
            observations = list(observations)
            for i in ended.tolist():
                self._store.one(out.final_obs, i, observations[i])
                observations[i], _ = self.envs[i].reset()
        self._store.all(out.obs, observations)

    def _checked(self, rewards: tuple, terms: tuple, truncs: tuple):
        """``(reward, terminated, truncated)`` as arrays, each converted once and checked:
        real scalar rewards (their finiteness is checked per slot by the collector), bool
        flags."""
        reward = np.asarray(rewards)
        if reward.shape != (self.num_envs,) or reward.dtype.kind not in "fiu":
            i = next((i for i, r in enumerate(rewards) if np.ndim(r) or
                      not isinstance(r, (int, float, np.integer, np.floating))), 0)
            raise contract_violation(self.env_id, "step()", "the reward", "a real scalar",
                                     rewards[i])
        arrays = [reward]
        for name, flags in (("terminated", terms), ("truncated", truncs)):
            arrays.append(np.asarray(flags))
            if arrays[-1].dtype != np.bool_:
                i = next(i for i, f in enumerate(flags) if not isinstance(f, (bool, np.bool_)))
                raise contract_violation(self.env_id, "step()", name, "a bool", flags[i])
        return arrays

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()
