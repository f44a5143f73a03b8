"""An hour of chaos: the default job (or any config whose env is a Gymnasium id) trained
under random faults for ``--minutes``, resumed whenever it stops, then a report of what it
survived.

    python benchmarks/chaos.py --minutes 60 [--config CONFIG] [--out FILE.json] [key=value ...]

The job runs in cycles, each a run of its own, as the config has it (the default job ends
once an evaluation reaches its target return, 475): whenever the run stops for any other
reason, it is resumed from its newest checkpoint (started again where it has none); when it
ends by itself, its final evaluation is recorded and the next cycle starts, with the next
seed. At the deadline the faults stop and the cycle in progress runs to its end.

Faults, one every ``--every`` seconds on average, each drawn at random among:

- ``kill -9`` of any process of the run: the supervisor, the learner, a worker, an
  evaluation, the fork server, the resource tracker;
- a worker stopped (SIGSTOP) for 2 to 10 s, then continued: a hang
  (``infra.worker_timeout_s=5``, so that the longer ones are seen);
- an env that raises, or returns a NaN reward, at a random step (benchmarks/chaos_env.py);
- the disk of the run directories filled to the last byte, freed ``--hold`` s later;
- /dev/shm filled likewise.

The last two need root: chaos.py then runs in a mount namespace of its own (``unshare``),
with a tmpfs of ``--disk-mb`` for the run directories and one of ``--shm-mb`` at /dev/shm,
so that nothing outside it is touched; without root (or where a container forbids the
namespace) they are reported skipped.

The report (a table, and the JSON file ``--out``): faults by kind; worker restarts and
resumes; the env step over time and how far a resume ever went back (at most one
checkpoint interval); checkpoints lost (a complete one that a resume did not find); what
the run left when it stopped (processes, /dev/shm segments, temp folders) and how long the
supervisor's death took to clean up; the final evaluation. ``ok`` says whether every
requirement held; the exit status is 0 only then.
"""

from __future__ import annotations

import argparse
import csv
import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastrl.checkpoint import latest_valid  # noqa: E402
from fastrl.config import load_config  # noqa: E402
from fastrl.memory.segments import leftover_segments  # noqa: E402

IN_NAMESPACE = "FASTRL_CHAOS_NAMESPACE"
#: set on every process of the job (with the incarnation): what is left is found by it
MARK = "FASTRL_CHAOS_RUN"
#: what the job runs with besides the user's overrides
JOB_OVERRIDES = ["infra.worker_timeout_s=5", "log.console=false"]
CLEANUP_WAIT_S = 15.0  # how long a stopped run's processes and segments may take to go
STUCK_STOPS = 4  # stops in a row with no fault in between: fastrl itself fails; give up
FINISH_LIMIT_S = 600.0  # the last cycle's run to its end, after the deadline
RESTART_DELAY_S = 1.0  # before a stopped run is resumed (as a service manager's RestartSec)


