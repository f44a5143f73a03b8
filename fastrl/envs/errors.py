"""What an env that breaks fastrl's env contract (fastrl.envs.contract) raises, and the
checks of a step's arrays that workers afford on every step."""

from __future__ import annotations

import numpy as np

from fastrl.core.errors import ExplainedError


class EnvError(ExplainedError, ValueError):
    """An env that cannot be made, or that breaks the contract of its declared spaces."""


class EnvContractError(EnvError):
    """An env returned something that does not match its declared spaces."""


def describe_value(value: object) -> str:
    """``float32 array of shape (3,)`` / ``int 5``: what came, for an error message."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    if isinstance(value, np.generic):
        return f"numpy {type(value).__name__} {value!r}"
    return f"{type(value).__name__} {value!r}"[:120]


def contract_violation(env_id: str, where: str, field: str, expected: str,
                       got: object) -> EnvContractError:
    """The error for one broken field: env, call, field, what was expected and got."""
    return EnvContractError(f"env {env_id!r} broke the env contract in {where}: {field} "
                            f"should be {expected}, got {describe_value(got)}")


def record_violation(env_id: str, where: str, field: str, wrong: str) -> EnvContractError:
    """The error for a Dict or Tuple observation with a wrong leaf (``wrong``, from
    fastrl.memory.records.ObsRecord.check)."""
    return EnvContractError(f"env {env_id!r} broke the env contract in {where}: in {field}, "
                            f"{wrong}")


def check_batch_arrays(env_id: str, where: str, n: int, obs_shape: tuple[int, ...],
                       obs_dtype: np.dtype, obs: object, reward: object = None,
                       terminated: object = None, truncated: object = None) -> None:
    """Check one batched ``reset`` (``obs`` only) or ``step`` result of ``n`` envs: arrays of
    the right shapes and dtypes, bool flags, finite rewards. Costs a few attribute reads
    (and one ``isfinite`` over ``n`` rewards), so workers run it on every step."""
    want = (n, *obs_shape)
    if not isinstance(obs, np.ndarray) or obs.shape != want or obs.dtype != obs_dtype:
        raise contract_violation(env_id, where, "obs", f"a {obs_dtype} array of shape {want}",
                                 obs)
    if reward is None:
        return
    if not isinstance(reward, np.ndarray) or reward.shape != (n,) or \
            reward.dtype.kind not in "fiu":
        raise contract_violation(env_id, where, "reward", f"a real-valued array of shape "
                                 f"({n},)", reward)
    if not np.isfinite(reward).all():
        bad = int(np.flatnonzero(~np.isfinite(reward))[0])
        raise contract_violation(env_id, where, f"reward[{bad}]", "a finite number",
                                 reward[bad].item())
    for name, flags in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flags, np.ndarray) or flags.shape != (n,) or flags.dtype != np.bool_:
            raise contract_violation(env_id, where, name, f"a bool array of shape ({n},)",
                                     flags)
