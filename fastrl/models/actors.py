"""What picks the workers' actions: the policy network, or uniform random actions.

An actor maps a batch of observations ``[n, *obs]`` to numpy ``(action, log_prob, value)``.
Around those calls a collector (fastrl.rollout.collector) calls its hooks, the one way a
per-row or per-slot concern of a feature reaches the collector (docs/architecture.md):
:meth:`Actor.begin_slot` before a slot's first step, :meth:`Actor.end_step` after every
step, and :meth:`Actor.state` / :meth:`Actor.restore` where a worker parks and
resumes.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from fastrl.models.masks import ActionMask, action_mask, uniform_legal
from fastrl.models.recurrent import is_recurrent


class Actor:
    """Picks actions for a worker's rows; the hooks do nothing unless an actor needs them."""

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(action, log_prob, value)`` of observations ``obs`` ``[n, *obs]``."""
        raise NotImplementedError

    def begin_slot(self, slot: dict[str, np.ndarray], seq: int, version: int) -> None:
        """Before the first step of ``slot`` (numbered ``seq``, collected with weights
        ``version``): write what the slot keeps of the actor, prepare what it acts with."""

    def end_step(self, terminated: np.ndarray, truncated: np.ndarray,
                 weight: np.ndarray | None) -> None:
        """After a step: ``terminated`` and ``truncated`` ``[n]`` mark the rows whose
        episode ended in it; ``weight`` ``[n]`` (bool), where the slot has one, is the
        step's weight per row (0: it does not train), which the actor may lower."""

    def state(self) -> dict:
        """What continues this actor in another process (a parked worker's)."""
        return {}

    def restore(self, state: dict) -> None:
        """Continue from a parked worker's state (:meth:`state`, among the collector's)."""


def policy_actor(policy: torch.nn.Module) -> Actor:
    """Batched CPU inference of ``policy`` (one torch forward per step for all envs): any
    module with the ``act(obs) -> (action, log_prob, value)`` of fastrl.models, or a
    :class:`RecurrentActor` of a recurrent one."""
    if is_recurrent(policy):
        return RecurrentActor(policy)
    return TorchActor(policy)


class TorchActor(Actor):
    """Acts with a feed-forward ``policy`` under ``torch.inference_mode`` (no version
    counters or autograd bookkeeping: ~4% of a small forward), on a tensor that shares the
    observations' memory."""

    def __init__(self, policy: torch.nn.Module) -> None:
        self.policy = policy

    def __call__(self, obs: np.ndarray):
        """``(action, log_prob, value)`` as numpy arrays."""
        with torch.inference_mode():
            action, log_prob, value = self.policy.act(torch.from_numpy(obs))
        return action.numpy(), log_prob.numpy(), value.numpy()


class RecurrentActor(Actor):
    """Acts with a recurrent policy (fastrl.models.recurrent), keeping each env's state
    ``core`` ``[n, state_size]`` on ``device``: zeros until :meth:`start` or the first
    call sizes it, advanced by every call, zeroed by :meth:`episodes_ended` for the envs
    whose episode ended. ``deterministic`` takes the mode (evaluation)."""

    def __init__(self, policy: torch.nn.Module, deterministic: bool = False,
                 device: torch.device | str = "cpu") -> None:
        self.policy, self.deterministic, self.device = policy, deterministic, device
        self.core = policy.initial_state(0, device)

    def start(self, num_envs: int) -> None:
        """Every env at an episode's first step."""
        self.core = self.policy.initial_state(num_envs, self.device)

    def __call__(self, obs: np.ndarray):
        """``(action, log_prob, value)`` as numpy arrays; the envs' states advance."""
        if len(self.core) != len(obs):
            self.start(len(obs))
        with torch.inference_mode():
            action, log_prob, value, self.core = self.policy.act(
                torch.as_tensor(obs, device=self.device), self.core, self.deterministic)
        return action.cpu().numpy(), log_prob.cpu().numpy(), value.cpu().numpy()

    def episodes_ended(self, ended: np.ndarray) -> None:
        """Zero the states of the envs where ``ended`` (bool ``[n]``): their next step
        starts an episode."""
        if ended.any():
            with torch.inference_mode():  # (the state is an inference tensor)
                self.core[torch.from_numpy(ended).to(self.device)] = 0.0

    def begin_slot(self, slot: dict[str, np.ndarray], seq: int, version: int) -> None:
        """Keep every env's state at the slot's first step in its ``core_state``: the
        learner replays each env's sequence from it."""
        envs = len(slot["core_state"])
        if len(self.core) != envs:
            self.start(envs)
        slot["core_state"][...] = self.core.numpy()

    def end_step(self, terminated: np.ndarray, truncated: np.ndarray,
                 weight: np.ndarray | None) -> None:
        """The envs whose episode ended start from a zero state."""
        self.episodes_ended(terminated | truncated)

    def state(self) -> dict:
        """Every env's state."""
        return {"core_state": self.core.numpy().copy()}

    def restore(self, state: dict) -> None:
        """Continue every env's state (a parked worker's that kept one)."""
        if "core_state" in state:
            self.core = torch.from_numpy(state["core_state"])


