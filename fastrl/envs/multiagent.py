"""Several agents in one env: PettingZoo's Parallel API (and its AEC API, made parallel by
PettingZoo's own conversion) behind the :class:`~fastrl.envs.batched.BatchedEnv` interface.

Every (env, agent) pair is one row: ``k`` envs of the agents ``possible_agents`` are
``k * len(agents)`` rows, env ``i``'s agent ``a`` at row ``i * len(agents) + a``. A row is
*active* while its agent is in the env's ``agents``: an agent that is done (terminated or
truncated) leaves its row inactive until the env resets, and an agent that joins
mid-episode makes it active from its first observation on. An inactive row's steps are
padding: the padding observation (:meth:`GroupLayout.padding`), its
action ignored, reward 0, ``terminated`` set (so no return flows across them). The env
group's ``active`` says which rows are live; a worker weighs a step of a row that is not 0
in the slot's ``weight`` (fastrl.envs.batched.live_rows_of), which keeps it out of the loss
and out of the episode statistics.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from fastrl.envs.batched import StepRows, WritesRows, own_rows
from fastrl.envs.errors import EnvContractError, EnvError, contract_violation
from fastrl.envs.obs_store import ObsStore
from fastrl.memory.records import MASK_KEY

MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def is_multi_agent(env: Any) -> bool:
    """True for a PettingZoo env, Parallel or AEC (by its API: ``possible_agents`` and
    per-agent space methods; PettingZoo itself need not be imported to tell)."""
    return hasattr(env, "possible_agents") and callable(getattr(env, "observation_space", None))


def pettingzoo_factory(env_id: str) -> Callable[..., Any] | None:
    """The env factory of a PettingZoo-style module named by ``env_id``
    (``mpe2.simple_spread_v3``, ``pettingzoo.butterfly.pistonball_v6``): its
    ``parallel_env``, else its ``env``; None where ``env_id`` names no such module (a
    Gymnasium id)."""
    if not MODULE_NAME.fullmatch(env_id) or env_id in gym.registry:
        return None
    try:
        module = importlib.import_module(env_id)
    except ImportError as e:
        missing = getattr(e, "name", None)
        if isinstance(e, ModuleNotFoundError) and missing and \
                (env_id == missing or env_id.startswith(missing + ".")):
            return None  # no such module: a Gymnasium id
        raise EnvError(f"env.id={env_id!r}: importing the module failed ({e})") from None
    factory = getattr(module, "parallel_env", None) or getattr(module, "env", None)
    return factory if callable(factory) else None


def as_parallel(env: Any, env_id: str) -> Any:
    """``env`` under PettingZoo's Parallel API: an AEC env goes through PettingZoo's
    ``aec_to_parallel``, which refuses games whose agents take turns."""
    if not hasattr(env, "agent_iter"):
        return env
    from pettingzoo.utils.conversions import aec_to_parallel  # an AEC env: PettingZoo is here

    try:
        return aec_to_parallel(env)
    except Exception as e:  # PettingZoo raises AssertionError / ValueError for turn-based games
        raise EnvError(f"env {env_id!r} is a PettingZoo AEC env that PettingZoo cannot step "
                       f"in parallel ({type(e).__name__}: {e}); fastrl steps every agent "
                       "of an env at once: give a Parallel env") from None


def agent_group(agent: str) -> str:
    """The group of an agent by PettingZoo's naming: its name without a trailing
    ``_<number>`` (``adversary_0`` and ``adversary_1`` are ``adversary``)."""
    return re.sub(r"_\d+$", "", agent)


def agent_groups(agents: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The groups of ``agents`` (:func:`agent_group`), each once, in the agents' order."""
    return tuple(dict.fromkeys(map(agent_group, agents)))


#: the leaves of a row's observation where groups are told apart (GroupLayout)
GROUP_KEY, OBS_KEY, BY_GROUP = "group", "obs", "by_group"


