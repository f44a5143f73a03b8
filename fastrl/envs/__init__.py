"""Built-in envs and the batched-env interface that custom simulators implement."""

from fastrl.envs import heavy  # noqa: F401 - registers fastrl/HeavyCartPole-v1
from fastrl.envs.batched import BatchedEnv, SlotRows, StepRows
from fastrl.envs.cartpole import BatchedCartPole
from fastrl.envs.catch import BatchedCatch
from fastrl.envs.duel import BatchedDuel
from fastrl.envs.recall import BatchedRecall

#: Batched simulators selected by ``env.id``; everything else goes to ``gymnasium.make``.
BUILTIN_BATCHED = {"fastrl/CartPole-v1": BatchedCartPole, "fastrl/Catch-v0": BatchedCatch,
                   "fastrl/Recall-v0": BatchedRecall, "fastrl/Duel-v0": BatchedDuel}

__all__ = ["BUILTIN_BATCHED", "BatchedCartPole", "BatchedCatch", "BatchedDuel", "BatchedEnv",
           "BatchedRecall", "SlotRows", "StepRows"]
