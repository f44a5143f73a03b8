"""Slot layouts: which arrays a trajectory slot holds, derived from the env's spaces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

ALIGN = 64  # every field starts on its own cache line


class UnsupportedSpace(TypeError):
    """An observation or action space whose values fastrl cannot store in a ring."""


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

    def views(self, buf: memoryview, base: int) -> dict[str, np.ndarray]:
        """Numpy views of every field of the slot that starts at byte ``base`` of ``buf``."""
        return {
            f.name: np.ndarray(f.shape, f.dtype, buffer=buf, offset=base + self.offsets[f.name])
            for f in self.fields
        }


def storage_of(space: spaces.Space, role: str) -> tuple[tuple[int, ...], np.dtype]:
    """Per-step shape and dtype that store one value of ``space``.

    ``role`` ('observation' or 'action') only words the error for unsupported spaces.
    """
    if isinstance(space, spaces.Box):
        return tuple(space.shape), np.dtype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        return tuple(space.nvec.shape), np.dtype(np.int64)
    if isinstance(space, spaces.MultiBinary):
        return tuple(np.atleast_1d(space.n)), np.dtype(np.int8)
    raise UnsupportedSpace(
        f"fastrl cannot store a {type(space).__name__} {role} space ({space}); it stores Box, "
        "Discrete, MultiDiscrete and MultiBinary. Flatten structured spaces with "
        "gymnasium.wrappers.FlattenObservation (observations) or a custom wrapper (actions)."
    )


def trajectory_layout(
    obs_space: spaces.Space, act_space: spaces.Space, rollout_len: int, num_envs: int
) -> SlotLayout:
    """The trajectory schema of docs/architecture.md for ``rollout_len`` steps of ``num_envs`` envs.

    Per step and env: obs, action, reward, terminated, truncated, log_prob, value, env_id,
    episode_id, policy_version, global_step, plus final_obs (the real last observation of an
    episode that was truncated at that step; stale bytes elsewhere) and episode_return/length
    (running totals; the episode's return and length where it ended). Per env:
    bootstrap_obs, the observation after the last step. Per slot: checksum (CRC32 of all the
    bytes before it, when ``infra.check_slots`` is on; it must stay the last field).
    """
    obs_shape, obs_dtype = storage_of(obs_space, "observation")
    act_shape, act_dtype = storage_of(act_space, "action")
    te = (rollout_len, num_envs)
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
        Field("final_obs", te + obs_shape, obs_dtype),
        Field("bootstrap_obs", (num_envs,) + obs_shape, obs_dtype),
        Field("checksum", (), np.dtype(np.uint32)),
    ])
