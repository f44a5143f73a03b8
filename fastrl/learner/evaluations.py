"""The learner's periodic evaluations (``log.eval_every_steps``), and the one path by which
a run is judged solved.

The path: the learner sends the weights that are due (:meth:`Evaluations.run`, an
``evaluate`` message with a copy of the flat parameters); the supervisor evaluates them in
a process of its own (fastrl.runtime.periodic_evals) and, when they reach
``algo.target_return``, marks their env step solved in the run's control block
(fastrl.memory.control); the learner sees it (:meth:`Evaluations.solved`), takes those
weights back and ends the run. Where no other process evaluates (the serial runtime), the
learner evaluates here, and marks the block itself. In a population (fastrl.population)
each member is solved on its own: it takes back the weights that solved and trains no
more, and the run ends once every member is solved.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.queues import Queue

import numpy as np
import torch

from fastrl.core.timing import StageTimer
from fastrl.eval.harness import SeedSuite, evaluate, record_solved
from fastrl.memory.control import RunControl
from fastrl.models.policy import flat_params, keep_solved
from fastrl.plan import RunPlan

# Weights sent for evaluation that are kept, the newest (besides those being evaluated): the
# supervisor evaluates one at a time and keeps only the newest request waiting.
KEEP_SENT_WEIGHTS = 2


class Evaluations:
    """When the learner's weights are evaluated, where, and whether one reached the target.

    ``elsewhere``: send the weights to the supervisor (the learner never stops training for
    an evaluation); else evaluate in this process. ``should_stop`` ends an evaluation here
    early (raising Stopped).
    """

    def __init__(self, plan: RunPlan, policy: torch.nn.Module, device: torch.device,
                 control: RunControl, metrics: Queue, timer: StageTimer, elsewhere: bool,
                 should_stop: Callable[[], bool]) -> None:
        self.plan, self.policy, self.device = plan, policy, device
        self.control, self.metrics, self.timer = control, metrics, timer
        self.elsewhere, self.should_stop = elsewhere, should_stop
        self.every = plan.cfg.log.eval_every_steps
        self.next_eval = self.every
        self.last_eval: dict[str, float] | None = None  # this process's last result
        self.eval_step = -1  # its env step
        self._sent: dict[int, np.ndarray] = {}  # weights sent for evaluation, by env step
        self.solved_at: dict[int, int] = {}  # the members solved, at the env step they were

    def due(self, step: int) -> bool:
        """An evaluation is due at env step ``step`` (before the end of the run: the last
        one is :meth:`finish`'s)."""
        return self.next_eval <= step < self.plan.cfg.algo.total_steps

    def run(self, step: int) -> None:
        """The evaluation that is due: the weights sent to the supervisor (kept until it
        judges them), or evaluated here."""
        if self.elsewhere:
            self._take_solved()  # (before the weights that solved may be dropped)
            params = flat_params(self.policy)
            self._sent[step] = params
            judged = self.control.eval_step()
            for sent in sorted(self._sent)[:-KEEP_SENT_WEIGHTS]:
                if sent != judged:
                    del self._sent[sent]
            self.metrics.put(("evaluate", step, {"params": params}))
        else:
            self.evaluate_here(step)
        while self.next_eval <= step:  # advanced only once it is done or sent
            self.next_eval += self.every

    def evaluate_here(self, step: int) -> None:
        """Evaluate the current weights in this process and report the result (``eval``)."""
        suite = SeedSuite.of(self.plan.cfg.log)
        self.policy.eval()
        with self.timer.stage("evaluate"):
            result = evaluate(self.policy, self.plan.env, suite.seeds, self.device,
                              suite.max_steps, self.should_stop,
                              episodes_per_seed=suite.episodes_per_seed,
                              selfplay=self.plan.cfg.selfplay)
        self.policy.train()
        record_solved(self.control, step, result, self.plan.cfg.algo.target_return)
        self.last_eval, self.eval_step = result, step
        self.metrics.put(("eval", step, result))

    def solved(self) -> bool:
        """Every member reached the target return, in this process's evaluations or the
        supervisor's of weights it was sent. A member newly solved first takes back the
        weights that did (training went on while they were evaluated), so that model.pt
        and the final checkpoint hold the policy that was judged."""
        self._take_solved()
        return len(self.solved_at) == self.control.members

    def _take_solved(self) -> None:
        """Each member newly marked solved takes back the weights that solved it."""
        for member in range(self.control.members):
            step = self.control.member_solved_step(member)
            if step is not None and member not in self.solved_at:
                self.solved_at[member] = step
                keep_solved(self.policy, member, self._sent.get(step))

    def finish(self, step: int) -> None:
        """The end of training at env step ``step``: unless solved, evaluate the last
        weights here, unless that was just done (nothing waits for the learner any
        more)."""
        if not self.solved() and step and self.eval_step != step:
            self.evaluate_here(step)

    def state(self) -> dict:
        """The schedule, last result and members solved, for the learner's checkpoint."""
        return {"next_eval": self.next_eval, "last_eval": self.last_eval,
                "eval_step": self.eval_step, "solved_at": dict(self.solved_at)}

    def restore(self, state: dict, step: int) -> None:
        """Continue from a checkpoint's :meth:`state` at env step ``step`` (a config resumed
        with another interval continues on the new one); the members solved stay solved,
        at the weights the checkpoint holds."""
        self.last_eval, self.eval_step = state["last_eval"], state["eval_step"]
        self.next_eval = min(state["next_eval"], step + self.every)
        # (checkpoints written before members were solved one by one hold none)
        for member, at in state.get("solved_at", {}).items():
            self.control.mark_solved(at, member)
            keep_solved(self.policy, member, None)
            self.solved_at[member] = at
