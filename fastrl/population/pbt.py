"""Population-based training (Jaderberg et al. 2017) inside one learner.

Every ``population.pbt.every_steps`` member env steps comes a round: the members are
ranked by their fitness, the mean return of their training episodes that ended since the
last round (read from the batches the learner trains on: a window of env steps, so two runs
of a population rank alike); each member of the bottom ``fraction`` copies one of the top
``fraction`` (its weights and optimizer state: the update applies the copy) and takes its
``population.vary`` settings, each multiplied by a factor drawn from ``perturb`` and kept
within its key's bounds (a discount of at most 1, ...), and with ``algo.normalize_reward``
its reward statistics. The draws come from a generator seeded by the run's seed and the
round, so a run repeats its lineage, which is kept (every copy: who copied whom, when, at
which fitness, the new settings) in the learner's checkpoint and written to
``members.csv``.

The copy takes effect with the weights published after the update that made it; a sync
algorithm without policy lag (the only kind PBT runs with: fastrl.compat) collects the
next batch with them, so no copied member trains on data of its old weights.
"""

from __future__ import annotations

import csv
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fastrl.population.config import value_of, varied, within_bounds

MEMBERS_CSV = "members.csv"


@dataclass(frozen=True)
class Copy:
    """One member's copy in a round: at member step ``step``, ``member`` (fitness
    ``fitness``) took ``source``'s weights, optimizer state and settings (fitness
    ``source_fitness``), its varied settings then becoming ``settings``."""

    step: int
    member: int
    source: int
    fitness: float
    source_fitness: float
    settings: dict[str, float]


class PBT:
    """The rounds of a population of ``size`` members whose settings ``keys`` (the
    ``population.vary`` keys) PBT perturbs; ``run_dir`` gets ``members.csv``."""

    def __init__(self, cfg: Any, size: int, keys: list[str], seed: int,
                 run_dir: str | None) -> None:
        self.cfg, self.size, self.keys, self.seed = cfg, size, keys, seed
        self.run_dir = run_dir
        self.rounds = 0
        self.next_round = cfg.every_steps
        self._returns: list[list[float]] = [[] for _ in range(size)]  # since the last round
        self.lineage: list[Copy] = []

    def observe(self, batch: dict[str, torch.Tensor], columns: list[torch.Tensor]) -> None:
        """Note each member's training episodes that ended in ``batch`` (member ``k``'s
        columns: ``columns[k]``)."""
        done = batch["terminated"] | batch["truncated"]
        for k, cols in enumerate(columns):
            ended = done.index_select(1, cols)
            if ended.any():
                self._returns[k] += batch["episode_return"].index_select(1, cols)[ended].tolist()

    def round(self, member_step: int, configs: list[Any],
              frozen: Collection[int] = ()) -> list[Copy]:
        """The copies of the round due at ``member_step`` (none when none is), given the
        members' algo configs ``configs`` (their current settings); the members ``frozen``
        (solved) copy none."""
        if not self.cfg.every_steps or member_step < self.next_round:
            return []
        while self.next_round <= member_step:
            self.next_round += self.cfg.every_steps
        fitness = [float(np.mean(r)) if r else -np.inf for r in self._returns]
        self._returns = [[] for _ in range(self.size)]
        # (stable: ties keep member order)
        order = np.argsort(np.asarray(fitness), kind="stable").tolist()
        n = max(1, int(self.cfg.fraction * self.size))
        bottom, top = [k for k in order if k not in frozen][:n], order[-n:]
        rng = np.random.default_rng([self.seed, self.rounds])
        self.rounds += 1
        copies = []
        for member in bottom:
            source = top[int(rng.integers(len(top)))]
            settings = {key: within_bounds(configs[source], key, value_of(configs[source], key)
                                           * float(rng.choice(self.cfg.perturb)))
                        for key in self.keys}
            copies.append(Copy(member_step, member, source, fitness[member], fitness[source],
                               settings))
        self.lineage += copies
        self._write()
        return copies

    @staticmethod
    def perturbed(config: Any, copy: Copy) -> Any:
        """The algo config a copied member trains with from now: ``config`` (its source's)
        with the copy's settings."""
        return varied(config, copy.settings)

    def _write(self) -> None:
        """``members.csv``: every copy so far, one row each."""
        if self.run_dir is None:
            return
        with (Path(self.run_dir) / MEMBERS_CSV).open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["step", "member", "source", "fitness", "source_fitness",
                          *self.keys])
            for c in self.lineage:
                out.writerow([c.step, c.member, c.source, c.fitness, c.source_fitness,
                              *(c.settings[key] for key in self.keys)])

    def state_dict(self) -> dict:
        """The rounds so far, the returns noted since the last and the lineage."""
        return {"rounds": self.rounds, "next_round": self.next_round,
                "returns": [list(r) for r in self._returns],
                "lineage": [asdict(c) for c in self.lineage]}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.rounds, self.next_round = state["rounds"], state["next_round"]
        self._returns = [list(r) for r in state["returns"]]
        self.lineage = [Copy(**c) for c in state["lineage"]]
        self._write()
