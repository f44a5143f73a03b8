"""``members.png``: a population's training curves at the end of its run, every member's
and the interquartile mean (IQM) across members with its 95% stratified-bootstrap interval
(fastrl.telemetry.aggregate), over each member's own env steps. Needs matplotlib (the
bench extra); without it nothing is drawn."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from fastrl.telemetry.aggregate import aggregate_iqm, interval_estimates

WINDOW = 20  # episodes a member's curve averages (the solve scenario's window)
POINTS = 60  # where along the steps the IQM and its interval are computed
REPS = 2_000  # bootstrap replicates at each point (a fixed seed: the same run, the same PNG)


def member_curves(episodes: Path, members: int, points: int = POINTS
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(steps [points], returns [members, points])``: each member's mean return over its
    last :data:`WINDOW` training episodes at each of ``points`` member steps (NaN before
    its first episode), from a population's ``episodes.csv`` (its ``step`` counts every
    member's steps together: a member's own are ``step / members``)."""
    with episodes.open(newline="") as f:
        rows = list(csv.DictReader(f))
    end = max((float(r["step"]) for r in rows), default=0.0) / members
    steps = np.linspace(end / points, end, points)
    curves = np.full((members, points), np.nan)
    for k in range(members):
        mine = [r for r in rows if r["group"] == f"member{k}"]
        at = np.array([float(r["step"]) / members for r in mine])
        ret = np.concatenate([[0.0], np.cumsum([float(r["return"]) for r in mine])])
        last = np.searchsorted(at, steps, side="right")  # episodes ended by each step
        first = np.maximum(last - WINDOW, 0)
        seen = last > 0
        curves[k, seen] = (ret[last] - ret[first])[seen] / (last - first)[seen]
    return steps, curves


def iqm_band(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(iqm, low, high)`` across members at each point where every member has a value
    (NaN elsewhere)."""
    iqm, low, high = (np.full(curves.shape[1], np.nan) for _ in range(3))
    rng = np.random.default_rng(0)
    for j in np.flatnonzero(~np.isnan(curves).any(axis=0)):
        e = interval_estimates(curves[:, j], {"iqm": aggregate_iqm}, reps=REPS,
                               rng=rng)["iqm"]
        iqm[j], low[j], high[j] = e.value, e.low, e.high
    return iqm, low, high


def plot_members(run_dir: Path, members: int) -> Path | None:
    """Write ``run_dir/members.png``; its path, or None without matplotlib or without an
    ended episode."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steps, curves = member_curves(run_dir / "episodes.csv", members)
    if np.isnan(curves).all():
        return None
    iqm, low, high = iqm_band(curves)
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, curve in enumerate(curves):
        ax.plot(steps, curve, lw=0.8, alpha=0.5, label="members" if k == 0 else None)
    ax.plot(steps, iqm, color="black", lw=2, label="IQM")
    ax.fill_between(steps, low, high, color="black", alpha=0.15, label="IQM, 95% CI")
    ax.set(xlabel="env steps of a member",
           ylabel=f"training return (last {WINDOW} episodes)",
           title=f"{members} members: each, and their IQM with its 95% interval")
    ax.legend(loc="best")
    fig.tight_layout()
    path = run_dir / "members.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