class GroupLayout:
    """How an env's agents' observations and actions become one row's.

    Agents form groups by name (:func:`agent_group`); a group's agents share one
    observation space and one action space. A row holds its agent's observation as it is,
    unless the groups see different spaces or ``grouped`` (one network per group,
    ``algo.policy_per_group``) asks to tell them apart: then it holds a Dict of ``group``
    (the agent's group index) and ``obs`` (the observation, where all groups see one
    space) or ``by_group`` (every group's observation, only its own filled). Groups may
    act in different spaces where all are ``Discrete`` from 0: rows then act in
    ``Discrete(most)`` and carry an ``action_mask`` of the group's own actions (and of its
    observation's mask, where it has one), so that nothing illegal for the group is drawn.
    An :class:`EnvContractError` names two agents that break this."""

    def __init__(self, env: Any, env_id: str, grouped: bool = False) -> None:
        agents = list(env.possible_agents)
        if not agents:
            raise EnvContractError(f"env {env_id!r} has no possible_agents")
        self.groups = agent_groups(agents)
        self.group_of = {a: self.groups.index(agent_group(a)) for a in agents}
        first: dict[str, str] = {}  # group -> its first agent
        for agent in agents:
            leader = first.setdefault(agent_group(agent), agent)
            for kind in ("observation_space", "action_space"):
                _same_space(env, env_id, kind, leader, agent)
        self.group_spaces = {g: env.observation_space(a) for g, a in first.items()}
        acts = {g: env.action_space(a) for g, a in first.items()}
        self.action_space = _row_action_space(env_id, acts, first)
        self._actions = [int(getattr(acts[g], "n", 0)) for g in self.groups]
        _check_own_masks(env_id, self.group_spaces, acts, first)
        spaces_ = list(self.group_spaces.values())
        self._shared = all(sp == spaces_[0] for sp in spaces_)
        self._masked = len(set(self._actions)) > 1  # (Discrete counts that differ)
        self._plain = self._shared and not (grouped or self._masked)  # (the obs as it is)
        if self._plain:
            self.observation_space = spaces_[0]
            return
        fields: dict[str, gym.Space] = {GROUP_KEY: gym.spaces.Discrete(len(self.groups))}
        if self._shared:
            fields[OBS_KEY] = spaces_[0]
        else:
            fields[BY_GROUP] = gym.spaces.Dict(self.group_spaces)
            self._blank = {g: _zeros(space) for g, space in self.group_spaces.items()}
        if self._masked:
            fields[MASK_KEY] = gym.spaces.Box(0, 1, (int(self.action_space.n),), np.int8)
        self.observation_space = gym.spaces.Dict(fields)

    def row_obs(self, agent: str, obs: Any) -> Any:
        """What agent ``agent``'s row stores for its observation ``obs``."""
        if self._plain:
            return obs
        g = self.group_of[agent]
        row = {GROUP_KEY: g}
        if self._shared:
            row[OBS_KEY] = obs
        else:
            row[BY_GROUP] = {**self._blank, self.groups[g]: obs}
        if self._masked:
            own = obs.get(MASK_KEY) if isinstance(obs, dict) else None
            legal = np.ones(self._actions[g], np.bool_) if own is None else np.asarray(own) != 0
            mask = np.zeros(int(self.action_space.n), np.int8)
            # (no legal action in its own mask: every one of its group's, as masks go)
            mask[:self._actions[g]] = legal if legal.any() else 1
            row[MASK_KEY] = mask
        return row

    def padding(self) -> Any:
        """The observation of a row whose agent is not live: every leaf zero (a Discrete's
        start), every action legal."""
        return _zeros(self.observation_space, legal=True)


def _check_own_masks(env_id: str, group_spaces: dict[str, gym.Space],
                     acts: dict[str, gym.Space], first: dict[str, str]) -> None:
    """A group's own ``action_mask`` has one flag per action of its space."""
    for g, space in group_spaces.items():
        if not _own_mask(space):
            continue
        n = getattr(acts[g], "n", None)
        shape = space[MASK_KEY].shape
        if n is None or shape != (int(n),):
            raise EnvContractError(
                f"env {env_id!r}: the action_mask of agent {first[g]!r} has shape {shape}; a mask "
                f"takes one flag per action of a Discrete action space, not {acts[g]}")


def _row_action_space(env_id: str, acts: dict[str, gym.Space],
                      first: dict[str, str]) -> gym.Space:
    """The action space rows act in: the groups' one, or ``Discrete(most)`` for groups of
    ``Discrete`` spaces from 0 that differ in their counts."""
    spaces_ = list(acts.values())
    if all(sp == spaces_[0] for sp in spaces_):
        return spaces_[0]
    if all(isinstance(sp, gym.spaces.Discrete) and sp.start == 0 for sp in spaces_):
        return gym.spaces.Discrete(max(int(sp.n) for sp in spaces_))
    other = next(iter(acts))
    g = next(g for g in acts if acts[g] != acts[other])
    raise EnvContractError(
        f"env {env_id!r}: agents {first[other]!r} and {first[g]!r} act in {acts[other]} and "
        f"{acts[g]}; agent groups may differ in their action spaces only as Discrete spaces "
        "from 0 (rows act in the largest, the others' actions masked)")


