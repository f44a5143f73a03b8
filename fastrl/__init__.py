"""fastrl: a shared-memory multiprocessing RL trainer for one workstation."""

__version__ = "0.1.0"  # before the imports: fastrl.checkpoint reads it

from fastrl.callbacks import Callback
from fastrl.config import MainConfig, load_config
from fastrl.envs import BatchedEnv
from fastrl.models.base import BasePolicy, PolicyContractError
from fastrl.trainer import Trainer

__all__ = ["BasePolicy", "BatchedEnv", "Callback", "MainConfig", "PolicyContractError",
           "Trainer", "load_config"]
