"""What a config means concretely: env spaces, ring layout, segment sizes, learner device.

Computed once by the supervisor and handed to every child, so that all processes agree on
the bytes of every slot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from fastrl.algos.base import DataMode
from fastrl.compat import check_env_pairs
from fastrl.config import AlgoConfig, ConfigError, MainConfig
from fastrl.envs.batched import weighs_rows
from fastrl.envs.contract import check_env
from fastrl.envs.multiagent import agent_group, agent_groups
from fastrl.envs.source import EnvSource, env_source, worker_seeds
from fastrl.memory.control import RunControl
from fastrl.memory.layout import SlotLayout, trajectory_layout
from fastrl.memory.ring import Ring
from fastrl.memory.segments import check_shm_space, free_shm_bytes
from fastrl.memory.weights import SharedWeights
from fastrl.models.base import build_policy
from fastrl.models.grouped import has_groups
from fastrl.models.masks import action_mask
from fastrl.models.recurrent import state_size
from fastrl.population.members import Population, population_of, seeded_builds, widened
from fastrl.population.pbt import PBT
from fastrl.population.policy import PopulationPolicy
from fastrl.population.update import BatchedUpdate, PopulationUpdate
from fastrl.selfplay.checks import check_baseline
from fastrl.selfplay.games import training_win_rates
from fastrl.selfplay.pool import PoolPublisher, pool_banks

SHM_KNOBS = "infra.ring_slots, infra.rollout_len, infra.envs_per_worker or infra.num_workers"
MAX_BANKS = 64  # weights kept for deterministic asynchrony, at most


@dataclass(frozen=True)
class SlotSchedule:
    """Deterministic asynchrony (``infra.deterministic``): which weights every slot is
    collected with, and the order in which the learner takes slots, as functions of
    sequence numbers alone, so that two runs of one seed train on the same data.

    Slots are numbered run-wide: worker ``i``'s slot ``s`` is ``g = s * workers + i``, and
    the learner takes them in that order (SYNC and ASYNC: ``batch_slots`` per update, so
    slot ``g`` trains in update ``g // batch_slots``; REPLAY: one at a time, when the rate
    limiter admits one). The weights *key* of a slot (fastrl.memory.weights):

    - SYNC: version ``s - lag`` (the weights ``lag`` updates before the one that trains on
      the slot: the rule of the data mode);
    - ASYNC: the version current when the slot a full ring before it (``g - delay``) was
      taken, the newest a worker has without waiting when the rings are full; never more
      than ``lag`` updates before the slot's own;
    - REPLAY: ``g`` itself: the learner publishes the weights for slot ``g`` as it takes
      slot ``g - delay``, the slot whose room ``g`` fills.

    ``banks`` is how many weights the learner keeps so that none is replaced before every
    slot that needs it is collected.
    """

    data: DataMode
    workers: int
    batch_slots: int
    ring_slots: int
    lag: int

    @property
    def delay(self) -> int:
        """Slots the rings hold in all: a slot fills the room slot ``g - delay`` left."""
        return self.workers * self.ring_slots

    @property
    def banks(self) -> int:
        """Weights the learner keeps (the most a key can lag the learner's version, + 1)."""
        if self.data is DataMode.SYNC:
            return self.lag + 1
        if self.data is DataMode.ASYNC:
            return min(self.lag, -(-self.delay // self.batch_slots)) + 1
        return self.delay + 1

    def weights_key(self, worker: int, seq: int) -> int:
        """The key of the weights worker ``worker``'s slot ``seq`` is collected with."""
        g = seq * self.workers + worker
        if self.data is DataMode.SYNC:
            return max(0, seq - self.lag)
        if self.data is DataMode.ASYNC:
            return max(0, (g - self.delay) // self.batch_slots, g // self.batch_slots - self.lag)
        return g

    def first_seq(self, worker: int, next_slot: int) -> int:
        """Where ring ``worker`` starts so that the learner's next slot is ``next_slot`` and
        none before it exists (the fresh rings of a resumed run)."""
        return (next_slot - worker + self.workers - 1) // self.workers

    def next_slot(self, version: int, global_step: int, slot_steps: int) -> int:
        """The run-wide number of the slot the learner takes next, at weights ``version``
        and env step ``global_step``."""
        if self.data is DataMode.REPLAY:
            return global_step // slot_steps
        return version * self.batch_slots


def slot_schedule(cfg: MainConfig) -> SlotSchedule | None:
    """The run's :class:`SlotSchedule`, or None when it is not deterministic (``none``
    trains nothing; ``infra.deterministic`` off, or left unset where it would keep more
    than MAX_BANKS weights)."""
    algorithm, infra = cfg.algo.algorithm, cfg.infra
    if not algorithm.trains or infra.deterministic is False:
        return None
    schedule = SlotSchedule(algorithm.data, infra.num_workers, cfg.batch_slots,
                            infra.ring_slots, cfg.policy_lag_bound)
    if schedule.banks <= MAX_BANKS:
        return schedule
    if infra.deterministic:
        raise ConfigError(
            f"config key 'infra.deterministic=true' keeps {schedule.banks} copies of the "
            f"weights at infra.max_policy_lag={cfg.policy_lag_bound}; at most {MAX_BANKS}: "
            f"lower the lag bound below {MAX_BANKS} or set infra.deterministic=false")
    return None


@dataclass(frozen=True)
class RunPlan:
    """The resolved shape of a run; picklable for ``spawn``."""

    cfg: MainConfig
    env: EnvSource
    obs_space: gym.Space
    act_space: gym.Space
    layout: SlotLayout
    num_params: int
    device: str
    policy_spec: Any = None  # a user's policy (class, import string or module), see make_policy
    schedule: SlotSchedule | None = None  # deterministic asynchrony, when on
    max_episode_steps: int | None = None  # the envs' declared time limit (sizes final_obs)
    agents: tuple[str, ...] = ()  # a multi-agent env's possible agents, one row each
    population: Population | None = None  # the members of a population run (cfg: widened)

    @property
    def rows_per_env(self) -> int:
        """Slot rows one env takes: one per agent (fastrl.envs.multiagent)."""
        return max(1, len(self.agents))

    @property
    def slot_steps(self) -> int:
        """Env steps one slot holds (``rollout_len * envs_per_worker``)."""
        return self.cfg.infra.rollout_len * self.cfg.infra.envs_per_worker

    @property
    def weight_banks(self) -> int:
        """Weights the weights segment keeps (fastrl.memory.weights)."""
        return self.schedule.banks if self.schedule else 1

    @property
    def ring_bytes(self) -> int:
        """Bytes of one worker's ring segment."""
        return Ring.nbytes(self.layout, self.cfg.infra.ring_slots)

    @property
    def pool_banks(self) -> int:
        """Banks of the self-play pool (0 without self-play: fastrl.selfplay.pool)."""
        return pool_banks(self.cfg.selfplay, self.cfg.policy_lag_bound)

    @property
    def weights_bytes(self) -> int:
        """Bytes of the weights segment: the weights, then the self-play pool."""
        return SharedWeights.nbytes(self.num_params, self.weight_banks) + \
            (SharedWeights.nbytes(self.num_params, self.pool_banks) if self.pool_banks else 0)

    def weights_of(self, buf: memoryview) -> tuple[SharedWeights, SharedWeights | None]:
        """The weights in the weights segment ``buf``, and the self-play pool after them
        (None without self-play)."""
        main = SharedWeights.nbytes(self.num_params, self.weight_banks)
        weights = SharedWeights(buf[:main], self.num_params, self.weight_banks)
        pool = SharedWeights(buf[main:], self.num_params, self.pool_banks) \
            if self.pool_banks else None
        return weights, pool

    def learner_hooks(self, pool: SharedWeights | None) -> list:
        """What runs beside the learner's publish and checkpoint (the LearnerHook protocol
        of fastrl.learner.learner): self-play's pool publisher, given its ``pool``."""
        return [] if pool is None else [PoolPublisher(pool, self.cfg.selfplay.snapshot_every)]

    def return_groups(self) -> tuple[list[float], np.ndarray]:
        """``(gammas, groups)`` of ``algo.normalize_reward``'s return statistics
        (fastrl.learner.reward_scale): the group of each row of a slot, and each group's
        discount. One group of every row; a population's members, one each."""
        pop = self.population
        if pop is None:
            return [self.cfg.algo.gamma], np.zeros(self.cfg.infra.envs_per_worker, np.intp)
        return [c.algo.gamma for c in pop.configs], np.repeat(np.arange(pop.size), pop.rows)

    @property
    def episode_groups(self) -> tuple[str, ...]:
        """The group of each row of an env, reported apart (a multi-agent env's agent
        groups, fastrl.envs.multiagent.agent_group; a population's members, each a block of
        rows of a worker, all of which count as one env here); empty for one agent."""
        if self.population is not None:
            return self.population.row_groups()
        return tuple(agent_group(a) for a in self.agents)

    @property
    def episode_stats(self) -> Callable[[np.ndarray], dict[str, float]] | None:
        """Extra statistics of the training episodes' returns in every report: self-play's
        win and draw rates (its episodes are the learner's games); None."""
        return training_win_rates if self.cfg.selfplay.enabled else None

    def shm_bytes(self) -> dict[str, int]:
        """Shared memory the run needs, by segment kind."""
        w = self.cfg.infra.num_workers
        return {f"{w} rings": w * self.ring_bytes, "weights": self.weights_bytes,
                "control": self.control_bytes}

    @property
    def control_bytes(self) -> int:
        """Bytes of the run's control block (fastrl.memory.control): a line per member."""
        return RunControl.nbytes(1 if self.population is None else self.population.size)

    def check_shared_memory(self) -> None:
        """Raise :class:`~fastrl.memory.segments.SharedMemoryFull` unless /dev/shm has room
        for :meth:`shm_bytes` now (every runtime but serial, which keeps the rings in its
        own memory). The supervisor checks again just before it creates the segments."""
        if self.cfg.infra.runtime != "serial":
            check_shm_space(self.shm_bytes(), knobs=self._shm_knobs())

    def _shm_knobs(self) -> str:
        """The config keys that shrink :meth:`shm_bytes`; for a population, first its size,
        with the most members that fit in what /dev/shm has free now (the rings and
        weights grow with the members; counted per member, so the figure is never more
        than fits)."""
        if self.population is None:
            return SHM_KNOBS
        fixed = RunControl.nbytes(0)  # (the rest grows by the member)
        per_member = (sum(self.shm_bytes().values()) - fixed) / self.population.size
        fits = max(int((free_shm_bytes() - fixed) // per_member), 0)
        return f"population.size (at most {fits} members fit now), {SHM_KNOBS}"

    @property
    def trains(self) -> bool:
        """False for an algorithm that does not train (none): workers never wait for new
        weights."""
        return self.cfg.algo.algorithm.trains

    def policy(self, seeds: list[int] | None = None) -> nn.Module:
        """A freshly initialised policy of this run's architecture (on the CPU). A
        population's holds every member's network, each built right after seeding the
        process with its member's ``seeds`` entry (default: the member's run seed), as its
        single run builds it (fastrl.population.members.seeded_builds)."""
        pop = self.population
        if pop is None:
            return make_policy(self.cfg.algo, self.obs_space, self.act_space, self.policy_spec)
        nets, streams = seeded_builds(
            seeds or [c.seed for c in pop.configs],
            lambda k: make_policy(pop.configs[k].algo, self.obs_space, self.act_space))
        return PopulationPolicy(nets, streams, pop)

    def make_update(self, policy: nn.Module, device: torch.device,
                    run_dir: str | None = None) -> Any:
        """The algorithm's update of ``policy`` (a population's: each member's, with its
        own settings, all at once where fastrl.population.update's BatchedUpdate applies and
        ``population.exact`` is off, else one member after another; with
        ``population.pbt``, PBT's rounds, whose lineage goes to ``run_dir``)."""
        algorithm, pop = self.cfg.algo.algorithm, self.population
        if pop is None:
            return algorithm.make_update(self.cfg.algo, policy, self.obs_space,
                                         self.act_space, device)
        updates = [algorithm.make_update(c.algo, policy.member(k), self.obs_space,
                                         self.act_space, device)
                   for k, c in enumerate(pop.configs)]
        streams = [s["torch"] for s in policy.streams]
        settings = self.cfg.population
        pbt = PBT(settings.pbt, pop.size, list(settings.vary), self.cfg.seed, run_dir) \
            if settings.pbt.every_steps else None
        if not settings.exact and BatchedUpdate.supports(policy, updates):
            return BatchedUpdate(pop, policy, updates, streams, pbt)
        return PopulationUpdate(pop, policy, updates, streams, pbt)

    def worker_seeds(self, worker: int, incarnation: int) -> tuple[list[int], list[int]]:
        """``(env seeds, action-sampling seeds)`` of a worker: one sampling seed, or a
        population's one per member (fastrl.population.members)."""
        if self.population is not None:
            return self.population.worker_seeds(worker, incarnation)
        seeds, sampling = worker_seeds(self.cfg.seed, worker, self.cfg.infra.envs_per_worker,
                                       incarnation)
        return seeds, [sampling]


def make_policy(algo: AlgoConfig, obs_space: gym.Space, act_space: gym.Space,
                spec: Any = None) -> nn.Module:
    """The network workers act with and whose weights the learner publishes: the user's
    policy ``spec`` (see :func:`fastrl.models.base.build_policy`; checked against the
    algorithm's policy family, :class:`~fastrl.models.base.PolicyContractError` if it does
    not fit), else the family's built-in network (fastrl.models.families)."""
    family = algo.algorithm.policy
    if spec is not None:  # (what it does not combine with: fastrl.compat, at plan_run)
        return build_policy(spec, family, algo, obs_space, act_space)
    return family.build(obs_space, act_space, algo)


def resolve_device(requested: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cuda`` must exist."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError("config key 'infra.device=cuda': CUDA is not available here; "
                          "use auto or cpu")
    return requested


def plan_run(cfg: MainConfig, env: EnvSource | None = None, policy: Any = None) -> RunPlan:
    """Probe the env's spaces once and derive everything the processes must agree on.

    ``env`` is where the envs come from (default: the config's ``env`` section); ``policy``
    a user's policy (default: ``algo.policy``, else the built-in network). The env contract
    and the policy's are checked here, before any process starts.
    """
    population = population_of(cfg)
    if population is not None:  # (the rest of fastrl runs the wider run)
        cfg = widened(cfg)
    # (one network per agent group reads the group of each row: fastrl.envs.multiagent)
    env = replace(env or env_source(cfg.env), grouped=cfg.algo.policy_per_group)
    check_env(env, cfg.seed)
    probe = env.make([cfg.seed])
    obs_space, act_space = probe.observation_space, probe.action_space
    max_episode_steps = getattr(probe, "max_episode_steps", None)
    agents = tuple(getattr(probe, "agents", None) or ())
    weighted = weighs_rows(probe)
    probe.close()
    infra = cfg.infra
    check_env_pairs(cfg, env.env_id, agents, len(agent_groups(agents)), has_groups(obs_space),
                    trainer_policy=policy is not None)
    policy = policy if policy is not None else (cfg.algo.policy or None)
    check_baseline(cfg.selfplay)
    check_rows(cfg, env.env_id, agents)
    action_mask(obs_space, act_space)  # a mask that cannot mask these actions: refused now
    network = make_policy(cfg.algo, obs_space, act_space, policy)
    num_params = sum(p.numel() for p in network.parameters()) * \
        (population.size if population else 1)
    layout = trajectory_layout(obs_space, act_space, infra.rollout_len, infra.envs_per_worker,
                               max_episode_steps, state_size(network), weighted)
    return RunPlan(cfg, env, obs_space, act_space, layout, num_params,
                   resolve_device(infra.device), policy, slot_schedule(cfg), max_episode_steps,
                   agents, population)


def check_rows(cfg: MainConfig, env_id: str, agents: tuple[str, ...]) -> None:
    """A multi-agent env takes one slot row per agent: ``infra.envs_per_worker`` counts
    rows, so it must be a multiple of the agents."""
    rows = cfg.infra.envs_per_worker
    if agents and rows % len(agents):
        a = len(agents)
        raise ConfigError(
            f"config key 'infra.envs_per_worker={rows}': env {env_id!r} has {a} agents, each "
            f"a row of the slot, so envs_per_worker counts rows and must be a multiple of "
            f"{a} (e.g. {a * max(1, rows // a)}: {max(1, rows // a)} envs x {a} agents)")
