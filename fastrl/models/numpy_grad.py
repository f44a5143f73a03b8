"""The built-in MLP actor-critic's ``evaluate`` and its backward pass, in numpy, for the
learner's gradient steps on the CPU.

A PPO gradient step of CartPole's 64x64 networks on 256 transitions is about 25 MFLOP:
0.2 ms at this machine's matmul peak, but 1.3 ms through torch, where each of the ~150
small ops of the forward pass, autograd's backward and the gradient clipping costs its
dispatch (``python benchmarks/learner_cpu.py --cases cartpole-ppo`` prints the floor).
Written out, the step is a dozen BLAS products into reused arrays plus elementwise ufuncs.
The arrays are numpy views of the policy's own parameters and of gradient tensors bound
to them once, so torch's optimizer (fastrl.algos.adam) steps the same memory and
checkpoints see nothing different. Results agree with autograd's to float32 rounding
(tests/models/test_numpy_grad.py).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fastrl.models.numpy_actor import NumpyActorCritic, chosen_index
from fastrl.models.policy import LOG_SQRT_2PI, ActorCritic

FLOAT_MIN = np.finfo(np.float32).min


class NumpyGrad:
    """:meth:`ActorCritic.evaluate` of one policy in numpy (:meth:`evaluate`), and the
    gradient of a loss given its derivatives with respect to the log-probabilities,
    entropies and values (:meth:`backward`), written into the parameters' ``grad``."""

    def __init__(self, policy: ActorCritic) -> None:
        self.policy = policy
        self.net = NumpyActorCritic(policy)
        self.continuous = policy.continuous
        self._saved: tuple = ()  # what backward needs of the last evaluate
        # numpy views of the gradients, per layer (bind_grads)
        self._actor_grads: list[tuple[np.ndarray, np.ndarray]] = []
        self._critic_grads: list[tuple[np.ndarray, np.ndarray]] = []
        self._log_std_grad: np.ndarray | None = None

    @staticmethod
    def supports(policy: nn.Module) -> bool:
        """True for a policy :class:`NumpyActorCritic` computes, with float32 parameters on
        the CPU, its networks (and a Box action's ``log_std``) all trainable: a frozen one
        would need its gradient left out, which autograd does."""
        if not NumpyActorCritic.supports(policy):
            return False
        trained = [*policy.actor.parameters(), *policy.critic.parameters(),
                   *([policy.log_std] if policy.continuous else [])]
        return all(p.requires_grad for p in trained) and all(
            p.device.type == "cpu" and p.dtype == torch.float32 for p in policy.parameters())

    def bind_grads(self) -> list[np.ndarray]:
        """Give every trainable parameter a gradient tensor that :meth:`backward` writes
        (again after an optimizer dropped them); returns their numpy views."""
        policy = self.policy
        self._actor_grads = _layer_grads(policy.actor)
        self._critic_grads = _layer_grads(policy.critic)
        if self.continuous:
            policy.log_std.grad = torch.zeros_like(policy.log_std)
            self._log_std_grad = policy.log_std.grad.numpy()
        return [p.grad.numpy() for p in policy.parameters() if p.grad is not None]

    def inputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(features [size, n], legal [classes, n] or None)`` of observations
        ``[n, *obs]`` as stored: what :meth:`evaluate` reads (columns may be picked)."""
        mask = self.net._mask
        return self.net.features(obs), None if mask is None else mask.numpy(obs).T

    def evaluate(self, x: np.ndarray, legal: np.ndarray | None,
                 action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(log_prob, entropy, value)`` ``[n]`` of flat actions (class indices, or Box
        vectors ``[n, size]``) under the current weights, for features ``x`` ``[size, n]``
        (C order); what :meth:`backward` differentiates until the next call, which also
        reuses the returned arrays."""
        head = self.net.actor(x)
        value = self.net.critic(x)[..., 0, :]
        if self.continuous:
            log_std = self.net._log_std  # [size, 1]
            z = (action.swapaxes(-1, -2) - head) * np.exp(-log_std)
            log_prob = (-0.5 * z * z - log_std - np.float32(LOG_SQRT_2PI)).sum(-2)
            entropy = np.broadcast_to((0.5 + LOG_SQRT_2PI + log_std).sum(-2), value.shape)
            self._saved = (x, z)
            return log_prob, entropy, value
        if legal is not None:
            head[~legal] = -np.inf
        log_p = head - head.max(-2, keepdims=True)
        log_p -= np.log(np.exp(log_p).sum(-2, keepdims=True))
        p = np.exp(log_p)
        # (clamped as in fastrl.models.policy: a masked class adds 0 * finite, not nan)
        np.maximum(log_p, FLOAT_MIN, out=log_p)
        entropy = -(p * log_p).sum(-2)
        chosen = chosen_index(action, log_p.shape)
        self._saved = (x, chosen, p, log_p, entropy)
        return log_p.reshape(-1)[chosen], entropy, value

    def backward(self, d_log_prob: np.ndarray, d_entropy: float | np.ndarray,
                 d_value: np.ndarray) -> None:
        """Write into the parameters' gradients (overwriting them) the gradient of a loss
        whose derivatives with respect to :meth:`evaluate`'s last outputs are these (the
        same ``d_entropy`` for every sample: a loss of the mean entropy; with stacked
        networks, one per network ``[K, 1]``)."""
        d_entropy = np.asarray(d_entropy, np.float32)
        d_log_prob = d_log_prob[..., None, :]  # (against [classes or size, n])
        if self.continuous:
            x, z = self._saved
            inv_std = np.exp(-self.net._log_std)
            d_head = z * inv_std * d_log_prob
            np.sum(d_log_prob * (z * z - 1), axis=-1, out=self._log_std_grad)
            # (d entropy / d log_std: 1, for each of the n samples)
            self._log_std_grad += d_entropy * np.float32(d_log_prob.shape[-1])
        else:
            x, chosen, p, log_p, entropy = self._saved
            # d log p[a] / d logits = onehot(a) - p; d H / d logits = -p (log p + H)
            d_head = p * -d_log_prob
            d_head.reshape(-1)[chosen] += d_log_prob[..., 0, :]
            if d_entropy.any():
                d_head -= p * (log_p + entropy[..., None, :]) * d_entropy[..., None]
        self.net.actor.backward(x, d_head, self._actor_grads)
        self.net.critic.backward(x, d_value[..., None, :], self._critic_grads)


def _layer_grads(seq: nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(weight grad, bias grad)`` numpy views for each Linear layer of ``seq``, bound as
    the layers' gradient tensors."""
    grads = []
    for layer in seq:
        if isinstance(layer, nn.Linear):
            layer.weight.grad = torch.zeros_like(layer.weight)
            layer.bias.grad = torch.zeros_like(layer.bias)
            grads.append((layer.weight.grad.numpy(), layer.bias.grad.numpy()))
    return grads

