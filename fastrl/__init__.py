"""fastrl: a shared-memory multiprocessing RL trainer for one workstation."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from fastrl.core.version import __version__

# The public names load on first use: ``python -m fastrl.train`` imports this package
# first, and must start its fork server (fastrl.core.forkserver) before torch is imported.
_EXPORTS = {
    "BasePolicy": "fastrl.models.base", "BatchedEnv": "fastrl.envs",
    "Callback": "fastrl.callbacks", "MainConfig": "fastrl.config",
    "PolicyContractError": "fastrl.models.base", "Trainer": "fastrl.trainer",
    "load_config": "fastrl.config",
}
__all__ = ["__version__", "BasePolicy", "BatchedEnv", "Callback", "MainConfig",
           "PolicyContractError", "Trainer", "load_config"]

if TYPE_CHECKING:
    from fastrl.callbacks import Callback
    from fastrl.config import MainConfig, load_config
    from fastrl.envs import BatchedEnv
    from fastrl.models.base import BasePolicy, PolicyContractError
    from fastrl.trainer import Trainer


def __getattr__(name: str) -> object:
    """``fastrl.Trainer`` and the other public names, imported when first asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fastrl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
