"""A population run as the rest of fastrl sees it: one wider run whose rows are the
members' blocks; and what each member owns of it (config, seeds, random streams)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from fastrl.core.process import rng_state, seed_everything, set_rng_state
from fastrl.envs.source import worker_seeds
from fastrl.population.config import member_config


@dataclass(frozen=True)
class Population:
    """The members of a run: ``configs[k]`` is member ``k``'s config (the single run it
    stands for); each owns ``rows`` consecutive rows of every worker's slot."""

    configs: tuple[Any, ...]
    rows: int

    @property
    def size(self) -> int:
        """Members."""
        return len(self.configs)

    def row_groups(self) -> tuple[str, ...]:
        """``member<k>`` for each row of a worker's slot: the groups episodes are reported
        by (fastrl.learner.report.ReportWindow)."""
        return tuple(f"member{k}" for k in range(self.size) for _ in range(self.rows))

    def columns(self, k: int, slots: int) -> torch.Tensor:
        """Member ``k``'s columns of a batch of ``slots`` slots side by side (``[T,
        slots * K * rows]``), in the order of the single run's batch."""
        starts = torch.arange(slots)[:, None] * (self.size * self.rows) + k * self.rows
        return (starts + torch.arange(self.rows)).flatten()

    def worker_seeds(self, worker: int, incarnation: int) -> tuple[list[int], list[int]]:
        """``(env seeds, sampling seeds)`` of worker ``worker``: every member's env seeds
        in member order, and each member's action-sampling seed, as its single run
        derives them (fastrl.rollout.worker)."""
        envs, sampling = [], []
        for cfg in self.configs:
            seeds, seed = worker_seeds(cfg.seed, worker, self.rows, incarnation)
            envs += seeds
            sampling.append(seed)
        return envs, sampling


def population_of(cfg: Any) -> Population | None:
    """The members of a run's config (fastrl.config.MainConfig); None for one member."""
    pop = cfg.population
    if pop.size == 1:
        return None
    configs = tuple(member_config(cfg, k) for k in range(pop.size))
    return Population(configs, cfg.infra.envs_per_worker)


def widened(cfg: Any) -> Any:
    """The run the rest of fastrl runs for a population's config: every worker steps every
    member's envs (``envs_per_worker`` times the members), and its step counts (total,
    evaluation and checkpoint intervals) are every member's together."""
    k = cfg.population.size
    infra, log = cfg.infra, cfg.log
    return replace(
        cfg, infra=replace(infra, envs_per_worker=infra.envs_per_worker * k),
        algo=replace(cfg.algo, total_steps=cfg.algo.total_steps * k),
        log=replace(log, eval_every_steps=log.eval_every_steps * k,
                    checkpoint_every_steps=log.checkpoint_every_steps * k))


def seeded_builds(seeds: list[int], build: Callable[[int], nn.Module]
                  ) -> tuple[list[nn.Module], list[dict]]:
    """``build(k)`` for each member, right after seeding the process with ``seeds[k]``, as
    a single run builds its network; returns the networks and the random state each build
    left (the member's streams from there on: fastrl.core.process.rng_state). The caller's
    random state is kept."""
    before = rng_state()
    nets, streams = [], []
    try:
        for k, seed in enumerate(seeds):
            seed_everything(seed)
            nets.append(build(k))
            streams.append(rng_state())
    finally:
        set_rng_state(before)
    return nets, streams
