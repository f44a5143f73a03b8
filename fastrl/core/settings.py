"""The building block of fastrl's typed config: a dataclass field that carries its own
documentation and value checks, so that the checks, the error messages and the config
reference (docs/config.md) all read them from one place."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def setting(default: Any, doc: str, **check: Any) -> Any:
    """A dataclass field with its documentation and value checks in the metadata.

    ``check`` takes ``gt``, ``ge``, ``le`` (numeric bounds) or ``choices`` (allowed values).
    """
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"doc": doc, **check})
    return field(default=default, metadata={"doc": doc, **check})


def bound_problem(value: Any, meta: Any) -> str | None:
    """What is wrong with ``value`` under a field's ``gt``/``ge``/``le``/``choices`` checks,
    or None."""
    if "choices" in meta and value not in meta["choices"]:
        return f"must be one of {', '.join(map(str, meta['choices']))}"
    if "gt" in meta and not value > meta["gt"]:
        return f"must be > {meta['gt']}"
    if "ge" in meta and not value >= meta["ge"]:
        return f"must be >= {meta['ge']}"
    if "le" in meta and not value <= meta["le"]:
        return f"must be <= {meta['le']}"
    return None
