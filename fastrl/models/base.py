"""User policies: :class:`BasePolicy` subclasses and plain ``torch.nn.Module`` s.

``Trainer(config, policy=X)`` (or the config key ``algo.policy``) trains ``X`` instead of the
built-in network of ``algo.name``. ``X`` is one of:

- a :class:`BasePolicy` subclass, or its import string ``'package.module:MyPolicy'``: every
  process constructs its own as ``MyPolicy(obs_space, act_space, algo_config)``;
- an instance of a :class:`BasePolicy` subclass: every process gets its own copy of it;
- any other ``torch.nn.Module`` instance, a network that fits the *plain module contract*
  below: every process gets its own copy, wrapped into the algorithm's policy.

The same class serves the workers' inference copy (on the CPU) and the learner (on
``infra.device``); the learner publishes the parameters as one flat vector in the order of
``policy.parameters()``, so a policy must build the same parameters, in the same order, every
time it is constructed. Only parameters travel: buffers (BatchNorm running statistics, say)
stay in the workers as constructed.

Policy contract (:class:`BasePolicy` subclasses)
-----------------------------------------------
``obs`` is a batch ``[B, *obs_space.shape]`` as fastrl stores observations (a Box's own
dtype; int64 for Discrete), on the policy's device; for a Dict or Tuple space, a dict (or
tuple) of such batches, one per leaf, nested as the space is (``obs["image"]`` ``[B, 84,
84, 3]`` uint8). ``action`` is ``[B, *act_space.shape]`` as fastrl stores actions (int64
for Discrete, ``Discrete.start`` included).

Every algorithm (``ppo``, ``dqn``, ``sac``, and ``none``, which only acts) calls, in the
workers and in evaluation:

- ``act(obs, deterministic=False) -> (action [B, *act_shape], log_prob [B], value [B])``;
  ``deterministic=True`` is the evaluation action (the mode). It always runs under
  ``torch.no_grad()``.

and besides, in the learner:

- ``ppo``: ``evaluate(obs, action) -> (log_prob [B], entropy [B], value [B])`` with
  gradients, and ``value(obs) -> [B]`` (bootstrap values; ``[B, 1]`` is refused, since it
  would broadcast silently). ``act`` samples the action whose ``log_prob`` PPO's ratio uses.
- ``dqn``: ``forward(obs) -> Q-values [B, n]`` for ``Discrete(n)``, and
  ``action_index(action) -> [B]`` integer columns of ``forward`` (:class:`BasePolicy`
  provides it). ``act`` returns the greedy action (the workers add epsilon-greedy
  exploration), zeros, and the greedy Q-value.
- ``sac`` (bounded Box actions): ``sample(obs) -> (action [B, prod(act_shape)] inside the
  bounds, log_prob [B])``, reparameterised (the actor loss backpropagates through it), and
  the attribute ``act_shape`` (:class:`BasePolicy` sets it). The twin critics are fastrl's
  (``algo.hidden_sizes``).

Plain module contract (any other ``nn.Module``)
-----------------------------------------------
The module receives the observations as float feature vectors ``[B, obs_size]`` (a Box
flattened, a Discrete one-hot, a Dict's or Tuple's leaves so and joined: the input of the
built-in MLPs, see :func:`~fastrl.models.encoders.obs_features`) and returns:

- ``dqn``: Q-values ``[B, n]`` for ``Discrete(n)`` (``algo.dqn.dueling`` does not apply);
- ``ppo`` / ``none``: ``(head, value)``: logits ``[B, n]`` for ``Discrete(n)`` (a
  Categorical policy) or the action mean ``[B, prod(act_shape)]`` for a Box (a Normal policy
  with a learned state-independent log-std), and the value ``[B]`` or ``[B, 1]``;
- ``sac``: ``[B, 2 * prod(act_shape)]``, the mean and the log-std of a tanh-squashed Gaussian
  (the log-std squashed into the built-in actor's bounds).

For observations that need their own layout (images), subclass :class:`BasePolicy`.

:func:`check_policy` and :func:`check_module` run these calls on a small batch sampled from
the observation space when the run is planned, before any process starts; a mismatch raises
:class:`PolicyContractError`, naming the policy, the call, the expected shape and the
returned one.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from fastrl.envs.errors import EnvError
from fastrl.envs.source import load_factory
from fastrl.memory.layout import storage_of
from fastrl.memory.records import obs_record
from fastrl.models.encoders import obs_features, unpack_tensors
from fastrl.models.masks import action_mask
from fastrl.models.policy import PolicyHead

PROBE_BATCH = 7  # rows of the batch the contract calls run on
OBS_CALLS = ("act", "evaluate", "value", "sample", "forward")  # calls that take observations


class PolicyContractError(ValueError):
    """A user policy does not fit the contract of the algorithm it was given to."""


@dataclass(frozen=True)
class PolicyFamily:
    """The network side of an algorithm: its built-in network, how a user's plain module
    is wrapped into one, the contract calls the learner makes and the action spaces it
    acts in (the families: fastrl.models.families)."""

    name: str
    #: the built-in network: ``build(obs_space, act_space, algo_config)`` (the ``algo``
    #: config section, fastrl.config.AlgoConfig)
    build: Callable[[gym.Space, gym.Space, Any], nn.Module]
    #: a user's plain module as this family's policy: ``wrap(module, obs, act, algo_config)``
    wrap: Callable[[nn.Module, gym.Space, gym.Space, Any], nn.Module]
    #: the learner's contract calls on a probe batch, given the sampled actions
    check_calls: Callable[[Any, torch.Tensor], None]
    #: a plain module's forward output: ``(probe, out, action outputs, discrete)``
    check_module_output: Callable[[Any, Any, int, bool], None]
    #: why the family cannot act in an action space ("acts in ..."), or None when it can
    refuse_actions: Callable[[gym.Space], str | None] = lambda space: None
    #: actions must lie within the action space's bounds (a squashed policy)
    bounded_actions: bool = False



class BasePolicy(nn.Module):
    """Base class of user policies; see the module documentation for what each algorithm
    calls. Subclasses build their network in ``__init__`` (after calling this one) and
    implement ``act`` and the algorithm's training calls.

    Sets :attr:`obs_space`, :attr:`act_space`, :attr:`algo_config`, :attr:`act_shape` and
    :attr:`obs_features` (observations -> float vectors of its ``size``; no parameters).
    For a Dict or Tuple observation space, the calls of :data:`OBS_CALLS` a subclass
    defines receive the observations as nested leaf tensors (see the module doc).
    """

    #: the calls take observations as fastrl stores them (records for Dict and Tuple
    #: spaces): fastrl's own wrappers, which hand them to an encoder
    takes_records = False

    def __init__(self, obs_space: gym.Space, act_space: gym.Space,
                 algo_config: Any) -> None:
        super().__init__()
        self.obs_space, self.act_space, self.algo_config = obs_space, act_space, algo_config
        self.act_shape = tuple(act_space.shape or ())
        self.obs_features = obs_features(obs_space)
        self._obs_record = None if self.takes_records else obs_record(obs_space)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in OBS_CALLS:
            if name in cls.__dict__:
                setattr(cls, name, _unpacking_records(cls.__dict__[name]))
        # Workers turn act's outputs into numpy arrays, which tensors that require grad
        # refuse; inference needs no graph either.
        if "act" in cls.__dict__:
            cls.act = torch.no_grad()(cls.act)

    def action_index(self, action: torch.Tensor) -> torch.Tensor:
        """Stored Discrete actions (``Discrete.start`` based) as class indices ``0..n-1``."""
        if not isinstance(self.act_space, spaces.Discrete):
            raise TypeError(f"action_index maps Discrete actions to indices; this policy acts "
                            f"in {self.act_space}")
        return action.long() - int(self.act_space.start)


def _unpacking_records(call: Callable) -> Callable:
    """``call``, given records of a Dict or Tuple space as nested leaf tensors."""

    @functools.wraps(call)
    def unpacking(self: BasePolicy, obs: Any, *args: Any, **kwargs: Any) -> Any:
        record = self.__dict__.get("_obs_record")
        # only records as stored: a forward that takes features gets them as they are
        if record is not None and isinstance(obs, torch.Tensor) and \
                obs.dtype == torch.uint8 and obs.shape[-1:] == (record.nbytes,):
            obs = unpack_tensors(obs, record)
        return call(self, obs, *args, **kwargs)

    return unpacking


class ModuleActorCritic(PolicyHead, BasePolicy):
    """PPO's policy around a plain module ``features -> (head, value)``: Categorical over the
    head's logits for Discrete actions, Normal around the head's mean with a learned
    state-independent log-std for Box actions."""

    takes_records = True

    def __init__(self, module: nn.Module, obs_space: gym.Space, act_space: gym.Space,
                 algo_config: Any) -> None:
        super().__init__(obs_space, act_space, algo_config)
        self.body = module
        self.legal_actions = action_mask(obs_space, act_space)
        self.continuous = isinstance(act_space, spaces.Box)
        self._act_start = 0 if self.continuous else int(act_space.start)
        if self.continuous:
            self.log_std = nn.Parameter(torch.zeros(int(np.prod(self.act_shape))))

    def _head_value(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        head, value = self.body(self.obs_features(obs))
        return self._masked(head, obs), value.reshape(head.shape[:-1])  # [B, 1], [B] -> [B]

    def act(self, obs: torch.Tensor, deterministic: bool = False):
        """``(action, log_prob, value)``; ``deterministic`` takes the mode."""
        head, value = self._head_value(obs)
        return (*self._choose(head, deterministic), value)

    def evaluate(self, obs: torch.Tensor, action: torch.Tensor):
        """``(log_prob, entropy, value)`` of stored actions under the current weights."""
        head, value = self._head_value(obs)
        return (*self._log_prob_entropy(head, self._flat_action(action)), value)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``[B]``."""
        return self._head_value(obs)[1]


