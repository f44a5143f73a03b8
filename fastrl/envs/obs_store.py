"""Observations of one space, checked and written into rows of stored observations."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from fastrl.envs.errors import contract_violation, record_violation
from fastrl.memory.layout import storage_of
from fastrl.memory.records import obs_record


class ObsStore:
    """Writes an env's observations into rows ``[n, *obs]`` as a slot stores them, every
    one checked against the space: a Box observation in the space's exact dtype, others
    cast to their storage dtype, a Dict or Tuple observation packed into its record leaf
    by leaf (fastrl.memory.records). A violation names the env, the call and the field."""

    def __init__(self, env_id: str, space: spaces.Space) -> None:
        self.env_id, self.space = env_id, space
        self.shape, self.dtype = storage_of(space, "observation")
        self.record = obs_record(space)
        # Box observations must come in the space's dtype; others are converted on storing.
        self.strict = isinstance(space, spaces.Box)

    def one(self, out: np.ndarray, i: int, obs: Any, where: str = "step()") -> None:
        """``out[i] = obs``, checked."""
        if self.record is not None:
            wrong = self.record.check(obs)
            if wrong:
                raise record_violation(self.env_id, where, "the observation", wrong)
            self.record.write(out[i], obs)
            return
        arr = np.asarray(obs)
        if arr.shape != self.shape or self.strict and arr.dtype != self.dtype:
            raise contract_violation(
                self.env_id, where, "the observation", f"a {self.dtype} array of shape "
                f"{self.shape} (its observation space is {self.space})", arr)
        out[i] = arr

    def all(self, out: np.ndarray, observations: list, where: str = "step()") -> None:
        """``out[:] = observations`` in one conversion; one by one (to name the culprit)
        when a shape or dtype is wrong, or for records."""
        arr = None
        if self.record is None:
            try:
                arr = np.array(observations)
            except ValueError:  # ragged shapes
                pass
        if arr is None or arr.shape[1:] != self.shape or \
                self.strict and arr.dtype != self.dtype:
            for i, obs in enumerate(observations):
                self.one(out, i, obs, where)
            return
        out[:] = arr
