"""Every member's network in one module: one set of weights to publish, load and save."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fastrl.models.encoders import observe_observations
from fastrl.models.policy import load_flat_params
from fastrl.population.members import Population
from fastrl.population.stacked import stack_parameters


class PopulationPolicy(nn.Module):
    """``members[k]`` is member ``k``'s network, as its single run builds it; the flat
    weights are the members' one after another (fastrl.models.policy.flat_params), and
    on the CPU the members' parameters are views of the rows of one tensor ``flat`` ``[K,
    P]``, which stacked code computes at once (fastrl.population.stacked). ``streams``
    are the random states the members' builds left
    (fastrl.population.members.seeded_builds), where the learner's updates continue.
    ``frozen``: the members solved, whose weights (normalisers included) no longer
    change (:meth:`freeze_member`)."""

    def __init__(self, members: list[nn.Module], streams: list[dict],
                 population: Population) -> None:
        super().__init__()
        self.flat = stack_parameters(members)  # (not a parameter: the members' are views)
        self.members = nn.ModuleList(members)
        self.streams, self.population = streams, population
        self.frozen: set[int] = set()

    def observe_rows(self, obs: torch.Tensor) -> None:
        """Fold a time-major batch of observations ``[T, N, ...]`` into each member's
        normalisers: member ``k``'s columns, in its single run's order
        (fastrl.models.encoders.observe_observations)."""
        pop = self.population
        slots = obs.shape[1] // (pop.size * pop.rows)
        for k, member in enumerate(self.members):
            if k not in self.frozen:
                observe_observations(member, obs.index_select(
                    1, pop.columns(k, slots).to(obs.device)))

    def member(self, k: int) -> nn.Module:
        """Member ``k``'s network."""
        return self.members[k]

    def freeze_member(self, k: int, flat: np.ndarray | None) -> None:
        """Member ``k`` is solved: it takes its part of ``flat`` (the whole policy's
        fastrl.models.policy.flat_params of the weights that solved; None: it keeps its
        own), and from now on no update or normaliser changes it."""
        if flat is not None:
            sizes = [sum(p.numel() for p in m.parameters()) for m in self.members]
            start = sum(sizes[:k])
            load_flat_params(self.members[k], flat[start:start + sizes[k]])
        self.frozen.add(k)


def members_summary(results: list[dict[str, float]]) -> dict[str, float]:
    """One evaluation of every member (``results[k]``: member ``k``'s summary) as one flat
    summary: each statistic's mean over the members, ``worst_return_mean``,
    ``median_return_mean`` and ``best_return_mean``, and each member's under
    ``member<k>/``."""
    means = [r["return_mean"] for r in results]
    out = {name: float(np.mean([r[name] for r in results])) for name in results[0]}
    out.update(worst_return_mean=float(min(means)), best_return_mean=float(max(means)),
               median_return_mean=float(np.median(means)))
    for k, r in enumerate(results):
        out.update({f"member{k}/{name}": v for name, v in r.items()})
    return out


def member_results(summary: dict[str, float]) -> list[dict[str, float]]:
    """Each member's own statistics of a :func:`members_summary` (its ``member<k>/*``
    keys, unprefixed), in member order; [] for a summary of one policy."""
    members: dict[int, dict[str, float]] = {}
    for key, value in summary.items():
        head, _, name = key.partition("/")
        if name and head.startswith("member") and head[6:].isdigit():
            members.setdefault(int(head[6:]), {})[name] = value
    return [members[k] for k in sorted(members)]
