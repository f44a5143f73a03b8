"""Actor-critic MLP policy: one class serves the workers' inference copy and the learner."""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from fastrl.models.encoders import make_encoder, orthogonal_init
from fastrl.models.masks import ActionMask, action_mask, mask_logits

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
#: ``algo.activation``: the hidden layers' activation of the actor-critic's MLPs (both are
#: computed by fastrl.models.numpy_actor too)
HIDDEN_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def sample_classes(log_p: torch.Tensor) -> torch.Tensor:
    """Class indices sampled from log-probabilities over the last dim, by Gumbel-max:
    ``argmax(log_p + G)`` with ``G = -log E``, ``E ~ Exp(1)``, is an exact sample and half
    the time of ``torch.multinomial`` on a worker's few rows. ``E`` is kept above zero so
    that a masked (-inf) class cannot win by ``-inf + inf``."""
    exp1 = torch.empty_like(log_p).exponential_().clamp_(min=torch.finfo(log_p.dtype).tiny)
    return (log_p - exp1.log_()).argmax(-1)


class UnsupportedActionSpace(TypeError):
    """An action space the built-in policy has no distribution for."""


def _layer(n_in: int, n_out: int, std: float) -> nn.Module:
    return orthogonal_init(nn.Linear(n_in, n_out), std)


def mlp(n_in: int, hidden: list[int], n_out: int, out_std: float,
        activation: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    """Orthogonally initialised MLP; ``out_std`` scales the output layer's init."""
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [_layer(n_in, h, np.sqrt(2)), activation()]
        n_in = h
    layers.append(_layer(n_in, n_out, out_std))
    return nn.Sequential(*layers)


def _torch_default_init(module: nn.Module) -> None:
    """Re-initialise every Linear and Conv2d layer of ``module`` as torch constructs them
    (``algo.ortho_init=false``, SB3's ``ortho_init=False``)."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            layer.reset_parameters()


class PolicyHead:
    """An actor-critic's action distribution over its network's head: Categorical over
    logits for Discrete actions (``Discrete.start`` offset in ``_act_start``), diagonal
    Gaussian around the head with the state-independent ``log_std`` for Box actions
    (``act_shape``). Shared by :class:`ActorCritic` and the plain-module wrapper of
    fastrl.models.base."""

    continuous: bool
    act_shape: tuple[int, ...]
    _act_start: int
    legal_actions: ActionMask | None = None  # the action mask (fastrl.models.masks)

    def _masked(self, head: torch.Tensor, obs) -> torch.Tensor:
        """The head's logits with -inf for the actions the observations' mask forbids."""
        legal = self.legal_actions
        return head if legal is None else mask_logits(head, legal(obs))

    def _log_prob_entropy(self, head: torch.Tensor, flat_action: torch.Tensor):
        """``(log_prob, entropy)`` of flat actions under the head's distribution (the
        learner's hot loop), written out rather than through torch.distributions: building
        a Categorical or Normal normalises and validates its arguments, a dozen more small
        ops per call that cost more than the network itself at CartPole sizes."""
        if self.continuous:
            entropy = (0.5 + LOG_SQRT_2PI + self.log_std).sum().expand(head.shape[:-1])
            return self._gaussian_log_prob(flat_action, head), entropy
        log_p = head.log_softmax(-1)
        log_prob = log_p.gather(-1, flat_action.unsqueeze(-1)).squeeze(-1)
        # (clamped: a class masked with a -inf logit adds 0 * finite, not 0 * -inf = nan)
        entropy = -(log_p.exp() * log_p.clamp(min=torch.finfo(log_p.dtype).min)).sum(-1)
        return log_prob, entropy

    def _gaussian_log_prob(self, flat_action: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        """Log-density of flat Box actions under the diagonal Gaussian around ``mean``."""
        z = (flat_action - mean) * (-self.log_std).exp()
        return (-0.5 * z * z - self.log_std - LOG_SQRT_2PI).sum(-1)

    def _choose(self, head: torch.Tensor, deterministic: bool):
        """``(action, log_prob)``: the mode (argmax / mean) or a sample, as stored."""
        if self.continuous:
            flat = head if deterministic else torch.addcmul(
                head, torch.randn_like(head), self.log_std.exp())
            log_prob = self._gaussian_log_prob(flat, head)
            return flat.reshape(*flat.shape[:-1], *self.act_shape), log_prob
        log_p = head.log_softmax(-1)
        flat = log_p.argmax(-1) if deterministic else sample_classes(log_p)
        log_prob = log_p.gather(-1, flat.unsqueeze(-1)).squeeze(-1)
        return flat + self._act_start, log_prob

    def _flat_action(self, action: torch.Tensor) -> torch.Tensor:
        """Stored actions as the distribution's values (flat Box vectors, class indices)."""
        if self.continuous:
            return action.reshape(*action.shape[:action.dim() - len(self.act_shape)], -1)
        return action.long() - self._act_start


class Heads(PolicyHead, nn.Module):
    """The parts every built-in actor-critic has: the encoder, the action distribution and
    separate actor and critic MLPs reading ``head_inputs`` features (the encoder's when
    None), with ``activation`` (a key of :data:`HIDDEN_ACTIVATIONS`) after each hidden
    layer. Layers are initialised orthogonally (CleanRL's gains), or as torch does without
    ``ortho_init``; a Box action's ``log_std`` starts at ``log_std_init``."""

    def __init__(self, obs_space: spaces.Space, act_space: spaces.Space, hidden: list[int],
                 encoder: str = "auto", normalize_obs: bool = False,
                 head_inputs: int | None = None, activation: str = "tanh",
                 ortho_init: bool = True, log_std_init: float = 0.0):
        super().__init__()
        if activation not in HIDDEN_ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; known: "
                             f"{', '.join(HIDDEN_ACTIVATIONS)}")
        # one encoder feeds both heads: a CNN torso is most of the network's cost
        self._features = make_encoder(obs_space, encoder, normalize_obs)
        self._act_start = 0  # Discrete(n, start): the network's classes are 0..n-1
        if isinstance(act_space, spaces.Discrete):
            self.continuous = False
            n_out = int(act_space.n)
            self._act_start = int(act_space.start)
        elif isinstance(act_space, spaces.Box):
            self.continuous = True
            n_out = int(np.prod(act_space.shape))
            self.log_std = nn.Parameter(torch.full((n_out,), float(log_std_init)))
        else:
            raise UnsupportedActionSpace(
                f"the PPO policy acts in Discrete or Box action spaces, not {act_space}"
            )
        self.act_shape = tuple(act_space.shape or ())
        self.legal_actions = action_mask(obs_space, act_space)
        n_in = self._features.size if head_inputs is None else head_inputs
        self.actor = mlp(n_in, hidden, n_out, 0.01, HIDDEN_ACTIVATIONS[activation])
        self.critic = mlp(n_in, hidden, 1, 1.0, HIDDEN_ACTIVATIONS[activation])
        if not ortho_init:
            _torch_default_init(self)


