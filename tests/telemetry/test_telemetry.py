"""Telemetry (fastrl.telemetry) in one process: which metric keys are documented, and the
custom scalars a callback hook may return. (Through a run: tests/runtime/test_embedded.py.)"""

from __future__ import annotations

import pytest

from fastrl import Callback
from fastrl.core.timing import STAGES
from fastrl.telemetry.events import custom_scalars
from fastrl.telemetry.metrics import METRICS, metric_documented


class Hooks(Callback):
    """A callback whose hooks the checks name."""


def test_documented_keys_and_per_stage_timing_keys():
    assert all(metric_documented(key) for key in METRICS)
    for stage in STAGES:
        assert metric_documented(f"timing/learner/{stage}_s")
        assert metric_documented(f"timing/workers/{stage}_s")
    for key in ("timing/learner/nap_s", "timing/elsewhere/train_s", "timing/learner/train",
                "loss/made_up", "policy_loss/extra"):
        assert not metric_documented(key), key


def test_custom_scalars_are_real_numbers_by_name():
    assert custom_scalars(Hooks(), "on_update", {"a": 1, 2: 2.5, "b": True}) == \
        {"a": 1.0, "2": 2.5, "b": 1.0}
    assert custom_scalars(Hooks(), "on_update", {}) == {}


@pytest.mark.parametrize("extra, words", [
    (1.0, "Hooks.on_update returned 1.0: a hook returns None or a dict of scalars"),
    ([("a", 1)], "a hook returns None or a dict"),
    ({"a": "high"}, "Hooks.on_update returned {'a': 'high'}: custom scalars must be real"),
    ({"a": None}, "custom scalars must be real numbers"),
])
def test_anything_else_is_a_type_error_naming_the_hook(extra, words):
    with pytest.raises(TypeError, match=words.replace("(", r"\(").replace("[", r"\[")):
        custom_scalars(Hooks(), "on_update", extra)
