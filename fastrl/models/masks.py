"""Action masks: which discrete actions are legal now, read from the observations.

A simulator hands the legal actions over as the ``action_mask`` key of a Dict observation
(PettingZoo's convention; a Gymnasium env with sb3-contrib's ``action_masks()`` method gets
the key added by fastrl.envs.masks): ``n`` flags for ``Discrete(n)`` actions, nonzero where
the action is legal. The mask is stored with the observation, so the learner sees the mask
each action was chosen under. The built-in policies give illegal actions a -inf logit (or
Q-value): they are never sampled, never the greedy action, and carry no probability in the
log-probabilities and entropies of the loss. A mask with no legal action at all (a
terminal observation, say) allows every action, so that nothing becomes NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from fastrl.memory.records import MASK_KEY, Leaf, obs_record
from fastrl.models.encoders import UnsupportedObservations, leaf_tensor


class ActionMask:
    """Reads the legal actions ``[*batch, n]`` (bool) out of observations: records as
    stored, or nested leaf tensors (a Dict's ``action_mask``)."""

    def __init__(self, leaf: Leaf) -> None:
        self.leaf = leaf

    def __call__(self, obs: Any) -> torch.Tensor:
        mask = leaf_tensor(obs, self.leaf) if isinstance(obs, torch.Tensor) else obs[MASK_KEY]
        legal = mask != 0
        return legal | ~legal.any(-1, keepdim=True)  # none legal: every action is

    def numpy(self, obs: np.ndarray) -> np.ndarray:
        """The legal actions ``[*batch, n]`` (bool) of records ``[*batch, nbytes]``."""
        legal = self.leaf.view(obs) != 0
        return legal | ~legal.any(-1, keepdims=True)


def uniform_legal(legal: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One class index per row of ``legal`` ``[n, classes]``, uniform among its legal ones."""
    return np.where(legal, rng.random(legal.shape), -1.0).argmax(-1)


def action_mask(obs_space: spaces.Space, act_space: spaces.Space) -> ActionMask | None:
    """The :class:`ActionMask` of a Dict observation space with an ``action_mask`` key, None
    without one; :class:`UnsupportedObservations` when the mask does not fit the actions
    (``n`` flags for ``Discrete(n)``)."""
    record = obs_record(obs_space)
    leaf = record.mask if record is not None else None
    if leaf is None:
        return None
    if not isinstance(act_space, spaces.Discrete):
        raise UnsupportedObservations(
            f"the observation key {MASK_KEY!r} masks Discrete actions; the actions are "
            f"{act_space}. Rename the key, or act in a Discrete space")
    if leaf.shape != (int(act_space.n),):
        raise UnsupportedObservations(
            f"the observation key {MASK_KEY!r} must hold one flag per action, shape "
            f"({int(act_space.n)},) for {act_space}; it is {leaf.space}")
    return ActionMask(leaf)


def mask_logits(logits: torch.Tensor, legal: torch.Tensor | None) -> torch.Tensor:
    """``logits`` (or Q-values) with -inf where the action is not legal."""
    if legal is None:
        return logits
    return logits.masked_fill(~legal, float("-inf"))
