"""Helpers shared by the test modules: config overrides for small runs, running
``python -m fastrl.train`` and waiting on it, reading a run's results and TensorBoard
scalars, the solve bar, and an importable env factory.

Test modules import this module as ``helpers`` (tests/conftest.py puts tests/ on the path of
this process and of every child); no test module imports another test module."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import psutil

from fastrl.memory.segments import leftover_segments

TESTS = Path(__file__).parent
ROOT = TESTS.parent
CONFIGS = ROOT / "configs"

# Small, fast runs for pipeline tests (override further per test).
TINY = [
    "infra.num_workers=2", "infra.envs_per_worker=2", "infra.rollout_len=16",
    "algo.num_minibatches=2", "algo.update_epochs=1", "log.eval_episodes=2",
    "log.console=false",
]
# A run that only a signal, a failure or close() ends.
ENDLESS = ["algo.total_steps=100000000", "algo.target_return=null"]
# One worker: one process fewer to start, where a test needs no second worker.
ONE_WORKER = ["infra.num_workers=1"]
# One worker, a small net (user policies through workers).
QUICK = ["infra.num_workers=1", "infra.envs_per_worker=2", "infra.rollout_len=16",
         "algo.num_minibatches=2", "algo.update_epochs=1", "log.eval_episodes=2",
         "log.console=false", "algo.target_return=null", "algo.hidden_sizes=[16]"]
QUICK_DQN = ["algo.name=dqn", "algo.replay.capacity=2048", "algo.replay.batch_size=32",
             "algo.replay.learning_starts=256", "algo.replay.max_ahead_steps=256"]
# Uninterrupted runs that stop-and-resume runs are compared with, bit for bit (fixed seed,
# max_policy_lag=0: the same slots and weights versions reach the learner whatever stops it);
# conftest.straight_run makes them.
STRAIGHT_STEPS = 12288
STRAIGHT = [f"algo.total_steps={STRAIGHT_STEPS}", "seed=7", "log.eval_every_steps=4096",
            "log.checkpoint_every_steps=2048", "infra.check_slots=true"]
# The Ray runtime.
RAY = ["infra.runtime=ray"]


def tiny_config(tmp_path: Path, *overrides: str):
    """The config of a TINY run under ``tmp_path``, with ``overrides``."""
    from fastrl.config import load_config

    return load_config(None, [*TINY, f"log.run_dir={tmp_path}", *overrides])


def ours_in_shm() -> set[str]:
    """fastrl's segments and multiprocessing's semaphores (our queues) in /dev/shm."""
    return set(leftover_segments()) | {n for n in os.listdir("/dev/shm") if n.startswith("sem.mp-")}


def others_in_shm(names: set[str], since: float) -> set[str]:
    """Of ``names`` (in /dev/shm), those that runs outside this test process and its children
    hold: the segments of a live supervisor that is not ours (fastrl names them
    fastrl_<pid>_...), and what else a live process that is not ours maps. Other test runs on
    the machine create and free theirs while a test of ours runs. Orphans started after
    ``since`` (a time.time()) count as ours: a child that outlived its parent."""
    ours = {os.getpid()} | {p.pid for p in psutil.Process().children(recursive=True)}
    for p in psutil.process_iter(["ppid", "create_time"]):
        if p.info["ppid"] == 1 and (p.info["create_time"] or 0) >= since:
            ours.add(p.pid)
    others, unnamed = set(), set()
    for name in names:
        parts = name.split("_")
        if name.startswith("fastrl_") and len(parts) > 2 and parts[1].isdigit():
            pid = int(parts[1])  # the supervisor that made it
            if pid not in ours and psutil.pid_exists(pid):
                others.add(name)
        else:
            unnamed.add(name)
    if unnamed:
        for pid in psutil.pids():
            if pid in ours:
                continue
            try:
                maps = Path(f"/proc/{pid}/maps").read_text()
            except OSError:  # gone, or not ours to read
                continue
            others |= {name for name in unnamed if f"/dev/shm/{name}" in maps}
    return others


def shm_left(before: set[str], since: float, grace_s: float = 3.0) -> set[str]:
    """What this test process and its children left in /dev/shm since ``before`` was taken
    (at ``since``): new names that no concurrent run holds and that are still there after
    ``grace_s`` (a resource tracker unlinks what a killed process left a moment later)."""
    deadline = time.monotonic() + grace_s
    while True:
        left = ours_in_shm() - before
        left -= others_in_shm(left, since)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def run_train(args: list[str], tmp_path: Path, timeout: float = 180, **kw):
    """``python -m fastrl.train`` in a subprocess with its run dir under ``tmp_path``."""
    cmd = [sys.executable, "-m", "fastrl.train", *args, f"log.run_dir={tmp_path}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def train_main(args: list[str], tmp_path: Path, capfd=None) -> subprocess.CompletedProcess:
    """``python -m fastrl.train`` run in this process (fastrl.train.main: the same exit
    status, stdout and stderr), with its run dir under ``tmp_path``: no interpreter to start
    and no torch to import for the supervisor. With pytest's ``capfd`` the children's output
    is in stderr too; without, only the supervisor's. Tests that signal the supervisor
    itself run it as a process instead (``launch``)."""
    from fastrl.train import main

    argv = [*args, f"log.run_dir={tmp_path}"]
    if capfd is not None:
        capfd.readouterr()  # what came before is not this run's
        code = main(argv)
        out, err = capfd.readouterr()
    else:
        with contextlib.redirect_stdout(io.StringIO()) as out_, \
                contextlib.redirect_stderr(io.StringIO()) as err_:
            code = main(argv)
        out, err = out_.getvalue(), err_.getvalue()
    return subprocess.CompletedProcess(argv, code, out, err)


def resume_main(run_dir: Path, overrides: list[str], capfd=None) -> subprocess.CompletedProcess:
    """``python -m fastrl.train --resume RUN_DIR overrides`` in this process (as
    :func:`train_main`; the run's own log.run_dir, the parent of ``run_dir``, given again)."""
    return train_main(["--resume", str(run_dir), *overrides], Path(run_dir).parent, capfd)


def run_dir_of(tmp_path: Path) -> Path:
    """The one run directory under ``tmp_path``."""
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return d


def last_json(out: str) -> dict:
    """The summary ``python -m fastrl.train`` prints as its last stdout line."""
    return json.loads(out.strip().splitlines()[-1])


def spawned_children(proc: subprocess.Popen) -> list[psutil.Process]:
    """The supervisor's learner and workers, in start order (learner first): the children of
    its fork server (fastrl.core.forkserver)."""
    kids = []
    for server in psutil.Process(proc.pid).children():
        try:
            if "forkserver" in " ".join(server.cmdline()):
                kids += server.children()
        except psutil.NoSuchProcess:
            pass
    return sorted(kids, key=lambda c: (c.create_time(), c.pid))


def tb_size(tmp_path: Path) -> int:
    """Bytes in the TensorBoard event file of the run under ``tmp_path`` (0: none yet)."""
    events = list(tmp_path.glob("*/tb/events.out.tfevents.*"))
    return events[0].stat().st_size if events else 0


def wait_training(proc: subprocess.Popen, tmp_path, timeout: float = 120) -> list[psutil.Process]:
    """Wait until the learner has logged an update (TensorBoard file has grown) and the
    learner and both workers run; returns them (learner first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if tb_size(tmp_path) > 2000 and len(spawned_children(proc)) >= 3:
            return spawned_children(proc)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"run did not start training: {proc.communicate(timeout=30)}")


def wait_updates(proc: subprocess.Popen, tmp_path, timeout: float = 120) -> None:
    """Wait until the learner has logged updates (its TensorBoard file has grown), whatever
    runs the workers (Ray actors are no children of the supervisor)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if tb_size(tmp_path) > 2000:
            return
        assert proc.poll() is None, proc.communicate(timeout=30)
        time.sleep(0.2)
    raise AssertionError("the run did not start training")


def wait_file(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until ``path`` exists; fail if ``proc`` ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)


def wait_for(ready, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until ``ready()``; fail if ``proc`` ends or ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, \
            proc.communicate(timeout=30)
        time.sleep(0.2)


def kill_then_stop(proc: subprocess.Popen, run: Path, victim: psutil.Process,
                   timeout: float = 60) -> str:
    """SIGKILL ``victim`` (a worker of the run ``proc``, training in ``run``) at a random
    moment, let the run make 10 updates after the restart, then stop it with SIGTERM; asserts
    that it stopped cleanly after one restart and returns its stderr."""
    time.sleep(random.uniform(0, 0.5))
    victim.send_signal(signal.SIGKILL)
    wait_for(lambda: updates_after_restart(run) >= 10, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    result = last_json(out)
    assert result["restarts"] == 1 and result["stopped_by_signal"], result
    return err


def all_gone(procs: list[psutil.Process], timeout: float = 15) -> bool:
    """Whether every process of ``procs`` has ended (zombies count as ended) in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs):
            return True
        time.sleep(0.1)
    return False


def tb(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    """``(step, value)`` of a TensorBoard scalar of a run (empty if never logged); a resumed
    run's purge step applies."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(Path(run_dir) / "tb"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def updates_after_restart(run_dir: Path) -> int:
    """Updates a run logged after its first worker restart (0 before one was logged; with
    log.metrics_every_s=0 every update is logged, with the supervisor's restart count).
    The run may be going on."""
    restarted = [step for step, count in tb(run_dir, "supervisor/restarts") if count >= 1]
    if not restarted:
        return 0
    return sum(1 for step, _ in tb(run_dir, "loss/policy_loss") if step > min(restarted))


def tb_accumulator(run_dir: Path, **size_guidance):
    """A loaded TensorBoard EventAccumulator of a run (histograms: ``histograms=0``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(Path(run_dir) / "tb"), size_guidance=size_guidance or None)
    acc.Reload()
    return acc


def assert_solved(cfg, global_step: int, final_eval: dict, run_dir: Path) -> None:
    """The solve bar: within 500k steps, the learner's last evaluation (20 episodes, fixed
    seeds, deterministic policy: fastrl.eval.harness.evaluate) and the saved model evaluated
    afresh here both average at least 475."""
    import torch

    from fastrl.envs.source import EnvSource
    from fastrl.eval.harness import evaluate
    from fastrl.plan import plan_run

    assert global_step <= 500_000
    assert final_eval["return_mean"] >= 475
    policy = plan_run(cfg).policy()
    policy.load_state_dict(torch.load(Path(run_dir) / "model.pt")["model"])
    seeds = list(range(cfg.log.eval_seed, cfg.log.eval_seed + 20))
    assert evaluate(policy, EnvSource("CartPole-v1"), seeds)["return_mean"] >= 475


def same_weights(a: Path, b: Path) -> bool:
    """Whether two runs' model.pt hold the same parameters, bit for bit."""
    import torch

    x, y = (torch.load(Path(run) / "model.pt")["model"] for run in (a, b))
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def make_cartpole(**kwargs) -> gym.Env:
    """A Gymnasium-API env factory at module level: importable, so spawn workers get it."""
    return gym.make("CartPole-v1", **kwargs)


def remote_workers() -> list[psutil.Process]:
    """Live worker actors under this test process's Ray (Ray titles them ray::RemoteWorker)."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "RemoteWorker" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


# --- shared memory across processes (tests/memory, tests/runtime/test_shared_memory.py) ---
def ring_layout():
    """The slot layout of the ring tests: a sequence number, a payload and a CRC32."""
    import numpy as np

    from fastrl.memory.layout import Field, SlotLayout

    return SlotLayout([
        Field("seq", (1,), np.dtype(np.int64)),
        Field("payload", (61,), np.dtype(np.float64)),
        Field("checksum", (), np.dtype(np.uint32)),  # Ring.stamp / Ring.verify: CRC32
    ])


def payload_for(seq: int):
    """The payload of slot ``seq``: every slot's differs."""
    import numpy as np

    return np.sin(np.arange(61) * 0.37 + seq)


def produce(name: str, slots: int, count: int) -> None:
    """Publish slots ``write_seq .. count-1`` into the ring in segment ``name`` (a spawned
    process's target): a restarted producer continues the ring."""
    from fastrl.memory.ring import Ring
    from fastrl.memory.segments import attach
    from fastrl.memory.wait import wait_until

    shm = attach(name)
    ring = Ring(shm.buf, ring_layout(), slots)
    for seq in range(ring.write_seq, count):
        wait_until(ring.has_free_slot, lambda: False, timeout_s=60)
        slot = ring.write_slot()
        slot["seq"][0] = seq
        p = payload_for(seq)
        for half in (slice(0, 30), slice(30, 61)):  # two writes: a kill can fall between
            slot["payload"][half] = p[half]
        ring.stamp()
        ring.publish()


def write_versions(name: str, size: int, versions: int) -> None:
    """Write weights versions 1..``versions`` (every parameter equal to its version) into the
    SharedWeights of ``size`` parameters in segment ``name`` (a spawned process's target)."""
    import numpy as np

    from fastrl.memory.segments import attach
    from fastrl.memory.weights import SharedWeights

    shm = attach(name)
    w = SharedWeights(shm.buf, size)
    for v in range(1, versions + 1):
        w.write(np.full(size, v, np.float32), v)
        time.sleep(50e-6)  # let the reader in between writes too, not only during them


def checkpoint_folders(run_dir: Path) -> list[Path]:
    """A run's checkpoint folders, oldest first (temporary ones left out)."""
    from fastrl.checkpoint import checkpoints_dir

    return sorted(p for p in checkpoints_dir(run_dir).iterdir() if not p.name.startswith("."))


def sigterm_when(proc, ready, timeout: float = 120) -> None:
    """SIGTERM ``proc`` at a random moment within a quarter second after ``ready()`` (a
    short TINY run can finish within a second of its first checkpoint)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    time.sleep(random.uniform(0, 0.25))  # a random moment: mid-update, mid-slot or waiting
    proc.send_signal(signal.SIGTERM)


def wandb_records(run_dir: Path) -> dict[str, list]:
    """The records of an offline W&B run's transaction log (``RUN_DIR/wandb/offline-run-*/
    run-<id>.wandb``, every such run in the order written) by kind, parsed with W&B's own
    protobuf classes: ``history`` as dicts of the values logged, ``run``, ``artifact``,
    ``exit`` as W&B's records. The log is LevelDB's format: 32 KiB blocks of records, each
    a 7-byte header (CRC, length, type: full, first, middle or last part) after the file's
    own 7-byte header."""
    import json
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    out: dict[str, list] = {}
    for path in sorted(Path(run_dir).glob("wandb/offline-run-*/run-*.wandb")):
        data, pos, part = path.read_bytes(), 7, b""
        while pos + 7 <= len(data):
            left = 32768 - pos % 32768
            _, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else \
                (0, 0, 0)
            if kind == 0:  # (a block's padding)
                pos += left
                continue
            part += data[pos + 7:pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):
                record = pb.Record.FromString(part)
                part = b""
                name = record.WhichOneof("record_type")
                value = getattr(record, name)
                if name == "history":  # (a key with a "/" comes as its parts)
                    value = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                             for i in value.item}
                out.setdefault(name, []).append(value)
    return out


def interrupted_run(launch, tmp_path: Path, *args: str) -> tuple[Path, int]:
    """A run of TINY + STRAIGHT (+ ``args``) in ``tmp_path/interrupted``, stopped with
    SIGTERM as soon as its first checkpoint exists; its folder and the step it stopped at
    (its final checkpoint's, the workers parked), well before STRAIGHT_STEPS."""
    from fastrl.checkpoint import latest_valid

    proc = launch([*STRAIGHT, *args, "log.run_name=interrupted"])
    run = tmp_path / "interrupted"
    sigterm_when(proc, lambda: latest_valid(run)[0] is not None)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    stop_step = last_json(out)["global_step"]
    assert 0 < stop_step < STRAIGHT_STEPS, "the stop came too late to test anything"
    return run, stop_step


def assert_restores(make, obs, steps: int) -> None:
    """An actor made with ``make(seed)`` and restored from the state of one that acted
    ``steps`` times acts on as that one."""
    import numpy as np

    saved = make(1)
    for _ in range(steps):
        saved(obs)
    state = saved.state()
    ahead = [saved(obs)[0] for _ in range(3)]
    fresh = make(2)
    fresh.restore(state)
    assert np.array_equal([fresh(obs)[0] for _ in range(3)], ahead), type(saved)