@dataclass
class Report:
    """What chaos.py measured, as the JSON file holds it."""

    minutes: float
    config: str
    isolated: bool
    faults: Counter = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)
    starts: int = 0
    resumes: int = 0
    fresh_restarts: int = 0  # stopped before its first checkpoint: started again
    worker_restarts: int = 0  # by the supervisor, within a run
    stop_codes: Counter = field(default_factory=Counter)
    steps: list[tuple[float, int, int]] = field(default_factory=list)  # (s, cycle, step)
    max_back_steps: int = 0
    checkpoint_interval: int = 0
    checkpoints_lost: list[str] = field(default_factory=list)
    left_after_stops: list[str] = field(default_factory=list)
    supervisor_cleanup_s: list[float] = field(default_factory=list)
    cycles: list[dict] = field(default_factory=list)
    temp_left: list[str] = field(default_factory=list)  # by the completed cycles
    left_at_end: dict[str, list[str]] = field(default_factory=dict)
    final_eval: float | None = None
    stuck: str | None = None

    def verdicts(self) -> dict[str, bool]:
        """Each requirement, held or not."""
        return {
            "never back more than one checkpoint interval":
                self.max_back_steps <= self.checkpoint_interval,
            "no checkpoint lost": not self.checkpoints_lost,
            "nothing left after any stop": not self.left_after_stops,
            "nothing left at the end": not any(self.left_at_end.values()),
            "final evaluation >= 475": self.final_eval is not None and self.final_eval >= 475,
            "every cycle's final evaluation >= 475": all(
                c["eval_return"] is not None and c["eval_return"] >= 475 for c in self.cycles),
            "never stuck": self.stuck is None,
        }

    def as_json(self) -> dict:
        """The JSON file's contents."""
        out = {k: v for k, v in self.__dict__.items()}
        out["faults"], out["stop_codes"] = dict(self.faults), dict(self.stop_codes)
        out["verdicts"] = self.verdicts()
        out["ok"] = all(out["verdicts"].values())
        return out


class Faults:
    """Draws and injects the faults, and undoes the ones that last (a hang, a full disk)."""

    def __init__(self, rng: random.Random, report: Report, triggers: Path,
                 disk: Path | None, shm: Path | None, hold_s: float) -> None:
        self.rng, self.report, self.triggers = rng, report, triggers
        self.disk, self.shm, self.hold_s = disk, shm, hold_s
        self.kinds = ["kill -9", "hang a worker", "env raises", "env returns NaN"]
        for kind, place in (("disk full", disk), ("/dev/shm full", shm)):
            if place is None:
                report.skipped[kind] = "needs root (a size-limited tmpfs of its own)"
            else:
                self.kinds.append(kind)
        self.undo: list[tuple[float, str, object]] = []  # (when, what, on what)

    def inject(self, supervisor: psutil.Process | None) -> None:
        """One fault, drawn at random (a kill needs a running job; a hang, a worker)."""
        kind = self.rng.choice(self.kinds)
        if kind == "kill -9" and supervisor is not None:
            role, proc = self.rng.choice(job_processes(supervisor))
            if signal_process(proc, signal.SIGKILL):
                self.report.faults[f"kill -9 {role}"] += 1
        elif kind == "hang a worker" and supervisor is not None:
            workers = [p for role, p in job_processes(supervisor) if role == "worker"]
            if workers:
                proc = self.rng.choice(workers)
                if signal_process(proc, signal.SIGSTOP):
                    self.report.faults[kind] += 1
                    self.undo.append((time.monotonic() + self.rng.uniform(2, 10), "cont", proc))
        elif kind.startswith("env"):
            (self.triggers / ("raise" if kind == "env raises" else "nan")).touch()
            self.report.faults[kind] += 1
        elif kind in ("disk full", "/dev/shm full"):
            filler = (self.disk if kind == "disk full" else self.shm) / ".chaos-filler"
            if not filler.exists():
                fill(filler)
                self.report.faults[kind] += 1
                self.undo.append((time.monotonic() + self.hold_s, "free", filler))

    def undo_due(self, everything: bool = False) -> None:
        """Continue the hung workers and free the filled places whose time has come."""
        now = time.monotonic()
        keep = []
        for when, what, target in self.undo:
            if not everything and when > now:
                keep.append((when, what, target))
            elif what == "cont":
                signal_process(target, signal.SIGCONT)
            else:
                Path(target).unlink(missing_ok=True)
        self.undo = keep


