"""The bench's ``solve`` scenario: wall time to a solved task, fastrl against
Stable-Baselines3, one training process after another in the same bench run.

Every run is a fresh process (``python -m fastrl.train CONFIG`` with fastrl's shipped
config; ``python -m fastrl.bench.sb3_solve`` with the RL Baselines3 Zoo's hyper-parameters),
timed from just before it starts, imports included. Both log every ended training episode
to a CSV file (step, return, length, time); the bench reads it as it grows and judges every
system alike: a task is solved when the mean return of the last ended training episodes
(:data:`WINDOW` of them, or the task's own window) first reaches the task's threshold. The
bench then stops the run (SIGINT), or stops it unsolved at the task's cap on steps or
seconds. For fastrl it also records when the run's own evaluation first reached the config's
``algo.target_return``.
"""

from __future__ import annotations

import csv
import math
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from fastrl.bench.report import pyplot, save_figure
from fastrl.bench.settings import NoTwin, fastrl_at_zoo, from_fastrl, from_zoo, sb3_at_fastrl
from fastrl.bench.zoo import ZOO
from fastrl.config import MainConfig, load_config

WINDOW = 20  # training episodes in the solve criterion's mean
#: the seeds the headline races run (``--seeds 5``: 101-105); the sweeps that tuned the
#: shipped configs ran seeds 1-3, so no race is run on a seed any setting was chosen on
FIRST_RACE_SEED = 101
#: whose settings a run trained with: each system its own (fastrl's shipped config, the
#: zoo's entry for SB3), or both at fastrl's, or both at the zoo's (fastrl.bench.settings)
OWN, FASTRLS, ZOOS = "own", "fastrl's", "zoo's"
#: race -> (fastrl's runs, SB3's runs) by the settings each trained with
RACES = {OWN: (OWN, OWN), FASTRLS: (OWN, FASTRLS), ZOOS: (ZOOS, OWN)}
POLL_S = 0.2  # between looks at a run's episode log
EXIT_WAIT_S = 60.0  # for a stopped run to exit before it is killed
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@dataclass(frozen=True)
class Peer:
    """An SB3 variant of a task: its name and the arguments of fastrl.bench.sb3_solve."""

    name: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class Task:
    """A task of the scenario: fastrl's shipped config, the threshold both systems must
    reach (the mean return of the last ``window`` ended training episodes), the SB3
    variants, and the caps after which a run counts as unsolved."""

    name: str
    config: str  # under configs/
    threshold: float
    peers: tuple[Peer, ...]
    max_steps: int
    max_seconds: float
    window: int = WINDOW  # ended training episodes in the criterion's mean
    overrides: tuple[str, ...] = ()  # key=value on the config (the env of a shared config)


TASKS: dict[str, Task] = {t.name: t for t in (
    Task("cartpole-ppo", "cartpole_ppo.yaml", 475.0, (
        Peer("SB3 PPO DummyVecEnv", ("--task", "cartpole-ppo", "--vec", "dummy")),
        Peer("SB3 PPO SubprocVecEnv", ("--task", "cartpole-ppo", "--vec", "subproc")),
    ), max_steps=500_000, max_seconds=300.0),
    Task("cartpole-dqn", "cartpole_dqn.yaml", 475.0, (
        Peer("SB3 DQN", ("--task", "cartpole-dqn")),
    ), max_steps=200_000, max_seconds=300.0),
    Task("pendulum-sac", "pendulum_sac.yaml", -200.0, (
        Peer("SB3 SAC", ("--task", "pendulum-sac")),
    ), max_steps=30_000, max_seconds=400.0),
    # MuJoCo and Atari need their extras; they are not in DEFAULT_TASKS
    Task("hopper-ppo", "mujoco_ppo.yaml", 1000.0, (
        Peer("SB3 PPO", ("--task", "hopper-ppo")),
    ), max_steps=300_000, max_seconds=1800.0, overrides=("env.id=Hopper-v5",)),
    Task("halfcheetah-sac", "mujoco_sac.yaml", 2500.0, (
        Peer("SB3 SAC", ("--task", "halfcheetah-sac")),
    ), max_steps=150_000, max_seconds=3600.0, overrides=("env.id=HalfCheetah-v5",)),
    Task("identity-masked-ppo", "masked_ppo.yaml", 90.0, (
        Peer("sb3-contrib MaskablePPO", ("--task", "identity-masked-ppo")),
    ), max_steps=300_000, max_seconds=900.0),
    Task("cartpole-novel-lstm", "cartpole_novel_lstm.yaml", 475.0, (
        Peer("sb3-contrib RecurrentPPO", ("--task", "cartpole-novel-lstm")),
    ), max_steps=300_000, max_seconds=1200.0),
    Task("breakout-ppo", "atari_ppo.yaml", 5.0, (
        Peer("SB3 PPO DummyVecEnv", ("--task", "breakout-ppo", "--vec", "dummy")),
        Peer("SB3 PPO SubprocVecEnv", ("--task", "breakout-ppo", "--vec", "subproc")),
    ), max_steps=10_000_000, max_seconds=2700.0, window=100,
        overrides=("env.id=ALE/Breakout-v5",)),
)}

