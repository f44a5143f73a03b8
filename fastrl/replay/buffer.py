"""ReplayBuffer: circular n-step transition storage filled from trajectory slots, sampled
uniformly.

Storage is preallocated numpy, one array per field in ``storage``: ``obs``, ``action``,
``next_obs`` (obs dtype), ``reward`` (float32: the n-step discounted return), ``done``
(float32: 1.0 where the window ended in a termination: no bootstrap), ``discount``
(float32: ``gamma ** k`` for the ``k`` rewards summed: the factor for bootstrapping from
``next_obs``) and ``stamp`` (int64: the insert counter when the row was written). Rows
``0 .. size - 1`` are the stored ones. The per-step work (n-step windows, row copies, the
gather of a sample) is done by numba kernels; Python runs once per slot or per batch.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fastrl.memory.layout import final_obs_index
from fastrl.replay.nstep import TAIL_FIELDS, insert_nstep
from fastrl.replay.rows import as_words, sample_uniform


class ReplayError(ValueError):
    """A replay buffer used wrongly: a bad argument, slot or saved state, an empty buffer."""


# storage field -> key of a sampled batch, in the order the kernels take the fields
SAMPLED = {"obs": "obs", "action": "action", "next_obs": "next_obs", "reward": "reward",
           "done": "done", "discount": "discount", "stamp": "stamps"}
WORD_FIELDS = ("obs", "action", "next_obs")  # copied as words by the kernels
SLOT_KEYS = ("obs", "action", "reward", "terminated", "truncated", "final_obs",
             "bootstrap_obs", "env_id")


def _positive_int(name: str, value) -> int:
    try:
        ok = not isinstance(value, bool) and int(value) == value and value >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ReplayError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


FieldSpecs = dict[str, tuple[tuple[int, ...], np.dtype]]


def row_fields(rows: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype,
               act_shape: tuple[int, ...], act_dtype: np.dtype) -> FieldSpecs:
    """Shape and dtype of every stored field for ``rows`` transitions, in :data:`SAMPLED`
    order."""
    f32, obs = np.dtype(np.float32), (rows, *obs_shape)
    return {"obs": (obs, obs_dtype), "action": ((rows, *act_shape), act_dtype),
            "next_obs": (obs, obs_dtype), "reward": ((rows,), f32), "done": ((rows,), f32),
            "discount": ((rows,), f32), "stamp": ((rows,), np.dtype(np.int64))}


def tail_fields(num_envs: int, n_step: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype,
                act_shape: tuple[int, ...], act_dtype: np.dtype) -> FieldSpecs:
    """Shape and dtype of the per-env tails: the last ``n_step - 1`` steps of each env."""
    te, flag = (num_envs, n_step - 1), np.dtype(np.bool_)
    return {"obs": ((*te, *obs_shape), obs_dtype), "action": ((*te, *act_shape), act_dtype),
            "reward": (te, np.dtype(np.float32)), "terminated": (te, flag),
            "truncated": (te, flag), "next_obs": ((*te, *obs_shape), obs_dtype),
            "pending": (te, flag), "bootstrap_obs": ((num_envs, *obs_shape), obs_dtype),
            "seen": ((num_envs,), flag)}


def _allocate(fields: FieldSpecs) -> dict[str, np.ndarray]:
    return {name: np.zeros(shape, dtype) for name, (shape, dtype) in fields.items()}


class ReplayBuffer:
    """Uniform replay of n-step transitions built from trajectory slots.

    ``num_envs``: how many envs the run has; slots name theirs by ``env_id`` in
    ``0 .. num_envs - 1``, and each env keeps its own unfinished n-step steps between slots
    (see :mod:`fastrl.replay.nstep`), so slots of different workers may arrive interleaved.
    """

    kind = "uniform"

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype,
                 act_shape: tuple[int, ...], act_dtype, num_envs: int, n_step: int = 1,
                 gamma: float = 0.99) -> None:
        self.capacity = _positive_int("capacity", capacity)
        self.num_envs = _positive_int("num_envs", num_envs)
        self.n_step = _positive_int("n_step", n_step)
        if not 0.0 < gamma <= 1.0:
            raise ReplayError(f"gamma must be in (0, 1], got {gamma!r}")
        self.gamma = float(gamma)
        self.obs_shape, self.act_shape = tuple(map(int, obs_shape)), tuple(map(int, act_shape))
        self.obs_dtype, self.act_dtype = np.dtype(obs_dtype), np.dtype(act_dtype)
        self._cursor = self._size = self._inserted = 0
        self.storage = self._zeros(self.capacity)
        self._store_args = _kernel_args(self.storage)
        self.tail = self._zeros_tail()
        self._tail_args = tuple(self._tail_words(k) for k in TAIL_FIELDS)
        self._batches: dict[int, tuple[dict[str, np.ndarray], np.ndarray, tuple]] = {}

    # -- layout ---------------------------------------------------------------------------

    def _zeros(self, rows: int) -> dict[str, np.ndarray]:
        """Zeroed arrays of every stored field for ``rows`` transitions, in :data:`SAMPLED`
        order."""
        return _allocate(row_fields(rows, self.obs_shape, self.obs_dtype, self.act_shape,
                                    self.act_dtype))

    def _zeros_tail(self) -> dict[str, np.ndarray]:
        """Zeroed per-env tails: the last ``n_step - 1`` steps of each env's stream."""
        return _allocate(tail_fields(self.num_envs, self.n_step, self.obs_shape,
                                     self.obs_dtype, self.act_shape, self.act_dtype))

    @classmethod
    def nbytes(cls, capacity: int, obs_shape: tuple[int, ...], obs_dtype,
               act_shape: tuple[int, ...], act_dtype, num_envs: int, n_step: int = 1) -> int:
        """Bytes such a buffer allocates (rows and n-step tails), computed, not allocated."""
        shapes = (tuple(obs_shape), np.dtype(obs_dtype), tuple(act_shape), np.dtype(act_dtype))
        fields = {**row_fields(capacity, *shapes), **{
            f"tail_{k}": v for k, v in tail_fields(num_envs, n_step, *shapes).items()}}
        return sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                   for shape, dtype in fields.values())

    def _tail_words(self, name: str) -> np.ndarray:
        a = self.tail[name]
        if name in WORD_FIELDS:
            return as_words(a, lead=2)
        return as_words(a) if name == "bootstrap_obs" else a

    # -- counters -------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Rows filled (at most ``capacity``)."""
        return self._size

    @property
    def inserted(self) -> int:
        """Transitions stored since the buffer was made: the insert counter rows are stamped
        with."""
        return self._inserted

    # -- insertion ------------------------------------------------------------------------

    def add_slot(self, slot: Mapping[str, np.ndarray]) -> int:
        """Store the transitions of one trajectory slot that are complete; returns how many.

        ``slot`` holds time-major arrays as the rings do: obs ``[T, E, *obs]``, action
        ``[T, E, *act]``, reward ``[T, E]``, terminated and truncated ``[T, E]`` bool,
        final_obs ``[E, rows, *obs]`` (each env's truncated steps' final observations, in
        step order: fastrl.memory.layout), bootstrap_obs ``[E, *obs]``,
        env_id ``[T, E]`` (constant along T; row 0 is read). Other keys are ignored. The
        arrays are copied, so the slot may be reused as soon as this returns.
        """
        args, env_ids = self._slot_args(slot)
        count = insert_nstep(args, env_ids, self._tail_args, self._store_args, self._cursor,
                             self._inserted, self.n_step, self.gamma)
        self._cursor = (self._cursor + count) % self.capacity
        self._size = min(self._size + count, self.capacity)
        self._inserted += count
        return count

    def _slot_args(self, slot: Mapping[str, np.ndarray]) -> tuple[tuple, np.ndarray]:
        """The slot's arrays checked, in the buffer's dtypes, as :func:`insert_nstep` takes
        them; and the run-wide env id of every column."""
        missing = [k for k in SLOT_KEYS if k not in slot]
        if missing:
            raise ReplayError(f"slot lacks {missing}; a slot needs {list(SLOT_KEYS)}")
        reward = np.asarray(slot["reward"])
        if reward.ndim != 2:
            raise ReplayError(f"slot reward must be [T, E], got shape {reward.shape}")
        te = reward.shape
        rows = np.shape(slot["final_obs"])[1] if np.ndim(slot["final_obs"]) > 1 else 0
        want = {"obs": (te + self.obs_shape, self.obs_dtype),
                "action": (te + self.act_shape, self.act_dtype),
                "reward": (te, np.float32), "terminated": (te, np.bool_),
                "truncated": (te, np.bool_),
                "final_obs": ((te[1], rows) + self.obs_shape, self.obs_dtype),
                "bootstrap_obs": (te[1:] + self.obs_shape, self.obs_dtype),
                "env_id": (te, None)}
        arrays = {}
        for key, (shape, dtype) in want.items():
            a = np.asarray(slot[key])
            if a.shape != shape:
                raise ReplayError(f"slot {key!r} has shape {a.shape}, expected {shape} "
                                  f"([T, E] = {list(te)}, obs {self.obs_shape}, action "
                                  f"{self.act_shape})")
            arrays[key] = np.ascontiguousarray(a, dtype)
        env_ids = arrays.pop("env_id")[0].astype(np.int64)
        self._check_env_ids(env_ids)
        index = final_obs_index(arrays["truncated"])
        if te[0] and index.max() >= rows:
            raise ReplayError(f"slot final_obs keeps {rows} final observation(s) per env, but "
                              f"an env truncated {int(index.max()) + 1} episodes in the slot")
        final_at = (index + np.arange(te[1], dtype=np.int32) * rows).astype(np.int32)
        words = {k: as_words(arrays[k], lead=2) for k in ("obs", "action", "final_obs")}
        final_obs = words["final_obs"].reshape(te[1] * rows, words["obs"].shape[-1])
        args = (words["obs"], words["action"], arrays["reward"], arrays["terminated"],
                arrays["truncated"], final_obs, final_at, as_words(arrays["bootstrap_obs"]))
        return args, env_ids

    def _check_env_ids(self, env_ids: np.ndarray) -> None:
        ids = env_ids.tolist()
        bad = [i for i in ids if not 0 <= i < self.num_envs]
        if bad:
            raise ReplayError(f"slot env_id {bad[0]} is outside 0 .. {self.num_envs - 1} "
                              f"(num_envs={self.num_envs})")
        if len(set(ids)) != len(ids):
            raise ReplayError(f"slot env_id repeats an env: {ids}")

    # -- sampling -------------------------------------------------------------------------

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``batch_size`` rows drawn uniformly with replacement.

        Keys: obs, action, reward, next_obs, done, discount, indices (int64), stamps (int64:
        pass them back with :meth:`PrioritizedReplayBuffer.update_priorities`), weights
        (float32, all ones here). The arrays are preallocated per batch size and overwritten
        by the next call with that size: copy or convert them before sampling again.
        """
        out, u, dst = self._batch(batch_size)
        rng.random(out=u)
        sample_uniform(u, self._size, out["indices"], self._store_args, dst)
        return dict(out)

    def _batch(self, batch_size: int) -> tuple[dict[str, np.ndarray], np.ndarray, tuple]:
        """The output arrays for ``batch_size`` rows, the uniform draws' array, and the
        outputs as the gather kernels take them."""
        if self._size == 0:
            raise ReplayError("cannot sample from an empty replay buffer: add slots first")
        cached = self._batches.get(batch_size)
        if cached is None:
            batch_size = _positive_int("batch_size", batch_size)
            rows = self._zeros(batch_size)
            out = {SAMPLED[k]: rows[k] for k in SAMPLED}
            out["indices"] = np.zeros(batch_size, np.int64)
            out["weights"] = np.ones(batch_size, np.float32)
            cached = self._batches[batch_size] = (out, np.empty(batch_size),
                                                  _kernel_args(rows))
        return cached

    # -- state ----------------------------------------------------------------------------

    def _config(self) -> dict[str, object]:
        """What a saved state must agree on with the buffer that loads it."""
        return {"kind": self.kind, "capacity": self.capacity, "num_envs": self.num_envs,
                "obs_shape": self.obs_shape, "obs_dtype": str(self.obs_dtype),
                "act_shape": self.act_shape, "act_dtype": str(self.act_dtype),
                "n_step": self.n_step, "gamma": self.gamma}

    def _counters(self) -> dict[str, int | float]:
        """The scalars a state holds besides the config."""
        return {"cursor": self._cursor, "size": self._size, "inserted": self._inserted}

    def _arrays(self, size: int) -> dict[str, np.ndarray]:
        """The live arrays a state holds, storage cut to ``size`` rows."""
        out = {k: v[:size] for k, v in self.storage.items()}
        out.update({f"tail_{k}": v for k, v in self.tail.items()})
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything that continues this buffer, as a flat dict of numpy arrays (scalars
        0-d) for ``np.savez``: the filled rows, cursor and counters, the per-env n-step
        tails, the config it must be loaded into (and, prioritized, the priorities)."""
        state = {k: np.array(v, np.int64) if isinstance(v, tuple) else np.array(v)
                 for k, v in {**self._config(), **self._counters()}.items()}
        state.update({k: v.copy() for k, v in self._arrays(self._size).items()})
        return state

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Continue from :meth:`state_dict` (or ``np.load`` of a file it was saved to).
        Raises :class:`ReplayError`, changing nothing, when the state does not fit."""
        state = {k: np.asarray(v) for k, v in state.items()}  # an npz file: read each once
        size = self._check_state(state)
        for k, live in self._arrays(size).items():
            live[...] = state[k]
        self._restore_counters({k: np.asarray(state[k]).item() for k in self._counters()})

    def _restore_counters(self, counters: dict[str, int | float]) -> None:
        self._cursor, self._size = int(counters["cursor"]), int(counters["size"])
        self._inserted = int(counters["inserted"])

    def _check_state(self, state: dict[str, np.ndarray]) -> int:
        """The state's row count, once the state is known to fit this buffer."""
        if "kind" in state and str(state["kind"]) != self.kind:
            raise ReplayError(f"replay state is of a {str(state['kind'])!r} buffer, this one "
                              f"is {self.kind!r}")
        config = self._config()
        keys = [*config, *self._counters(), *self._arrays(0)]
        missing = [k for k in keys if k not in state]
        if missing:
            raise ReplayError(f"replay state lacks {missing}")
        differ = [f"{k}: state has {_show(state[k])}, buffer has {_show(v)}"
                  for k, v in config.items() if not _same(state[k], v)]
        if differ:
            raise ReplayError("replay state does not fit this buffer: " + "; ".join(differ))
        size, cursor = int(state["size"]), int(state["cursor"])
        if not (0 <= size <= self.capacity and 0 <= cursor < self.capacity):
            raise ReplayError(f"replay state has size {size} and cursor {cursor}; capacity is "
                              f"{self.capacity}")
        for k, live in self._arrays(size).items():
            got = state[k]
            if got.shape != live.shape or got.dtype != live.dtype:
                raise ReplayError(f"replay state {k!r} is {got.dtype}{list(got.shape)}, "
                                  f"expected {live.dtype}{list(live.shape)}")
        return size


def _kernel_args(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Stored fields in :data:`SAMPLED` order, those of :data:`WORD_FIELDS` as words: what
    the insert and gather kernels take."""
    return tuple(as_words(arrays[k]) if k in WORD_FIELDS else arrays[k] for k in SAMPLED)


def _show(value) -> str:
    v = np.asarray(value).tolist()
    return repr(tuple(v) if isinstance(v, list) else v)


def _same(saved, value) -> bool:
    return np.asarray(saved).tolist() == np.asarray(value).tolist()