def job_processes(supervisor: psutil.Process) -> list[tuple[str, psutil.Process]]:
    """The job's processes by role: the supervisor and everything under it."""
    try:
        procs = [supervisor, *supervisor.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []
    out = []
    for proc in procs:
        try:
            out.append((role_of(proc, supervisor), proc))
        except psutil.NoSuchProcess:
            continue
    return out


def role_of(proc: psutil.Process, supervisor: psutil.Process) -> str:
    """What a process of the job is (children name themselves: fastrl.core.process)."""
    if proc.pid == supervisor.pid:
        return "supervisor"
    name = proc.name()
    for prefix, role in (("fastrl learner", "learner"), ("fastrl worker", "worker"),
                         ("fastrl eval", "evaluation"), ("fastrl periodic", "evaluation")):
        if name.startswith(prefix):
            return role
    cmdline = " ".join(proc.cmdline())
    if "forkserver" in cmdline:
        return "fork server"
    return "resource tracker" if "resource_tracker" in cmdline else "other"


def signal_process(proc: psutil.Process, sig: int) -> bool:
    """Send ``sig`` to ``proc`` (by its pid, checked against its start time); False when it
    is gone."""
    try:
        proc.send_signal(sig)
        return True
    except psutil.NoSuchProcess:
        return False


def fill(path: Path) -> None:
    """Write ``path`` until its file system has no byte left."""
    with path.open("wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            try:
                while True:
                    f.write(block)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise


def marked(mark: str) -> list[psutil.Process]:
    """The processes whose environment holds ``MARK=mark`` (or starts with it + "-")."""
    found = []
    for proc in psutil.process_iter():
        try:
            value = proc.environ().get(MARK)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if value is not None and (value == mark or value.startswith(mark + "-")):
            found.append(proc)
    return found


def describe(procs: list[psutil.Process]) -> list[str]:
    """``pid name`` of each process still there."""
    out = []
    for proc in procs:
        try:
            out.append(f"{proc.pid} {proc.name()}")
        except psutil.NoSuchProcess:
            continue
    return out


class Job:
    """The job's cycles: starts, resumes and completes runs of the config."""

    def __init__(self, args: argparse.Namespace, work: Path, env: dict[str, str],
                 report: Report, token: str) -> None:
        self.args, self.runs, self.env, self.report = args, work / "runs", env, report
        self.token, self.log = token, work / "job.log"
        self.cycle, self.incarnation, self.cycle_starts = 0, 0, 0
        self.proc: subprocess.Popen | None = None
        self.supervisor: psutil.Process | None = None
        self.newest = 0  # the step of the cycle's newest checkpoint seen complete
        self.last_step = 0  # the cycle's newest env step seen
        self._looked = 0.0

    @property
    def run_dir(self) -> Path:
        return self.runs / f"cycle-{self.cycle}"

    def start(self) -> None:
        """Start the cycle's run: resumed from its newest checkpoint, else from scratch."""
        ckpt = latest_valid(self.run_dir)[0] if self.run_dir.exists() else None
        if ckpt is not None:
            self._check_not_lost(ckpt.global_step, ckpt.path.name)
            cmd, start_step = ["--resume", str(self.run_dir)], ckpt.global_step
            self.report.resumes += 1
        else:
            if self.run_dir.exists():
                shutil.rmtree(self.run_dir)
                self.report.fresh_restarts += 1
            cmd = [self.args.config, *JOB_OVERRIDES, *self.args.overrides,
                   f"seed={self.args.seed + self.cycle}", f"log.run_dir={self.runs}",
                   f"log.run_name={self.run_dir.name}"]
            start_step = 0
        self.report.max_back_steps = max(self.report.max_back_steps,
                                         self.last_step - start_step)
        self.last_step = start_step
        self.incarnation += 1
        self.cycle_starts += 1
        with self.log.open("a") as log:
            log.write(f"\n### cycle {self.cycle}, start {self.incarnation}: {' '.join(cmd)}\n")
            log.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "fastrl.train", *cmd], stdout=log, stderr=log,
                env={**self.env, MARK: self._mark()})
        self.supervisor = psutil.Process(self.proc.pid)
        self.report.starts += 1

    def _mark(self) -> str:
        return f"{self.token}-{self.incarnation}"

    def _check_not_lost(self, step: int, name: str) -> None:
        """A resume must find the newest checkpoint any earlier look found complete, and
        none may have been set aside as corrupt."""
        if step < self.newest:
            self.report.checkpoints_lost.append(
                f"cycle {self.cycle}: resumed from {name} at {step:,}, but one at "
                f"{self.newest:,} was complete before")
        self.newest = max(self.newest, step)
        for aside in self.run_dir.glob("checkpoints/corrupt-*"):
            entry = f"cycle {self.cycle}: {aside.name}"
            if entry not in self.report.checkpoints_lost:
                self.report.checkpoints_lost.append(entry)

    def observe(self, t: float) -> None:
        """Note the run's env step (its newest episodes.csv row), and every 2 s its newest
        complete checkpoint."""
        step = newest_episode_step(self.run_dir / "episodes.csv")
        if step is not None and (not self.report.steps or self.report.steps[-1][1:] !=
                                 (self.cycle, step)):
            self.last_step = max(self.last_step, step)
            self.report.steps.append((round(t, 1), self.cycle, step))
        if t - self._looked >= 2.0 and self.run_dir.exists():
            self._looked = t
            ckpt = latest_valid(self.run_dir)[0]
            if ckpt is not None:
                self.newest = max(self.newest, ckpt.global_step)

    def ended(self) -> bool:
        """The run process has exited: account for it; True when the cycle completed."""
        code = self.proc.wait()
        self.report.stop_codes[str(code)] += 1
        this_start = self._this_start()
        self.report.worker_restarts += len(re.findall(r"restart \d+:", this_start))
        self._wait_for_cleanup(killed_supervisor=code == -signal.SIGKILL)
        self.proc, self.supervisor = None, None
        result = last_json(this_start)
        # (ended by itself: solved, or at algo.total_steps)
        return code == 0 and result is not None and "global_step" in result and \
            not result.get("stopped_by_signal")

    def next_cycle(self, work: Path) -> None:
        """Record the completed cycle (its final evaluation, what it left), remove its run
        directory, and go on to the next."""
        result = last_json(self._this_start())
        # (a run resumed from its final checkpoint, the supervisor killed after it, ends
        # at once and evaluates nothing: its final evaluation is its evals.csv's last row)
        final = (result.get("eval") or {}).get("return_mean")
        self.report.cycles.append({
            "cycle": self.cycle, "global_step": result["global_step"],
            "eval_return": final if final is not None else last_eval(self.run_dir),
            "starts": self.cycle_starts})
        self.report.temp_left.extend(str(p.relative_to(work)) for p in temp_left(self.run_dir))
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.cycle += 1
        self.cycle_starts, self.newest, self.last_step = 0, 0, 0

    def _this_start(self) -> str:
        """This start's part of the job log."""
        text = self.log.read_text(errors="replace")
        return text[text.rfind("\n### cycle "):]

    def _wait_for_cleanup(self, killed_supervisor: bool) -> None:
        """Every process and segment of the stopped run must go (a killed supervisor's
        within CLEANUP_WAIT_S: the time it took is recorded)."""
        t0 = time.monotonic()
        segments_of = f"{self.proc.pid}_"  # (fastrl.memory.segments: the supervisor's pid)
        while True:
            procs, segments = marked(self._mark()), leftover_segments(segments_of)
            if not procs and not segments:
                break
            if time.monotonic() - t0 > CLEANUP_WAIT_S:
                self.report.left_after_stops.append(
                    f"cycle {self.cycle}, start {self.incarnation}: "
                    f"{', '.join(describe(procs) + segments)}")
                for proc in procs:  # (ours: end them, so that the next start is clean)
                    signal_process(proc, signal.SIGKILL)
                break
            time.sleep(0.05)
        if killed_supervisor:
            self.report.supervisor_cleanup_s.append(round(time.monotonic() - t0, 2))


