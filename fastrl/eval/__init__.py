"""Evaluation: the seeded harness (:mod:`fastrl.eval.harness`) that the learner and the
checkpoint evaluations run, loading a checkpoint's policy (:mod:`fastrl.eval.policy`), and the
``python -m fastrl.eval`` command (:mod:`fastrl.eval.cli`)."""
