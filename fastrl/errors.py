"""The exceptions that mean bad input: every command-line tool exits 2 on these, with one
line naming what was wrong, and 1 on a run that failed."""

from fastrl.checkpoint import CheckpointError
from fastrl.config import ConfigError
from fastrl.envs.source import EnvError
from fastrl.memory.layout import UnsupportedSpace
from fastrl.memory.segments import SharedMemoryFull
from fastrl.models.base import PolicyContractError
from fastrl.models.encoders import UnsupportedObservations
from fastrl.models.policy import UnsupportedActionSpace

#: A bad config, env, space, policy or checkpoint, or a run larger than /dev/shm has room
#: for (found before any process starts).
INPUT_ERRORS = (ConfigError, CheckpointError, EnvError, UnsupportedSpace,
                UnsupportedActionSpace, UnsupportedObservations, PolicyContractError,
                SharedMemoryFull)
