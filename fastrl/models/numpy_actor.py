"""The workers' action choice for the built-in MLP actor-critic, in numpy (its MLPs'
backward pass serves the learner's numpy gradient, fastrl.models.numpy_grad).

At a worker's batch sizes (tens of envs, 64-unit layers) a torch forward costs its per-op
dispatch (a few µs for each of ~25 ops) far more than its arithmetic; numpy's BLAS calls and
SIMD ufuncs into preallocated arrays do the same work in a third of the time (``python -m
pytest benchmarks/test_kernels.py -k "actor or inference"``). The weights are numpy views of the
policy's own parameters, so what a worker loads into the torch module is what acts here:
nothing is copied or kept in sync. The actions follow the same distributions as
:meth:`fastrl.models.policy.ActorCritic.act` (Gumbel-max over the log-softmax for Discrete
actions, the mean plus ``exp(log_std)`` times a standard normal for Box), drawn from numpy's global
random state as torch's are drawn from torch's (or from the actor's own ``rng``, where a
population gives each member its stream): the worker seeds both, and a run parked
at its end saves and restores both (fastrl.core.process.rng_state), so that a resumed run
acts as an uninterrupted one. Log-probabilities and values agree with torch's to float32
rounding.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

from fastrl.models.actors import Actor
from fastrl.models.encoders import ObsFeatures, RecordEncoder, RunningNorm
from fastrl.models.policy import LOG_SQRT_2PI, ActorCritic

TINY = np.finfo(np.float64).tiny
NORM_CLIP = np.float32(RunningNorm.CLIP)
ACTIVATIONS = {nn.Tanh: np.tanh, nn.ReLU: lambda x, out: np.maximum(x, 0, out=out)}


@functools.lru_cache(maxsize=32)
def _sample_offsets(shape: tuple[int, ...]) -> np.ndarray:
    blocks = np.arange(int(np.prod(shape[:-2])), dtype=np.intp) * shape[-2] * shape[-1]
    return blocks.reshape(*shape[:-2], 1) + np.arange(shape[-1])


def chosen_index(action: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Where each sample's class ``action`` ``[..., n]`` lies in an array of ``shape``
    ``[..., classes, n]``, flattened: one fancy index into it picks (or adds to) every
    sample's, a fraction of the cost of ``take_along_axis``."""
    return action * shape[-1] + _sample_offsets(shape)


def _tanh_grad(d: np.ndarray, y: np.ndarray) -> None:
    d *= 1 - y * y  # tanh' from its output


def _relu_grad(d: np.ndarray, y: np.ndarray) -> None:
    d *= y > 0


#: each activation's derivative, applied in place to the gradient ``d`` of its output ``y``
DERIVATIVES = {np.tanh: _tanh_grad, ACTIVATIONS[nn.ReLU]: _relu_grad}


def _view(p: torch.Tensor) -> np.ndarray:
    return p.detach().numpy()  # shares the parameter's memory