class ActorCritic(Heads):
    """Separate actor and critic MLPs; Categorical head for Discrete, diagonal Gaussian
    (state-independent std) for Box. Inputs are observations as the ring stores them,
    with any number of leading batch dimensions."""

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values of a batch of observations."""
        return self.critic(self._features(obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """``(action, log_prob, value)`` for a batch of observations (rollout inference).

        ``deterministic`` takes the mode (argmax / mean) for evaluation.
        """
        x = self._features(obs)
        action, log_prob = self._choose(self._masked(self.actor(x), obs), deterministic)
        return action, log_prob, self.critic(x).squeeze(-1)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor):
        """``(log_prob, entropy, value)`` of stored actions under the current weights."""
        x = self._features(obs)
        log_prob, entropy = self._log_prob_entropy(self._masked(self.actor(x), obs),
                                                   self._flat_action(action))
        return log_prob, entropy, self.critic(x).squeeze(-1)


def param_shapes(model: nn.Module) -> dict[str, list[int]]:
    """Shape of every tensor of ``model``'s state dict: what a checkpoint must match."""
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def flat_params(model: nn.Module) -> np.ndarray:
    """All parameters as one float32 vector (the layout of the shared weights segment)."""
    # reshape, not view: a convolution's weight in channels-last memory is not contiguous
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu().numpy()


def load_flat_params(model: nn.Module, flat: np.ndarray) -> None:
    """Copy a vector laid out by :func:`flat_params` into ``model`` (no aliasing of ``flat``)."""
    src = torch.from_numpy(flat)
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(src[offset : offset + n].view_as(p))
            offset += n


def keep_solved(model: nn.Module, member: int, flat: np.ndarray | None) -> None:
    """Member ``member`` of ``model`` reached the target return with the weights ``flat``
    (:func:`flat_params` of the whole model; None: the current ones): it takes them back.
    A model of several members (fastrl.population) then trains that member no more
    (``freeze_member``); a single model's run ends anyway."""
    freeze = getattr(model, "freeze_member", None)
    if freeze is not None:
        freeze(member, flat)
    elif flat is not None:
        load_flat_params(model, flat)