# --- building a user's policy -------------------------------------------------------------
def build_policy(spec: Any, family: PolicyFamily, algo: Any, obs_space: gym.Space,
                 act_space: gym.Space) -> nn.Module:
    """A fresh, checked policy of this process from a user's ``spec``: a
    :class:`BasePolicy` subclass, its import string, an instance of one (copied) or a plain
    module (copied and wrapped into ``family``'s policy). Raises
    :class:`PolicyContractError` for anything else and for a policy that does not fit the
    contract of ``family``, the policy family of algorithm ``algo.name``."""
    if isinstance(spec, str):
        spec = policy_class(spec)
    if isinstance(spec, type) and issubclass(spec, BasePolicy):
        policy = _construct(spec, algo, obs_space, act_space)
    elif isinstance(spec, BasePolicy):
        policy = copy.deepcopy(spec)
    elif isinstance(spec, nn.Module):
        check_module(spec, family, algo.name, obs_space, act_space)
        return family.wrap(copy.deepcopy(spec), obs_space, act_space, algo)
    elif isinstance(spec, type) and issubclass(spec, nn.Module):
        raise PolicyContractError(
            f"policy={spec.__name__}: a torch.nn.Module class that is not a fastrl.BasePolicy "
            f"subclass is taken as an instance only: pass {spec.__name__}(...)")
    else:
        raise PolicyContractError(
            f"policy={spec!r}: expected a fastrl.BasePolicy subclass, its import string "
            "'package.module:MyPolicy', or a torch.nn.Module instance")
    check_policy(policy, family, algo.name, obs_space, act_space)
    return policy


