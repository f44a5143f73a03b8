"""python -m fastrl.bench as a command: a failing measurement as a row, a short run of every
scenario and peer with its report, and the learner scenario with staging on and off. (Its
options and help: tests/bench/test_bench.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch


@pytest.mark.timeout(300)
def test_a_failing_measurement_is_a_row_not_a_traceback(tmp_path, no_shm_residue):
    proc = subprocess.run(
        [sys.executable, "-m", "fastrl.bench", "--env", "NoSuch-v0", "--workers", "1",
         "--duration", "0.3", "--warmup", "0.1", "--repeats", "1", "--peers", "raw",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    notes = [r["note"] for r in json.loads((tmp_path / "bench.json").read_text())["medians"]]
    assert len(notes) == 2 and all(n.startswith("failed: EnvError") for n in notes)


@pytest.mark.slow  # every scenario and peer: a Ray of its own, process pools, numba kernels
@pytest.mark.timeout(600)
def test_every_scenario_and_peer_runs_and_writes_the_report(tmp_path, no_shm_residue):
    proc = subprocess.run(
        [sys.executable, "-m", "fastrl.bench", "--scenario",
         "collect,collect-policy,train,collect-ray,replay",
         "--workers", "1", "--envs-per-worker", "2", "--rollout-len", "8", "--duration", "0.25",
         "--warmup", "0.1", "--repeats", "1", "--out", str(tmp_path), "--pin",
         "--replay-capacity", "5000", "--replay-frames", "500"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert {"cpu_model", "logical_cores", "python", "versions", "git_sha"} <= set(doc["machine"])
    rows = {r["system"]: r for r in doc["medians"]}
    for name in ("fastrl collect", "fastrl collect-policy", "fastrl train", "raw loop",
                 "gymnasium SyncVectorEnv", "gymnasium AsyncVectorEnv"):
        r = rows[name]
        assert r["steps"] > 0 and r["steps_per_sec"] > 0 and r["steps_per_cpu_s"] > 0, name
        assert r["cores_used"] > 0
    replay = {name: r for name, r in rows.items() if r["scenario"] == "replay"}
    assert "kernels loaded from numba's cache" in replay.pop("replay first calls")["note"]
    for key in ("sample", "uniform", "update", "loop", "insert n=1", "insert n=3", "frames"):
        fastrl, baseline = (r for name, r in replay.items() if name.startswith(f"replay {key}:"))
        assert fastrl["steps"] > 0 and fastrl["steps_per_sec"] > 0 and fastrl["cpu_s"] > 0
        if not baseline["note"].startswith("skipped: cpprb"):  # optional peer
            assert baseline["steps_per_sec"] > 0, key
            assert re.search(r"µs/call; \d+\.\d\dx ", fastrl["note"]), fastrl["note"]
    assert re.search(r"M transitions/s \(target >= 10M: (met|MISSED)\)",
                     replay["replay insert n=3: fastrl PER add_slot n=3"]["note"])
    assert "median" in proc.stdout and "fastrl replay" in proc.stdout
    for optional in ("SB3 SubprocVecEnv", "EnvPool"):  # measured, or said to be skipped
        assert rows[optional]["steps"] > 0 or rows[optional]["note"].startswith("skipped")
    assert set(rows["fastrl collect-policy"]["stage_share"]) == {"act", "env", "write"}
    assert "steps/CPU-s" in proc.stdout
    # the Ray runtime against the local one, and where its extra cost goes
    ray_row = rows["fastrl collect-ray"]
    assert ray_row["steps_per_sec"] > 0 and ray_row["costs"]["cores_workers"] > 0
    assert ray_row["costs"]["relay_get_ms"] > 0 and ray_row["costs"]["relay_copy_ms"] > 0
    assert "relay_get_ms" not in rows["fastrl collect"]["costs"]
    assert "where the time goes" in proc.stdout and "× collect" in proc.stdout


@pytest.mark.timeout(120)
def test_learner_scenario_measures_staging_on_and_off(tmp_path, no_shm_residue):
    proc = subprocess.run(
        [sys.executable, "-m", "fastrl.bench", "--scenario", "learner", "--workers", "2",
         "--envs-per-worker", "4", "--rollout-len", "16", "--duration", "0.3", "--warmup",
         "0.1", "--repeats", "2", "--peers", "", "--no-plot", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "bench.json").read_text())
    rows = {r["system"]: r for r in doc["medians"]}
    on, off = rows["fastrl learner staging on"], rows["fastrl learner staging off"]
    for row in (on, off):
        assert row["steps"] > 0 and row["steps_per_sec"] > 0 and row["workers"] == 2, row
    ratio = float(re.search(r"on/off (\d+\.\d+)x", on["note"]).group(1))
    assert 0 < ratio < float("inf")
    assert [len(rounds) for rounds in doc["repeats"]] == [2, 2]
    if torch.cuda.is_available():
        assert on["note"].startswith("CudaStager on cuda") and "hidden behind compute" in \
            on["note"]
    else:
        assert on["note"].startswith("HostStager on cpu")
    assert off["note"].startswith("SyncStager")
    assert "fastrl learner" in proc.stdout and "on/off" in proc.stdout
