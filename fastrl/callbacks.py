"""Hooks an embedding program gets into a run: updates, evaluations, checkpoints.

Callbacks run in the process that called :meth:`fastrl.Trainer.fit` (never in a worker or
the learner), so they need not be picklable and may touch the program's own state. Each
hook may return a dict of extra scalars, which go to TensorBoard as ``custom/<name>`` at
that step. A hook that raises stops the run gracefully (final checkpoint, no segment left)
and ``fit()`` re-raises its exception.
"""

from __future__ import annotations

from typing import Any


class Callback:
    """Subclass and override the hooks you need; the defaults do nothing.

    The ``metrics`` of :meth:`on_update` follow the schema in
    :data:`fastrl.telemetry.metrics.METRICS` (losses, ``episode/*``, ``timing/*``, ...).
    """

    def on_update(self, step: int, metrics: dict[str, Any]) -> dict[str, float] | None:
        """After each learner report (every ``log.metrics_every_s``: losses averaged over
        the updates since the last one), ``step`` env steps in. The values are floats but
        ``policy_lag/histogram``, a list of counts (entry k: transitions that lagged k
        policy versions)."""
        return None

    def on_eval(self, step: int, result: dict[str, float],
                source: str) -> dict[str, float] | None:
        """After each evaluation: by the learner (``source='learner'``), or of the checkpoint
        folder ``source`` in a separate process (``log.eval_on_checkpoint``). ``result``
        holds ``return_mean``, ``return_std``, ``return_min``, ``return_max``,
        ``length_mean``, ... (see fastrl.eval.harness)."""
        return None

    def on_checkpoint(self, step: int, path: str) -> dict[str, float] | None:
        """After a checkpoint folder was written (complete, renamed into place)."""
        return None