def temp_left(run_dir: Path) -> list[Path]:
    """Temp files a run directory still holds: hidden checkpoint folders being written,
    parked worker states no checkpoint took."""
    return [*run_dir.glob("checkpoints/.tmp-*"), *run_dir.glob("checkpoints/.parked/*")]


def newest_episode_step(path: Path) -> int | None:
    """The step of the last complete row of an episodes.csv, or None."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 512))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines[1:] if len(lines) > 1 else []):
        first = line.split(",", 1)[0]
        if first.isdigit():
            return int(first)
    return None


def last_eval(run_dir: Path) -> float | None:
    """The mean return of a run's last evaluation (evals.csv), or None."""
    try:
        with (run_dir / "evals.csv").open() as f:
            rows = [row for row in csv.DictReader(f) if row.get("source") == "eval"]
    except FileNotFoundError:
        return None
    return float(rows[-1]["return_mean"]) if rows else None


def last_json(out: str) -> dict | None:
    """The run's result: the last line of its stdout, as JSON."""
    for line in reversed(out.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def run_chaos(args: argparse.Namespace, work: Path, isolated: bool) -> Report:
    """The job under faults until the deadline, then to the end of its cycle."""
    cfg = load_config(args.config, [*JOB_OVERRIDES, *args.overrides])
    report = Report(args.minutes, args.config, isolated,
                    checkpoint_interval=cfg.log.checkpoint_every_steps)
    runs, triggers, tmp = work / "runs", work / "triggers", work / "tmp"
    for d in (runs, triggers, tmp):
        d.mkdir(parents=True, exist_ok=True)
    token = f"chaos{os.getpid()}"
    env = {**os.environ, "TMPDIR": str(tmp), "FASTRL_CHAOS_TRIGGERS": str(triggers),
           "FASTRL_CHAOS_ENV": cfg.env.id,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), str(ROOT),
                                                       os.environ.get("PYTHONPATH")]))}
    args.overrides = [*args.overrides, "env.id=chaos_env:Chaos-v0"]
    rng = random.Random(args.seed)
    faults = Faults(rng, report, triggers, runs if isolated else None,
                    Path("/dev/shm") if isolated else None, args.hold)
    job = Job(args, work, env, report, token)
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60
    next_fault = t0 + rng.uniform(0.5, 1.5) * args.every
    quiet_stops = 0  # stops since the last fault
    finishing = False
    while True:
        now = time.monotonic()
        if not finishing and now >= deadline:
            finishing = True
            faults.undo_due(everything=True)
            for stale in triggers.iterdir():
                stale.unlink()
            finish_by = now + FINISH_LIMIT_S
        if finishing and now > finish_by:
            report.stuck = f"the last cycle did not end within {FINISH_LIMIT_S:g} s"
            break
        if job.proc is None:
            job.start()
        job.observe(now - t0)
        if not finishing:
            faults.undo_due()
            if now >= next_fault:
                faults.inject(job.supervisor)
                quiet_stops = 0
                next_fault = now + rng.uniform(0.5, 1.5) * args.every
        try:
            job.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
        complete = job.ended()
        quiet_stops = 0 if complete else quiet_stops + 1
        if not complete:
            time.sleep(RESTART_DELAY_S)
        if complete:
            job.next_cycle(work)
            if finishing:
                break
        elif quiet_stops >= STUCK_STOPS:
            report.stuck = (f"cycle {job.cycle}: {quiet_stops} stops in a row with no fault "
                            f"between them (see {job.log})")
            break
    faults.undo_due(everything=True)
    if job.proc is not None:  # (given up on: end it, and let it clean up)
        job.proc.send_signal(signal.SIGTERM)
        try:
            job.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            job.proc.kill()
        job.ended()
    report.final_eval = report.cycles[-1]["eval_return"] if report.cycles else None
    if args.out:  # (the raw output, beside the report)
        shutil.copyfile(job.log, args.out.with_suffix(".log"))
    report.left_at_end = {
        "processes": describe(marked(token)),
        "/dev/shm segments": leftover_segments(),
        "temp folders": sorted(str(p.relative_to(work)) for p in
                               [*runs.glob("*/checkpoints/.tmp-*"), *tmp.iterdir()]),
        "temp folders of completed cycles": report.temp_left,
    }
    return report


