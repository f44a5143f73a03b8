"""Slot layouts: which arrays a trajectory slot holds, derived from the env's spaces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from fastrl.memory.records import ObsRecord, UnsupportedSpace, is_structured, leaf_storage

ALIGN = 64  # every field starts on its own cache line
#: the fields shaped [E, ...] (one entry per env), not [T, E, ...] (one per step and env)
PER_ENV = ("final_obs", "bootstrap_obs", "core_state")


@dataclass(frozen=True)
class Field:
    """One array of a slot: ``shape`` is the full per-slot shape."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


class SlotLayout:
    """Byte offsets of a list of fields packed into one slot, each 64-byte aligned."""

    def __init__(self, fields: list[Field]) -> None:
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {names}")
        self.fields = fields
        self.offsets: dict[str, int] = {}
        offset = 0
        for f in fields:
            self.offsets[f.name] = offset
            offset += -(-f.nbytes // ALIGN) * ALIGN
        self.nbytes = max(offset, ALIGN)

    def shape_of(self, name: str) -> tuple[int, ...] | None:
        """The per-slot shape of field ``name``; None where the slot has no such field."""
        return next((f.shape for f in self.fields if f.name == name), None)

    def views(self, buf: memoryview, base: int) -> dict[str, np.ndarray]:
        """Numpy views of every field of the slot that starts at byte ``base`` of ``buf``."""
        return {
            f.name: np.ndarray(f.shape, f.dtype, buffer=buf, offset=base + self.offsets[f.name])
            for f in self.fields
        }


def storage_of(space: spaces.Space, role: str) -> tuple[tuple[int, ...], np.dtype]:
    """Per-step shape and dtype that store one value of ``space``.

    Dict and Tuple observations are records of their leaves, ``[nbytes]`` uint8
    (fastrl.memory.records). ``role`` ('observation' or 'action') only words the error for
    unsupported spaces.
    """
    if role == "observation" and is_structured(space):
        return (ObsRecord(space).nbytes,), np.dtype(np.uint8)
    try:
        return leaf_storage(space)
    except UnsupportedSpace:
        stores = "Box, Discrete, MultiDiscrete and MultiBinary" + (
            ", and Dict and Tuple spaces of those" if role == "observation" else "")
        raise UnsupportedSpace(
            f"fastrl cannot store a {type(space).__name__} {role} space ({space}); it stores "
            f"{stores}") from None


def final_obs_rows(rollout_len: int, max_episode_steps: int | None) -> int:
    """Final observations a slot keeps per env: as many as one env can truncate episodes
    in ``rollout_len`` steps. Truncations of one env are at least ``max_episode_steps``
    steps apart, so that is ``ceil(rollout_len / max_episode_steps)``; without a known
    limit, one per step."""
    if max_episode_steps is None:
        return rollout_len
    return min(rollout_len, -(-rollout_len // max_episode_steps))


def trajectory_layout(
    obs_space: spaces.Space, act_space: spaces.Space, rollout_len: int, num_envs: int,
    max_episode_steps: int | None = None, core_state_size: int = 0, weighted: bool = False,
) -> SlotLayout:
    """The trajectory schema of docs/architecture.md for ``rollout_len`` steps of ``num_envs`` envs.

    Per step and env: obs, action, reward, terminated, truncated, log_prob, value, env_id,
    episode_id, policy_version, global_step, and episode_return/length (running totals;
    the episode's return and length where it ended). Per env: bootstrap_obs, the observation
    after the last step; final_obs ``[num_envs, rows, *obs]``, the real last observations of
    the env's episodes truncated in the slot, in step order (row ``k`` belongs to its
    ``k``-th truncated step, see :func:`final_obs_index`; rows past its truncations hold
    stale bytes). ``rows`` is :func:`final_obs_rows` of the envs' ``max_episode_steps``.
    With a recurrent policy (``core_state_size`` floats of state per env), core_state
    ``[num_envs, core_state_size]``: each env's state at the slot's first step. With
    ``weighted`` (a multi-agent env: each env column an (env, agent) row,
    fastrl.envs.multiagent), per step and row: weight, bool (1: the step trains and counts;
    0: padding, or a row that acts but does not train, like self-play's opponent).
    Per slot: checksum (CRC32 of all the bytes before it, when ``infra.check_slots`` is on;
    it must stay the last field).
    """
    obs_shape, obs_dtype = storage_of(obs_space, "observation")
    act_shape, act_dtype = storage_of(act_space, "action")
    te = (rollout_len, num_envs)
    finals = (num_envs, final_obs_rows(rollout_len, max_episode_steps))
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    return SlotLayout([
        Field("obs", te + obs_shape, obs_dtype),
        Field("action", te + act_shape, act_dtype),
        Field("reward", te, f32),
        Field("terminated", te, np.dtype(np.bool_)),
        Field("truncated", te, np.dtype(np.bool_)),
        Field("log_prob", te, f32),
        Field("value", te, f32),
        Field("env_id", te, np.dtype(np.int32)),
        Field("episode_id", te, i64),
        Field("policy_version", te, i64),
        Field("global_step", te, i64),
        Field("episode_return", te, f32),
        Field("episode_length", te, np.dtype(np.int32)),
        Field("final_obs", finals + obs_shape, obs_dtype),
        Field("bootstrap_obs", (num_envs,) + obs_shape, obs_dtype),
        *([Field("core_state", (num_envs, core_state_size), f32)] if core_state_size else []),
        *([Field("weight", te, np.dtype(np.bool_))] if weighted else []),
        Field("checksum", (), np.dtype(np.uint32)),
    ])


def final_obs_index(truncated: np.ndarray) -> np.ndarray:
    """For a slot's ``truncated`` ``[T, E]``, the row of ``final_obs[e]`` that holds each
    truncated step's final observation (the env's truncations before it); -1 elsewhere."""
    return np.where(truncated, np.cumsum(truncated, axis=0, dtype=np.int32) - 1, -1)


def pack_final_obs(step_final_obs: np.ndarray, truncated: np.ndarray,
                   out: np.ndarray) -> None:
    """Write the final observations of the truncated steps of ``step_final_obs``
    ``[T, E, *obs]`` (one per step, as simulators hand them over) into a slot's
    ``final_obs`` ``out`` ``[E, rows, *obs]``; ValueError when an env truncated more
    episodes than ``out`` has rows."""
    if not truncated.any():  # (most slots: the index below costs 7 ns a transition)
        return
    index = final_obs_index(truncated)
    t, e = np.nonzero(truncated)
    if index.max() >= out.shape[1]:
        raise ValueError(f"{int(index.max()) + 1} truncated episodes of one env in "
                         f"{len(truncated)} steps; the slot keeps {out.shape[1]} per env")
    out[e, index[t, e]] = step_final_obs[t, e]
