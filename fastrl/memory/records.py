"""Structured observations (Gymnasium ``Dict`` and ``Tuple`` spaces) as packed records.

A ring stores one array per field. A structured observation is stored as one row of bytes
per step, a *record*: each leaf of the space (a Box, Discrete, MultiDiscrete or
MultiBinary, nested in Dicts and Tuples as Gymnasium allows) at its own 8-byte aligned
offset, in its own storage dtype (uint8 images stay uint8). Everything that moves
observations (rings, final and bootstrap observations, replay buffers, staging) moves the
rows as they are; only the ends see leaves: simulators write them through
:meth:`ObsRecord.views`, and networks read them (fastrl.models.encoders).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from gymnasium import spaces

from fastrl.core.text import human_bytes, plural

LEAF_ALIGN = 8  # every leaf starts on a multiple of its widest possible item
MASK_KEY = "action_mask"  # PettingZoo's key of the legal actions (docs/embedded.md)


class UnsupportedSpace(TypeError):
    """An observation or action space whose values fastrl cannot store in a ring."""


def leaf_storage(space: spaces.Space) -> tuple[tuple[int, ...], np.dtype]:
    """Per-value shape and dtype that store one value of a Box, Discrete, MultiDiscrete or
    MultiBinary space; :class:`UnsupportedSpace` for any other."""
    if isinstance(space, spaces.Box):
        return tuple(space.shape), np.dtype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        return tuple(space.nvec.shape), np.dtype(np.int64)
    if isinstance(space, spaces.MultiBinary):
        return tuple(int(d) for d in np.atleast_1d(space.n)), np.dtype(np.int8)
    raise UnsupportedSpace(f"no storage for {space}")


@dataclass(frozen=True)
class Leaf:
    """One leaf of a structured space: where it sits in the nesting (``path``: keys and
    indices from the root), its space, its storage and its byte offset in the record."""

    path: tuple[str | int, ...]
    space: spaces.Space
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int

    @property
    def name(self) -> str:
        """The leaf's path as one name: ``image``, ``robot.joints``, ``0``."""
        return ".".join(map(str, self.path))

    @cached_property  # (read for every leaf of every step a worker takes)
    def nbytes(self) -> int:
        """Bytes of one value."""
        return math.prod(self.shape) * self.dtype.itemsize

    def view(self, rows: np.ndarray) -> np.ndarray:
        """This leaf of records ``rows`` ``[*batch, nbytes]`` (uint8) as a writable view
        ``[*batch, *shape]`` in its dtype."""
        raw = rows[..., self.offset:self.offset + self.nbytes]
        return raw.view(self.dtype).reshape((*rows.shape[:-1], *self.shape))


def is_structured(space: spaces.Space) -> bool:
    """True for a Dict or Tuple space (stored as a record)."""
    return isinstance(space, (spaces.Dict, spaces.Tuple))


def _walk(space: spaces.Space, path: tuple) -> list[tuple[tuple, spaces.Space]]:
    if isinstance(space, spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in _walk(sub, (*path, key))]
    if isinstance(space, spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in _walk(sub, (*path, i))]
    return [(path, space)]


