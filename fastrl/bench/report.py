"""The bench's outputs: a console table, a JSON file of every figure, a PNG scaling plot."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import psutil
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fastrl.bench.measure import Result

VERSIONED = ("fastrl", "numpy", "torch", "gymnasium", "numba", "stable-baselines3", "envpool")


def machine_facts() -> dict:
    """CPU model, cores, Python and package versions, git SHA of the checkout."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        sha = None
    return {"cpu_model": model, "logical_cores": psutil.cpu_count(),
            "physical_cores": psutil.cpu_count(logical=False),
            "usable_cores": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "platform": platform.platform(), "versions": versions, "git_sha": sha}


def table(results: list[Result], raw_rate: float | None) -> Table:
    """Medians of the repeats, one row per system and configuration."""
    t = Table(title="fastrl bench (medians of repeats)")
    for col in ("system", "procs", "envs", "steps/s", "steps/CPU-s", "cores", "× raw",
                "act/env/write", "note"):
        t.add_column(col, justify="left" if col in ("system", "note") else "right")
    for r in results:
        share = "/".join(f"{100 * r.stage_share[k]:.0f}%" for k in ("act", "env", "write")) \
            if r.stage_share else ""
        ratio = f"{r.steps_per_sec / raw_rate:.2f}" if raw_rate and r.steps else ""
        t.add_row(escape(r.system), str(r.workers), str(r.envs), f"{r.steps_per_sec:,.0f}",
                  f"{r.steps_per_cpu_s:,.0f}", f"{r.cores_used:.2f}", ratio, share,
                  escape(r.note))
    return t


def provenance(program: str) -> dict:
    """What reproduces a committed result file: ``command`` (``program`` and this process's
    arguments, shell-quoted) and ``machine`` (:func:`machine_facts`)."""
    return {"command": " ".join([program, shlex.join(sys.argv[1:])]),
            "machine": machine_facts()}


def write_json(path: Path, args: dict, results: list[Result], repeats: list[list[Result]],
               extra: dict | None = None):
    """Every raw repeat and the medians, with the machine facts and the options used, and
    ``extra`` sections (the solve scenario's)."""
    doc = {**provenance("python -m fastrl.bench"), "options": args,
           "medians": [r.as_dict() for r in results],
           "repeats": [[r.as_dict() for r in rs] for rs in repeats], **(extra or {})}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def pyplot():
    """matplotlib's pyplot drawing to files only (the Agg backend), or None when matplotlib
    is not installed (the bench extra installs it)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(plt, fig, path: Path) -> None:
    """Write ``fig`` to ``path`` (PNG) and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_scaling(path: Path, results: list[Result], raw_rate: float | None) -> bool:
    """steps/s against worker processes, one line per system, with the ideal line
    (workers × the raw single-env loop). False when matplotlib is not installed or nothing
    was measured."""
    plt = pyplot() if any(r.steps for r in results) else None
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    systems: dict[str, list[Result]] = {}
    for r in results:
        if r.steps and r.system != "raw loop":
            systems.setdefault(r.system, []).append(r)
    for name, rows in systems.items():
        rows.sort(key=lambda r: r.workers)
        ax.plot([r.workers for r in rows], [r.steps_per_sec for r in rows], "o-", label=name)
    workers = sorted({r.workers for r in results if r.steps})
    if raw_rate and workers:
        ax.plot(workers, [w * raw_rate for w in workers], "k--", label="ideal: procs × raw loop")
    ax.set_xlabel("processes stepping envs")
    ax.set_ylabel("env steps / s")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save_figure(plt, fig, path)
    return True


def print_table(results: list[Result], raw_rate: float | None) -> None:
    """The table on the console, then where fastrl's runs spent their time and CPU."""
    console = Console(width=max(Console().width, 150))
    console.print(table(results, raw_rate))
    if any(r.costs for r in results):
        console.print(costs_table(results))


def costs_table(results: list[Result]) -> Table:
    """fastrl's runs: steps/s against the ``collect`` run of the same workers and env (the
    local runtime, measured in the same bench run), cores by process role, and a worker's
    and the Ray relay's milliseconds per slot, a worker's nanoseconds per transition
    spent writing it into the slot, and the run's start-up: seconds from its start until
    every worker had published a slot."""
    t = Table(title="fastrl runs: where the time goes (cores = CPU-s per wall-s)")
    for col in ("system", "procs", "× collect", "start s", "supervisor", "learner", "workers",
                "other", "rollout ms/slot", "write ns/step", "relay get+copy ms/slot"):
        t.add_column(col, justify="left" if col == "system" else "right")
    for r in results:
        if not r.costs:
            continue
        base = next((b for b in results if b.scenario == "collect" and b.workers == r.workers
                     and b.envs == r.envs and b.steps and
                     b.system.partition("[")[2] == r.system.partition("[")[2]), None)
        c = r.costs
        relay = f"{c['relay_get_ms']:.2f}+{c['relay_copy_ms']:.2f}" if "relay_get_ms" in c \
            else ""
        t.add_row(escape(r.system), str(r.workers),
                  f"{r.steps_per_sec / base.steps_per_sec:.2f}" if base else "",
                  f"{c['start_s']:.2f}" if "start_s" in c else "",
                  *(f"{c[f'cores_{k}']:.2f}" for k in ("supervisor", "learner", "workers",
                                                       "other")),
                  f"{c['rollout_ms']:.1f}", f"{c['write_ns']:.1f}", relay)
    return t