#: the tasks ``--scenario solve`` runs unless told: those that need no extra beyond bench's
DEFAULT_TASKS = ("cartpole-ppo", "cartpole-dqn", "pendulum-sac")


def first_solved(returns: list[float] | np.ndarray, threshold: float,
                 window: int = WINDOW) -> int | None:
    """Index of the episode at whose end the mean return of the last ``window`` ended
    episodes first reaches ``threshold`` (None: never; fewer than ``window`` episodes never
    count)."""
    r = np.asarray(returns, np.float64)
    if len(r) < window:
        return None
    sums = np.convolve(r, np.ones(window), "valid")  # sums[i]: episodes i .. i+window-1
    hit = np.flatnonzero(sums >= threshold * window - 1e-9 * max(1.0, abs(threshold)))
    return int(hit[0]) + window - 1 if len(hit) else None


def read_rows(path: Path) -> list[dict[str, str]]:
    """The complete rows of a CSV log that its writer may still be appending to (a last
    line without its newline is left for the next read)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()
    return list(csv.DictReader(lines))


@dataclass
class SolveRun:
    """One training run of the scenario. Seconds count from just before its process
    started; ``solved_s``/``solved_step`` are None when it did not solve the task before its
    cap, ``eval_s``/``eval_step`` when fastrl's own evaluation did not reach its target (or
    for SB3)."""

    task: str
    system: str
    seed: int
    settings: str = OWN  # whose settings it trained with (:data:`RACES`)
    solved_s: float | None = None
    solved_step: int | None = None
    eval_s: float | None = None
    eval_step: int | None = None
    steps: int = 0  # env steps of the last ended episode seen
    wall_s: float = 0.0  # until the process exited
    note: str = ""
    curve: dict[str, list[float]] = field(default_factory=dict)  # seconds, return, step

    def as_dict(self) -> dict:
        """Every figure, for bench.json."""
        return asdict(self)


def judge(run: SolveRun, episodes: list[dict[str, str]], t0: float, threshold: float,
          evals: list[dict[str, str]] = (), eval_target: float | None = None,
          window: int = WINDOW) -> None:
    """Fill ``run``'s solve (and evaluation) figures from its logs, ``t0`` being the Unix
    time its process started."""
    returns = [float(e["return"]) for e in episodes]
    run.curve = {"seconds": [float(e["time"]) - t0 for e in episodes], "return": returns,
                 "step": [int(float(e["step"])) for e in episodes]}
    run.steps = run.curve["step"][-1] if episodes else 0
    i = first_solved(returns, threshold, window)
    if i is not None:
        run.solved_s, run.solved_step = run.curve["seconds"][i], run.curve["step"][i]
    if eval_target is not None:
        hit = next((e for e in evals if e["source"] == "eval"
                    and float(e["return_mean"]) >= eval_target), None)
        if hit:
            run.eval_s, run.eval_step = float(hit["time"]) - t0, int(float(hit["step"]))


_CTRL_C = threading.Event()


@contextmanager
def ctrl_c_between_runs() -> Iterator[None]:
    """Meanwhile a first Ctrl-C (SIGINT) only sets a flag, which the scenario raises as
    KeyboardInterrupt where it can stop cleanly: after stopping the run it watches, or
    before starting the next (raised anywhere, a library can mangle it: OmegaConf turned
    one into an UnboundLocalError); a second one interrupts at once."""
    def on_sigint(signum: int, frame: Any) -> None:
        if _CTRL_C.is_set():
            raise KeyboardInterrupt
        _CTRL_C.set()

    _CTRL_C.clear()
    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        _CTRL_C.clear()


def _stop_if_asked() -> None:
    """Raise KeyboardInterrupt if a Ctrl-C came (:func:`ctrl_c_between_runs`)."""
    if _CTRL_C.is_set():
        raise KeyboardInterrupt


def run_process(cmd: list[str], run: SolveRun, episodes_csv: Path, threshold: float,
                max_steps: int, max_seconds: float, log: Path, window: int = WINDOW,
                solved: Callable[[list[dict[str, str]]], bool] | None = None) -> float:
    """Start ``cmd``, watch its episode log until the task is solved (``solved(rows)``;
    default: :func:`first_solved` of every row's return), the caps are reached or it exits,
    then stop it (SIGINT; killed after :data:`EXIT_WAIT_S`); returns the Unix time it
    started. Its output goes to ``log``, and it runs in ``log``'s folder, where files a peer
    drops (MuJoCo's MUJOCO_LOG.TXT) are removed with the bench's work folder."""
    solved = solved or (lambda rows: first_solved([float(r["return"]) for r in rows],
                                                  threshold, window) is not None)
    with log.open("w") as out:
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
        try:
            while proc.poll() is None and not _CTRL_C.is_set():
                time.sleep(POLL_S)
                rows = read_rows(episodes_csv)
                if solved(rows):
                    break
                if time.time() - t0 > max_seconds or \
                        (rows and float(rows[-1]["step"]) >= max_steps):
                    run.note = "capped"
                    break
        finally:
            stop(proc)
        _stop_if_asked()  # (the run it cut short is no measurement)
        run.wall_s = time.time() - t0
        if proc.returncode not in (0, -signal.SIGINT, 130) and not run.note:
            run.note = f"exit code {proc.returncode} (see {log})"
    return t0


def stop(proc: subprocess.Popen) -> None:
    """SIGINT the run (fastrl and SB3 both stop gracefully on it), kill it if it is still
    there after :data:`EXIT_WAIT_S`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(EXIT_WAIT_S)


def shipped_config(task: str) -> MainConfig:
    """fastrl's shipped config of ``task``, with the task's own overrides."""
    t = TASKS[task]
    return load_config(CONFIGS / t.config, list(t.overrides))


def run_fastrl(task: Task, seed: int, work: Path, extra: list[str] = (),
               settings: str = OWN) -> SolveRun:
    """fastrl's shipped config of ``task`` (``settings=ZOOS``: with the zoo's settings
    instead), from ``python -m fastrl.train``; the run does not stop at its own evaluation
    criterion (``algo.target_return=null``) so that the training criterion can be reached,
    and the time it would have is taken from its ``evals.csv``."""
    config = CONFIGS / task.config
    zoo = fastrl_at_zoo(task.name, shipped_config(task.name)) if settings == ZOOS else []
    extra = [*task.overrides, *zoo, *extra]
    target = load_config(config, extra).algo.target_return
    run = SolveRun(task.name, "fastrl", seed, settings)
    run_dir = work / f"fastrl-{task.name}-{_slug(settings)}-s{seed}"
    cmd = [sys.executable, "-m", "fastrl.train", str(config), f"seed={seed}",
           "algo.target_return=null", f"log.run_dir={work}", f"log.run_name={run_dir.name}",
           "log.console=false", *extra]
    t0 = run_process(cmd, run, run_dir / "episodes.csv", task.threshold, task.max_steps,
                     task.max_seconds, work / f"{run_dir.name}.log", task.window)
    judge(run, read_rows(run_dir / "episodes.csv"), t0, task.threshold,
          read_rows(run_dir / "evals.csv"), target, task.window)
    return run


def _slug(text: str) -> str:
    """``text`` as a part of a file name."""
    return "".join(c if c.isalnum() else "-" for c in text)


def run_sb3(task: Task, peer: Peer, seed: int, work: Path, settings: str = OWN) -> SolveRun:
    """An SB3 variant of ``task`` (fastrl.bench.sb3_solve), at the zoo's settings or
    (``settings=FASTRLS``) at fastrl's shipped config's."""
    run = SolveRun(task.name, peer.name, seed, settings)
    name = f"{_slug(peer.name)}-{task.name}-{_slug(settings)}-s{seed}"
    episodes = work / f"{name}.csv"
    cmd = [sys.executable, "-m", "fastrl.bench.sb3_solve", *peer.args, f"--seed={seed}",
           f"--out={episodes}", f"--settings={'fastrl' if settings == FASTRLS else 'zoo'}"]
    t0 = run_process(cmd, run, episodes, task.threshold, task.max_steps, task.max_seconds,
                     work / f"{name}.log", task.window)
    judge(run, read_rows(episodes), t0, task.threshold, window=task.window)
    return run


def sb3_installed() -> bool:
    """True when stable-baselines3 can be imported here (the bench extra)."""
    import importlib.util

    return importlib.util.find_spec("stable_baselines3") is not None


#: the note of an equal-settings run that is its system's own-settings run counted again
SAME_SETTINGS = "its own-settings run: the settings coincide"


def equal_settings_runs(task: Task, extra: Sequence[str] = ()) -> list[tuple[str, str, bool]]:
    """The equal-settings runs ``task`` has a translation for, as (system, settings, same):
    SB3's first variant at fastrl's settings, fastrl at the zoo's; each one that lacks a
    twin is said on stderr and left out. ``same``: fastrl's shipped settings (no ``extra``
    overrides) are the zoo's, so each system's own-settings run is that race's run too."""
    runs = []
    cfg = shipped_config(task.name)
    try:
        same = not extra and from_fastrl(cfg) == from_zoo(ZOO[task.name])
    except NoTwin:
        same = False
    for system, settings, translate in (
            (task.peers[0].name, FASTRLS, lambda: sb3_at_fastrl(task.name, cfg)),
            ("fastrl", ZOOS, lambda: fastrl_at_zoo(task.name, cfg))):
        try:
            translate()
        except NoTwin as e:
            print(f"solve: {task.name}: no race at the {settings} settings: {e}",
                  file=sys.stderr)
            continue
        runs.append((system, settings, same))
    return runs


def run_solve(tasks: list[str], seeds: list[int], extra: list[str] = (), peers: bool = True,
              max_seconds: float | None = None, max_steps: int | None = None,
              equal: bool = True, first_peer: bool = False) -> Iterator[SolveRun]:
    """Every system of every task, on each of ``seeds``, one run at a time, each run as it
    ends: for each seed fastrl first, then each SB3 variant (when ``peers`` and SB3 is
    installed; ``first_peer``: the first only), then, when ``equal``, SB3 at fastrl's
    settings and fastrl at the zoo's. ``max_seconds`` and ``max_steps`` lower the tasks'
    caps."""
    if peers and not sb3_installed():
        print("solve: stable-baselines3 is not installed, fastrl runs alone "
              "(pip install -e '.[bench]')", file=sys.stderr)
        peers = False
    with tempfile.TemporaryDirectory(prefix="fastrl-solve-") as tmp:
        work = Path(tmp)
        for name in tasks:
            task = TASKS[name]
            task = replace(task, max_seconds=min(task.max_seconds, max_seconds or math.inf),
                           max_steps=min(task.max_steps, max_steps or task.max_steps))
            equals = equal_settings_runs(task, extra) if peers and equal else []
            for seed in seeds:
                _stop_if_asked()
                own = {"fastrl": run_fastrl(task, seed, work, extra)}
                yield own["fastrl"]
                for peer in (task.peers[:1] if first_peer else task.peers) if peers else ():
                    _stop_if_asked()
                    own[peer.name] = run_sb3(task, peer, seed, work)
                    yield own[peer.name]
                for system, settings, same in equals:
                    _stop_if_asked()
                    if same:
                        run = own[system]  # (its own note, "capped" say, stays said)
                        yield replace(run, settings=settings,
                                      note="; ".join(filter(None, (run.note, SAME_SETTINGS))))
                        continue
                    yield (run_fastrl(task, seed, work, extra, settings) if system == "fastrl"
                           else run_sb3(task, task.peers[0], seed, work, settings))


def _median(values: list[float | None]) -> float | None:
    """The median, an unsolved run counting as infinitely slow (None: most were unsolved)."""
    m = statistics.median(math.inf if v is None else v for v in values)
    return None if math.isinf(m) else m


def _at_least(runs: list[SolveRun]) -> float:
    """A lower bound on the median seconds to solve of a system whose median is unknown
    (most seeds unsolved): an unsolved run would have taken longer than it ran."""
    return statistics.median(r.wall_s if r.solved_s is None else r.solved_s for r in runs)


def _fastest(systems: dict[str, list[SolveRun]]) -> tuple[str | None, float | None, bool]:
    """The fastest of ``systems`` by median seconds to solve: (name, median, bound). Where
    none solved in enough seeds to have a median, the fastest one's :func:`_at_least` is a
    lower bound on it (``bound``)."""
    medians = {s: _median([r.solved_s for r in rs]) for s, rs in systems.items()}
    solved = {s: m for s, m in medians.items() if m is not None}
    if solved:
        name = min(solved, key=solved.get)
        return name, solved[name], False
    if not systems:
        return None, None, False
    bounds = {s: _at_least(rs) for s, rs in systems.items()}
    name = min(bounds, key=bounds.get)
    return name, bounds[name], True


def _by_system(runs: list[SolveRun], task: str, settings: str,
               fastrl: bool) -> dict[str, list[SolveRun]]:
    """``task``'s runs at ``settings``, of fastrl or of the SB3 variants, by system."""
    out: dict[str, list[SolveRun]] = {}
    for r in runs:
        if r.task == task and r.settings == settings and (r.system == "fastrl") == fastrl:
            out.setdefault(r.system, []).append(r)
    return out


def races(runs: list[SolveRun]) -> list[dict]:
    """One row per task and race (:data:`RACES`: each system at its own settings, both at
    fastrl's, both at the zoo's): fastrl's median seconds and env steps to solve against the
    fastest SB3 variant's in that race, and their ratios. An SB3 side unsolved in most
    seeds makes the seconds' ratio an upper bound (``ratio_is_bound``)."""
    rows = []
    for task in dict.fromkeys(r.task for r in runs):
        for race, (ours, theirs) in RACES.items():
            fastrl = _by_system(runs, task, ours, fastrl=True).get("fastrl")
            sb3 = _by_system(runs, task, theirs, fastrl=False)
            if not fastrl or not sb3:
                continue
            name, sb3_s, bound = _fastest(sb3)
            fastrl_s = _median([r.solved_s for r in fastrl])
            fastrl_steps = _median([r.solved_step for r in fastrl])
            sb3_steps = _median([r.solved_step for r in sb3[name]])
            rows.append({
                "task": task, "race": race, "seeds": sorted(r.seed for r in fastrl),
                "fastrl_s": fastrl_s, "sb3_system": name, "sb3_s": sb3_s,
                "ratio": fastrl_s / sb3_s if fastrl_s is not None and sb3_s else None,
                "ratio_is_bound": bound, "fastrl_steps": fastrl_steps, "sb3_steps": sb3_steps,
                "steps_ratio": fastrl_steps / sb3_steps
                if fastrl_steps is not None and sb3_steps else None,
            })
    return rows


def summarize(runs: list[SolveRun]) -> list[dict]:
    """One row per task, system and settings: the medians over seeds of the seconds and env
    steps to solve it (and, for fastrl, to its evaluation target), and how many seeds
    solved; fastrl's row at its own settings also carries its ratio to the fastest SB3
    variant at the zoo's (:func:`races`, ``ratio_is_bound`` where that is a bound)."""
    own = {r["task"]: r for r in races(runs) if r["race"] == OWN}
    rows = []
    for task in dict.fromkeys(r.task for r in runs):
        for settings in dict.fromkeys(r.settings for r in runs if r.task == task):
            for fastrl in (True, False):
                for system, rs in _by_system(runs, task, settings, fastrl).items():
                    race = own.get(task) if fastrl and settings == OWN else None
                    rows.append({
                        "task": task, "system": system, "settings": settings,
                        "runs": len(rs), "solved": sum(r.solved_s is not None for r in rs),
                        "median_s": _median([r.solved_s for r in rs]),
                        "median_steps": _median([r.solved_step for r in rs]),
                        "median_eval_s": _median([r.eval_s for r in rs]) if fastrl else None,
                        "ratio_to_fastest_sb3": race["ratio"] if race else None,
                        "ratio_is_bound": bool(race and race["ratio_is_bound"]),
                    })
    return rows


def or_dash(v: float | None, spec: str) -> str:
    """``v`` formatted by ``spec``, or ``-`` for None."""
    return "-" if v is None else format(v, spec)


def print_solve(rows: list[dict], race_rows: list[dict]) -> None:
    """The summary table on the console, then the races (fastrl against SB3 at each
    system's own settings and at equal settings)."""
    from rich.console import Console
    from rich.table import Table

    own = "".join(f", {task}: {TASKS[task].window}" for task in dict.fromkeys(
        r["task"] for r in rows) if TASKS[task].window != WINDOW)
    t = Table(title=f"solve: seconds from process start until the mean return of the last "
                    f"{WINDOW} training episodes{f' ({own[2:]})' if own else ''} reaches the "
                    "threshold (medians over seeds)")
    for col in ("task", "system", "settings", "solved", "seconds", "env steps",
                "fastrl eval s"):
        t.add_column(col, justify="left" if col in ("task", "system", "settings") else "right")
    for r in rows:
        t.add_row(r["task"], r["system"], r["settings"], f"{r['solved']}/{r['runs']}",
                  or_dash(r["median_s"], ".1f"), or_dash(r["median_steps"], ",.0f"),
                  or_dash(r["median_eval_s"], ".1f"))
    console = Console(width=max(Console().width, 120))
    console.print(t)
    t = Table(title="races: fastrl's median against the fastest SB3 variant's, at each "
                    "system's own settings and at equal settings",
              caption="<x: the SB3 side did not solve in most seeds; each unsolved run counts "
                      "the seconds it ran, so x is an upper bound")
    for col in ("task", "race (settings)", "seeds", "fastrl s", "SB3 s", "× SB3 seconds",
                "fastrl steps", "SB3 steps", "× SB3 steps"):
        t.add_column(col, justify="left" if col.startswith(("task", "race")) else "right")
    for r in race_rows:
        seeds = r["seeds"]
        t.add_row(r["task"], r["race"], f"{seeds[0]}-{seeds[-1]}" if seeds else "-",
                  or_dash(r["fastrl_s"], ".1f"), or_dash(r["sb3_s"], ".1f"),
                  ("<" if r["ratio_is_bound"] and r["ratio"] is not None else "")
                  + or_dash(r["ratio"], ".2f"),
                  or_dash(r["fastrl_steps"], ",.0f"), or_dash(r["sb3_steps"], ",.0f"),
                  or_dash(r["steps_ratio"], ".2f"))
    console.print(t)


def plot_solve(path: Path, runs: list[SolveRun]) -> bool:
    """Training return (mean of the task's window of episodes) against wall seconds, one
    panel per task, one line per system and seed; False without matplotlib."""
    tasks = list(dict.fromkeys(r.task for r in runs))
    plt = pyplot() if tasks else None
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.2), squeeze=False)
    colors: dict[str, str] = {}
    for ax, task in zip(axes[0], tasks):
        for r in (r for r in runs if r.task == task and r.curve.get("return")):
            ret = np.asarray(r.curve["return"])
            k = min(TASKS[task].window, len(ret))
            mean = np.convolve(ret, np.ones(k) / k, "valid")
            who = r.system if r.settings == OWN else f"{r.system} at {r.settings}"
            color = colors.setdefault(who, f"C{len(colors)}")
            ax.plot(r.curve["seconds"][k - 1:], mean, color=color, alpha=0.8,
                    label=f"{who} s{r.seed}")
        ax.axhline(TASKS[task].threshold, color="k", ls="--", lw=0.8)
        ax.set_title(task)
        ax.set_xlabel("seconds from process start")
        ax.set_ylabel(f"training return (last {TASKS[task].window} episodes)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    save_figure(plt, fig, path)
    return True
