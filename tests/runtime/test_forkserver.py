"""The fork server that starts every child of a run (fastrl.core.forkserver): what it has
imported, which signals it survives, and that ``python -m fastrl.train`` starts it before
importing torch."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from helpers import ENDLESS, wait_training

from fastrl.core import forkserver
from fastrl.core.forkserver import PRELOAD, start_fork_server

pytestmark = pytest.mark.timeout(120)


def ignored_signals(pid: int) -> set[int]:
    """The signals process ``pid`` ignores (its SigIgn mask in /proc)."""
    mask = int(next(line.split()[1] for line in open(f"/proc/{pid}/status")
                    if line.startswith("SigIgn:")), 16)
    return {sig for sig in range(1, 64) if mask >> (sig - 1) & 1}


def test_the_server_ignores_the_stop_signals_and_has_the_children_s_modules():
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    pid = start_fork_server()
    assert start_fork_server() == pid  # one server per process, reused
    assert {signal.SIGINT, signal.SIGTERM} <= ignored_signals(pid)
    deadline = time.monotonic() + 60  # (it imports before it serves: the call returns first)
    while "libtorch" not in open(f"/proc/{pid}/maps").read():  # imported once, there
        assert time.monotonic() < deadline, "the fork server never imported torch"
        time.sleep(0.05)
    server = psutil.Process(pid)
    assert server.ppid() == psutil.Process().pid and all(m in " ".join(server.cmdline())
                                                         for m in PRELOAD)
    # this process kept its own handlers and mask through the server's start
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGINT, signal.SIGTERM}


def test_a_running_server_s_pid_is_had_without_setting_the_stop_signals_aside(monkeypatch):
    # Every spawn asks for it: setting SIG_IGN discards a pending Ctrl-C, which the run
    # would then never hear of (a run that went on after a Ctrl-C to its process group).
    pid = start_fork_server()

    def set_aside(*args):
        raise AssertionError(f"the stop signals were touched: {args}")

    monkeypatch.setattr(forkserver, "signal", SimpleNamespace(
        signal=set_aside, pthread_sigmask=set_aside, SIG_IGN=signal.SIG_IGN,
        SIG_BLOCK=signal.SIG_BLOCK, SIG_SETMASK=signal.SIG_SETMASK))
    assert start_fork_server() == pid


def test_importing_fastrl_does_not_import_torch():
    # `python -m fastrl.train` imports the package first: torch must wait until the fork
    # server has been started, so that the two imports run side by side.
    code = "import sys, fastrl; assert 'torch' not in sys.modules; fastrl.Trainer"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_run_s_children_are_forks_of_a_server_that_ignores_group_signals(launch, tmp_path):
    proc = launch(ENDLESS)
    kids = wait_training(proc, tmp_path)
    servers = {k.ppid() for k in kids}
    assert len(servers) == 1 and psutil.Process(servers.pop()).ppid() == proc.pid
    # become_child: ignored for good (a worker catches SIGTERM, for the supervisor's own)
    assert all(signal.SIGINT in ignored_signals(kid.pid) for kid in kids)
    assert signal.SIGTERM in ignored_signals(kids[0].pid)  # the learner
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=90)
    assert proc.returncode == 0


UPDATES_WITHOUT_DYNAMO = """
import sys
from helpers import tiny_config
from fastrl import Trainer
for overrides in ([], ["algo.name=dqn", "algo.replay.learning_starts=256"],
                  ["env.id=Pendulum-v1", "algo.name=sac", "algo.replay.learning_starts=256"]):
    Trainer(tiny_config(sys.argv[1], "infra.runtime=serial", "algo.total_steps=768",
                        "algo.target_return=null", *overrides)).fit()
assert "torch._dynamo" not in sys.modules, "an update imported torch._dynamo"
"""


def test_training_never_imports_torch_dynamo(tmp_path):
    # torch.optim imports torch._dynamo when an optimizer is built: ~0.7 s of the learner's
    # start, before its first update (fastrl.algos.adam)
    subprocess.run([sys.executable, "-c", UPDATES_WITHOUT_DYNAMO, str(tmp_path)], check=True,
                   timeout=100, cwd=Path(__file__).parents[1])
