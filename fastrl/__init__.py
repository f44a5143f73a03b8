"""fastrl: a shared-memory multiprocessing RL trainer for one workstation."""

__version__ = "0.1.0"  # before the imports: fastrl.checkpoint reads it

from fastrl.config import MainConfig, load_config
from fastrl.trainer import Trainer

__all__ = ["MainConfig", "Trainer", "load_config"]
