"""The algorithm registry: every module of :mod:`fastrl.algos` that holds an ``ALGORITHM``
record (:class:`~fastrl.algos.base.Algorithm`) is an algorithm, under its name.

Adding an algorithm is adding such a module: the config (``algo.name`` and the
``algo.<name>`` section), the workers, the learner, ``describe`` and the checks all ask
this registry.
"""

from __future__ import annotations

import importlib
import pkgutil

import fastrl.algos
from fastrl.algos.base import Algorithm
from fastrl.core.errors import ConfigError


def _discover() -> dict[str, Algorithm]:
    """name -> record of every algorithm module, in module order (sorted by name)."""
    found: dict[str, Algorithm] = {}
    for info in sorted(pkgutil.iter_modules(fastrl.algos.__path__), key=lambda m: m.name):
        record = getattr(importlib.import_module(f"fastrl.algos.{info.name}"), "ALGORITHM",
                         None)
        if record is None:
            continue
        if record.name in found:
            raise RuntimeError(f"two algorithm modules are named {record.name!r}")
        found[record.name] = record
    return found


#: Every algorithm, by ``algo.name``.
ALGORITHMS: dict[str, Algorithm] = _discover()


def algorithm(name: str) -> Algorithm:
    """The algorithm ``name``; a ConfigError naming the known ones for another name."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ConfigError(f"config key 'algo.name={name}': must be one of "
                          f"{', '.join(ALGORITHMS)}") from None