def print_table(report: Report) -> None:
    """The report as a table."""
    data = report.as_json()
    rows = [("faults injected", sum(report.faults.values()))]
    rows += [(f"  {kind}", n) for kind, n in sorted(report.faults.items())]
    rows += [(f"  {kind}", f"skipped: {why}") for kind, why in report.skipped.items()]
    rows += [("runs started", report.starts), ("  resumed from a checkpoint", report.resumes),
             ("  started again (no checkpoint yet)", report.fresh_restarts),
             ("worker restarts by the supervisor", report.worker_restarts),
             ("cycles completed", len(report.cycles)),
             ("  their lowest final evaluation",
              min((c["eval_return"] for c in report.cycles if c["eval_return"] is not None),
                  default=None)),
             ("env steps of the last observation", report.steps[-1][2] if report.steps else 0),
             ("most steps a resume went back",
              f"{report.max_back_steps:,} (interval {report.checkpoint_interval:,})"),
             ("checkpoints lost", len(report.checkpoints_lost)),
             ("left after a stop", len(report.left_after_stops)),
             ("supervisor kill -9: cleaned up in (s, max)",
              max(report.supervisor_cleanup_s, default=0.0)),
             *((f"left at the end: {k}", len(v)) for k, v in report.left_at_end.items()),
             ("final evaluation (return)", report.final_eval)]
    rows += [(f"[{'ok' if held else 'FAILED'}] {name}", "") for name, held in
             data["verdicts"].items()]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def isolate() -> None:
    """As root: run again in a mount namespace of its own (unshare), where tmpfs mounts
    stand in for the disk and /dev/shm; returns only inside it, or where that fails."""
    if os.environ.get(IN_NAMESPACE) or not can_isolate():
        return
    env = {**os.environ, IN_NAMESPACE: "1"}
    code = subprocess.call(["unshare", "--mount", "--propagation", "private",
                            sys.executable, *sys.argv], env=env)
    sys.exit(code)


