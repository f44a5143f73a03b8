"""Recurrent actor-critic: the built-in encoder, an LSTM or GRU core, then the actor and
critic MLPs (``algo.core``; sb3-contrib's RecurrentPPO and CleanRL's ppo_atari_lstm put the
core in the same place).

The core's state is one float32 vector per env (``state_size``; an LSTM's is ``h`` and
``c`` joined). Workers keep each env's state, zero it where an episode starts, and store
every env's state at a slot's first step in the slot (``core_state``); the learner replays
each env's sequence of the slot from that state, zeroing it again where an episode starts
within the slot. Back-propagation is truncated at the slot's first step: the stored state is
a constant.

The learner's replay (:meth:`RecurrentActorCritic.evaluate_sequences`, every gradient step)
is one call of torch's sequence kernel (``torch.lstm`` / ``torch.gru``, with the cell's own
weights) over every episode piece of the minibatch, each piece a column of its own starting
from its state: a Python loop of one cell call per step cost 3-7x as much in the cell's
forward and backward on the CPU, in per-op overhead (numbers: docs/bench.md, "Recurrent
policies"; the test against the loop: tests/models/test_recurrent.py).
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import nn

from fastrl.models.policy import Heads

NO_CORE = "none"  # algo.core of a feed-forward network
CORES = (NO_CORE, "lstm", "gru")


def is_recurrent(policy: nn.Module) -> bool:
    """The policy is the built-in recurrent actor-critic (``algo.core``), which carries a
    state from step to step (a user policy's attributes of any name mean nothing here)."""
    return isinstance(policy, RecurrentActorCritic)


def state_size(policy: nn.Module) -> int:
    """Floats of state per env the policy carries: 0 unless :func:`is_recurrent`."""
    return policy.state_size if is_recurrent(policy) else 0


def episode_starts(terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """``[T, N]`` bool: True where an episode starts within a slot, after a step that ended
    one. Row 0 is False: the state stored at a slot's first step was already zeroed there
    by the worker."""
    first = torch.zeros_like(terminated)
    first[1:] = terminated[:-1] | truncated[:-1]
    return first


class RecurrentActorCritic(Heads):
    """The actor-critic of fastrl.models.policy with an LSTM or GRU cell of ``core_size``
    units between the encoder and the actor and critic MLPs. The actor and critic share the
    encoder, and the cell too unless ``shared_core`` is False: then the critic has a cell of
    its own (``critic_core``; sb3-contrib's RecurrentPPO default), and an env's state is
    the actor cell's then the critic cell's. ``heads``: the keywords of :class:`Heads`
    (``activation``, ``log_std_init``); without ``ortho_init`` the cells too keep torch's
    init."""

    def __init__(self, obs_space: spaces.Space, act_space: spaces.Space, hidden: list[int],
                 encoder: str = "auto", normalize_obs: bool = False, core: str = "lstm",
                 core_size: int = 128, shared_core: bool = True, ortho_init: bool = True,
                 **heads: Any):
        super().__init__(obs_space, act_space, hidden, encoder, normalize_obs,
                         head_inputs=core_size, ortho_init=ortho_init, **heads)
        if core not in CORES[1:]:
            raise ValueError(f"unknown core {core!r}; known: {', '.join(CORES[1:])}")
        cell = nn.LSTMCell if core == "lstm" else nn.GRUCell
        self.core = cell(self._features.size, core_size)
        self.critic_core = None if shared_core else cell(self._features.size, core_size)
        for name, param in self.named_parameters() if ortho_init else ():
            if name.startswith(("core.", "critic_core.")):
                if ".bias" in name:
                    nn.init.zeros_(param)
                else:
                    nn.init.orthogonal_(param, 1.0)
        self.core_size = core_size
        self.state_size = len(self._cores()) * (2 * core_size if core == "lstm" else core_size)

    def _cores(self) -> tuple[nn.Module, ...]:
        """The cells, in the order their states are joined in an env's state."""
        return (self.core,) if self.critic_core is None else (self.core, self.critic_core)

    def initial_state(self, n: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """The state of ``n`` envs at an episode's first step: zeros ``[n, state_size]``."""
        return torch.zeros(n, self.state_size, device=device)

    def _step(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The state after one step of features ``x`` ``[B, F]`` from ``state``."""
        cores = self._cores()
        return torch.cat([_cell_step(cell, x, part)
                          for cell, part in zip(cores, state.chunk(len(cores), -1))], -1)

    def unroll(self, obs: torch.Tensor, first: torch.Tensor,
               state: torch.Tensor) -> torch.Tensor:
        """The state after each step of sequences ``obs`` ``[T, B, ...]`` from ``state``
        ``[B, state_size]``, zeroed before the steps where ``first`` ``[T, B]``: ``[T, B,
        state_size]`` (the state after step ``t``, before any reset at ``t + 1``)."""
        x = self._features(obs)  # every step's features in one batched call
        keep = (~first).unsqueeze(-1).to(x.dtype)
        states = []
        for t in range(x.shape[0]):
            state = self._step(x[t], state * keep[t])
            states.append(state)
        return torch.stack(states)

    def outputs(self, obs: torch.Tensor, first: torch.Tensor,
                state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the actor and the critic read after each step of sequences ``obs`` ``[T, B,
        ...]`` from ``state``, zeroed before the steps where ``first``: ``[T, B,
        core_size]`` each, as :meth:`unroll` gives them, in one call of the sequence kernel
        per cell.

        Each episode piece (an env's steps from the slot's start or an episode's start to
        the next start) becomes a column of its own, padded at its end to the longest
        piece: padding after a piece's last step cannot change its outputs.
        """
        x = self._features(obs)
        steps, envs = first.shape
        starts = first.T.clone()  # [B, T]: env-major, so that each piece is contiguous
        starts[:, 0] = True
        starts = starts.flatten()
        piece = starts.cumsum(0) - 1  # the piece of each (env, step)
        begins = starts.nonzero().squeeze(1)
        at = torch.arange(steps * envs, device=x.device) - begins[piece]  # step in piece
        columns = x.new_zeros(int(at.max()) + 1, len(begins), x.shape[-1])
        columns[at, piece] = x.transpose(0, 1).reshape(steps * envs, -1)
        initial = state.new_zeros(len(begins), state.shape[-1])
        initial[piece[::steps]] = state * (~first[0]).unsqueeze(-1).to(state.dtype)
        cores = self._cores()
        out = [_run_cell(cell, columns, part)[at, piece]
               .view(envs, steps, -1).transpose(0, 1)
               for cell, part in zip(cores, initial.chunk(len(cores), -1))]
        return out[0], out[-1]

    def _read(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the actor and the critic read of a state: the ``h`` of their cells."""
        parts = state.chunk(len(self._cores()), -1)
        return parts[0][..., :self.core_size], parts[-1][..., :self.core_size]

    def value(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """The values of observations ``[B, ...]`` seen from ``state`` ``[B, state_size]``
        (the state after the step before them)."""
        _, critic_in = self._read(self._step(self._features(obs), state))
        return self.critic(critic_in).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, state: torch.Tensor, deterministic: bool = False):
        """``(action, log_prob, value, next_state)`` for a batch of observations and the
        envs' states; ``deterministic`` takes the mode (evaluation)."""
        state = self._step(self._features(obs), state)
        actor_in, critic_in = self._read(state)
        action, log_prob = self._choose(self._masked(self.actor(actor_in), obs), deterministic)
        return action, log_prob, self.critic(critic_in).squeeze(-1), state

    def evaluate_sequences(self, obs: torch.Tensor, action: torch.Tensor,
                           first: torch.Tensor, state: torch.Tensor):
        """``(log_prob, entropy, value)`` ``[T, B]`` of stored actions ``[T, B, ...]``,
        replaying each sequence from its stored ``state`` (see :meth:`outputs`)."""
        actor_in, critic_in = self.outputs(obs, first, state)
        log_prob, entropy = self._log_prob_entropy(self._masked(self.actor(actor_in), obs),
                                                   self._flat_action(action))
        return log_prob, entropy, self.critic(critic_in).squeeze(-1)


def _cell_step(cell: nn.Module, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """An LSTM or GRU cell's state after one step of ``x`` from ``state`` (an LSTM's ``h``
    and ``c`` joined)."""
    if isinstance(cell, nn.LSTMCell):
        return torch.cat(cell(x, state.chunk(2, -1)), -1)
    return cell(x, state)


def _run_cell(cell: nn.Module, x: torch.Tensor, initial: torch.Tensor) -> torch.Tensor:
    """A cell's ``h`` after each step of ``x`` ``[L, S, F]`` from its states ``initial``
    ``[S, ...]``, by torch's sequence kernel over the cell's weights (which nn.LSTM and
    nn.GRU lay out as the cells do)."""
    weights = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
    # (the kernel's train flag keeps what backward needs, cuDNN's included: wanted wherever
    # gradients are, whatever the module's mode; no dropout here for it to switch)
    training = torch.is_grad_enabled()
    if isinstance(cell, nn.LSTMCell):
        h, c = (part.unsqueeze(0).contiguous() for part in initial.chunk(2, -1))
        return torch.lstm(x, (h, c), weights, True, 1, 0.0, training, False, False)[0]
    return torch.gru(x, initial.unsqueeze(0).contiguous(), weights, True, 1, 0.0, training,
                     False, False)[0]


def describe_core(plan: Any) -> dict[str, Any] | None:
    """The recurrent core of a run's built-in network (``algo.core``; fastrl.describe's
    part ``rollout.core``): its kind, units, whether actor and critic share it and the
    floats of state a slot keeps per env; None without one."""
    algo = plan.cfg.algo
    if algo.core == NO_CORE:
        return None
    return {"kind": algo.core, "size": algo.core_size, "shared": algo.shared_core,
            "state_floats": plan.layout.shape_of("core_state")[1]}


def core_lines(core: dict[str, Any]) -> list[str]:
    """Its line in the rollout box of ``python -m fastrl.describe``."""
    article = "an" if core["kind"] == "lstm" else "a"
    whose = "" if core["shared"] else " for the actor and one for the critic"
    return [f"recurrent: {article} {core['kind'].upper()} core of {core['size']:,} units"
            f"{whose}; "
            f"each env's state ({core['state_floats']:,} floats) is kept by its worker, "
            "zeroed where an episode starts and stored at each slot's first step; the "
            "learner replays each env's sequence from it and minibatches whole sequences"]