RANDOM_TABLE = 4096  # steps of random actions drawn at a time


def _random_table(space: spaces.Space, shape: tuple[int, int],
                  rng: np.random.Generator) -> np.ndarray:
    """Uniform random actions ``[*shape, *action]`` of ``space`` (unbounded Box dimensions
    drawn from [-1, 1])."""
    if isinstance(space, spaces.Discrete):
        return space.start + rng.integers(space.n, size=shape)
    if isinstance(space, spaces.MultiDiscrete):
        return space.start + rng.integers(space.nvec, size=(*shape, *space.nvec.shape))
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(2, size=(*shape, *np.atleast_1d(space.n)), dtype=np.int8)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        return rng.uniform(low, high, size=(*shape, *space.shape)).astype(space.dtype)
    raise TypeError(f"no random actions for {space}")


class RandomActor(Actor):
    """Uniform random actions for ``num_envs`` envs; log_prob and value are zeros (nothing
    trains on them: ``algo.name=none``, or off-policy exploration before the first update).
    Actions are drawn 4096 steps at a time, so that one costs nothing per step (as in the
    bench's peer loops), and drawn afresh once used up: they never repeat.

    Called with observations it is an :data:`Actor`; since it never looks at them, a
    collector may instead take a whole slot's actions at once (:meth:`actions_into`) and
    step the slot in one call (fastrl.envs.batched.BatchedEnv.rollout_into).
    """

    def __init__(self, space: spaces.Space, num_envs: int, seed: int) -> None:
        self.space, self.num_envs = space, num_envs
        self._rng = np.random.default_rng(seed)
        self._zeros = np.zeros(num_envs, np.float32)
        self._table = self._draw(RANDOM_TABLE)
        self._next = 0

    def _draw(self, steps: int) -> np.ndarray:
        self._table_rng = self._rng.bit_generator.state  # (what draws this table again)
        return _random_table(self.space, (steps, self.num_envs), self._rng)

    def _take(self, steps: int) -> np.ndarray:
        """The next ``steps`` rows of actions (a fresh table once this one is used up)."""
        if self._next + steps > len(self._table):
            self._table, self._next = self._draw(max(RANDOM_TABLE, steps)), 0
        self._next += steps
        return self._table[self._next - steps:self._next]

    def __call__(self, obs: np.ndarray):
        """One step's random actions (``obs`` is not read), zero log-probs and values."""
        return self._take(1)[0], self._zeros, self._zeros

    def actions_into(self, out: np.ndarray) -> None:
        """Write the next ``len(out)`` steps of actions into ``out`` ``[T, n, *action]``."""
        out[...] = self._take(len(out))

    def state(self) -> dict:
        """Where its actions are: the table's random state, length and next row."""
        return {"random_table": (self._table_rng, len(self._table), self._next)}

    def restore(self, state: dict) -> None:
        """Go on with the actions of a parked worker's :meth:`state`, where it kept them."""
        if "random_table" in state:
            self._rng.bit_generator.state, steps, next_row = state["random_table"]
            self._table, self._next = self._draw(steps), next_row


class LegalRandomActor(Actor):
    """Uniform random actions among the legal ones of each step's observations (a Dict
    space with an ``action_mask``, fastrl.models.masks); log_prob and value are zeros. It
    reads observations, so a collector steps it step by step."""

    def __init__(self, space: spaces.Discrete, mask: ActionMask, seed: int) -> None:
        self.start, self.mask = int(space.start), mask
        self._rng = np.random.default_rng(seed)

    def __call__(self, obs: np.ndarray):
        """Random legal actions for observations ``[n, *obs]``, zero log-probs and values."""
        zeros = np.zeros(len(obs), np.float32)
        return self.start + uniform_legal(self.mask.numpy(obs), self._rng), zeros, zeros

    def state(self) -> dict:
        """Its random state."""
        return {"random_legal": self._rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        """Go on with a parked worker's random state (:meth:`state`), where it kept one."""
        if "random_legal" in state:
            self._rng.bit_generator.state = state["random_legal"]


def random_actor(obs_space: spaces.Space, act_space: spaces.Space, num_envs: int,
                 seed: int) -> RandomActor | LegalRandomActor:
    """Uniform random actions for ``num_envs`` envs: among the legal ones where the
    observations carry an action mask."""
    mask = action_mask(obs_space, act_space)
    if mask is None:
        return RandomActor(act_space, num_envs, seed)
    return LegalRandomActor(act_space, mask, seed)