def policy_class(ref: str) -> type[BasePolicy]:
    """The :class:`BasePolicy` subclass that an import string ``'package.module:Name'``
    (config key ``algo.policy``) names."""
    try:
        cls = load_factory(ref, "algo.policy")
    except EnvError as e:
        raise PolicyContractError(str(e)) from None
    if not (isinstance(cls, type) and issubclass(cls, BasePolicy)):
        raise PolicyContractError(f"algo.policy={ref!r} names {cls!r}, not a fastrl.BasePolicy "
                                  "subclass")
    return cls


def _construct(cls: type[BasePolicy], algo: Any, obs_space: gym.Space,
               act_space: gym.Space) -> BasePolicy:
    try:
        return cls(obs_space, act_space, algo)
    except Exception as e:
        raise PolicyContractError(
            f"policy {cls.__name__} for algo.name={algo.name}: {cls.__name__}(obs_space, "
            f"act_space, algo_config) raised {type(e).__name__}: {e} (obs_space={obs_space}, "
            f"act_space={act_space})") from e


# --- contract checks ----------------------------------------------------------------------
class _Probe:
    """Contract calls of one policy on a probe batch, every failure worded alike. Refuses a
    policy without parameters and an action space the algorithm cannot act in."""

    def __init__(self, policy: nn.Module, family: PolicyFamily, algo_name: str,
                 obs_space: gym.Space, act_space: gym.Space) -> None:
        self.policy, self.family, self.algo_name = policy, family, algo_name
        self.act_space = act_space
        self.prefix = f"policy {type(policy).__name__} for algo.name={algo_name}"
        self.obs = sample_obs(obs_space, PROBE_BATCH)
        self.act_shape, self.act_dtype = storage_of(act_space, "action")
        if next(policy.parameters(), None) is None:
            raise self.error("has no parameters; fastrl trains and publishes a policy's "
                             "parameters")
        refusal = family.refuse_actions(act_space)
        if refusal:
            raise self.error(f"{algo_name} {refusal}")

    def error(self, text: str) -> PolicyContractError:
        """The error for ``text``, prefixed with the policy and the algorithm."""
        return PolicyContractError(f"{self.prefix}: {text}")

    def call(self, call: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``policy.method(*args)``; a missing method or an exception is a contract error."""
        fn = getattr(self.policy, method, None)
        if not callable(fn):
            raise self.error(f"has no method {call}, which algo.name={self.algo_name} calls")
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise self.error(f"{call} raised {type(e).__name__}: {e} (its input: "
                             f"{shape_text(args[0])} {args[0].dtype})") from e

    def parts(self, call: str, what: str, out: Any, n: int) -> tuple:
        """``out`` as a tuple of ``n``."""
        if not (isinstance(out, (tuple, list)) and len(out) == n):
            raise self.error(f"{call} must return {what}; it returned {describe(out)}")
        return tuple(out)

    def shape(self, call: str, what: str, out: Any, dims: tuple[int, ...]) -> torch.Tensor:
        """``out`` as a tensor ``[B, *dims]``."""
        if not (isinstance(out, torch.Tensor) and tuple(out.shape) == (PROBE_BATCH, *dims)):
            raise self.error(f"{call} must return {what} of shape {dims_text(dims)} for "
                             f"{self.act_space}; it returned {describe(out)}")
        return out

    def within(self, call: str, what: str, values: torch.Tensor, low: torch.Tensor,
               high: torch.Tensor, bounds: str) -> None:
        """Every value of ``values`` in ``[low, high]``, integer or float as they are."""
        if values.is_floating_point() != low.is_floating_point() or \
                bool((values < low).any() or (values > high).any()):
            raise self.error(f"{call} must return {what} in {bounds}; it returned "
                             f"{values.dtype} values in [{values.min().item():g}, "
                             f"{values.max().item():g}]")

    def stored(self, action: torch.Tensor) -> torch.Tensor:
        """``action`` as the ring stores it, as the learner reads it back."""
        return torch.from_numpy(action.detach().cpu().numpy().astype(self.act_dtype))


def sample_obs(obs_space: gym.Space, n: int) -> torch.Tensor:
    """``n`` observations of ``obs_space`` (fixed seed) as fastrl stores them."""
    space = copy.deepcopy(obs_space)  # (sampling advances the space's own generator)
    space.seed(0)
    values = [space.sample() for _ in range(n)]
    record = obs_record(obs_space)
    if record is not None:
        return torch.from_numpy(record.pack(values))
    _, dtype = storage_of(obs_space, "observation")
    return torch.from_numpy(np.stack(values).astype(dtype))


def dims_text(dims: tuple[int, ...]) -> str:
    """``[B, 2]`` for a batch of ``dims``."""
    return "[" + ", ".join(["B", *map(str, dims)]) + "]"


def shape_text(x: torch.Tensor) -> str:
    """A tensor's shape as ``[B, 3]`` when its first dimension is the probe batch."""
    dims = [str(d) for d in x.shape]
    if dims and x.shape[0] == PROBE_BATCH:
        dims[0] = "B"
    return "[" + ", ".join(dims) + "]"


def describe(out: Any) -> str:
    """What a contract call returned, for an error message."""
    if isinstance(out, torch.Tensor):
        return shape_text(out)
    if isinstance(out, (tuple, list)):
        return "(" + ", ".join(describe(x) for x in out) + ")"
    return f"a {type(out).__name__}"


@contextlib.contextmanager
def _probing(module: nn.Module) -> Iterator[None]:
    """No gradients, the global RNGs as they were afterwards, and every submodule in eval
    mode meanwhile: a probe must not move BatchNorm statistics."""
    modes = {m: m.training for m in module.modules()}
    module.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            yield
    finally:
        for m, training in modes.items():
            m.training = training


def check_policy(policy: nn.Module, family: PolicyFamily, algo_name: str,
                 obs_space: gym.Space, act_space: gym.Space) -> None:
    """Run the calls that algorithm ``algo_name``, of policy family ``family``, makes (see
    the module documentation) on a probe batch, without gradients, in eval mode and without
    touching the global RNGs; raise :class:`PolicyContractError` at the first output of the
    wrong kind or shape."""
    probe = _Probe(policy, family, algo_name, obs_space, act_space)
    with _probing(policy):
        action = probe.stored(_check_act(probe, deterministic=False))
        _check_act(probe, deterministic=True)
        family.check_calls(probe, action)


def _check_act(probe: _Probe, deterministic: bool) -> torch.Tensor:
    """``act`` in one mode; returns its action."""
    call = f"act(obs, deterministic={deterministic})"
    out = probe.call(call, "act", probe.obs, deterministic=deterministic)
    action, log_prob, value = probe.parts(call, "(action, log_prob, value)", out, 3)
    probe.shape(call, "actions", action, probe.act_shape)
    probe.shape(call, "log_prob", log_prob, ())
    probe.shape(call, "value", value, ())
    space = probe.act_space
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        probe.within(call, "integer actions", action, torch.tensor(start),
                     torch.tensor(start + int(space.n) - 1),
                     f"{start}..{start + int(space.n) - 1} for {space}")
    elif probe.family.bounded_actions:
        probe.within(call, "actions", action, torch.as_tensor(space.low),
                     torch.as_tensor(space.high), f"the bounds of {space}")
    return action


def check_actor_critic_calls(probe: _Probe, action: torch.Tensor) -> None:
    probe.shape("value(obs)", "values", probe.call("value(obs)", "value", probe.obs), ())
    call = "evaluate(obs, action)"
    out = probe.call(call, "evaluate", probe.obs, action)
    for part, what in zip(probe.parts(call, "(log_prob, entropy, value)", out, 3),
                          ("log_prob", "entropy", "value")):
        probe.shape(call, what, part, ())


def check_q_network_calls(probe: _Probe, action: torch.Tensor) -> None:
    n = int(probe.act_space.n)
    probe.shape("forward(obs)", "Q-values", probe.call("forward(obs)", "__call__", probe.obs),
                (n,))
    call = "action_index(action)"
    index = probe.shape(call, "column indices", probe.call(call, "action_index", action), ())
    probe.within(call, "integer column indices", index, torch.tensor(0), torch.tensor(n - 1),
                 f"0..{n - 1}")


def check_squashed_gaussian_calls(probe: _Probe, action: torch.Tensor) -> None:
    space = probe.act_space
    act_shape = getattr(probe.policy, "act_shape", None)
    if act_shape is None or tuple(act_shape) != tuple(space.shape):
        raise probe.error(f"attribute act_shape must be {tuple(space.shape)} for {space}; it "
                          f"is {act_shape!r}")
    call = "sample(obs)"
    flat, log_prob = probe.parts(call, "(action, log_prob)",
                                 probe.call(call, "sample", probe.obs), 2)
    probe.shape(call, "flat actions", flat, (int(np.prod(space.shape)),))
    probe.shape(call, "log_prob", log_prob, ())
    probe.within(call, "actions", flat, torch.as_tensor(space.low).flatten(),
                 torch.as_tensor(space.high).flatten(), f"the bounds of {space}")


def check_module(module: nn.Module, family: PolicyFamily, algo_name: str,
                 obs_space: gym.Space, act_space: gym.Space) -> None:
    """Hold a plain module to the plain module contract of ``family`` (see the module
    documentation) on a probe batch, as :func:`check_policy` does; raise
    :class:`PolicyContractError` on a mismatch."""
    probe = _Probe(module, family, algo_name, obs_space, act_space)
    discrete = isinstance(act_space, spaces.Discrete)
    if not isinstance(act_space, (spaces.Discrete, spaces.Box)):
        raise probe.error(f"a plain module acts in Discrete or Box action spaces, not "
                          f"{act_space}; subclass fastrl.BasePolicy for others")
    with _probing(module):
        out = probe.call("forward(obs)", "__call__", obs_features(obs_space)(probe.obs))
    n_out = int(act_space.n) if discrete else int(np.prod(act_space.shape))
    family.check_module_output(probe, out, n_out, discrete)


def check_actor_critic_output(probe: _Probe, out: Any, n_out: int, discrete: bool) -> None:
    head = "logits" if discrete else "action mean"
    what = f"({head} {dims_text((n_out,))}, value [B] or [B, 1])"
    fits = isinstance(out, (tuple, list)) and len(out) == 2 and \
        all(isinstance(x, torch.Tensor) for x in out) and \
        tuple(out[0].shape) == (PROBE_BATCH, n_out) and \
        tuple(out[1].shape) in ((PROBE_BATCH,), (PROBE_BATCH, 1))
    if not fits:
        raise probe.error(f"forward(obs) must return {what} for {probe.act_space}; it "
                          f"returned {describe(out)}")
