"""The ``population`` config section, and each member's config."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from fastrl.core.errors import ConfigError
from fastrl.core.settings import setting


@dataclass
class PBTConfig:
    """Population-based training (docs/population.md, "PBT"): every ``every_steps`` member
    env steps, the members whose training episodes since the last round returned least
    copy the weights and optimizer state of those that returned most, then perturb their
    ``population.vary`` settings."""

    every_steps: int = setting(0, "member env steps between PBT rounds; 0: no PBT", ge=0)
    fraction: float = setting(0.25, "the share of members that copy in a round, and the "
                              "share they copy from (at least one each)", gt=0, le=0.5)
    perturb: list[float] = setting([0.8, 1.25], "factors a copied member's population.vary "
                                   "settings are each multiplied by, one drawn per setting "
                                   "(then kept within the key's bounds)")


@dataclass
class PopulationConfig:
    """Several members trained in one run (docs/population.md): the same workers step every
    member's envs, the same learner trains every member's network. Member k is the single
    run with seed ``seed + k``: bit for bit with ``exact``, else up to floating-point
    reduction order (every member computed at once)."""

    size: int = setting(1, "members trained in this run; member k is the run with seed "
                        "seed+k (and the k-th value of every population.vary key)", gt=0)
    vary: dict[str, list[float]] = setting(
        {}, "per member, other values of algo's float keys: {'algo.lr': [v0, v1, ...]}, one "
        "value per member")
    exact: bool = setting(False, "update and act for one member after another, so that "
                          "member k is bit-identical to its single run (slower); else all "
                          "members at once, equal up to floating-point reduction order")
    pbt: PBTConfig = field(default_factory=PBTConfig)


def member_config(cfg: Any, k: int) -> Any:
    """Member ``k``'s config (a fastrl.config.MainConfig): the run's with seed ``seed + k``,
    every ``population.vary`` key at its ``k``-th value, and a population of one."""
    algo = varied(cfg.algo, {key: values[k] for key, values in cfg.population.vary.items()})
    return replace(cfg, seed=cfg.seed + k, algo=algo, population=PopulationConfig())


def varied(algo: Any, values: dict[str, float]) -> Any:
    """``algo`` (an AlgoConfig) with each ``algo.``-key of ``values`` set to its value."""
    for key, value in values.items():
        algo = _set(algo, key.split(".")[1:], value)
    return algo


def value_of(algo: Any, key: str) -> Any:
    """The value of the ``algo.``-key ``key`` in ``algo`` (a section's: the section;
    ``"algo"``: ``algo``)."""
    for part in key.split(".")[1:]:
        algo = getattr(algo, part)
    return algo


def within_bounds(algo: Any, key: str, value: float) -> float:
    """``value`` for the ``algo.``-key ``key`` of ``algo`` brought within the key's bounds
    (its ``le`` and ``ge``); a value at or past its ``gt`` bound gives ``algo``'s own."""
    parent, _, name = key.rpartition(".")
    section = value_of(algo, parent)
    meta = next(f.metadata for f in fields(section) if f.name == name)
    value = min(value, meta.get("le", value))
    value = max(value, meta.get("ge", value))
    return value if "gt" not in meta or value > meta["gt"] else getattr(section, name)


def _set(section: Any, path: list[str], value: float) -> Any:
    head, *rest = path
    if rest:
        return replace(section, **{head: _set(getattr(section, head), rest, value)})
    return replace(section, **{head: float(value)})


def varied_keys(algo: Any) -> list[str]:
    """The keys ``population.vary`` accepts: every float key of ``algo`` (a
    fastrl.config.AlgoConfig) and of its sections."""
    def floats(section: Any, prefix: str) -> list[str]:
        out = []
        for f in fields(section):
            value = getattr(section, f.name)
            if is_dataclass(value):
                out += floats(value, f"{prefix}{f.name}.")
            elif f.type in (float, "float", "float | None"):
                out.append(prefix + f.name)
        return out
    return floats(algo, "algo.")


def check_population(cfg: Any) -> None:
    """``population.vary`` names float keys of ``algo``, each with one value per member,
    each value within its key's bounds (checked on the member's config by the caller)."""
    pop = cfg.population
    accepted = varied_keys(cfg.algo)
    for key, values in pop.vary.items():
        if key not in accepted:
            raise ConfigError(f"config key 'population.vary' names {key!r}; it varies float "
                              f"keys of algo: {', '.join(accepted)}")
        if len(values) != pop.size:
            raise ConfigError(f"config key 'population.vary.{key}' has {len(values)} values; "
                              f"population.size={pop.size} needs one per member")
    if pop.vary and pop.size == 1:
        raise ConfigError("config key 'population.vary' needs population.size > 1")
    pbt = pop.pbt
    if pbt.every_steps and not pop.vary:
        raise ConfigError(f"config key 'population.pbt.every_steps={pbt.every_steps}' needs "
                          "population.vary: the settings PBT perturbs, one value per member")
    if not pbt.perturb or any(not f > 0 for f in pbt.perturb):
        raise ConfigError(f"config key 'population.pbt.perturb={pbt.perturb}' takes factors "
                          "> 0, at least one")
