"""Every member's network computed at once: the members' parameters live in one ``[K, P]``
tensor (member ``k``'s ``P`` parameters in row ``k``, each member's own parameters views of
it), so each layer's weights are one stacked ``[K, out, in]`` array and one ``np.matmul``
computes the layer for all K members (fastrl.models.numpy_actor's MLPs, with a leading
member axis). ``np.matmul`` over a stack runs the same product per member as over one
matrix, so a stacked forward gives each member what its own does
(tests/population/test_stacked.py).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fastrl.models.encoders import ObsFeatures
from fastrl.models.numpy_actor import NumpyActorCritic, NumpyMLP, standardized
from fastrl.models.numpy_grad import NumpyGrad

#: where each parameter starts in a row, and the row's length, in multiples of 64 bytes (as
#: torch allocates one): kernels take other paths, and round otherwise, for data that starts
#: elsewhere (tests/population/test_stacked.py)
ALIGN = 16  # float32s


def _layout(member: nn.Module) -> tuple[list[tuple[str, int, torch.Tensor]], int]:
    """``(name, offset, parameter)`` of each parameter of ``member`` in its row, and the
    row's length."""
    out, offset = [], 0
    for name, p in member.named_parameters():
        out.append((name, offset, p))
        offset += -(-p.numel() // ALIGN) * ALIGN
    return out, offset


def stack_parameters(members: list[nn.Module]) -> torch.Tensor:
    """Move the parameters of ``members`` (networks of one architecture) into one ``[K,
    P]`` tensor, each parameter becoming a view of its member's row (values unchanged;
    zeros between them); returns the tensor."""
    width = _layout(members[0])[1]
    flat = torch.zeros(len(members), width, dtype=next(members[0].parameters()).dtype)
    for k, member in enumerate(members):
        for name, offset, p in _layout(member)[0]:
            view = flat[k, offset:offset + p.numel()].view_as(p)
            view.copy_(p.detach())
            owner, _, leaf = name.rpartition(".")
            setattr(member.get_submodule(owner), leaf,
                    nn.Parameter(view, requires_grad=p.requires_grad))
    return flat


def stacked_views(flat: np.ndarray, member: nn.Module) -> dict[str, np.ndarray]:
    """Each parameter of ``member`` (the layout of a row of ``flat`` ``[K, P]``, as
    :func:`stack_parameters` made it) as a ``[K, *shape]`` view of ``flat``."""
    return {name: flat[:, offset:offset + p.numel()].reshape(len(flat), *p.shape)
            for name, offset, p in _layout(member)[0]}


def _linear_views(seq: nn.Sequential, views: dict[str, np.ndarray],
                  prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(weight, bias)`` of each Linear layer of ``seq`` (the module ``prefix`` of a
    member), stacked: from ``views`` (:func:`stacked_views`)."""
    return [(views[f"{prefix}.{i}.weight"], views[f"{prefix}.{i}.bias"])
            for i, m in enumerate(seq) if isinstance(m, nn.Linear)]


def views_flat(members: list[nn.Module], flat: torch.Tensor) -> bool:
    """True while every parameter of ``members`` is still a CPU view of ``flat`` (moving
    a network to another device copies its parameters out)."""
    base = flat.untyped_storage().data_ptr()
    return flat.device.type == "cpu" and all(
        p.untyped_storage().data_ptr() == base for m in members for p in m.parameters())


class StackedActorCritic(NumpyActorCritic):
    """:class:`NumpyActorCritic` of K members at once: rows ``[k*rows, (k+1)*rows)`` of
    the observations are member ``k``'s, acted on by its network with samples drawn from
    ``rngs[k]``, the draws its own actor would take."""

    def __init__(self, members: list[nn.Module], flat: torch.Tensor,
                 rngs: list[np.random.RandomState]) -> None:
        super().__init__(members[0])
        views = stacked_views(flat.numpy(), members[0])
        self.actor = NumpyMLP(members[0].actor, _linear_views(members[0].actor, views, "actor"))
        self.critic = NumpyMLP(members[0].critic,
                               _linear_views(members[0].critic, views, "critic"))
        if self.continuous:
            self._log_std = views["log_std"][..., None]
        if self._norm is not None:  # (each member's running statistics, [K, 1, size])
            self._norm = tuple(views[f"_features.norm.{n}"][:, None] for n in ("mean", "var"))
        self.members, self.rngs = len(members), rngs

    @staticmethod
    def supports(members: list[nn.Module], flat: torch.Tensor) -> bool:
        """True for members :class:`NumpyActorCritic` computes over plain Box
        observations (standardised or not), without an action mask, their parameters views
        of ``flat``."""
        return views_flat(members, flat) and all(
            NumpyActorCritic.supports(m) and type(m._features) is ObsFeatures
            and not m._features._one_hot and m.legal_actions is None for m in members)

    def features(self, obs: np.ndarray) -> np.ndarray:
        """Observations ``[K*rows, *obs]`` as float32 features ``[K, size, rows]``, each
        member's standardised by its own statistics where it keeps them."""
        x = obs.reshape(self.members, len(obs) // self.members, self._size)
        if self._norm is not None:
            x = standardized(x, *self._norm)
        return np.ascontiguousarray(x.swapaxes(1, 2), np.float32)

    def _draw(self, kind: str, shape: tuple[int, ...]) -> np.ndarray:
        """Each member's samples ``shape[1:]``, from its own random state."""
        return np.stack([getattr(rng, kind)(shape[1:]) for rng in self.rngs])


class StackedGrad(NumpyGrad):
    """:class:`NumpyGrad` of K members at once: :meth:`evaluate` takes features ``[K,
    size, n]`` and actions ``[K, n]`` (member k's minibatch in row k) and :meth:`backward`
    writes every member's gradient into ``grads`` ``[K, P]``, laid out as the parameters'
    ``flat`` (what :class:`StackedAdam` steps)."""

    def __init__(self, members: list[nn.Module], flat: torch.Tensor) -> None:
        self.policy = members[0]
        self.net = StackedActorCritic(members, flat, [])
        self.continuous = self.net.continuous
        self._saved = ()
        self.grads = torch.zeros_like(flat)
        views = stacked_views(self.grads.numpy(), members[0])
        self._actor_grads = _linear_views(members[0].actor, views, "actor")
        self._critic_grads = _linear_views(members[0].critic, views, "critic")
        self._log_std_grad = views.get("log_std")

    def bind_grads(self) -> list[np.ndarray]:
        """The gradients, ``[K, P]`` (bound once, at construction)."""
        return [self.grads.numpy()]


class StackedAdam:
    """Adam over the members' ``params`` ``[K, P]`` with gradients ``grads`` ``[K, P]``:
    torch's fused kernel (as fastrl.algos.adam) on each member's row, at the member's
    learning rate; members at one rate step in one call."""

    def __init__(self, params: torch.Tensor, grads: torch.Tensor,
                 betas: tuple[float, float], eps: float) -> None:
        self.params, self.grads, self.betas, self.eps = params, grads, betas, eps
        self.exp_avg = torch.zeros_like(params)
        self.exp_avg_sq = torch.zeros_like(params)
        self.steps = [torch.zeros((), dtype=torch.float32) for _ in range(len(params))]

    @torch.no_grad()
    def step(self, lrs: list[float | None]) -> None:
        """One Adam step of every member, member ``k`` at learning rate ``lrs[k]`` (None: it
        takes no step)."""
        for lr in dict.fromkeys(r for r in lrs if r is not None):
            rows = [k for k, r in enumerate(lrs) if r == lr]
            torch._foreach_add_([self.steps[k] for k in rows], 1)
            torch._fused_adam_(
                [self.params[k] for k in rows], [self.grads[k] for k in rows],
                [self.exp_avg[k] for k in rows], [self.exp_avg_sq[k] for k in rows], [],
                [self.steps[k] for k in rows], amsgrad=False, lr=lr, beta1=self.betas[0],
                beta2=self.betas[1], weight_decay=0.0, eps=self.eps, maximize=False,
                grad_scale=None, found_inf=None)

    @torch.no_grad()
    def copy_row(self, member: int, source: int) -> None:
        """Member ``member`` takes ``source``'s parameters, moments and step count."""
        for t in (self.params, self.exp_avg, self.exp_avg_sq):
            t[member].copy_(t[source])
        self.steps[member].copy_(self.steps[source])

    def state_dict(self) -> dict:
        """The moments and step counts."""
        return {"exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone(),
                "steps": torch.stack(self.steps)}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`."""
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])
        for step, saved in zip(self.steps, state["steps"]):
            step.copy_(saved)
