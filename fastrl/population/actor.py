"""A worker's action choice for every member's rows, each member from its own streams."""

from __future__ import annotations

import numpy as np
import torch

from fastrl.core.process import numpy_state, set_numpy_state
from fastrl.memory.layout import PER_ENV
from fastrl.models.actors import Actor
from fastrl.population.policy import PopulationPolicy
from fastrl.population.stacked import StackedActorCritic


class PopulationActor(Actor):
    """Member ``k``'s actor picks the actions of rows ``[k*rows, (k+1)*rows)``, drawing
    from member ``k``'s random streams (``streams[k]``: a state of
    fastrl.core.process.rng_state, the one its single run's worker acts from): its numpy
    actor from a random state of its own, a torch actor from torch's, swapped in around its
    call. With ``stacked`` (:func:`acts_stacked`) one stacked forward acts for every
    member (fastrl.population.stacked), each drawing from its own numpy random state as
    its actor would."""

    def __init__(self, policy: PopulationPolicy, actors: list[Actor], streams: list[dict],
                 rows: int, stacked: bool) -> None:
        self.actors, self.rows = actors, rows
        self._numpy = [np.random.RandomState() for _ in actors]
        self._torch: list[torch.Tensor] = []
        self.restore({"population_streams": streams})
        self._stacked = StackedActorCritic(list(policy.members), policy.flat,
                                           self._numpy) if stacked else None

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(action, log_prob, value)`` of every member's rows, in row order."""
        if self._stacked is not None:
            return self._stacked(obs)
        parts = []
        for k, actor in enumerate(self.actors):
            torch.set_rng_state(self._torch[k])
            parts.append(actor(obs[k * self.rows:(k + 1) * self.rows]))
            self._torch[k] = torch.get_rng_state()
        return tuple(np.concatenate(column) for column in zip(*parts))

    def begin_slot(self, slot: dict[str, np.ndarray], seq: int, version: int) -> None:
        """Each member's actor before a slot, on its rows of it (a recurrent one keeps its
        envs' states there)."""
        for k, actor in enumerate(self.actors):
            actor.begin_slot(self._rows_of(slot, k), seq, version)

    def end_step(self, terminated: np.ndarray, truncated: np.ndarray,
                 weight: np.ndarray | None) -> None:
        """Each member's actor after a step, on its rows."""
        for k, actor in enumerate(self.actors):
            rows = slice(k * self.rows, (k + 1) * self.rows)
            actor.end_step(terminated[rows], truncated[rows],
                           None if weight is None else weight[rows])

    def _rows_of(self, slot: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
        """Member ``k``'s rows of a slot: views of every field of rows (time-major ``[T,
        N, ...]``, the per-env ones ``[N, ...]``; not the slot's checksum)."""
        rows = slice(k * self.rows, (k + 1) * self.rows)
        return {name: a[rows] if name in PER_ENV else a[:, rows]
                for name, a in slot.items() if a.ndim}

    def state(self) -> dict:
        """Every member's streams, and each member's actor's state."""
        return {"population_streams": [
            {"numpy": numpy_state(rng), "torch": t} for rng, t in zip(self._numpy, self._torch)],
            "population_actors": [actor.state() for actor in self.actors]}

    def restore(self, state: dict) -> None:
        """Continue every member's streams and actor (:meth:`state`; or the streams the
        members' builds left)."""
        streams = state["population_streams"]
        for rng, stream, actor in zip(self._numpy, streams, self.actors):
            set_numpy_state(stream["numpy"], rng)
            if hasattr(actor, "rng"):  # (a numpy actor draws from its own state)
                actor.rng = rng
        self._torch = [stream["torch"].clone() for stream in streams]
        for actor, kept in zip(self.actors, state.get("population_actors", ())):
            actor.restore(kept)


def acts_stacked(policy: PopulationPolicy, exact: bool, inference: str) -> bool:
    """Whether a worker acts for every member of ``policy`` with one stacked forward: not
    ``exact`` (population.exact), numpy inference (infra.worker_inference, where the
    members' actors are numpy ones) and members the stacked forward computes."""
    return not exact and inference == "numpy" and StackedActorCritic.supports(
        list(policy.members), policy.flat)
