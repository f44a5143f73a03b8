"""A sweep's search space: a YAML mapping of config keys to ranges or lists of choices.

    algo.lr: {low: 5.0e-4, high: 5.0e-3, log: true}   # a float range (log-uniform)
    algo.update_epochs: [4, 10]                        # choices
    infra.rollout_len: {low: 16, high: 64}             # an int range: the key is an int

A range is sampled as the key's type in the config (an int key gives ints); every value is
checked against the config before the first trial, so a key that does not exist or a value
it refuses is one line, not a failed trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import yaml
from omegaconf import OmegaConf

from fastrl.config import ConfigError, MainConfig, load_config


class SpaceError(ConfigError):
    """A search space file that cannot be used (exit status 2)."""


@dataclass(frozen=True)
class Param:
    """One swept key: a range (``low``, ``high``, ``log``; ``integer`` for an int key) or
    a list of ``choices``."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: optuna.Trial) -> Any:
        """This key's value for ``trial``."""
        if self.choices:
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.integer:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, log=self.log)

    def bounds(self) -> list[Any]:
        """The values to check against the config: the ends of a range, or every choice."""
        return list(self.choices) if self.choices else [self.low, self.high]


def override(key: str, value: Any) -> str:
    """``key=value`` as the config's dotlist parser reads it back (lists and null too)."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    return f"{key}={text.removesuffix('...').strip()}"


def _param(key: str, spec: Any, base: MainConfig) -> Param:
    """The :class:`Param` of one entry of the file, typed by the key's value in ``base``."""
    where = f"search space key {key!r}"
    current = OmegaConf.select(OmegaConf.structured(base), key, default="<missing>")
    if current == "<missing>" or OmegaConf.is_config(current):
        raise SpaceError(f"{where}: not a config key (docs/config.md lists them)")
    if isinstance(spec, list):
        if not spec:
            raise SpaceError(f"{where}: an empty list of choices")
        return Param(key, choices=tuple(spec))
    if not isinstance(spec, dict) or set(spec) - {"low", "high", "log"} or \
            {"low", "high"} - set(spec):
        raise SpaceError(f"{where}: expected {{low: ..., high: ..., log: true|false}} or a "
                         f"list of choices, got {spec!r}")
    low, high, log = spec["low"], spec["high"], bool(spec.get("log", False))
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        raise SpaceError(f"{where}: low and high must be numbers, got {low!r}, {high!r}")
    if isinstance(current, bool) or not isinstance(current, (int, float)) and current is not None:
        raise SpaceError(f"{where}: a range needs a numeric key; it holds {current!r} (give a "
                         "list of choices)")
    if not low < high or (log and low <= 0):
        raise SpaceError(f"{where}: needs low < high{' and low > 0 (log)' if log else ''}, "
                         f"got {low}, {high}")
    integer = isinstance(current, int)
    if integer and not (float(low).is_integer() and float(high).is_integer()):
        raise SpaceError(f"{where}: the key is an int; low and high must be whole numbers")
    return Param(key, float(low), float(high), log, integer)


def load_space(path: Path, config: Path, overrides: list[str]) -> list[Param]:
    """The parameters of the search space file ``path``, each checked against the config
    (``config`` with ``overrides``) at its bounds or choices."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise SpaceError(f"--space {path}: cannot read it ({e})") from None
    if not isinstance(raw, dict) or not raw:
        raise SpaceError(f"--space {path}: expected a mapping of config keys to ranges or "
                         "lists of choices")
    base = load_config(config, overrides)
    space = [_param(str(key), spec, base) for key, spec in raw.items()]
    for param in space:
        for value in param.bounds():
            value = int(value) if param.integer else value
            try:
                load_config(config, [*overrides, override(param.key, value)])
            except ConfigError as e:
                raise SpaceError(f"search space key {param.key!r}: the value {value!r} is "
                                 f"refused: {e}") from None
    return space
