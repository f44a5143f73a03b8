"""What the fork server (fastrl.core.forkserver) loads once, before it forks any child.

The entry modules of every child (and with them torch, numpy, numba, gymnasium and the rest
of fastrl they use), and the numba kernels every child calls from its first step: the
ordered loads and stores on ring and weights counters, and a worker's slot bookkeeping.
Loaded here, each child forks with them ready instead of paying numba's start-up (~0.2 s of
a core) on its own.
"""

from fastrl.learner import learner  # noqa: F401
from fastrl.memory import atomics
from fastrl.rollout import collector, worker  # noqa: F401
from fastrl.runtime import checkpoint_evals, periodic_evals  # noqa: F401

atomics.warm_up()
collector.warm_up()
