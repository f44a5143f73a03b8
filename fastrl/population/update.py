"""The learner's update of every member: each member's columns of the batch, trained by its
own update with its own settings, optimizer and random stream."""

from __future__ import annotations

from typing import Any

import torch

from fastrl.algos.base import annealed
from fastrl.memory.layout import PER_ENV
from fastrl.population.members import Population


class PopulationUpdate:
    """``updates[k]`` is member ``k``'s update (its algorithm's, on its own network, with
    its config's settings). :meth:`update` hands each its columns of the batch, its
    learning rate and its own env step, as its single run would; member ``k`` draws from
    torch's random state ``streams[k]`` (its minibatch order), swapped in around its
    update."""

    def __init__(self, population: Population, updates: list[Any],
                 streams: list[torch.Tensor]) -> None:
        self.population, self.updates = population, updates
        self.streams = [s.clone() for s in streams]
        self._columns: dict[tuple[int, torch.device], list[torch.Tensor]] = {}

    def _member_columns(self, width: int, device: torch.device) -> list[torch.Tensor]:
        """Each member's columns of a batch ``width`` columns wide."""
        key = (width, device)
        if key not in self._columns:
            pop = self.population
            slots = width // (pop.size * pop.rows)
            self._columns[key] = [pop.columns(k, slots).to(device) for k in range(pop.size)]
        return self._columns[key]

    def update(self, batch: dict[str, torch.Tensor], lr: float,
               step: int) -> dict[str, torch.Tensor]:
        """Every member's update on its columns of ``batch`` at run step ``step`` (every
        member's steps together; ``lr`` is the run's, unused: each member anneals its own);
        returns the statistics' means over the members, and each member's under
        ``member<k>/``."""
        pop = self.population
        member_step = step // pop.size
        columns = self._member_columns(batch["reward"].shape[1], batch["reward"].device)
        per_member = []
        for k, (update, cfg) in enumerate(zip(self.updates, pop.configs)):
            mine = {name: t.index_select(0 if name in PER_ENV else 1, columns[k])
                    for name, t in batch.items()}
            algo = cfg.algo
            rate = annealed(algo.lr, algo.anneal_lr, member_step, algo.total_steps)
            torch.set_rng_state(self.streams[k])
            per_member.append(update.update(mine, rate, member_step))
            self.streams[k] = torch.get_rng_state()
        out = {name: torch.stack([s[name] for s in per_member]).mean()
               for name in per_member[0]}
        for k, stats in enumerate(per_member):
            out.update({f"member{k}/{name}": v for name, v in stats.items()})
        return out

    def state_dict(self) -> dict:
        """Every member's update state and random stream."""
        return {"members": [u.state_dict() for u in self.updates], "streams": self.streams}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        for update, member in zip(self.updates, state["members"]):
            update.load_state_dict(member)
        self.streams = [s.clone() for s in state["streams"]]
