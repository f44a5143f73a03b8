"""A population's checkpoint through ``python -m fastrl.eval`` and ``python -m
fastrl.export``: every member, one member (``--member K``) or the best (``--member
best``), and clear refusals."""

from __future__ import annotations

import json

import pytest
from helpers import TINY, run_dir_of, train_main

from fastrl.eval.cli import main as eval_main
from fastrl.export import main as export_main

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A population of three and a single run, each with its final evaluation."""
    out = {}
    for name, extra in (("population", ["population.size=3"]), ("single", [])):
        tmp = tmp_path_factory.mktemp(name)
        proc = train_main([*TINY, "algo.total_steps=1024", "algo.target_return=null",
                           "log.tensorboard=false", "log.eval_episodes=2", *extra], tmp)
        assert proc.returncode == 0, proc.stderr
        out[name] = run_dir_of(tmp)
    return out


def _eval(capsys, *argv: str) -> dict:
    assert eval_main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_eval_reports_every_member_one_member_or_the_best(runs, capsys):
    run = str(runs["population"])
    every = _eval(capsys, run)["summary"]
    returns = [every[f"member{k}/return_mean"] for k in range(3)]
    assert every["best_return_mean"] == max(returns)
    assert every["worst_return_mean"] == min(returns)
    for k in range(3):
        assert _eval(capsys, run, "--member", str(k))["summary"]["return_mean"] == returns[k]
    # (best: by the checkpoint's last evaluation, the same suite as here)
    assert _eval(capsys, run, "--member", "best")["summary"]["return_mean"] == max(returns)


@pytest.mark.parametrize("run, member, says", [
    ("population", "3", "member '3': this population has a member 0..2, or best"),
    ("population", "first", "member 'first': this population has a member 0..2, or best"),
    ("single", "0", "member '0': this checkpoint holds one policy, not a population"),
])
def test_eval_refuses_a_member_it_does_not_have(runs, capsys, run, member, says):
    assert eval_main([str(runs[run]), "--member", member]) == 2
    assert says in capsys.readouterr().err


def test_export_takes_one_member(runs, tmp_path, capsys):
    run = str(runs["population"])
    assert export_main([run, "--format", "torch-export", "--out",
                        str(tmp_path / "all.pt2")]) == 2
    assert "holds a population of 3 policies; export one: --member K" in \
        capsys.readouterr().err
    out = tmp_path / "member1.pt2"
    assert export_main([run, "--format", "torch-export", "--out", str(out),
                        "--member", "1", "--repeats", "2"]) == 0
    sidecar = json.loads(out.with_name(out.name + ".json").read_text())
    assert sidecar["population_member"] == 1 and sidecar["policy_class"] == "ActorCritic"
