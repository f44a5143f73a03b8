"""The learner's update of every member: each member's columns of the batch, trained with
its own settings, optimizer and random stream, either by its own update, one member after
another (``population.exact``: bit for bit its single run), or by one stacked step for all
(:class:`BatchedUpdate`, the default where it applies)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from fastrl.algos.a2c import A2C
from fastrl.algos.a2c import STAT_NAMES as A2C_STAT_NAMES
from fastrl.algos.base import annealed
from fastrl.algos.ppo import (
    NUMPY_FIELDS,
    PPO,
    STAT_NAMES,
    clip_numpy_grads,
    explained_variance,
    normalized,
    numpy_ppo_backward,
)
from fastrl.memory.layout import PER_ENV
from fastrl.population.members import Population
from fastrl.population.pbt import PBT, Copy
from fastrl.population.stacked import StackedActorCritic, StackedAdam, StackedGrad


def member_batch(batch: dict[str, torch.Tensor], columns: torch.Tensor
                 ) -> dict[str, torch.Tensor]:
    """A member's part of a learner batch: its ``columns`` of every field (the per-env
    fields' rows), the batch its single run would train on."""
    return {name: t.index_select(0 if name in PER_ENV else 1, columns)
            for name, t in batch.items()}


class PopulationUpdate:
    """``updates[k]`` is member ``k``'s update (its algorithm's, on its own network, with
    its config's settings). :meth:`update` hands each its columns of the batch, its
    learning rate and its own env step, as its single run would; member ``k`` draws from
    torch's random state ``streams[k]`` (its minibatch order), swapped in around its
    update. The members ``policy`` (a PopulationPolicy) holds frozen, those solved, are
    not updated. With ``pbt`` (fastrl.population.pbt) each update ends with PBT's round
    where one is due: copies of members' weights, optimizer state, settings and reward
    statistics (never onto a frozen member)."""

    def __init__(self, population: Population, policy: Any, updates: list[Any],
                 streams: list[torch.Tensor], pbt: PBT | None = None) -> None:
        self.population, self.policy, self.updates, self.pbt = population, policy, updates, pbt
        self.streams = [s.clone() for s in streams]
        self._columns: dict[tuple[int, torch.device], list[torch.Tensor]] = {}
        self.reward_scale: Any = None

    def bind_reward_scale(self, scale: Any) -> None:
        """The learner's reward normaliser (``algo.normalize_reward``: a
        fastrl.learner.reward_scale.ReturnScale), a group per member:
        PBT copies a member's statistics with its weights, and its gamma with its
        settings."""
        self.reward_scale = scale

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
        returns the statistics' means over the members updated, and each member's under
        ``member<k>/`` (NaN for a frozen one: it trained no more)."""
        pop = self.population
        member_step = step // pop.size
        columns = self._member_columns(batch["reward"].shape[1], batch["reward"].device)
        per_member = {}
        for k, update in enumerate(self.updates):
            if k in self.policy.frozen:
                continue
            mine = member_batch(batch, columns[k])
            algo = update.cfg
            rate = annealed(algo.lr, algo.anneal_lr, member_step, algo.total_steps)
            torch.set_rng_state(self.streams[k])
            per_member[k] = update.update(mine, rate, member_step)
            self.streams[k] = torch.get_rng_state()
        self._pbt_round(batch, columns, member_step)
        names = next(iter(per_member.values()))
        return member_stats({name: torch.stack([per_member[k][name] if k in per_member
                                                else torch.tensor(torch.nan)
                                                for k in range(pop.size)])
                             for name in names})

    def _pbt_round(self, batch: dict[str, torch.Tensor], columns: list[torch.Tensor],
                   member_step: int) -> None:
        """With PBT: note the batch's episodes, and make the round's copies if one is due
        (fastrl.population.pbt)."""
        if self.pbt is None:
            return
        self.pbt.observe(batch, columns)
        for copy in self.pbt.round(member_step, [u.cfg for u in self.updates],
                                   self.policy.frozen):
            self._copy_member(copy.member, copy.source)
            self._take_settings(copy)
            if self.reward_scale is not None:
                self.reward_scale.copy_group(copy.member, copy.source)

    def _take_settings(self, copy: Copy) -> None:
        """A copied member's settings: its source's, perturbed as ``copy`` says (its
        rewards' discount too, where they are normalised)."""
        cfg = self.updates[copy.member].cfg = PBT.perturbed(self.updates[copy.source].cfg,
                                                            copy)
        if self.reward_scale is not None:
            self.reward_scale.gammas[copy.member] = cfg.gamma

    def _copy_member(self, member: int, source: int) -> None:
        """Member ``member`` takes ``source``'s weights and optimizer state."""
        dst, src = self.updates[member], self.updates[source]
        with torch.no_grad():
            for a, b in zip(dst.policy.parameters(), src.policy.parameters(), strict=True):
                a.copy_(b)
        dst.optimizer.load_state_dict(src.optimizer.state_dict())

    def _replay_lineage(self) -> None:
        """The members' settings after a checkpoint's copies (its lineage, in order)."""
        for copy in self.pbt.lineage:
            self._take_settings(copy)

    def pbt_state(self) -> dict:
        """PBT's state, where there is PBT."""
        return {} if self.pbt is None else {"pbt": self.pbt.state_dict()}

    def load_pbt_state(self, state: dict) -> None:
        """Restore :meth:`pbt_state`: the rounds, and the settings the lineage left."""
        if self.pbt is not None:
            self.pbt.load_state_dict(state["pbt"])
            self._replay_lineage()

    def state_dict(self) -> dict:
        """Every member's update state and random stream (and PBT's)."""
        return {"members": [u.state_dict() for u in self.updates], "streams": self.streams,
                **self.pbt_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        for update, member in zip(self.updates, state["members"]):
            update.load_state_dict(member)
        self.streams = [s.clone() for s in state["streams"]]
        self.load_pbt_state(state)


def member_stats(stats: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An update's statistics from each member's (``stats[name]``: ``[K]``, NaN for a
    member not updated): their means over the members updated, then each member's under
    ``member<k>/``."""
    out = {name: v.nanmean() for name, v in stats.items()}
    for k in range(len(next(iter(stats.values())))):
        out.update({f"member{k}/{name}": v[k] for name, v in stats.items()})
    return out


@dataclass(frozen=True)
class Coefficients:
    """PPO's loss settings for every member at once, as fastrl.algos.ppo's numpy step
    reads them: the float ones one per member ``[K, 1]``, the switches shared."""

    norm_adv: bool
    clip_vloss: bool
    ent_coef: np.ndarray
    vf_coef: np.ndarray
    max_grad_norm: np.ndarray

    @classmethod
    def of(cls, configs: list[Any]) -> Coefficients:
        """The members' algo configs' settings."""
        return cls(configs[0].norm_adv, configs[0].clip_vloss,
                   *(per_member([getattr(c, name) for c in configs])
                     for name in ("ent_coef", "vf_coef", "max_grad_norm")))


def per_member(values: list[float]) -> np.ndarray:
    """One float32 value per member, ``[K, 1]``."""
    return np.asarray(values, np.float32)[:, None]


class BatchedUpdate(PopulationUpdate):
    """Every member's PPO (APPO, A2C) update at once: each member's advantages and
    transitions as its own update makes them (``updates[k]``, fastrl.algos.ppo; APPO's
    are V-trace's, fastrl.algos.appo), then
    every gradient step of all members in one stacked numpy step
    (fastrl.population.stacked): member ``k``'s minibatch (in its own order, from
    ``streams[k]``), loss at its own settings, gradient clipped to its own norm, and its
    own Adam step. A2C's (fastrl.algos.a2c) is PPO's loss without ratio or clip, one step
    on the whole batch. Each member computes what its single run does, up to
    floating-point reduction order (tests/population/test_batched.py)."""

    def __init__(self, population: Population, policy: Any, updates: list[Any],
                 streams: list[torch.Tensor], pbt: PBT | None = None) -> None:
        super().__init__(population, policy, updates, streams, pbt)
        self.grad = StackedGrad(list(policy.members), policy.flat)
        group = updates[0].optimizer.param_groups[0]
        self.adam = StackedAdam(policy.flat, self.grad.grads, group["betas"], group["eps"])
        algo = updates[0].cfg  # (epochs and minibatches: not varied, shared)
        self.minibatches, self.epochs = algo.algorithm.minibatches(algo)
        self.unclipped = type(updates[0]).update is A2C.update
        self.stat_names = A2C_STAT_NAMES if self.unclipped else STAT_NAMES

    @staticmethod
    def supports(policy: Any, updates: list[Any]) -> bool:
        """True where every member's update is PPO's or A2C's step (fastrl.algos.ppo,
        fastrl.algos.a2c; APPO's is PPO's) on a network with a numpy step, without
        ``target_kl`` (whose early stop is each member's own), and the network computes
        stacked (:class:`StackedActorCritic`)."""
        return all(type(u).update in (PPO.update, A2C.update) and u._numpy is not None
                   and u.cfg.target_kl is None for u in updates) and \
            StackedActorCritic.supports(list(policy.members), policy.flat)

    def update(self, batch: dict[str, torch.Tensor], lr: float,
               step: int) -> dict[str, torch.Tensor]:
        """Every member's update on its columns of ``batch`` at once (``lr`` unused: each
        member anneals its own); statistics as :meth:`PopulationUpdate.update`'s."""
        member_step = step // self.population.size
        columns = self._member_columns(batch["reward"].shape[1], batch["reward"].device)
        data, explained = self._member_data(batch, columns)
        # (a frozen member's gradient is computed with the others', and not applied)
        lrs = [None if k in self.policy.frozen else
               annealed(u.cfg.lr, u.cfg.anneal_lr, member_step, u.cfg.total_steps)
               for k, u in enumerate(self.updates)]
        coef = Coefficients.of([u.cfg for u in self.updates])  # (PBT changes them)
        clip = None
        if self.unclipped:
            coef = replace(coef, clip_vloss=False)
        else:
            clip = per_member([u.clip_coef(member_step) for u in self.updates])
        n = data["x"].shape[-1]
        mb_size, whole = n // self.minibatches, self.minibatches == 1
        measured = []
        for epoch in range(self.epochs):
            order = None if whole else self._permutations(n)
            for start in range(0, n, mb_size):
                mb = data if order is None else _taken(data, order[:, start:start + mb_size])
                stats = numpy_ppo_backward(self.grad, mb, clip, coef, not whole,
                                           epoch == self.epochs - 1)
                norm = clip_numpy_grads(self.grad.bind_grads(), coef.max_grad_norm)
                self.adam.step(lrs)
                if stats is not None:
                    measured.append(np.concatenate([stats, norm[:, None]], 1))
        self._pbt_round(batch, columns, member_step)
        stats = dict(zip(self.stat_names, torch.from_numpy(np.mean(measured, 0)).T))
        stats["explained_variance"] = torch.stack(explained)
        frozen = torch.tensor([lr is None for lr in lrs])
        return member_stats({name: v.masked_fill(frozen, torch.nan)
                             for name, v in stats.items()})

    def _member_data(self, batch: dict[str, torch.Tensor], columns: list[torch.Tensor]
                     ) -> tuple[dict[str, np.ndarray], list[torch.Tensor]]:
        """Every member's transitions (member ``k``'s: its ``columns[k]`` of the batch) as
        its numpy step reads them (advantages normalised over the whole batch where one
        minibatch takes it), stacked ``[K, ...]``; and each member's explained
        variance."""
        parts, explained = [], []
        for k, update in enumerate(self.updates):
            mine = member_batch(batch, columns[k])
            adv, returns = update.advantages(mine)
            data = update._split({**mine, "adv": adv, "returns": returns})
            if self.minibatches == 1 and update.cfg.norm_adv:
                data["adv"] = normalized(data["adv"])
            parts.append(update._numpy_data(data))
            explained.append(explained_variance(returns, mine["value"]))
        stacked = {name: np.stack([p[name] for p in parts]) for name in ("x", *NUMPY_FIELDS)}
        return {**stacked, "legal": None}, explained

    def _permutations(self, n: int) -> np.ndarray:
        """Each member's minibatch order ``[K, n]``, from its own torch stream, as its
        single run draws it."""
        orders = []
        for k in range(self.population.size):
            torch.set_rng_state(self.streams[k])
            orders.append(torch.randperm(n).numpy())
            self.streams[k] = torch.get_rng_state()
        return np.stack(orders)

    def _copy_member(self, member: int, source: int) -> None:
        """Member ``member`` takes ``source``'s weights and Adam state (rows of the stacked
        tensors)."""
        self.adam.copy_row(member, source)

    def state_dict(self) -> dict:
        """Every member's Adam state and random stream (and PBT's)."""
        return {"adam": self.adam.state_dict(), "streams": self.streams, **self.pbt_state()}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.adam.load_state_dict(state["adam"])
        self.streams = [s.clone() for s in state["streams"]]
        self.load_pbt_state(state)


def _taken(data: dict[str, np.ndarray], order: np.ndarray) -> dict[str, np.ndarray]:
    """Each member's transitions ``order[k]`` of ``data`` (stacked ``[K, ..., n]``)."""
    members = np.arange(len(order))[:, None]
    out = {name: a[members, order] for name, a in data.items() if name not in ("x", "legal")}
    return {**out, "x": np.take_along_axis(data["x"], order[:, None, :], 2), "legal": None}
