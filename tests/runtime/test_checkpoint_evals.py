"""A checkpoint evaluated in a spawned process, as the supervisor does with
log.eval_on_checkpoint: the report it writes, atomically, and what the supervisor logs of it."""

from __future__ import annotations

import json
import multiprocessing

import pytest
from helpers import checkpoint_folders as folders

from fastrl.eval.checkpoints import checkpoint_report, evaluate_checkpoint_to, evaluate_checkpoints
from fastrl.runtime.checkpoint_evals import checkpoint_eval_summary

pytestmark = pytest.mark.timeout(300)


def test_evaluate_checkpoint_to_in_a_spawned_process(checkpointed_run, tmp_path):
    checkpoint, out = folders(checkpointed_run)[0], tmp_path / "evals" / "a.json"
    proc = multiprocessing.get_context("spawn").Process(
        target=evaluate_checkpoint_to, args=(str(checkpoint), str(out)))
    proc.start()
    try:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    finally:
        proc.kill()
        proc.join(timeout=10)
    assert [p.name for p in out.parent.iterdir()] == ["a.json"]  # no temporary left
    written = json.loads(out.read_text())
    assert written == checkpoint_report(evaluate_checkpoints([checkpoint]))
    assert written["global_step"] == 512 and written["summary"]["episodes"] == 2.0
    assert written["suite"]["num_seeds"] == 2  # the run's log.eval_episodes (TINY)
    # what the supervisor logs of it (fastrl.runtime.supervisor, log.eval_on_checkpoint)
    assert checkpoint_eval_summary(written) == written["summary"]

