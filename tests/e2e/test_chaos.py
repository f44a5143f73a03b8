"""The chaos benchmark's short variant (benchmarks/chaos.py, docs/faults-and-resume.md): the
default job under random faults for a minute and a half, resumed whenever it stops, keeps
every checkpoint, leaves nothing behind and still learns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from helpers import ROOT


@pytest.mark.timeout(420)
def test_the_default_job_survives_random_faults_and_still_learns(tmp_path):
    out = tmp_path / "chaos.json"
    # (a session of its own: on a timeout the whole of it, job included, is ended)
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "chaos.py"),
                             "--minutes", "1.5", "--every", "3", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        raise
    report = json.loads(out.read_text())
    assert proc.returncode == 0, (report["verdicts"], stdout[-3000:], stderr[-3000:])
    assert all(report["verdicts"].values()) and report["ok"]
    assert sum(report["faults"].values()) >= 10 and report["resumes"] >= 1
    assert report["final_eval"] >= 475 and report["cycles"]
    # in a mount namespace of its own (root) it fills its own disk and /dev/shm, else it
    # says those faults were skipped
    assert bool(report["skipped"]) != report["isolated"]
    assert not report["isolated"] or {"disk full", "/dev/shm full"} & set(report["faults"])
    assert (tmp_path / "chaos.log").stat().st_size > 0  # (the job's raw output)
