"""Self-play (``selfplay.*``, docs/multi-agent.md): one seat of each two-player game learns,
the other acts with a frozen past policy from a pool in shared memory.

The feature reaches the rest of fastrl through the small protocols every cross-cutting
feature uses (docs/architecture.md, "Adding a feature"):

- :mod:`~fastrl.selfplay.config`: its config section;
- :mod:`~fastrl.selfplay.seats`: which rows of a game learn;
- :mod:`~fastrl.selfplay.actor`: the worker's actor (hooks ``begin_slot``: draw and load the
  slot's opponent; ``end_step``: weight the opponent's rows 0, so they do not train);
- :mod:`~fastrl.selfplay.pool`: the pool's size, and its publisher, the learner hook that
  snapshots the policy beside every publish and checkpoints the pool;
- :mod:`~fastrl.selfplay.games`: win and draw rates, and the scripted baseline evaluations
  play against;
- :mod:`~fastrl.selfplay.checks`: a baseline that imports, a resumed pool that keeps its
  shape (what it does not combine with is a row of fastrl.compat's table);
- :mod:`~fastrl.selfplay.describe`: its part of ``python -m fastrl.describe``.
"""
