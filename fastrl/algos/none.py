"""``algo.name=none``: no training. Workers act (with the untrained policy, or uniformly at
random with ``algo.random_actions``) and the learner releases every slot unread: what the
bench's collection scenarios measure."""

from fastrl.algos.base import Algorithm, DataMode
from fastrl.models.families import ACTING_ONLY

ALGORITHM = Algorithm(
    name="none",
    summary="no training, the learner only drains slots (collection throughput)",
    data=DataMode.DRAIN,
    policy=ACTING_ONLY,
)