class ObsRecord:
    """The packed record of a Dict or Tuple space: its leaves, in the space's order, and
    its size in bytes (a multiple of 8). Raises :class:`UnsupportedSpace` naming the first
    leaf fastrl cannot store (Text, Graph, Sequence, OneOf)."""

    def __init__(self, space: spaces.Space) -> None:
        if not is_structured(space):
            raise TypeError(f"{space} is not a Dict or Tuple space")
        self.space = space
        self.leaves: list[Leaf] = []
        offset = 0
        for path, sub in _walk(space, ()):
            name = ".".join(map(str, path)) or "(empty)"
            try:
                shape, dtype = leaf_storage(sub)
            except UnsupportedSpace:
                raise UnsupportedSpace(
                    f"fastrl cannot store the {type(sub).__name__} leaf {name!r} of the "
                    f"{type(space).__name__} observation space; a leaf must be a Box, Discrete, "
                    "MultiDiscrete or MultiBinary (encode text or graphs as arrays in a "
                    "wrapper)") from None
            self.leaves.append(Leaf(path, sub, shape, dtype, offset))
            offset += -(-self.leaves[-1].nbytes // LEAF_ALIGN) * LEAF_ALIGN
        if not self.leaves:
            raise UnsupportedSpace(f"the observation space {space} has no leaves to store")
        self.nbytes = offset

    @property
    def mask(self) -> Leaf | None:
        """The leaf of legal actions: a top-level ``action_mask`` key of a Dict space."""
        return next((leaf for leaf in self.leaves if leaf.path == (MASK_KEY,)), None)

    @property
    def feature_leaves(self) -> list[Leaf]:
        """The leaves a network reads as features: all but the mask."""
        return [leaf for leaf in self.leaves if leaf.path != (MASK_KEY,)]

    def views(self, rows: np.ndarray) -> Any:
        """Every leaf of ``rows`` ``[*batch, nbytes]`` as a writable view, nested as the
        space is (dicts and tuples of arrays ``[*batch, *leaf.shape]``)."""
        return self.nest([leaf.view(rows) for leaf in self.leaves])

    def nest(self, values: list) -> Any:
        """One value per leaf, in the record's order, nested as the space is."""
        it = iter(values)

        def build(space: spaces.Space) -> Any:
            if isinstance(space, spaces.Dict):
                return {key: build(sub) for key, sub in space.spaces.items()}
            if isinstance(space, spaces.Tuple):
                return tuple(build(sub) for sub in space.spaces)
            return next(it)

        return build(self.space)

    def leaf_values(self, value: Any) -> list[Any]:
        """The leaves of a nested value of this space (dicts by key, tuples by index), in
        the record's order; KeyError / IndexError / TypeError naming the leaf when the
        nesting does not match."""
        out = []
        for leaf in self.leaves:
            v = value
            for depth, key in enumerate(leaf.path):
                try:
                    v = v[key]
                except (KeyError, IndexError, TypeError):
                    where = ".".join(map(str, leaf.path[:depth + 1]))
                    raise LeafMissing(f"no leaf {where!r} in the observation {_short(v)}") \
                        from None
            out.append(v)
        return out

    def write(self, rows: np.ndarray, value: Any) -> None:
        """Store a nested value into records ``rows`` (leaves with ``rows``' batch dims, or
        one record when ``rows`` is ``[nbytes]``); values are cast to each leaf's dtype."""
        for leaf, v in zip(self.leaves, self.leaf_values(value)):
            leaf.view(rows)[...] = v

    def pack(self, values: list) -> np.ndarray:
        """Records ``[len(values), nbytes]`` of a list of nested values."""
        rows = np.zeros((len(values), self.nbytes), np.uint8)
        for row, value in zip(rows, values):
            self.write(row, value)
        return rows

    def check(self, value: Any, batch: tuple[int, ...] = ()) -> str | None:
        """What is wrong with a nested value (leaves with leading dims ``batch``), or None:
        a missing leaf, or a leaf of the wrong shape, or of the wrong dtype (a Box leaf's
        exactly, the others' castable to their storage)."""
        try:
            leaves = self.leaf_values(value)
        except LeafMissing as e:
            return str(e)
        for leaf, v in zip(self.leaves, leaves):
            try:
                arr = np.asarray(v)
            except ValueError:
                return f"leaf {leaf.name!r} is ragged: {_short(v)}"
            want = (*batch, *leaf.shape)
            strict = isinstance(leaf.space, spaces.Box)
            if arr.shape != want or (arr.dtype != leaf.dtype if strict else
                                     not np.can_cast(arr.dtype, leaf.dtype, "same_kind")):
                return (f"leaf {leaf.name!r} should be a {leaf.dtype} array of shape {want}"
                        f"{'' if strict else ' (or castable to it)'} ({leaf.space}), got "
                        f"{arr.dtype} {arr.shape}")
        return None


class LeafMissing(KeyError):
    """A nested observation lacks a leaf of its space."""

    def __str__(self) -> str:
        return str(self.args[0])


def _short(value: Any) -> str:
    return " ".join(repr(value).split())[:120]


def obs_record(space: spaces.Space) -> ObsRecord | None:
    """The :class:`ObsRecord` of a structured space, None for any other."""
    return ObsRecord(space) if is_structured(space) else None


def describe_record(plan: Any) -> dict[str, Any]:
    """A Dict or Tuple observation's record (fastrl.describe's part of ``env``, merged into
    it): ``observation_leaves`` (name, shape, dtype, bytes, offset each),
    ``observation_bytes`` and ``action_mask`` (the mask leaf's name); null each for other
    observations."""
    record = obs_record(plan.obs_space)
    if record is None:
        return {"observation_leaves": None, "observation_bytes": None, "action_mask": None}
    leaves = [{"name": leaf.name, "shape": list(leaf.shape), "dtype": str(leaf.dtype),
               "bytes": leaf.nbytes, "offset": leaf.offset} for leaf in record.leaves]
    return {"observation_leaves": leaves, "observation_bytes": record.nbytes,
            "action_mask": record.mask.name if record.mask is not None else None}


def record_lines(env: dict[str, Any]) -> list[str]:
    """Its lines in the rollout box of ``python -m fastrl.describe`` (none for a plain
    observation)."""
    leaves = env["observation_leaves"]
    if leaves is None:
        return []
    each = ", ".join(f"{x['name']} {x['dtype']}{tuple(x['shape'])} {human_bytes(x['bytes'])}"
                     for x in leaves)
    count = plural(len(leaves), "leaf", "leaves")
    lines = [f"stored as one {human_bytes(env['observation_bytes'])} record a step of "
             f"{count}: {each}"]
    if env["action_mask"]:
        lines.append(f"action mask: the observations' {env['action_mask']!r}; only legal "
                     "actions are taken, and the loss ranges over them")
    return lines