class NumpyMLP:
    """A ``Linear`` / ``Tanh`` / ``ReLU`` sequence over numpy views of its parameters,
    computed feature-major (``[features, batch]``) into reused arrays, one set per batch
    size. Feature-major, every product is weight ``[out, in]`` (C order, as torch stores
    it) times activations ``[in, batch]`` (C order): the cheapest BLAS case, about half the
    time of ``[batch, in]`` times the transposed weight at these sizes."""

    def __init__(self, seq: nn.Sequential,
                 weights: list[tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        """``seq``'s layers over views of its parameters, or over ``weights`` (a ``(weight,
        bias)`` pair per Linear layer of ``seq``, stacked ``[K, out, in]`` and ``[K, out]``
        for K networks of its shape, computed at once: fastrl.population.stacked)."""
        linears = [m for m in seq if isinstance(m, nn.Linear)]
        if weights is None:
            weights = [(_view(m.weight), _view(m.bias)) for m in linears]
        self.layers: list[tuple[np.ndarray, np.ndarray, object]] = []
        pairs = iter(weights)
        for module in seq:
            if isinstance(module, nn.Linear):
                w, b = next(pairs)
                self.layers.append((w, b[..., None], None))
            else:
                w, b, _ = self.layers[-1]
                self.layers[-1] = (w, b, ACTIVATIONS[type(module)])
        self._out: dict[int, list[np.ndarray]] = {}
        self._back: dict[int, list[np.ndarray]] = {}  # backward's gradients, likewise

    @staticmethod
    def supports(seq: nn.Module) -> bool:
        """True for an ``nn.Sequential`` of Linear layers, each followed by at most one of
        the activations this class computes (what :func:`fastrl.models.policy.mlp`
        builds)."""
        if not isinstance(seq, nn.Sequential) or not isinstance(seq[0], nn.Linear):
            return False
        if any(isinstance(m, nn.Linear) and m.bias is None for m in seq):
            return False
        kinds = [type(m) for m in seq]
        return all(k is nn.Linear or (k in ACTIVATIONS and prev is nn.Linear)
                   for prev, k in zip([None, *kinds], kinds))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The network's output ``[out, n]`` for ``x`` ``[in, n]`` float32, C order (with
        stacked weights ``[K, out, n]`` for ``[K, in, n]``: network k's of ``x[k]``; an
        array this object reuses on its next call with ``n`` columns)."""
        n = x.shape[-1]
        outs = self._out.get(n)
        if outs is None:
            outs = self._out[n] = [np.empty((*w.shape[:-1], n), np.float32)
                                   for w, _, _ in self.layers]
        for (w, b, activation), out in zip(self.layers, outs):
            np.matmul(w, x, out=out)
            out += b
            if activation is not None:
                activation(out, out=out)
            x = out
        return x

    def backward(self, x: np.ndarray, d: np.ndarray,
                 grads: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Backpropagate ``d`` ``[out, n]``, the gradient of a loss with respect to the
        output of the last call (whose input was ``x`` ``[in, n]``), into ``grads``: a
        ``(weight, bias)`` pair of arrays per layer, overwritten. ``d`` is overwritten."""
        n = x.shape[-1]
        outs = self._out[n]
        back = self._back.get(n)
        if back is None:
            back = self._back[n] = [np.empty_like(o) for o in outs[:-1]]
        for i in range(len(self.layers) - 1, -1, -1):
            w, _, activation = self.layers[i]
            if activation is not None:
                DERIVATIVES[activation](d, outs[i])
            grad_w, grad_b = grads[i]
            np.matmul(d, (outs[i - 1] if i else x).swapaxes(-1, -2), out=grad_w)
            np.sum(d, axis=-1, out=grad_b)
            if i:
                d = np.matmul(w.swapaxes(-1, -2), d, out=back[i - 1])


class NumpyActorCritic(Actor):
    """:meth:`ActorCritic.act` of one policy in numpy: an
    :class:`~fastrl.models.actors.Actor` (its arrays are valid until its next call), its
    samples drawn from ``rng`` (numpy's global random state unless set)."""

    def __init__(self, policy: ActorCritic) -> None:
        self.rng: np.random.RandomState = np.random.mtrand._rand
        features = policy._features
        norm = getattr(features, "norm", None)  # (a record's leaves are not standardised)
        self._norm = None if norm is None else (_view(norm.mean), _view(norm.var))
        self._size = features.size
        record = isinstance(features, RecordEncoder)
        # (leaf or None, features, one-hot classes or 0, first class) per part of the
        # features; a plain Box observation is read in one piece by features instead
        self._parts = [(leaf, e.size, e._one_hot, e._start) for leaf, e in zip(
            features.leaves if record else [None], features.encoders if record else [features])]
        self._in_parts = record or bool(features._one_hot)
        self._mask = policy.legal_actions
        self.actor, self.critic = NumpyMLP(policy.actor), NumpyMLP(policy.critic)
        self.continuous = policy.continuous
        self._act_start, self._act_shape = policy._act_start, policy.act_shape
        if self.continuous:
            self._log_std = _view(policy.log_std)[:, None]

    @staticmethod
    def supports(policy: nn.Module) -> bool:
        """True for fastrl's own :class:`ActorCritic` (not a subclass) over flat
        observation features with MLP heads: Box, Discrete (one-hot) or multi-valued
        observations, or records of such leaves, unstandardised (an action mask is fine);
        anything else acts through torch."""
        if type(policy) is not ActorCritic or not (
                NumpyMLP.supports(policy.actor) and NumpyMLP.supports(policy.critic)):
            return False
        features = policy._features
        if type(features) is RecordEncoder:
            return all(type(e) is ObsFeatures and e.norm is None for e in features.encoders)
        return type(features) is ObsFeatures

    def features(self, obs: np.ndarray) -> np.ndarray:
        """Observations ``[n, *obs]`` as float32 features ``[size, n]``, C order."""
        if self._in_parts:
            return self._part_features(obs)
        x = obs.reshape(len(obs), self._size)
        if self._norm is not None:
            x = standardized(x, *self._norm)
        return np.ascontiguousarray(x.T, np.float32)

    def _part_features(self, obs: np.ndarray) -> np.ndarray:
        """Records ``[n, nbytes]`` or Discrete observations ``[n]``: each part's features
        (a Discrete one one-hot, as ObsFeatures) as float32 ``[size, n]``."""
        n = len(obs)
        x = np.zeros((self._size, n), np.float32)
        row = 0
        for leaf, size, classes, start in self._parts:
            values = obs if leaf is None else leaf.view(obs)
            if classes:
                x[row + values.reshape(n).astype(np.intp) - start, np.arange(n)] = 1.0
            else:
                x[row:row + size] = values.reshape(n, size).T
            row += size
        return x

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(action, log_prob, value)`` sampled for observations ``[n, *obs]``."""
        x = self.features(obs)
        # [classes or action size, n]; a subclass's stacked networks add a leading axis
        head = self.actor(x)
        if self._mask is not None:  # as fastrl.models.masks.mask_logits
            head[~self._mask.numpy(obs).T] = -np.inf
        if self.continuous:
            noise = self._draw("standard_normal", head.shape).astype(np.float32)
            action = noise * np.exp(self._log_std)
            action += head
            log_prob = (noise * noise).sum(-2)
            log_prob *= -0.5
            log_prob -= (self._log_std.sum(-2)
                         + self._log_std.shape[-2] * np.float32(LOG_SQRT_2PI))
            action = action.swapaxes(-1, -2).reshape(len(obs), *self._act_shape)
        else:
            log_p = head - head.max(-2, keepdims=True)
            log_p -= np.log(np.exp(log_p).sum(-2, keepdims=True))
            # Gumbel-max, as fastrl.models.policy.sample_classes: argmax(log_p - log E)
            noise = self._draw("standard_exponential", head.shape)
            np.maximum(noise, TINY, out=noise)
            np.log(noise, out=noise)
            np.subtract(log_p, noise, out=noise)
            flat = noise.argmax(-2)
            log_prob = log_p.reshape(-1)[chosen_index(flat, log_p.shape)]
            action = (flat + self._act_start if self._act_start else flat).reshape(len(obs))
        return action, log_prob.reshape(len(obs)), self.critic(x)[..., 0, :].reshape(len(obs))

    def _draw(self, kind: str, shape: tuple[int, ...]) -> np.ndarray:
        """Samples of ``rng``'s distribution ``kind`` (a RandomState method's name)."""
        return getattr(self.rng, kind)(shape)


def standardized(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Features ``x`` ``[..., size]`` standardised by running statistics ``mean`` and
    ``var`` (broadcast against them) and clipped, as RunningNorm.forward does."""
    x = (x - mean) * (1.0 / np.sqrt(var + np.float32(1e-8)))
    return np.clip(x, -NORM_CLIP, NORM_CLIP, out=x)


def numpy_actor(policy: nn.Module) -> Actor | None:
    """A :class:`NumpyActorCritic` of ``policy`` when it supports one, else None."""
    return NumpyActorCritic(policy) if NumpyActorCritic.supports(policy) else None