def _own_mask(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces


def _same_space(env: Any, env_id: str, kind: str, one: str, other: str) -> None:
    a, b = getattr(env, kind)(one), getattr(env, kind)(other)
    if a != b:
        raise EnvContractError(
            f"env {env_id!r}: agents {one!r} and {other!r} have different "
            f"{kind.replace('_', ' ')}s ({a} and {b}); the agents of one group share their "
            "spaces (groups by name: agent_0 and agent_1 are one group)")


def _zeros(space: gym.Space, legal: bool = False) -> Any:
    """A value of ``space`` with every leaf at zero (at its least value where zero is not
    one: a Discrete's start); with ``legal``, a top-level action mask of ones."""
    if isinstance(space, gym.spaces.Dict):
        return {k: np.ones(v.shape, v.dtype) if legal and k == MASK_KEY else _zeros(v)
                for k, v in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_zeros(v) for v in space.spaces)
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(getattr(space, "start", 0) + np.zeros(space.shape), np.int64)
    return np.zeros(space.shape, space.dtype)


class ParallelEnvGroup(WritesRows):
    """PettingZoo Parallel envs, one per seed, as ``len(envs) * len(agents)`` rows of a
    :class:`~fastrl.envs.batched.BatchedEnv` (see the module doc). ``active`` ``[rows]``
    says which rows' observations are live agents' now; every result is checked.
    ``grouped``: rows tell their agent group (:class:`GroupLayout`)."""

    def __init__(self, envs: list[Any], env_id: str, seeds: list[int],
                 grouped: bool = False) -> None:
        self.envs, self.env_id, self.seeds = envs, env_id, seeds
        self.agents = tuple(envs[0].possible_agents)
        self.layout = GroupLayout(envs[0], env_id, grouped)
        self.observation_space, self.action_space = (self.layout.observation_space,
                                                     self.layout.action_space)
        self._index = {agent: a for a, agent in enumerate(self.agents)}
        self.num_envs = len(envs) * len(self.agents)
        self.max_episode_steps = None  # PettingZoo envs truncate as they like
        self.baseline = getattr(envs[0], "baseline", None)  # (the env's scripted player)
        self._store = ObsStore(env_id, self.observation_space)
        self._padding = np.zeros(self._store.shape, self._store.dtype)
        self._store.one(self._padding[None], 0, self.layout.padding(), "the padding")
        self._box_action = isinstance(self.action_space, gym.spaces.Box)
        self._rows = own_rows(self.num_envs, self._store.shape, self._store.dtype)
        self.active = np.zeros(self.num_envs, np.bool_)

    def reset(self) -> np.ndarray:
        """Reset every env with its seed; returns the first observations ``[rows, *obs]``."""
        for i, (env, seed) in enumerate(zip(self.envs, self.seeds)):
            self._reset_env(i, env, self._rows.obs, seed)
        return self._rows.obs

    def _reset_env(self, i: int, env: Any, obs_out: np.ndarray, seed: int | None) -> None:
        """Reset env ``i`` into its rows of ``obs_out`` (padding for absent agents)."""
        result = env.reset(seed=seed)
        where = "reset()"
        if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict)):
            raise contract_violation(self.env_id, where, "the result",
                                     "a 2-tuple (observations by agent, infos by agent)",
                                     result)
        rows = slice(i * len(self.agents), (i + 1) * len(self.agents))
        obs_out[rows] = self._padding
        self.active[rows] = False
        self._store_live(i, env, result[0], obs_out, where)

    def _store_live(self, i: int, env: Any, observations: dict, obs_out: np.ndarray,
                    where: str) -> None:
        """Write the observations of env ``i``'s live agents (``env.agents``) into their
        rows and mark those rows active."""
        base = i * len(self.agents)
        for agent in env.agents:
            row = base + self._row_of(agent, where)
            if agent not in observations:
                raise contract_violation(self.env_id, where, "the observations",
                                         f"an entry for every live agent, {agent!r} too",
                                         sorted(observations))
            self._store.one(obs_out, row, self.layout.row_obs(agent, observations[agent]),
                            f"{where} (agent {agent!r})")
            self.active[row] = True

    def _row_of(self, agent: str, where: str) -> int:
        index = self._index.get(agent)
        if index is None:
            raise contract_violation(self.env_id, where, "env.agents",
                                     f"agents of possible_agents {list(self.agents)}", agent)
        return index

    def step_into(self, actions: np.ndarray, out: StepRows) -> None:
        """Step every env once: each live agent acts with its row's action; an env whose
        agents are all done is reset in the same call (see the module doc for the rows of
        agents that are not live)."""
        if self._box_action:
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        out.reward[:] = 0.0
        out.terminated[:] = ~self.active  # padding steps end no return
        out.truncated[:] = False
        was_active = self.active.copy()
        out.obs[~was_active] = self._padding
        for i, env in enumerate(self.envs):
            self._step_env(i, env, actions, out)

    def _step_env(self, i: int, env: Any, actions: np.ndarray, out: StepRows) -> None:
        base, where = i * len(self.agents), "step()"
        live = list(env.agents)
        result = env.step({agent: actions[base + self._index[agent]] for agent in live})
        if not (isinstance(result, tuple) and len(result) == 5 and
                all(isinstance(x, dict) for x in result)):
            raise contract_violation(self.env_id, where, "the result", "a 5-tuple of dicts "
                                     "by agent (obs, rewards, terminations, truncations, "
                                     "infos)", result)
        observations, rewards, terms, truncs, _ = result
        for agent in live:
            row = base + self._index[agent]
            out.reward[row] = self._reward(agent, rewards)
            term, trunc = self._flag(agent, terms, "terminations"), \
                self._flag(agent, truncs, "truncations")
            out.terminated[row], out.truncated[row] = term, trunc
            if term or trunc:
                if agent in env.agents:
                    raise contract_violation(self.env_id, where, f"agent {agent!r}",
                                             "out of env.agents once terminated or truncated",
                                             "still in env.agents")
                if agent in observations:
                    self._store.one(out.final_obs, row,
                                    self.layout.row_obs(agent, observations[agent]),
                                    f"{where} (agent {agent!r})")
                elif trunc:
                    raise contract_violation(self.env_id, where, "the observations",
                                             f"the final observation of truncated agent "
                                             f"{agent!r}", sorted(observations))
                out.obs[row] = self._padding
                self.active[row] = False
            elif agent not in env.agents:
                raise contract_violation(self.env_id, where, f"agent {agent!r}",
                                         "terminated or truncated where it leaves env.agents",
                                         "neither")
        if not env.agents:
            self._reset_env(i, env, out.obs, None)
        else:
            self._store_live(i, env, observations, out.obs, where)

    def _reward(self, agent: str, rewards: dict) -> float:
        reward = rewards.get(agent, 0.0)
        if not isinstance(reward, (int, float, np.integer, np.floating)) or \
                isinstance(reward, bool):
            raise contract_violation(self.env_id, "step()", f"the reward of {agent!r}",
                                     "a real scalar", reward)
        return reward

    def _flag(self, agent: str, flags: dict, name: str) -> bool:
        flag = flags.get(agent, False)
        if not isinstance(flag, (bool, np.bool_)):
            raise contract_violation(self.env_id, "step()", f"{name}[{agent!r}]", "a bool",
                                     flag)
        return bool(flag)

    def close(self) -> None:
        """Close every env."""
        for env in self.envs:
            env.close()


def describe_agents(plan: Any) -> dict[str, Any]:
    """A run's agents (fastrl.describe's part of ``env``, merged into it): ``agents`` and
    ``agent_groups`` (null for one agent an env), ``policy_per_group``."""
    return {"agents": list(plan.agents) or None,
            "agent_groups": list(agent_groups(plan.agents)) or None,
            "policy_per_group": plan.cfg.algo.policy_per_group}


def agents_lines(env: dict[str, Any]) -> list[str]:
    """Its line in the rollout box of ``python -m fastrl.describe`` (none for one agent)."""
    if not env["agents"]:
        return []
    policy = "one network per group" if env["policy_per_group"] else "sharing one policy"
    return [f"agents: {', '.join(env['agents'])} (groups: {', '.join(env['agent_groups'])}), "
            f"one row each, {policy}; a row whose agent is not in its env is "
            "padding, kept out of the loss and the episode statistics until the env resets"]
