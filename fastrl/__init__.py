"""fastrl: a shared-memory multiprocessing RL trainer for one workstation."""

from fastrl.config import MainConfig, load_config
from fastrl.trainer import Trainer

__all__ = ["MainConfig", "Trainer", "load_config"]
__version__ = "0.1.0"