def can_isolate() -> bool:
    """Root, with ``unshare`` and the right to make a mount namespace and mount in it (a
    container may withhold it)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = ["unshare", "--mount", "--propagation", "private", "mount", "-t", "tmpfs",
             "-o", "size=1m", "tmpfs", tempfile.gettempdir()]
    return subprocess.run(probe, capture_output=True).returncode == 0


def mount_tmpfs(path: Path, megabytes: int) -> None:
    """A tmpfs of ``megabytes`` at ``path`` (inside our mount namespace)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)],
                   check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--config", default=str(ROOT / "configs" / "cartpole_ppo.yaml"))
    parser.add_argument("--every", type=float, default=4.0,
                        help="mean seconds between two faults")
    parser.add_argument("--hold", type=float, default=5.0,
                        help="seconds a full disk or /dev/shm stays full")
    parser.add_argument("--disk-mb", type=int, default=512)
    parser.add_argument("--shm-mb", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="the JSON report")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    isolate()
    isolated = bool(os.environ.get(IN_NAMESPACE))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fastrl-chaos-"))
    try:
        if isolated:
            mount_tmpfs(work / "runs", args.disk_mb)  # (chaos.py's own files stay out)
            mount_tmpfs(Path("/dev/shm"), args.shm_mb)
        report = run_chaos(args, work, isolated)
        print_table(report)
        data = report.as_json()
        if args.out:
            args.out.write_text(json.dumps(data, indent=1) + "\n")
        if args.keep:
            print(f"run directories: {work}")
        return 0 if data["ok"] else 1
    finally:
        if not args.keep:
            if isolated:
                subprocess.run(["umount", str(work / "runs")], check=False)
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
